"""The native sort of 64-bit keys (eight single-pass radix passes over the whole keys) on the
oracle against numpy's stable sort: keys alone, with 4- and 8-byte values, argsort; edge values,
sizes across tiles; the plan it takes; a look-back of any width; its kernels assemble for sm_90."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.codegen.codegen_support import assemble, needs_ptxas
from tests.lib import expected as E
from tests.lib.test_onesweep import RecordingBackend
from tests.lib.test_plan import RecordingBackend as SequenceRecorder
from vyre import lib
from vyre.driver.errors import DispatchFailed
from vyre.lib._sort import onesweep as K
from vyre.lib._sort import topology as topo
from vyre.lib.blocks import WG
from vyre.reference import ReferenceBackend

KEYS_TILE, PAIRS_TILE = WG * K.ONESWEEP_WIDE_ITEMS, WG * K.ONESWEEP_WIDE_VALUE_ITEMS
SIZES = [0, 1, 2, 33, 255, 257, PAIRS_TILE + 1, KEYS_TILE - 1, KEYS_TILE + 1, 3 * KEYS_TILE + 5]
KEY_TYPES = [np.uint64, np.int64, np.float64]
VALUE_TYPES = [np.uint32, np.float32, np.int64, np.float64]


def _keys(rng: np.random.Generator, dtype: type, n: int) -> np.ndarray:
    """Random keys with the edge values (0, 1, max, min; -0.0, NaNs, infinities, subnormals) mixed
    in and plenty of ties (so stability shows)."""
    keys = E.data(rng, dtype, n)
    keys[: n // 4] = keys[n // 4: 2 * (n // 4)]
    return keys


def _numpy_sort(keys: np.ndarray) -> np.ndarray:
    """numpy's stable order; for floats, the sort's total order (-0.0 before +0.0, NaNs last)."""
    order = E.sort_order(keys)
    if keys.dtype.kind != "f":
        E.assert_same(order, np.argsort(keys, kind="stable"))
    return order


@pytest.mark.parametrize("dtype", KEY_TYPES)
@pytest.mark.parametrize("n", SIZES)
def test_sort_matches_numpy(backend, rng, dtype, n):
    keys = _keys(rng, dtype, n)
    order = _numpy_sort(keys)
    E.assert_same_bits(lib.sort(keys, backend=backend), keys[order])
    E.assert_same(lib.argsort(keys, backend=backend), order.astype(np.uint32))
    values = E.data(rng, VALUE_TYPES[n % len(VALUE_TYPES)], n)
    got_k, got_v = lib.sort(keys, values, backend=backend)
    E.assert_same_bits(got_k, keys[order])
    assert got_v.dtype == values.dtype and got_v.tobytes() == values[order].tobytes()


@pytest.mark.parametrize("dtype", KEY_TYPES)
@pytest.mark.parametrize("value_type", VALUE_TYPES)
def test_pairs_across_tiles(backend, rng, dtype, value_type):
    keys = _keys(rng, dtype, 2 * PAIRS_TILE + 7)
    values = E.data(rng, value_type, keys.size)
    order = _numpy_sort(keys)
    got_k, got_v = lib.sort(keys, values, backend=backend)
    E.assert_same_bits(got_k, keys[order])
    assert got_v.dtype == value_type and got_v.tobytes() == values[order].tobytes()


def test_every_digit_decides(backend, rng):
    """Keys that differ in one byte only, at each of the eight digit positions: every pass counts."""
    digits = rng.integers(0, 256, 4001, dtype=np.uint64)
    positions = rng.integers(0, 8, digits.size, dtype=np.uint64)
    keys = digits << (positions * np.uint64(8))
    E.assert_same(lib.sort(keys, backend=backend), np.sort(keys, kind="stable"))
    signed = keys.view(np.int64)
    E.assert_same(lib.argsort(signed, backend=backend), np.argsort(signed, kind="stable").astype(np.uint32))


def test_float64_nans_and_zeros(backend):
    """Every NaN (any sign, any payload) sorts last in input order and comes back as
    0x7FFFFFFFFFFFFFFF; -0.0 before +0.0; subnormals in place."""
    bits = np.array([0x7FF8000000000001, 0x0000000000000000, 0xFFF0000000000001, 0x8000000000000000,
                     0x7FF0000000000000, 0x0000000000000001, 0x8000000000000001, 0xFFFFFFFFFFFFFFFF,
                     0xFFF0000000000000], np.uint64)
    keys = bits.view(np.float64)
    nan = 0x7FFFFFFFFFFFFFFF
    want = np.array([0xFFF0000000000000, 0x8000000000000001, 0x8000000000000000, 0, 1, 0x7FF0000000000000,
                     nan, nan, nan], np.uint64)
    E.assert_same(lib.sort(keys, backend=backend).view(np.uint64), want)
    E.assert_same(lib.argsort(keys, backend=backend), np.array([8, 6, 3, 1, 5, 4, 0, 2, 7], np.uint32))


@pytest.mark.parametrize("dtype", KEY_TYPES)
def test_plan_native_below_the_limit(rng, monkeypatch, dtype):
    """Below ``ONESWEEP_LIMIT`` keys: the single-pass plan with eight passes over the whole keys; at
    the limit (lowered here), the composite plan (two 32-bit sorts of indices and gathers)."""
    be = RecordingBackend()
    keys = _keys(rng, dtype, 2 * KEYS_TILE + 3)
    order = _numpy_sort(keys)
    E.assert_same_bits(lib.sort(keys, backend=be), keys[order])
    name = np.dtype(dtype).name.replace("uint", "u").replace("int", "i").replace("float", "f")
    assert be.names[-1] == ["lib_zero_fill", f"lib_radix_histograms_{name}", "lib_radix_digit_starts_8",
                            "lib_zero_fill", *(f"lib_radix_onesweep64_{shift}" for shift in range(0, 64, 8))]
    monkeypatch.setattr(topo, "ONESWEEP_LIMIT", keys.size)
    E.assert_same_bits(lib.sort(keys, backend=be), keys[order])
    assert not any("onesweep64" in name for name in be.names[-1])
    assert any("split_keys" in name for name in be.names[-1])


@pytest.mark.parametrize("width", [1, 3])
def test_look_back_of_any_width_sorts(rng, monkeypatch, width):
    """Over more tiles than one look-back trip reads, with the oracle's workgroup chunks: the same
    result for every width, in every one of the eight passes."""
    monkeypatch.setattr(K, "radix_onesweep", functools.partial(K.radix_onesweep.__wrapped__, width=width))
    keys = _keys(rng, np.int64, 5 * KEYS_TILE + 5)
    order = _numpy_sort(keys)
    E.assert_same(lib.sort(keys, backend=ReferenceBackend()), keys[order])
    E.assert_same(lib.argsort(keys, backend=ReferenceBackend()), order.astype(np.uint32))


def test_sort_raises_when_lookback_gives_up(rng, monkeypatch):
    """A wait too short for the oracle: the plan raises instead of returning wrong keys."""
    monkeypatch.setattr(K, "radix_onesweep",
                        functools.partial(K.radix_onesweep.__wrapped__, spin=(1, 2), width=1))
    keys = rng.integers(0, 2**64, 8 * KEYS_TILE, dtype=np.uint64)
    with pytest.raises(DispatchFailed, match="look-backs gave up.*Fix: "):
        lib.sort(keys, backend=ReferenceBackend())


def test_workgroup_memory_fits():
    """The wide tiles stay within the 48 KiB of workgroup memory every device runs (more needs a
    device that opts in to it), with 8-byte values too."""
    from vyre.ir import DataType
    from vyre.ir.layout import PORTABLE_WORKGROUP_BYTES, workgroup_layout

    for values, value_raw in [("none", DataType.U32), ("iota", DataType.U32), ("load", DataType.U32),
                              ("load", DataType.U64)]:
        items = K.onesweep_items(DataType.U64, values)
        program = K.radix_onesweep(8, None, None, values, items, 0, 1, raw=DataType.U64, value_raw=value_raw)
        assert workgroup_layout(program).total <= PORTABLE_WORKGROUP_BYTES


@pytest.mark.parametrize("items", [20, 24])
def test_wider_keys_only_tiles_sort_on_the_oracle(rng, monkeypatch, items):
    """With ``ONESWEEP_WIDE_ITEMS`` at 20 and 24 (over 48 KiB of workgroup memory) the oracle sorts
    64-bit keys exactly, over several tiles and a partial last one."""
    monkeypatch.setattr(K, "ONESWEEP_WIDE_ITEMS", items)
    for dtype in (np.uint64, np.float64):
        be = RecordingBackend()
        keys = _keys(rng, dtype, 3 * WG * items + 5)
        E.assert_same_bits(lib.sort(keys, backend=be), keys[_numpy_sort(keys)])
        assert any("onesweep64" in name for name in be.names[-1])


@needs_ptxas
@pytest.mark.parametrize("items", [20, 24])
def test_wider_keys_only_tiles_take_dynamic_workgroup_memory_and_assemble(items):
    """Keys-only tiles of 20 and 24 keys per invocation (57,380 and 67,620 bytes of workgroup
    memory) validate, declare dynamic shared memory and pass ptxas for sm_80 and sm_90."""
    from vyre.ir import DataType
    from vyre.ir.layout import PORTABLE_WORKGROUP_BYTES, dynamic_workgroup_bytes
    from vyre.ir.validate import validate
    from vyre_cuda import emit_ptx

    programs = {f"shift{shift}": K.radix_onesweep(shift, DataType.I64 if shift == 0 else None, None, "none", items,
                                                  0, 1, raw=DataType.U64) for shift in (0, 8, 56)}
    for program in programs.values():
        validate(program)
        assert dynamic_workgroup_bytes(program) > PORTABLE_WORKGROUP_BYTES
    for sm in ("80", "90"):
        ptx = {name: emit_ptx(program, sm=sm) for name, program in programs.items()}
        assert all(".extern .shared .align 16 .b8 vyre_smem[];" in text for text in ptx.values())
        assert assemble(ptx, sm) == []


@needs_ptxas
def test_every_native_kernel_assembles_for_sm90(rng):
    """Each program of the native 64-bit sorts (every key type; keys alone, 4- and 8-byte values,
    argsort) passes ptxas for sm_90."""
    from vyre_cuda import emit_ptx

    be = SequenceRecorder()
    programs = {}
    for dtype in KEY_TYPES:
        keys = _keys(rng, dtype, 40)
        lib.sort(keys, backend=be)
        lib.argsort(keys, backend=be)
        lib.unique(keys, backend=be)
        for value_type in (np.uint32, np.float64):
            lib.sort(keys, E.data(rng, value_type, keys.size), backend=be)
    for program in {step[0] for seq in be.sequences for step in seq}:
        programs[f"{program.name}_{len(programs)}"] = program
    from vyre.ir import DataType

    # the passes that move values or indices (key-value sorts and argsort take the composite plan
    # for now, so they are built here directly): every shift, the key transform on the first and last
    for values, value_raw in (("iota", DataType.U32), ("load", DataType.U32), ("load", DataType.U64)):
        items = K.onesweep_items(DataType.U64, values)
        for shift in range(0, 64, 8):
            program = K.radix_onesweep(shift, DataType.F64 if shift == 0 else None,
                                       DataType.F64 if shift == 56 else None, values, items, 0, 1,
                                       raw=DataType.U64, value_raw=value_raw)
            programs[f"{program.name}_{values}_{value_raw.name}"] = program
    wide = [name for name in programs if any(part in name for part in ("onesweep64", "starts_8", "histograms_"))]
    assert len(wide) >= 3 * 8 + 3
    failures = assemble({name: emit_ptx(programs[name], sm="90") for name in wide}, "90")
    assert not failures, "\n".join(failures[:20])
