"""Sharded inputs of ``multi.map`` and the multi-device library calls, on several oracle backends,
judged by numpy (and one-device oracle runs)."""

from __future__ import annotations

import numpy as np
import pytest
from test_multi import global_ids_program, histogram_program, oracles, u32, xor_program

from vyre import DispatchConfig
from vyre.driver.errors import InvalidProgram
from vyre.lib import multi
from vyre.lib.sharded import Sharded
from vyre.reference import run

SIZES = [0, 1, 2, 63, 64, 65, 1000, 4099]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng()


def i32(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)


# ---- multi.map on sharded inputs -----------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 64, 65, 1000, 4099])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_map_on_sharded_inputs_returns_sharded_outputs(rng, n: int, k: int) -> None:
    a, b = u32(rng, n), u32(rng, n)
    sa, sb = multi.shard(a, oracles(k), align=64), multi.shard(b, oracles(k), align=64)
    stats: dict = {}
    (out,) = multi.map(xor_program(), [sa, sb], stats=stats)
    assert isinstance(out, Sharded) and out.sizes == sa.sizes and out.devices == sa.devices
    assert np.array_equal(out.gather(), a ^ b)
    assert np.array_equal(sa.gather(), a)  # the inputs are not written
    assert len(stats["devices"]) == max(1, sum(1 for size in sa.sizes if size))  # empty trailing parts run nothing


def test_map_on_sharded_inputs_with_a_replicated_table_and_uniform(rng) -> None:
    program = global_ids_program()  # workgroup 32: parts are multiples of 32
    n = 1025
    inputs = [u32(rng, n), u32(rng, 37), np.array([7], np.uint32), u32(rng, n)]
    expected = run(program, inputs)
    sharded = [multi.shard(inputs[0], oracles(3), align=32), inputs[1], inputs[2],
               multi.shard(inputs[3], oracles(3), align=32)]
    (tag,) = multi.map(program, sharded)
    assert np.array_equal(tag.gather(), expected[0])


def test_map_sharded_reduction_equals_numpy(rng) -> None:
    data = u32(rng, 3000)
    stats: dict = {}
    (bins,) = multi.map(histogram_program(), [multi.shard(data, oracles(3))], reduce={"bins": "add"},
                        config=DispatchConfig(elements=3000), stats=stats)
    assert np.array_equal(bins, np.bincount(data % 256, minlength=256).astype(np.uint32))
    assert stats["reduction"] == "host"


def test_map_sharded_refusals_say_how_to_fix() -> None:
    a = np.arange(200, dtype=np.uint32)
    unaligned = Sharded([a[:100], a[100:]], oracles(2))
    with pytest.raises(InvalidProgram, match="multiple of the workgroup size 64") as info:
        multi.map(xor_program(), [unaligned, unaligned])
    assert "Fix:" in str(info.value)
    good = multi.shard(a, oracles(2), align=64)
    other = Sharded([a[:64], a[64:]], oracles(2))
    with pytest.raises(InvalidProgram, match="the same way"):
        multi.map(xor_program(), [good, other])
    with pytest.raises(InvalidProgram, match="parts"):
        multi.map(xor_program(), [good, good], devices=oracles(3))
    with pytest.raises(InvalidProgram, match="int32"):
        multi.map(xor_program(), [good, Sharded([p.view(np.int32) for p in good.parts], good.devices)])
    program = global_ids_program()  # table is read at data-dependent indices: replicated
    with pytest.raises(InvalidProgram, match="one host array"):
        multi.map(program, [good, good, np.array([1], np.uint32), good])


def test_sharded_value_checks_its_parts() -> None:
    with pytest.raises(InvalidProgram, match="at least one part"):
        Sharded([], [])
    with pytest.raises(InvalidProgram, match="devices"):
        Sharded([np.zeros(3, np.uint32)])  # host parts name their devices
    with pytest.raises(InvalidProgram, match="2 parts but 1 devices"):
        Sharded([np.zeros(3, np.uint32)] * 2, ["reference"])
    with pytest.raises(InvalidProgram, match="1-D"):
        Sharded([np.zeros((2, 2), np.uint32)], ["reference"])


# ---- library calls -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_reduce_histogram_scan_sort_equal_numpy_on_host_arrays(rng, n: int, k: int) -> None:
    x, y = u32(rng, n), i32(rng, n)
    devices = oracles(k)
    assert multi.reduce(x, devices=devices) == np.add.reduce(x, dtype=np.uint32)
    assert multi.reduce(y, "min", devices=devices) == (y.min() if n else np.iinfo(np.int32).max)
    assert multi.reduce(x, "xor", devices=devices) == np.bitwise_xor.reduce(x)
    assert np.array_equal(multi.histogram(x % 100, 100, devices=devices), np.bincount(x % 100, minlength=100))
    assert np.array_equal(multi.inclusive_scan(x, devices=devices), np.cumsum(x, dtype=np.uint32))
    assert np.array_equal(multi.inclusive_scan(y, "max", devices=devices), np.maximum.accumulate(y))
    assert np.array_equal(multi.sort(x, devices=devices), np.sort(x))
    assert np.array_equal(multi.sort(y, devices=devices), np.sort(y))


@pytest.mark.parametrize("n", SIZES)
def test_library_calls_on_sharded_inputs_stay_sharded(rng, n: int) -> None:
    x = u32(rng, n)
    sx = multi.shard(x, oracles(3), align=32)
    scan = multi.inclusive_scan(sx)
    assert isinstance(scan, Sharded) and scan.sizes == sx.sizes
    assert np.array_equal(scan.gather(), np.cumsum(x, dtype=np.uint32))
    ordered = multi.sort(sx)
    assert isinstance(ordered, Sharded) and ordered.size == n
    assert np.array_equal(ordered.gather(), np.sort(x))
    assert multi.reduce(sx, "max") == (x.max() if n else 0)
    assert np.array_equal(multi.histogram(sx, 16), np.bincount(x[x < 16], minlength=16))


def test_sort_with_heavy_duplicates_and_skew(rng) -> None:
    x = np.concatenate([np.full(3000, 7, np.uint32), u32(rng, 50), np.zeros(500, np.uint32)])
    rng.shuffle(x)
    assert np.array_equal(multi.sort(x, devices=oracles(4)), np.sort(x))
    f = rng.standard_normal(2000).astype(np.float32)
    f[::97] = np.nan
    f[::89] = -0.0
    got = multi.sort(f, devices=oracles(3))
    want = np.sort(f)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)])


def test_sort_parts_hold_consecutive_ranges(rng) -> None:
    x = u32(rng, 5000)
    ordered = multi.sort(multi.shard(x, oracles(3)))
    parts = [p for p in ordered.parts if p.size]
    assert all(a[-1] <= b[0] for a, b in zip(parts, parts[1:]))
    assert min(ordered.sizes) > 1000  # the sample's splitters balance uniform keys


def test_library_call_refusals() -> None:
    with pytest.raises(InvalidProgram, match="1-D"):
        multi.sort(np.zeros((2, 2), np.uint32), devices=oracles(2))
    with pytest.raises(InvalidProgram, match="parts"):
        multi.reduce(multi.shard(np.arange(10, dtype=np.uint32), oracles(2)), devices=oracles(3))
    with pytest.raises(InvalidProgram, match="align"):
        multi.shard(np.arange(10, dtype=np.uint32), oracles(2), align=0)
    with pytest.raises(InvalidProgram, match="Fix:"):
        multi.reduce(np.arange(10, dtype=np.uint32), "mul", devices=oracles(2))


def test_bounds_cover_everything_once() -> None:
    from vyre.lib.multi_ops import bounds

    for n in (0, 1, 255, 256, 257, 10_000):
        for parts in (1, 2, 3, 7):
            ranges = bounds(n, parts, 64)
            assert ranges[0][0] == 0 and ranges[-1][1] == n and len(ranges) == parts
            assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
            assert all(lo % 64 == 0 or lo == n for lo, _ in ranges)


def test_multi_ops_imports_on_its_own() -> None:
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", "import vyre.lib.multi_ops"], check=True, timeout=60)


def test_a_list_of_device_arrays_without_a_device_is_refused() -> None:
    class OnSomeDevice:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<u4", "data": (0, False), "version": 3}
        ndim = 1

    with pytest.raises(InvalidProgram, match="name the devices"):
        multi.map(xor_program(), [[OnSomeDevice()], [OnSomeDevice()]])
    with pytest.raises(InvalidProgram, match="single device array") as info:
        multi.sort(OnSomeDevice(), devices=oracles(2))
    assert "Fix:" in str(info.value)
