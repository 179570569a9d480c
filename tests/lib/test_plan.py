"""Topologies, scratch reuse and PTX of ``vyre.lib``: what runs, and that it is the same per capacity class."""

from __future__ import annotations

import numpy as np
import pytest

from tests.codegen.codegen_support import assemble, needs_ptxas
from vyre import lib
from vyre.driver.errors import InvalidProgram
from vyre.lib.scratch import scratch_for
from vyre.reference import ReferenceBackend


class RecordingBackend(ReferenceBackend):
    """The oracle, keeping the steps of every ``dispatch_sequence`` it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.sequences: list[list[tuple]] = []

    def dispatch_sequence(self, steps, reads=()):
        self.sequences.append(list(steps))
        return super().dispatch_sequence(steps, reads)


def _signature(steps):
    """Programs, grids and handles of a sequence: what a captured CUDA graph is keyed on."""
    return [(program, config.grid, tuple(h.id for h in handles)) for program, handles, config in steps]


EVERY_CALL = {
    "reduce": lambda x, b: lib.reduce(x, "max", backend=b),
    "inclusive_scan": lambda x, b: lib.inclusive_scan(x, backend=b),
    "exclusive_scan": lambda x, b: lib.exclusive_scan(x, "xor", 3, backend=b),
    "select": lambda x, b: lib.select(x, x & 1, backend=b),
    "select_if": lambda x, b: lib.select_if(x, 10, 2**31, backend=b),
    "histogram": lambda x, b: lib.histogram(x & 1023, 1000, backend=b),
    "sort": lambda x, b: lib.sort(x, x, backend=b),
    "argsort": lambda x, b: lib.argsort(x.view(np.float32), backend=b),
    "unique": lambda x, b: lib.unique(x.view(np.int32) & 7, backend=b),
    "run_length_encode": lambda x, b: lib.run_length_encode(x >> 30, backend=b),
    "segmented_reduce": lambda x, b: lib.segmented_reduce(x, np.array([0, 5, 5, len(x)], np.uint32), "min", backend=b),
}


@pytest.mark.parametrize("name", sorted(EVERY_CALL))
def test_one_topology_per_capacity_class(rng, name):
    """Sizes 2100 and 4000 share the class 4096: same programs, grids and scratch handles, one sequence each."""
    be = RecordingBackend()
    for n in (2100, 4000):
        EVERY_CALL[name](rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32), be)
    assert len(be.sequences) == 2
    assert _signature(be.sequences[0]) == _signature(be.sequences[1])
    EVERY_CALL[name](rng.integers(0, 2**32, 5000, dtype=np.uint64).astype(np.uint32), be)
    assert _signature(be.sequences[2]) != _signature(be.sequences[1])


@pytest.mark.parametrize("n, dtype, steps, groups", [(1, np.uint32, 1, 1), (4096, np.uint32, 1, 1),
                                                     (4097, np.uint32, 1, 1), (2**20, np.int32, 1, 128),
                                                     (2**20 + 1, np.uint32, 1, 256), (2**23, np.uint32, 1, 1024),
                                                     (4097, np.float32, 3, 2), (2**20 + 1, np.float32, 3, 512)])
def test_scan_levels(n, dtype, steps, groups):
    """One workgroup up to 4096 elements; above, integers: one look-back kernel of 8192-element
    tiles (no zero fill: it keeps its state zero itself); F32: up, spine, down over at most 4096
    segments."""
    be = RecordingBackend()
    out = lib.inclusive_scan(np.ones(n, dtype), backend=be)
    assert len(be.sequences[0]) == steps
    assert be.sequences[0][-1][2].grid == (groups, 1, 1)
    if n <= 2**20 + 1:  # the oracle is slow at 2^23; the grid is what this test checks there
        np.testing.assert_array_equal(out, np.arange(1, n + 1, dtype=dtype))


def test_scratch_is_reused_and_released():
    be = ReferenceBackend()
    x = np.arange(3000, dtype=np.uint32)
    lib.sort(x, backend=be)
    held = be.metrics()["reference_resident_bytes"]
    assert held > 0
    lib.sort(x[::-1].copy(), backend=be)
    assert be.metrics()["reference_resident_bytes"] == held
    assert lib.release_scratch(be) == held
    assert be.metrics()["reference_resident_bytes"] == 0
    assert lib.release_scratch(be) == 0


def test_scratch_survives_backend_restart():
    """After shutdown frees every handle, the next call notices the stale scratch and starts afresh."""
    be = ReferenceBackend()
    x = np.arange(1, 2000, dtype=np.uint32)
    assert lib.reduce(x, backend=be) == x.sum()
    be.shutdown()
    assert lib.reduce(x, backend=be) == x.sum()
    assert scratch_for(be).nbytes > 0


def test_device_arrays_need_a_binding_backend():
    """A device array on a backend that cannot bind one in place (the oracle) is a clear
    UnsupportedFeature naming the fix, not a crash or a silent host copy."""
    from vyre.driver.errors import UnsupportedFeature

    class DeviceArray:  # what vyre.lib inspects of a device array; the oracle has no device memory
        __cuda_array_interface__ = {"typestr": "<u4", "shape": (4,), "strides": None, "data": (0, False),
                                    "version": 3}

    be = ReferenceBackend()
    for call in (lambda: lib.reduce(DeviceArray(), backend=be), lambda: lib.sort(DeviceArray(), backend=be),
                 lambda: lib.select(DeviceArray(), np.ones(4, np.uint32), backend=be, count="device")):
        with pytest.raises(UnsupportedFeature, match="device arrays in vyre.lib.*Fix: "):
            call()


def test_count_device_on_the_oracle(rng):
    """``count="device"`` gives full-length results and a 1-element count on any backend."""
    x = rng.integers(0, 100, 999).astype(np.uint32)
    out, n = lib.select_if(x, 10, 50, count="device", backend="reference")
    want = x[(x >= 10) & (x < 50)]
    assert out.shape == x.shape and n.shape == (1,) and n[0] == want.size
    np.testing.assert_array_equal(out[:want.size], want)
    values, lengths, runs = lib.run_length_encode(np.sort(x), count="device", backend="reference")
    uniq, counts = np.unique(x, return_counts=True)
    assert runs[0] == uniq.size
    np.testing.assert_array_equal(values[:runs[0]], uniq)
    np.testing.assert_array_equal(lengths[:runs[0]], counts)
    assert [v.size for v in lib.unique(x[:0], count="device", backend="reference")] == [0, 0, 1]
    with pytest.raises(InvalidProgram, match='count="exact"'):
        lib.select(x, x, count="later", backend="reference")


@needs_ptxas
def test_every_kernel_assembles_for_sm90(rng, monkeypatch):
    from vyre.lib._sort import topology as sort_topology
    from vyre_cuda import emit_ptx

    be = RecordingBackend()
    x = rng.integers(0, 2**32, 5000, dtype=np.uint64).astype(np.uint32)
    for call in EVERY_CALL.values():
        call(x, be)
    lib.histogram(x, 20_000, backend=be)
    lib.select(x.view(np.float32), x.view(np.float32), backend=be)
    lib.sort(x.view(np.float32), x, backend=be)  # the largest radix kernels: f32 keys with values
    monkeypatch.setattr(sort_topology, "ONESWEEP_LIMIT", 0)  # and the segmented sort's (n >= 2^30)
    lib.sort(x.view(np.float32), x, backend=be)
    lib.argsort(x.view(np.int32), backend=be)
    programs = {p.name + str(i): p for i, p in enumerate({s[0] for seq in be.sequences for s in seq})}
    assert len(programs) > 15
    failures = assemble({name: emit_ptx(p, sm="90") for name, p in programs.items()}, "90")
    assert not failures, "\n".join(failures[:20])


def test_default_backend_is_acquired_once():
    """Without ``backend=`` the library acquires a backend (the oracle on a machine without a GPU) once."""
    from vyre.lib import io

    x = np.arange(1, 3000, dtype=np.uint32)
    assert lib.reduce(x) == x.sum()
    first = io.default_backend()
    scanned = lib.inclusive_scan(x)
    assert scanned[-1] == x.sum() and io.default_backend() is first


def test_backend_without_subgroups_is_refused():
    from vyre.driver.errors import UnsupportedFeature

    class NoSubgroups(ReferenceBackend):
        def supports_subgroup_ops(self) -> bool:
            return False

    with pytest.raises(UnsupportedFeature, match="subgroup.*Fix: "):
        lib.inclusive_scan(np.ones(10, np.uint32), backend=NoSubgroups())


def test_threads_share_one_backend(rng):
    """Calls from several threads on one backend are serialised by the scratch lock and all correct."""
    from concurrent.futures import ThreadPoolExecutor

    be = ReferenceBackend()
    inputs = [rng.integers(0, 2**32, 3000 + 500 * k, dtype=np.uint64).astype(np.uint32) for k in range(6)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        sorted_ = list(pool.map(lambda x: lib.sort(x, backend=be), inputs))
        scanned = list(pool.map(lambda x: lib.inclusive_scan(x, backend=be), inputs))
    for x, s, c in zip(inputs, sorted_, scanned):
        np.testing.assert_array_equal(s, np.sort(x))
        np.testing.assert_array_equal(c, np.cumsum(x, dtype=np.uint32))


@pytest.mark.parametrize("name", ["inclusive_scan", "exclusive_scan", "select", "select_if", "sort", "argsort",
                                  "unique", "run_length_encode"])
def test_segments_of_many_tiles(monkeypatch, rng, name):
    """With few workgroups each segment spans several tiles: running carries, counts and digit positions."""
    from tests.lib import expected as E
    from vyre.lib._scan import topology as scan_topology
    from vyre.lib._sort import topology as sort_topology

    monkeypatch.setattr(scan_topology, "SCAN_GROUPS", 4)
    monkeypatch.setattr(sort_topology, "ONESWEEP_LIMIT", 0)  # the segmented sort, the plan for n >= 2^30
    be = ReferenceBackend()
    n = 21_001  # 3 scan segments of 4 tiles, 4 sort segments of 6 tiles (the last ones partial)
    x = E.data(rng, np.uint32, n)
    if name == "inclusive_scan":
        E.assert_same(lib.inclusive_scan(x, backend=be), np.cumsum(x, dtype=np.uint32))
    elif name == "exclusive_scan":
        E.assert_same(lib.exclusive_scan(x, "max", 5, backend=be), E.exclusive_scan(x, "max", 5))
    elif name == "select":
        E.assert_same(lib.select(x, x & 3 == 1, backend=be), x[x & 3 == 1])
    elif name == "select_if":
        E.assert_same(lib.select_if(x, 2**30, 2**31, backend=be), x[(x >= 2**30) & (x < 2**31)])
    elif name == "sort":
        keys, values = lib.sort(x.view(np.float32), x, backend=be)
        order = E.sort_order(x.view(np.float32))
        E.assert_same(values, x[order])
    elif name == "argsort":
        keys = x.view(np.int32) >> 20  # many equal keys: stability matters
        E.assert_same(lib.argsort(keys, backend=be), E.sort_order(keys).astype(np.uint32))
    elif name == "unique":
        values, counts = lib.unique(x & 63, backend=be)
        want_values, want_counts = np.unique(x & 63, return_counts=True)
        E.assert_same(values, want_values)
        E.assert_same(counts, want_counts.astype(np.uint32))
    else:
        runs = E.runs(rng, np.uint32, n)
        values, lengths = lib.run_length_encode(runs, backend=be)
        want_values, want_lengths = E.run_length_encode(runs)
        E.assert_same(values, want_values)
        E.assert_same(lengths, want_lengths)


def test_onesweep_limit_setting(monkeypatch, rng):
    """``VYRE_ONESWEEP_LIMIT=0`` sorts over segments (no single-pass kernel runs); results are the same;
    a value that is not a count is ``InvalidSetting``."""
    from vyre.driver.errors import InvalidSetting

    x = rng.integers(0, 2**32, 3001, dtype=np.uint64).astype(np.uint32)
    names = {}
    for limit in ("", "0"):
        monkeypatch.setenv("VYRE_ONESWEEP_LIMIT", limit)
        be = RecordingBackend()
        np.testing.assert_array_equal(lib.sort(x, backend=be), np.sort(x))
        names[limit] = {s[0].name for seq in be.sequences for s in seq}
    assert any("onesweep" in n for n in names[""]) and not any("onesweep" in n for n in names["0"])
    monkeypatch.setenv("VYRE_ONESWEEP_LIMIT", "lots")
    with pytest.raises(InvalidSetting, match="VYRE_ONESWEEP_LIMIT"):
        lib.sort(x + 1, backend=RecordingBackend())
