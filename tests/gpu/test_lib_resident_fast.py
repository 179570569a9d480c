"""``vyre.lib`` on ``ResidentArray``s through the compiled path on ``cuda``: the handles aliased into
a compiled call keyed by dtype and length (``FastCall``, ``vyre.lib.repeat``), results issued from
the recycled pool, the work on the backend's stream with no wait unless the result is a host value.
Each case changes what a repeat must notice (contents, handles, lengths, frees, recycled results)
and compares with numpy."""

from __future__ import annotations

import numpy as np
import pytest

import vyre
from tests.lib import expected as E
from vyre import lib
from vyre.driver.errors import InvalidHandle
from vyre.lib.scratch import scratch_for

pytestmark = pytest.mark.gpu
pytest.importorskip("cupy")


@pytest.fixture
def backend(own_backend):
    return own_backend


def _syncs(be) -> int:
    return be.metrics().get("cuda_sync_points", 0)


def _calls(be, rx, rv):
    """One call of each compiled function on ``rx`` (u32) and ``rv`` (values), results as numpy."""
    keys, values = lib.sort(rx, rv, backend=be)
    kept, count = lib.select_if(rx, 0, 2**30, count="device", backend=be)
    got = {"sum": lib.reduce(rx, backend=be), "max": lib.reduce(rx, "max", backend=be),
           "tsum": lib.transform_reduce(rx, _low, backend=be),
           "scan": lib.inclusive_scan(rx, backend=be), "xscan": lib.exclusive_scan(rx, backend=be),
           "hist": lib.histogram(rx, 64, backend=be), "sorted": lib.sort(rx, backend=be),
           "order": lib.argsort(rx, backend=be), "keys": keys, "values": values, "kept": kept, "count": count}
    out = {k: (E.get_resident(be, v) if isinstance(v, lib.ResidentArray) else v) for k, v in got.items()}
    return out, {k: v for k, v in got.items() if isinstance(v, lib.ResidentArray)}


@vyre.func
def _low(v):
    w = v & 65535
    return w * w


def _check(got: dict, x: np.ndarray, v: np.ndarray) -> None:
    order = np.argsort(x, kind="stable")
    assert got["sum"] == x.sum(dtype=np.uint32)
    assert got["max"] == x.max()
    low = x & np.uint32(65535)
    assert got["tsum"] == (low * low).sum(dtype=np.uint32)
    E.assert_same(got["scan"], np.cumsum(x, dtype=np.uint32))
    E.assert_same(got["xscan"], np.concatenate([[0], np.cumsum(x, dtype=np.uint32)[:-1]]).astype(np.uint32))
    E.assert_same(got["hist"], np.bincount(x[x < 64], minlength=64).astype(np.uint32))
    E.assert_same(got["sorted"], np.sort(x))
    E.assert_same(got["order"], order.astype(np.uint32))
    E.assert_same(got["keys"], x[order])
    E.assert_same(got["values"], v[order])
    keep = x[x < 2**30]
    assert int(got["count"][0]) == keep.size
    E.assert_same(got["kept"][:keep.size], keep)


def test_repeats_follow_new_contents_handles_and_lengths(backend, rng):
    """Equal calls over new contents (same handle), other handles, other lengths and recycled or
    kept results: each is exact, and the loop runs its repeats (``scratch.repeats``)."""
    scratch = scratch_for(backend)
    n = 70_001
    rx, rv = E.put_resident(backend, np.zeros(n, np.uint32)), E.put_resident(backend, np.zeros(n, np.uint32))
    kept = []
    for i in range(10):
        if i == 7:
            n = 5_003  # another length: another key, then repeats of it
        x = rng.integers(0, 2**31, n).astype(np.uint32)
        v = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
        if i in (4, 7):
            rx, rv = E.put_resident(backend, x), E.put_resident(backend, v)  # other handles
        else:
            backend.upload_resident(rx.handle, x)
            backend.upload_resident(rv.handle, v)
            rx, rv = lib.ResidentArray(rx.handle, np.uint32, n, backend), lib.ResidentArray(rv.handle, np.uint32, n,
                                                                                             backend)
        got, results = _calls(backend, rx, rv)
        _check(got, x, v)
        if i % 3 == 0:
            kept.append((results, got))
        else:
            lib.recycle(*results.values(), backend=backend)
        if i == 3:
            assert scratch.repeats, "the third equal resident call should run its repeat"
    for results, want in kept:  # results kept by the caller are never written by later calls
        for name, r in results.items():
            E.assert_same(E.get_resident(backend, r), want[name])


def test_recycled_results_are_reused_without_new_captures(backend, rng):
    """A loop that recycles its results writes into the same handles and, once warm, replays its
    graph: no new captures, and a scan waits for nothing (no sync point) until it is read."""
    x = rng.integers(0, 2**31, 300_000).astype(np.uint32)
    rx = E.put_resident(backend, x)
    for _ in range(5):  # record, then the sightings that capture the graph
        lib.recycle(lib.inclusive_scan(rx, backend=backend), backend=backend)
    first = lib.inclusive_scan(rx, backend=backend)
    lib.recycle(first, backend=backend)
    before, syncs = backend.metrics(), _syncs(backend)
    for _ in range(20):
        out = lib.inclusive_scan(rx, backend=backend)
        assert out.handle is first.handle
        lib.recycle(out, backend=backend)
    assert _syncs(backend) == syncs, "a resident scan should not wait for the device"
    assert backend.metrics()["cuda_graph_captures"] == before["cuda_graph_captures"]
    out = lib.inclusive_scan(rx, backend=backend)
    E.assert_same(E.get_resident(backend, out), np.cumsum(x, dtype=np.uint32))


def test_reduce_waits_once_and_recycles_its_value(backend, rng):
    """A resident ``reduce`` returns a host scalar: one wait per call, and its 1-element result
    handle goes back to the pool (the resident bytes stay flat over a loop)."""
    x = rng.integers(0, 2**31, 1 << 20).astype(np.uint32)
    rx = E.put_resident(backend, x)
    for _ in range(4):
        lib.reduce(rx, backend=backend)
    held = backend.metrics()["cuda_resident_bytes_in_use"]
    for _ in range(2):
        x = x[::-1].copy()
        backend.upload_resident(rx.handle, x)
        syncs = _syncs(backend)
        for _ in range(25):
            assert lib.reduce(rx, backend=backend) == x.sum(dtype=np.uint32)
        assert _syncs(backend) - syncs <= 25, "one read back per call"
    assert backend.metrics()["cuda_resident_bytes_in_use"] == held


def test_freed_input_falls_back_and_raises(backend, rng):
    """A freed input of a repeated call raises ``InvalidHandle`` (as the full path does) and
    leaks no result handle; a live handle of the same length runs again."""
    x = rng.integers(0, 2**31, 20_000).astype(np.uint32)
    rx = E.put_resident(backend, x)
    for _ in range(4):
        lib.recycle(lib.inclusive_scan(rx, backend=backend), backend=backend)
        lib.reduce(rx, backend=backend)
    backend.free_resident(rx.handle)
    for fn in (lib.inclusive_scan, lib.reduce, lib.sort):
        with pytest.raises(InvalidHandle, match="Fix: "):
            fn(rx, backend=backend)
    ry = E.put_resident(backend, x[::-1].copy())
    for _ in range(3):
        assert lib.reduce(ry, backend=backend) == x.sum(dtype=np.uint32)
        scan = lib.inclusive_scan(ry, backend=backend)
        E.assert_same(E.get_resident(backend, scan), np.cumsum(x[::-1], dtype=np.uint32))


def test_freed_result_and_reallocated_memory(backend, rng):
    """Results freed by the caller (not recycled): the next call gets new handles, possibly at the
    same addresses, and stays exact; handles of other sizes in between change nothing."""
    x = rng.integers(0, 2**31, 40_000).astype(np.uint32)
    rx = E.put_resident(backend, x)
    for i in range(8):
        out = lib.inclusive_scan(rx, backend=backend)
        E.assert_same(E.get_resident(backend, out), np.cumsum(x, dtype=np.uint32))
        backend.free_resident(out.handle)
        if i % 2:
            junk = backend.allocate_resident(x.nbytes * 2)
            backend.free_resident(junk)


def test_device_and_resident_calls_share_roles(backend, rng):
    """Device-array calls and resident calls of one function alternate (they share scratch roles
    and aliases): each stays exact."""
    cupy = pytest.importorskip("cupy")
    for i in range(6):
        x = rng.integers(0, 2**31, 10_000 + i).astype(np.uint32)
        rx = E.put_resident(backend, x)
        d = cupy.asarray(x)
        assert lib.reduce(rx, backend=backend) == x.sum(dtype=np.uint32)
        assert int(lib.reduce(d, backend=backend)) == int(x.sum(dtype=np.uint32))
        E.assert_same(E.get_resident(backend, lib.inclusive_scan(rx, backend=backend)), np.cumsum(x, dtype=np.uint32))
        E.assert_same(cupy.asnumpy(lib.inclusive_scan(d, backend=backend)), np.cumsum(x, dtype=np.uint32))
        backend.free_resident(rx.handle)


def test_release_scratch_between_repeats(backend, rng):
    """``release_scratch`` drops the compiled calls; the next resident call compiles again."""
    x = rng.integers(0, 2**31, 9_999).astype(np.uint32)
    rx = E.put_resident(backend, x)
    for i in range(6):
        E.assert_same(E.get_resident(backend, lib.exclusive_scan(rx, backend=backend)),
                      np.concatenate([[0], np.cumsum(x, dtype=np.uint32)[:-1]]).astype(np.uint32))
        assert lib.reduce(rx, "max", backend=backend) == x.max()
        if i == 3:
            lib.release_scratch(backend)


def test_segmented_reduce_compiled_on_resident_and_cupy(backend, rng):
    """``segmented_reduce`` runs compiled on resident values and offsets and on CuPy arrays: new
    offsets of the same count in the same handle, and new CuPy arrays, give new results."""
    cupy = pytest.importorskip("cupy")
    x = rng.integers(0, 2**31, 100_000).astype(np.uint32)
    rx, ro = E.put_resident(backend, x), E.put_resident(backend, np.zeros(65, np.uint32))
    dx = cupy.asarray(x)
    for i in range(5):
        offsets = np.concatenate([[i], np.sort(rng.integers(i, x.size + 1, 63)), [x.size]]).astype(np.uint32)
        backend.upload_resident(ro.handle, offsets)
        want = E.segmented_reduce(x, offsets, "max")
        out = lib.segmented_reduce(rx, ro, "max", backend=backend)
        E.assert_same(E.get_resident(backend, out), want)
        lib.recycle(out, backend=backend)
        E.assert_same(cupy.asnumpy(lib.segmented_reduce(dx, cupy.asarray(offsets), "max", backend=backend)), want)


def test_segmented_reduce_compiled_from_short_to_long_segments(backend, rng):
    """One compiled call (same dtype, lengths and handles) fed offsets that change from 1024-element
    segments to one segment of everything after empty ones, to random cuts with a few long
    segments, and back; each recycled result is poisoned before the next call. Every result is
    exact and the graph is captured once."""
    n = 1 << 22
    segments = n // 1024
    x = E.data(rng, np.uint32, n)
    rx, ro = E.put_resident(backend, x), E.put_resident(backend, np.zeros(segments + 1, np.uint32))
    few_long = np.sort(np.concatenate([rng.integers(0, n // 100, segments - 10), rng.integers(0, n + 1, 9)]))
    layouts = [np.arange(0, n + 1, 1024), np.concatenate([np.zeros(segments, np.int64), [n]]),
               np.concatenate([[0], few_long, [n]]), np.arange(0, n + 1, 1024)]
    captures = None
    for offsets in layouts:
        offsets = offsets.astype(np.uint32)
        backend.upload_resident(ro.handle, offsets)
        out = lib.segmented_reduce(rx, ro, backend=backend)
        prefix = np.concatenate([np.zeros(1, np.uint64), np.cumsum(x, dtype=np.uint64)])
        E.assert_same(E.get_resident(backend, out), (prefix[offsets[1:]] - prefix[offsets[:-1]]).astype(np.uint32))
        captures = captures or backend.metrics()["cuda_graph_captures"]
        backend.upload_resident(out.handle, np.full(segments, 0xDEADBEEF, np.uint32))
        lib.recycle(out, backend=backend)
    assert backend.metrics()["cuda_graph_captures"] == captures
    for handle in (rx.handle, ro.handle):
        backend.free_resident(handle)
