"""``dispatch_until`` in a conditional CUDA graph node (a WHILE node whose body is the iteration).

Every loop runs three ways: with conditional nodes (the default; ``VYRE_CUDA_CONDITIONAL=1``), with
``VYRE_CUDA_CONDITIONAL=0`` (batched readbacks) and on the oracle; the iteration
counts and final states must be identical. The ``cuda_conditional_loops`` counter proves which
path ran: on a driver that supports conditional nodes (CUDA 12.4+), asked for, the conditional
path must be the one taken.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
from test_graphs import components, copy_back, random_graph, relax
from test_threads import COUNTDOWN

from vyre.reference import ReferenceBackend

pytestmark = pytest.mark.gpu

MODES = ("1", "0")  # VYRE_CUDA_CONDITIONAL


def loops(backend) -> int:
    return backend.metrics()["cuda_conditional_loops"]


def expect_path(backend, mode: str, before: int) -> None:
    """The conditional path ran exactly when it was allowed (and the driver supports it)."""
    supported = backend.sequences.conditional_reason() is None
    assert (loops(backend) > before) == (mode == "1" and supported)


def test_a_new_driver_runs_conditional_loops(backend, monkeypatch) -> None:
    """On a driver of CUDA 12.4+ with graphs on by default and conditional loops asked for
    (unset or ``1``), nothing may silently fall back; ``0`` takes the batched path."""
    if backend.info.driver_version < 12040:
        pytest.skip(f"driver {backend.info.driver_version} predates conditional graph nodes")
    monkeypatch.delenv("VYRE_CUDA_GRAPHS", raising=False)
    monkeypatch.delenv("VYRE_CUDA_CONDITIONAL", raising=False)
    assert backend.sequences.conditional_reason() is None
    monkeypatch.setenv("VYRE_CUDA_CONDITIONAL", "0")
    assert "VYRE_CUDA_CONDITIONAL=0" in backend.sequences.conditional_reason()


def run_countdown(be, start: np.ndarray, max_iterations: int) -> tuple[int, np.ndarray]:
    hc, flag = be.allocate_resident(start.nbytes), be.allocate_resident(4)
    be.upload_resident(hc, start)
    be.upload_resident(flag, np.array([0xDEADBEEF], np.uint32))
    try:
        iterations = be.dispatch_until([(COUNTDOWN, [hc, flag])], flag, max_iterations)
        return iterations, be.download_resident(hc).view(np.uint32).copy()
    finally:
        be.free_resident(hc)
        be.free_resident(flag)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("top", "cap"), [(0, 10), (1, 10), (2, 10), (63, 100), (64, 100), (65, 100),
                                          (300, 1000), (1999, 5000), (10, 1), (10, 5), (200, 64), (200, 65)])
def test_countdown_counts_and_caps_like_the_oracle(backend, rng, monkeypatch, mode, top, cap) -> None:
    """``max(c) + 1`` iterations (the last changes nothing), or exactly ``cap`` when that is fewer;
    done after 1 iteration when nothing is left (``top`` 0)."""
    monkeypatch.setenv("VYRE_CUDA_CONDITIONAL", mode)
    start = rng.integers(0, top + 1, 1000, dtype=np.uint32)
    start[rng.integers(0, start.size)] = top
    before = loops(backend)
    got = run_countdown(backend, start, cap)
    expect_path(backend, mode, before)
    want = run_countdown(ReferenceBackend(), start, cap)
    assert got[0] == want[0] == min(top + 1, cap)
    assert np.array_equal(got[1], want[1])
    assert np.array_equal(got[1], start - np.minimum(start, np.uint32(want[0])))


@pytest.mark.parametrize("mode", MODES)
def test_zero_iterations_run_nothing(backend, rng, monkeypatch, mode) -> None:
    monkeypatch.setenv("VYRE_CUDA_CONDITIONAL", mode)
    start = rng.integers(1, 50, 300, dtype=np.uint32)
    before = loops(backend)
    iterations, after = run_countdown(backend, start, 0)
    assert iterations == 0 and loops(backend) == before
    assert np.array_equal(after, start)


def test_label_propagation_equals_batched_and_oracle(backend, rng, monkeypatch) -> None:
    """Two steps per iteration (relax, copy back) on a sparse random graph: one result three ways,
    and calling again on the converged labels takes one iteration (the cached loop graph replays)."""
    n = 20_000
    row, col = random_graph(rng, n, 10_000)
    labels = rng.permutation(n).astype(np.uint32) * np.uint32(3) + np.uint32(1)
    results = []
    for be, mode in ((backend, "1"), (backend, "0"), (ReferenceBackend(), "1")):
        monkeypatch.setenv("VYRE_CUDA_CONDITIONAL", mode)
        hs = [be.allocate_resident(a.nbytes) for a in (row, col, labels, labels, np.zeros(1, np.uint32))]
        for h, a in zip(hs, (row, col, labels, labels, np.ones(1, np.uint32))):
            be.upload_resident(h, a)
        r, c, old, new, flag = hs
        steps = [(relax(), [r, c, old, new, flag]), (copy_back(), [new, old])]
        before = loops(be) if be is backend else 0
        iterations = be.dispatch_until(steps, flag, 10_000)
        results.append((iterations, be.download_resident(old).view(np.uint32).copy()))
        assert be.dispatch_until(steps, flag, 10_000) == 1
        if be is backend:
            expect_path(backend, mode, before)
            for h in hs:
                be.free_resident(h)
    (it_cond, got_cond), (it_batch, got_batch), (it_ref, want) = results
    assert it_cond == it_batch == it_ref > 3
    assert np.array_equal(got_cond, want) and np.array_equal(got_batch, want)
    assert np.array_equal(want, components(row, col, labels))


def test_loops_over_freed_and_reused_handles_of_growing_size(backend, monkeypatch) -> None:
    """Each loop frees its handles, so the next one gets recycled memory and a new loop graph while
    the old one is destroyed. Exact counts each time."""
    monkeypatch.setenv("VYRE_CUDA_CONDITIONAL", "1")
    for i in range(8):
        n, top = 700 + 97 * i, 3 + i
        start = np.arange(n, dtype=np.uint32) % np.uint32(top + 1)
        iterations, after = run_countdown(backend, start, 1000)
        assert iterations == top + 1 and not after.any()


def test_a_new_flag_or_freed_body_handle_builds_a_new_loop(backend, rng, monkeypatch) -> None:
    """The loop graph is keyed by the flag; freeing a handle of its body retires it (no stale replay)."""
    monkeypatch.setenv("VYRE_CUDA_CONDITIONAL", "1")
    start = rng.integers(0, 40, 500, dtype=np.uint32)
    for _ in range(3):  # fresh handles each time: new flag pointer or reused memory, same answer
        assert run_countdown(backend, start, 1000)[0] == int(start.max()) + 1
    hc = backend.allocate_resident(start.nbytes)
    flags = [backend.allocate_resident(4) for _ in range(2)]
    for flag in flags:
        backend.upload_resident(hc, start)
        assert backend.dispatch_until([(COUNTDOWN, [hc, flag])], flag, 1000) == int(start.max()) + 1
        assert not backend.download_resident(hc).view(np.uint32).any()
    for h in (hc, *flags):
        backend.free_resident(h)


def test_graphs_off_falls_back_to_the_eager_loop(backend, rng, monkeypatch) -> None:
    monkeypatch.setenv("VYRE_CUDA_GRAPHS", "0")
    monkeypatch.setenv("VYRE_CUDA_CONDITIONAL", "1")
    assert "VYRE_CUDA_GRAPHS" in backend.sequences.conditional_reason()
    start = rng.integers(0, 100, 700, dtype=np.uint32)
    before = loops(backend)
    assert run_countdown(backend, start, 1000)[0] == int(start.max()) + 1
    assert loops(backend) == before


def test_shutdown_releases_conditional_loop_graphs(monkeypatch, rng) -> None:
    import cupy

    from vyre_cuda.backend import CudaBackend

    monkeypatch.setenv("VYRE_CUDA_CONDITIONAL", "1")
    be = CudaBackend()
    start = rng.integers(0, 30, 4096, dtype=np.uint32)
    for cap in (5, 1000):
        assert run_countdown(be, start, cap)[0] == min(int(start.max()) + 1, cap)
    hc, flag = be.allocate_resident(start.nbytes), be.allocate_resident(4)
    be.upload_resident(hc, start)
    be.dispatch_until([(COUNTDOWN, [hc, flag])], flag, 100)
    assert loops(be) == 3 and be.metrics()["cuda_graphs_live"] >= 1
    assert be.sequences.control is not None
    be.shutdown()
    assert be.metrics()["cuda_graphs_live"] == 0 and len(be.sequences.graphs) == 0
    assert be.sequences.control is None and be.heap.reserved == 0 and be.metrics()["cuda_param_blocks"] == 0
    gc.collect()
    cupy.cuda.runtime.deviceSynchronize()


def enqueue_countdown(be, start: np.ndarray, max_iterations: int) -> np.ndarray:
    """``run_countdown`` through ``enqueue_until`` (no count read); the counters after it."""
    hc, flag = be.allocate_resident(start.nbytes), be.allocate_resident(4)
    be.upload_resident(hc, start)
    be.upload_resident(flag, np.array([0xDEADBEEF], np.uint32))
    try:
        assert be.enqueue_until([(COUNTDOWN, [hc, flag])], flag, max_iterations) is None
        return be.download_resident(hc).view(np.uint32).copy()
    finally:
        be.free_resident(hc)
        be.free_resident(flag)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("top", "cap"), [(0, 10), (1, 10), (63, 100), (300, 1000), (10, 5), (200, 65), (7, 0)])
def test_enqueue_until_leaves_the_state_dispatch_until_leaves(backend, rng, monkeypatch, mode, top, cap) -> None:
    """The loop without a count read ends where ``dispatch_until`` ends (the cap included), on the
    conditional path with no host wait, and on the batched path (which waits) alike."""
    monkeypatch.setenv("VYRE_CUDA_CONDITIONAL", mode)
    start = rng.integers(0, top + 1, 1000, dtype=np.uint32)
    start[rng.integers(0, start.size)] = top
    before = loops(backend)
    got = enqueue_countdown(backend, start, cap)
    if cap:
        expect_path(backend, mode, before)
    assert np.array_equal(got, run_countdown(ReferenceBackend(), start, cap)[1])


def test_enqueue_until_does_not_wait(backend, monkeypatch) -> None:
    """On the conditional path the loop is enqueued with no synchronisation when its graph's last
    run has finished: the sync counter does not move until the result is read. A second loop
    enqueued while the first still runs waits for it once (a graph is never run twice at once)."""
    monkeypatch.delenv("VYRE_CUDA_CONDITIONAL", raising=False)
    if backend.sequences.conditional_reason() is not None:
        pytest.skip(backend.sequences.conditional_reason())
    start = np.full(4096, 40, np.uint32)
    hc, flag = backend.allocate_resident(start.nbytes), backend.allocate_resident(4)
    steps = [(COUNTDOWN, [hc, flag])]
    try:
        backend.upload_resident(hc, start)
        backend.enqueue_until(steps, flag, 100)  # builds the loop graph
        assert not backend.download_resident(hc).view(np.uint32).any()
        backend.upload_resident(hc, start)
        syncs = backend.metrics()["cuda_sync_points"]
        backend.enqueue_until(steps, flag, 100)
        assert backend.metrics()["cuda_sync_points"] == syncs
        assert not backend.download_resident(hc).view(np.uint32).any()
        backend.upload_resident(hc, np.full(4096, 3000, np.uint32))  # 3,000 iterations: milliseconds
        syncs = backend.metrics()["cuda_sync_points"]
        backend.enqueue_until(steps, flag, 5000)
        backend.enqueue_until(steps, flag, 5000)  # the first still runs: one wait, then one iteration
        assert backend.metrics()["cuda_sync_points"] == syncs + 1
        assert not backend.download_resident(hc).view(np.uint32).any()
    finally:
        backend.free_resident(hc)
        backend.free_resident(flag)


def test_compiled_loop_replays_watches_its_flag_and_refuses_freed_handles(backend, monkeypatch) -> None:
    """``compile_until``: from the second call on the loop graph is replayed with no lookups and no
    wait, giving the same state as ``dispatch_until``; a loop its cap ends with the flag still set
    raises the watch's error from a later call; after a handle is freed it takes the general calls,
    which refuse the handle."""
    from vyre.driver.errors import InvalidHandle

    monkeypatch.delenv("VYRE_CUDA_CONDITIONAL", raising=False)
    if backend.sequences.conditional_reason() is not None:
        pytest.skip(backend.sequences.conditional_reason())
    start = np.arange(1, 4097, dtype=np.uint32) % 50
    hc, flag = backend.allocate_resident(start.nbytes), backend.allocate_resident(4)
    steps = [(COUNTDOWN, [hc, flag])]

    class Capped(Exception):
        pass

    held = [hc, flag]
    try:
        loop = backend.compile_until([], steps, flag, 100)
        for call in range(4):
            backend.upload_resident(hc, start)
            syncs = backend.metrics()["cuda_sync_points"]
            loop.enqueue()
            assert backend.metrics()["cuda_sync_points"] == syncs, call
            assert not backend.download_resident(hc).view(np.uint32).any(), call
            assert loop.replays is not None, call  # kept by the first call's general path
        capped = backend.compile_until([], steps, flag, 5)
        backend.upload_resident(hc, start)
        capped.enqueue(watch=Capped)
        left = backend.download_resident(hc).view(np.uint32)  # waits: the watched word has landed
        assert np.array_equal(left, np.maximum(start.astype(np.int64) - 5, 0).astype(np.uint32))
        with pytest.raises(Capped):
            backend.enqueue_sequence([])
        backend.enqueue_sequence([])  # raised once
        backend.free_resident(held.pop(0))
        with pytest.raises(InvalidHandle):
            loop.enqueue()
    finally:
        for handle in held:
            backend.free_resident(handle)
