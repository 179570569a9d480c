"""vyre.lib on the caller's device arrays: bound in place, results of the caller's kind, the caller's
stream, no host copy and no host wait (checked against the oracle and numpy, counted by telemetry)."""

from __future__ import annotations

import numpy as np
import pytest

from vyre import lib
from vyre.driver.errors import InvalidHandle, InvalidProgram

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

SIZES = (1, 7, 1000, 5003, (1 << 16) + 3, 300_001)


@pytest.fixture(scope="module")
def backend():
    import vyre

    return vyre.default_backend()


def _delta(backend, before: dict, *names: str) -> dict:
    after = backend.metrics()
    return {name: after.get(name, 0) - before.get(name, 0) for name in names}


def _keys(rng, n: int, dtype) -> np.ndarray:
    if np.dtype(dtype) == np.float32:
        x = rng.standard_normal(n).astype(np.float32)
        x[:: max(1, n // 7)] = -0.0
        return x
    return rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, n, dtype=np.int64).astype(dtype)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.float32])
def test_calls_on_cupy_match_the_oracle(backend, rng, n, dtype):
    """Every primitive on CuPy input gives CuPy output equal to the same call on the oracle."""
    x = _keys(rng, n, dtype)
    flags = (rng.integers(0, 3, n) == 0).astype(np.uint32)
    d, f = cupy.asarray(x), cupy.asarray(flags)
    ref = dict(backend="reference")
    checks = {
        "reduce": (lambda **k: lib.reduce(d if not k else x, "max", **k)),
        "inclusive_scan": (lambda **k: lib.inclusive_scan(d if not k else x, "min", **k)),
        "exclusive_scan": (lambda **k: lib.exclusive_scan(d if not k else x, "max", **k)),
        "select": (lambda **k: lib.select(d if not k else x, f if not k else flags, **k)),
        "sort": (lambda **k: lib.sort(d if not k else x, **k)),
        "argsort": (lambda **k: lib.argsort(d if not k else x, **k)),
    }
    if dtype != np.float32:
        checks["sort_pairs"] = lambda **k: lib.sort(d if not k else x, f if not k else flags, **k)
        checks["unique"] = lambda **k: lib.unique(d if not k else x, **k)
    for name, call in checks.items():
        got, want = call(), call(**ref)
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        for g, w in zip(got, want):
            assert isinstance(g, cupy.ndarray), name
            np.testing.assert_array_equal(cupy.asnumpy(g), np.asarray(w), err_msg=name)


def test_histogram_and_segmented_reduce_on_cupy(backend, rng):
    x = rng.integers(0, 300, 100_003).astype(np.uint32)
    np.testing.assert_array_equal(cupy.asnumpy(lib.histogram(cupy.asarray(x), 256)),
                                  np.bincount(x[x < 256], minlength=256))
    offsets = np.sort(rng.integers(0, x.size, 50)).astype(np.uint32)
    offsets[0], offsets[-1] = 0, x.size
    got = lib.segmented_reduce(cupy.asarray(x), cupy.asarray(offsets), "add")
    np.testing.assert_array_equal(cupy.asnumpy(got), lib.segmented_reduce(x, offsets, "add", backend="reference"))


def test_torch_in_torch_out(backend, rng):
    torch = pytest.importorskip("torch")
    x = rng.integers(0, 2**31, 70_001).astype(np.int32)
    t = torch.as_tensor(x, device="cuda")
    out = lib.sort(t)
    assert isinstance(out, torch.Tensor) and out.is_cuda
    np.testing.assert_array_equal(out.cpu().numpy(), np.sort(x))
    total = lib.reduce(t, "add")
    assert isinstance(total, torch.Tensor) and total.shape == ()
    assert int(total.item()) == int(np.add.reduce(x, dtype=np.int32))


def test_no_host_copy_and_no_wait(backend, rng):
    """Scans, sorts, reductions and histograms on CuPy arrays move no bytes through the host and
    never synchronise (counted over 30 calls of each)."""
    x = cupy.asarray(rng.integers(0, 2**32, 1 << 20, dtype=np.uint64).astype(np.uint32))
    lib.sort(x), lib.inclusive_scan(x), lib.reduce(x), lib.histogram(x & 255, 256)  # bind once
    cupy.cuda.Device().synchronize()
    before = backend.metrics()
    for _ in range(30):
        lib.sort(x), lib.inclusive_scan(x), lib.reduce(x), lib.histogram(x, 256)
        lib.select(x, x, count="device")
    delta = _delta(backend, before, "cuda_sync_points", "cuda_h2d_bytes", "cuda_d2h_bytes", "cuda_d2d_bytes")
    assert delta == {"cuda_sync_points": 0, "cuda_h2d_bytes": 0, "cuda_d2h_bytes": 0, "cuda_d2d_bytes": 0}
    assert int(lib.reduce(x)) == int(np.add.reduce(cupy.asnumpy(x), dtype=np.uint32))


def test_pointer_changes_do_not_recapture(backend, rng):
    """Arrays that alternate between calls (as a loop's results do) reuse bound graphs."""
    xs = [cupy.asarray(rng.integers(0, 2**31, 50_000).astype(np.uint32)) for _ in range(3)]
    for _ in range(20):  # each (input, result) pointer pair: launched once, captured when met again
        for x in xs:
            out = lib.inclusive_scan(x)
    before = backend.metrics()
    for _ in range(20):
        for x in xs:
            out = lib.inclusive_scan(x)
    assert _delta(backend, before, "cuda_graph_captures")["cuda_graph_captures"] == 0
    np.testing.assert_array_equal(cupy.asnumpy(out), np.cumsum(cupy.asnumpy(xs[-1]), dtype=np.uint32))


def test_replay_lane_sees_new_contents_at_the_same_addresses(backend, rng):
    """A loop whose arrays stay where they were (results dropped, inputs refilled in place) replays
    the last call's graph without re-pointing: every result still equals numpy on fresh data, on
    the default stream, a side stream, and after switching between them and between sizes."""
    side = cupy.cuda.Stream(non_blocking=True)
    small, big = cupy.empty(70_001, cupy.uint32), cupy.empty(1 << 16, cupy.uint32)
    before = backend.metrics()
    for i in range(30):
        d = (small, big)[(i // 5) % 2]
        x = rng.integers(0, 2**31, d.size).astype(np.uint32)
        stream = side if i % 10 >= 7 else None
        with side if stream is not None else cupy.cuda.Stream.null:
            d.set(x, stream=stream)
            total, scanned = lib.reduce(d, stream=stream), lib.inclusive_scan(d, "max", stream=stream)
            got_total, got_scan = int(total), cupy.asnumpy(scanned)
        assert got_total == int(x.sum(dtype=np.uint32))
        np.testing.assert_array_equal(got_scan, np.maximum.accumulate(x))
        del total, scanned  # the pool hands the same addresses to the next call
    counts = _delta(backend, before, "cuda_graph_replays", "cuda_graph_captures")
    assert counts["cuda_graph_replays"] > 0 or counts["cuda_graph_captures"] == 0  # no capture under a sanitizer


def test_replay_lane_with_kept_results_and_torch(backend, rng):
    """Results kept alive move every call (no replay of another call's addresses): all exact; torch too."""
    torch = pytest.importorskip("torch")
    kept = []
    for _ in range(6):
        x = rng.integers(0, 2**31, 40_000).astype(np.uint32)
        kept.append((x, lib.inclusive_scan(cupy.asarray(x))))
    for x, out in kept:
        np.testing.assert_array_equal(cupy.asnumpy(out), np.cumsum(x, dtype=np.uint32))
    t = torch.empty(30_000, dtype=torch.int32, device="cuda")
    for _ in range(8):
        x = rng.integers(-2**20, 2**20, t.numel()).astype(np.int32)
        t.copy_(torch.as_tensor(x))
        out = lib.inclusive_scan(t)
        np.testing.assert_array_equal(out.cpu().numpy(), np.cumsum(x, dtype=np.int32))


def test_stream_order_on_a_side_stream(backend, rng):
    """Work before a call on a non-default stream is seen by it, and work after it sees its result."""
    x = rng.integers(0, 1000, 1 << 22).astype(np.uint32)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        d = cupy.asarray(x)
        for _ in range(20):  # a queue of work the call must wait for
            d = d + 1
        out = lib.inclusive_scan(d, stream=s)
        total = lib.reduce(d, stream=s)
        last = out[-1:] * 2  # CuPy work after the call, on the same stream
    s.synchronize()
    want = np.cumsum(x + 20, dtype=np.uint32)
    np.testing.assert_array_equal(cupy.asnumpy(out), want)
    assert int(total) == int(want[-1]) and int(last[0]) == int(np.uint32(want[-1] * 2))


def test_torch_side_stream_order(backend, rng):
    torch = pytest.importorskip("torch")
    x = rng.integers(0, 2**31, 1 << 21).astype(np.int32)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        t = torch.as_tensor(x, device="cuda")
        t = t.flip(0).contiguous()
        out = lib.sort(t)  # the current torch stream: side
        first = out[:1] + 0
    side.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), np.sort(x))
    assert int(first.item()) == int(np.sort(x)[0])


def test_scratch_shared_across_streams_stays_ordered(backend, rng):
    """Two streams calling the same function at once share scratch; results stay exact."""
    xs = [rng.integers(0, 2**32, 1 << 20, dtype=np.uint64).astype(np.uint32) for _ in range(4)]
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]
    outs = []
    for i, x in enumerate(xs):
        with streams[i % 2]:
            outs.append(lib.sort(cupy.asarray(x), stream=streams[i % 2]))
    for s in streams:
        s.synchronize()
    for x, out in zip(xs, outs):
        np.testing.assert_array_equal(cupy.asnumpy(out), np.sort(x))


def test_count_device_and_exact_sizes(backend, rng):
    x = rng.integers(0, 100, 200_001).astype(np.uint32)
    d = cupy.asarray(x)
    out, n = lib.select_if(d, 10, 20, count="device")
    want = x[(x >= 10) & (x < 20)]
    assert int(n[0]) == want.size and out.shape == x.shape
    np.testing.assert_array_equal(cupy.asnumpy(out[:want.size]), want)
    np.testing.assert_array_equal(cupy.asnumpy(lib.select_if(d, 10, 20)), want)
    values, lengths, runs = lib.run_length_encode(cupy.sort(d), count="device")
    u, c = np.unique(x, return_counts=True)
    k = int(runs[0])
    np.testing.assert_array_equal(cupy.asnumpy(values[:k]), u)
    np.testing.assert_array_equal(cupy.asnumpy(lengths[:k]), c)


def test_mixed_host_and_device_inputs(backend, rng):
    x = rng.integers(0, 50, 10_001).astype(np.uint32)
    flags = (x % 3 == 0).astype(np.uint32)
    got = lib.select(cupy.asarray(x), flags)  # host flags go to the device in stream order
    np.testing.assert_array_equal(cupy.asnumpy(got), x[flags != 0])


def test_bad_device_arrays(backend):
    x = cupy.arange(100, dtype=cupy.uint32)
    with pytest.raises(InvalidProgram, match="not contiguous.*Fix: "):
        lib.sort(x[::2])
    with pytest.raises(InvalidProgram, match="float16.*Fix: "):
        lib.sort(x.astype(cupy.float16))
    assert int(lib.reduce(x)) == 4950  # nothing was left half-bound


def test_release_scratch_between_calls(backend, rng):
    x = cupy.asarray(rng.integers(0, 2**31, 9_999).astype(np.uint32))
    a = cupy.asnumpy(lib.sort(x))
    lib.release_scratch()
    np.testing.assert_array_equal(cupy.asnumpy(lib.sort(x)), a)
    assert int(cupy.asnumpy(x).size) == 9_999  # the caller's array outlives the released handles


def test_compiled_calls_follow_new_arrays_and_arguments(backend, rng):
    """Repeated calls (the compiled path) on changing arrays, sizes, streams and arguments stay exact."""
    s = cupy.cuda.Stream(non_blocking=True)
    for i in range(12):
        n = (5000, 5000, 70_001)[i % 3]
        x = rng.integers(0, 2**31, n).astype(np.uint32)
        d = cupy.asarray(x)
        stream = s if i % 4 == 3 else None
        init = int(i % 5)
        got = [lib.reduce(d, "max", stream=stream), lib.exclusive_scan(d, "add", init, stream=stream),
               lib.sort(d, stream=stream), lib.argsort(d, stream=stream), lib.histogram(d & 63, 64, stream=stream),
               lib.select_if(d, 100, 2**30, count="device", stream=stream)]
        s.synchronize()
        cupy.cuda.Device().synchronize()
        want_scan = np.concatenate([[init], np.cumsum(x[:-1], dtype=np.uint32) + np.uint32(init)]).astype(np.uint32)
        assert int(got[0]) == int(x.max())
        np.testing.assert_array_equal(cupy.asnumpy(got[1]), want_scan)
        np.testing.assert_array_equal(cupy.asnumpy(got[2]), np.sort(x))
        np.testing.assert_array_equal(x[cupy.asnumpy(got[3])], np.sort(x, kind="stable"))
        np.testing.assert_array_equal(cupy.asnumpy(got[4]), np.bincount(x & 63, minlength=64))
        kept = x[(x >= 100) & (x < 2**30)]
        assert int(got[5][1][0]) == kept.size
        np.testing.assert_array_equal(cupy.asnumpy(got[5][0][:kept.size]), kept)
        if i == 6:
            lib.release_scratch()


def test_repeated_calls_run_their_compiled_form_and_stay_exact(backend, rng):
    """A loop's repeated calls (same function, arguments and array kinds) run their compiled form
    directly (``vyre.lib.repeat``), each with its own arguments: calls that differ only in an op,
    a bin count or a dtype never share one, kept results are never overwritten, and a
    non-contiguous array after a repeat still gets its error."""
    from vyre.lib.scratch import scratch_for

    torch = pytest.importorskip("torch")
    scratch = scratch_for(backend)
    kept = []
    for i in range(8):
        x = rng.integers(0, 2**31, 20_001).astype(np.uint32)
        f = rng.standard_normal(4_099).astype(np.float32)
        d, df, t = cupy.asarray(x), cupy.asarray(f), torch.as_tensor(x.view(np.int32), device="cuda")
        got = {"sum": lib.reduce(d), "max": lib.reduce(d, "max"), "fmin": lib.reduce(df, op="min"),
               "scan": lib.inclusive_scan(d), "hist": lib.histogram(d & 15, 16), "hist32": lib.histogram(d & 31, 32),
               "sorted": lib.sort(d), "order": lib.argsort(d), "torch": lib.inclusive_scan(t),
               "pairs": lib.sort(d, d ^ np.uint32(7))}
        kept.append((x, f, got))
        if i == 2:
            assert scratch.repeats, "the third call of each kind should have found its repeat"
        if i == 5:
            lib.release_scratch()
    for x, f, got in kept:
        assert int(got["sum"]) == int(x.sum(dtype=np.uint32))
        assert int(got["max"]) == int(x.max())
        assert float(got["fmin"]) == float(f.min())
        np.testing.assert_array_equal(cupy.asnumpy(got["scan"]), np.cumsum(x, dtype=np.uint32))
        np.testing.assert_array_equal(cupy.asnumpy(got["hist"]), np.bincount(x & 15, minlength=16))
        np.testing.assert_array_equal(cupy.asnumpy(got["hist32"]), np.bincount(x & 31, minlength=32))
        np.testing.assert_array_equal(cupy.asnumpy(got["sorted"]), np.sort(x))
        np.testing.assert_array_equal(x[cupy.asnumpy(got["order"])], np.sort(x, kind="stable"))
        np.testing.assert_array_equal(got["torch"].cpu().numpy(), np.cumsum(x.view(np.int32), dtype=np.int32))
        order = np.argsort(x, kind="stable")
        np.testing.assert_array_equal(cupy.asnumpy(got["pairs"][1]), (x ^ np.uint32(7))[order])
    d = cupy.asarray(rng.integers(0, 2**31, 40_002).astype(np.uint32))
    for _ in range(3):
        lib.sort(d[:20_001])
    with pytest.raises(InvalidProgram, match="not contiguous.*Fix: "):
        lib.sort(d[::2])


def test_unique_of_many_small_keys_on_cupy(backend, rng):
    """unique of 2^20+ CuPy keys: small nonnegative keys counted without a sort, others sorted; all
    equal to numpy (u32 and i32, one key setting the top bit of the range, a negative key)."""
    n = (1 << 20) + 3
    for dtype, top in ((np.uint32, 255), (np.int32, 60_000), (np.uint32, 1 << 30), (np.int32, -7)):
        x = rng.integers(0, 200, n).astype(dtype)
        x[rng.integers(0, n)] = top
        values, counts = lib.unique(cupy.asarray(x))
        want_values, want_counts = np.unique(x, return_counts=True)
        np.testing.assert_array_equal(cupy.asnumpy(values), want_values)
        np.testing.assert_array_equal(cupy.asnumpy(counts), want_counts)
        values, counts, distinct = lib.unique(cupy.asarray(x), count="device")
        k = int(distinct[0])
        np.testing.assert_array_equal(cupy.asnumpy(values[:k]), want_values)


def test_graphs_given_as_cupy_arrays_never_cross_to_the_host(backend, rng):
    """from_edges, Graph, bfs and connected components on CuPy arrays: the same results as on numpy,
    and no host copy of the edges (the host-to-device bytes stay far below the edges' size)."""
    from vyre.lib import graph

    n, m = 20_000, 200_000
    src = rng.integers(0, n, m).astype(np.uint32)
    dst = rng.integers(0, n, m).astype(np.uint32)
    both_src, both_dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    ptr_h, idx_h = graph.from_edges(n, both_src, both_dst)
    cupy.cuda.Device().synchronize()
    before = backend.metrics()
    ptr_d, idx_d = graph.from_edges(n, cupy.asarray(both_src), cupy.asarray(both_dst.astype(np.int32)))
    assert isinstance(ptr_d, cupy.ndarray) and isinstance(idx_d, cupy.ndarray)
    levels = graph.bfs(ptr_d, idx_d, 3, undirected=True)
    labels = graph.connected_components(ptr_d, idx_d, undirected=True)
    moved = _delta(backend, before, "cuda_h2d_bytes")["cuda_h2d_bytes"]
    assert moved < idx_h.nbytes // 2, moved  # per-vertex words only: edges uploaded would be 3x idx_h
    np.testing.assert_array_equal(cupy.asnumpy(ptr_d), ptr_h)
    np.testing.assert_array_equal(cupy.asnumpy(idx_d), idx_h)
    assert isinstance(levels, cupy.ndarray) and isinstance(labels, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(levels), graph.bfs(ptr_h, idx_h, 3, undirected=True))
    np.testing.assert_array_equal(cupy.asnumpy(labels), graph.connected_components(ptr_h, idx_h, undirected=True))
    with pytest.raises(InvalidProgram, match="Fix: "):
        graph.bfs(cupy.asarray(ptr_h[::-1].copy()), idx_d, 0)


def _undirected_csr(rng, n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """A random CSR graph of ``n`` vertices with ``m`` edges, each stored both ways (numpy)."""
    from vyre.lib import graph

    src, dst = rng.integers(0, n, m).astype(np.uint32), rng.integers(0, n, m).astype(np.uint32)
    return graph.from_edges(n, np.concatenate([src, dst]), np.concatenate([dst, src]))


def test_graph_binds_cupy_arrays_in_place(backend, rng):
    """A Graph of CuPy arrays reads the caller's memory (its handles point at the arrays; no byte is
    copied device to device, none of the edges crosses from the host), gives CuPy results equal to
    the numpy graph's, and leaves the arrays intact and usable after close()."""
    from vyre.lib import graph

    n, m = 50_000, 400_000
    ptr_h, idx_h = _undirected_csr(rng, n, m)
    ptr_d, idx_d = cupy.asarray(ptr_h), cupy.asarray(idx_h)
    with graph.Graph(ptr_h, idx_h, undirected=True) as host:
        want = [host.bfs(5), host.connected_components(), host.bfs(77), host.bfs(5, alpha=0.0)]
    cupy.cuda.Device().synchronize()
    before = backend.metrics()
    with graph.Graph(ptr_d, idx_d, undirected=True) as g:
        assert backend.device_view(g.indptr_handle)[0] == ptr_d.data.ptr
        assert backend.device_view(g.indices_handle)[0] == idx_d.data.ptr
        got = [g.bfs(5), g.connected_components(), g.bfs(77), g.bfs(5, alpha=0.0)]
        kept = [x.copy() for x in got]  # results are the caller's: later traversals do not touch them
    moved = _delta(backend, before, "cuda_h2d_bytes", "cuda_d2h_bytes", "cuda_d2d_bytes")
    assert moved["cuda_d2d_bytes"] == 0, moved  # bound in place: the edges were not copied
    assert moved["cuda_h2d_bytes"] < 4 * n and moved["cuda_d2h_bytes"] < 4 * n, moved  # a few control words
    for result, copy, expected in zip(got, kept, want, strict=True):
        assert isinstance(result, cupy.ndarray) and result.dtype == cupy.uint32
        np.testing.assert_array_equal(cupy.asnumpy(result), expected)
        np.testing.assert_array_equal(cupy.asnumpy(copy), expected)
    np.testing.assert_array_equal(cupy.asnumpy(ptr_d), ptr_h)  # close() left the caller's arrays alone
    np.testing.assert_array_equal(cupy.asnumpy(idx_d), idx_h)
    assert int((idx_d + 1).sum(dtype=cupy.uint64)) == int(idx_h.sum(dtype=np.uint64)) + idx_h.size
    with graph.Graph(ptr_d, idx_d) as again:  # the same arrays bound again after the first graph closed
        np.testing.assert_array_equal(cupy.asnumpy(again.bfs(5)), want[0])


def test_graph_plain_calls_on_cupy_arrays(backend, rng):
    """The plain calls on CuPy arrays (int32 indices bound as they are, int64 offsets converted on the
    device) return CuPy arrays equal to the numpy calls', with no edge copied."""
    from vyre.lib import graph

    n, m = 30_000, 200_000
    ptr_h, idx_h = _undirected_csr(rng, n, m)
    ptr_d, idx_d = cupy.asarray(ptr_h.astype(np.int64)), cupy.asarray(idx_h.astype(np.int32))
    graph.bfs(ptr_d, idx_d, 0)  # the programs loaded once
    cupy.cuda.Device().synchronize()
    before = backend.metrics()
    levels = graph.bfs(ptr_d, idx_d, 11)
    labels = graph.connected_components(ptr_d, idx_d, undirected=True)
    moved = _delta(backend, before, "cuda_h2d_bytes", "cuda_d2d_bytes")
    assert moved["cuda_d2d_bytes"] == 0 and moved["cuda_h2d_bytes"] < 4 * n, moved
    assert isinstance(levels, cupy.ndarray) and isinstance(labels, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(levels), graph.bfs(ptr_h, idx_h, 11))
    np.testing.assert_array_equal(cupy.asnumpy(labels), graph.connected_components(ptr_h, idx_h))
    with graph.Graph(ptr_d, idx_d) as g:
        assert backend.device_view(g.indices_handle)[0] == idx_d.data.ptr  # i32: the same bits, no copy
        assert backend.device_view(g.indptr_handle)[0] != ptr_d.data.ptr  # i64: converted, the graph's own
    empty = graph.connected_components(cupy.zeros(1, cupy.uint32), cupy.zeros(0, cupy.uint32))
    assert isinstance(empty, cupy.ndarray) and empty.size == 0
    lone = graph.bfs(cupy.asarray(np.array([0, 0], np.uint32)), cupy.zeros(0, cupy.uint32), 0)
    assert isinstance(lone, cupy.ndarray) and cupy.asnumpy(lone).tolist() == [0]


def test_graph_plain_call_loop_reuses_its_buffers_and_stays_exact(backend, rng):
    """Plain calls in a loop on CuPy arrays share vyre.lib's scratch (one set of handles per size):
    every result exact and kept intact by later calls, and an open Graph beside them unaffected."""
    from vyre.lib import graph

    graphs = [_undirected_csr(rng, 20_000, 150_000) for _ in range(3)] + [_undirected_csr(rng, 7_001, 40_000)]
    on_device = [(cupy.asarray(p), cupy.asarray(i)) for p, i in graphs]
    with graph.Graph(*on_device[0], undirected=True) as kept:
        results = []
        for k in range(12):
            p, i = on_device[k % 4]
            undirected = k % 3 == 0
            results.append((k, undirected, graph.bfs(p, i, k, undirected=undirected), graph.connected_components(p, i)))
        for k, undirected, levels, labels in results:
            ph, ih = graphs[k % 4]
            np.testing.assert_array_equal(cupy.asnumpy(levels), graph.bfs(ph, ih, k, undirected=undirected))
            np.testing.assert_array_equal(cupy.asnumpy(labels), graph.connected_components(ph, ih))
        np.testing.assert_array_equal(cupy.asnumpy(kept.bfs(3)), graph.bfs(*graphs[0], 3, undirected=True))


def test_graph_results_follow_the_callers_stream(backend, rng):
    """On a non-default CuPy stream: arrays made by work queued there are read after it, and work
    queued after the call sees the results (checked by values)."""
    from vyre.lib import graph

    n, m = 40_000, 300_000
    ptr_h, idx_h = _undirected_csr(rng, n, m)
    want = graph.bfs(ptr_h, idx_h, 9, undirected=True)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        idx_d = cupy.asarray(idx_h) + 1
        for _ in range(20):  # a queue of work the graph must wait for
            idx_d = idx_d + 1
        idx_d -= 21
        with graph.Graph(cupy.asarray(ptr_h), idx_d, undirected=True) as g:
            levels = g.bfs(9)
            doubled = levels * 2  # CuPy work after the call, on the same stream
            labels = g.connected_components()
            smallest = labels.min()
    s.synchronize()
    np.testing.assert_array_equal(cupy.asnumpy(levels), want)
    np.testing.assert_array_equal(cupy.asnumpy(doubled), want * np.uint32(2))
    assert int(smallest) == 0


def test_graph_on_torch_tensors_gives_torch_results(backend, rng):
    torch = pytest.importorskip("torch")
    from vyre.lib import graph

    n, m = 20_000, 100_000
    ptr_h, idx_h = _undirected_csr(rng, n, m)
    ptr_t = torch.as_tensor(ptr_h.astype(np.int64), device="cuda")
    idx_t = torch.as_tensor(idx_h.astype(np.int32), device="cuda")
    with graph.Graph(ptr_t, idx_t, undirected=True) as g:
        assert backend.device_view(g.indices_handle)[0] == idx_t.data_ptr()
        levels, labels = g.bfs(4), g.connected_components()
    plain = graph.bfs(ptr_t, idx_t, 4)
    for result in (levels, labels, plain):
        assert isinstance(result, torch.Tensor) and result.is_cuda and result.dtype == torch.uint32
    np.testing.assert_array_equal(levels.cpu().numpy(), graph.bfs(ptr_h, idx_h, 4))
    np.testing.assert_array_equal(plain.cpu().numpy(), graph.bfs(ptr_h, idx_h, 4))
    np.testing.assert_array_equal(labels.cpu().numpy(), graph.connected_components(ptr_h, idx_h))
    np.testing.assert_array_equal(idx_t.cpu().numpy(), idx_h.astype(np.int32))  # intact after close()


def test_graph_refuses_bad_device_arrays(backend):
    from vyre.lib import graph

    ptr, idx = cupy.asarray(np.array([0, 1, 2], np.uint32)), cupy.asarray(np.array([1, 0], np.uint32))
    with pytest.raises(InvalidProgram, match="contiguous.*Fix: "):
        graph.Graph(ptr, cupy.asarray(np.array([1, 7, 0, 7], np.uint32))[::2])
    with pytest.raises(InvalidProgram, match="integer.*Fix: "):
        graph.bfs(ptr, idx.astype(cupy.float32), 0)
    with pytest.raises(InvalidProgram, match="outside u32.*Fix: "):
        graph.connected_components(ptr, cupy.asarray(np.array([1, -1], np.int64)))
    assert cupy.asnumpy(graph.bfs(ptr, idx, 0)).tolist() == [0, 1]  # nothing was left half-bound


def test_resident_array_is_a_device_array_for_cupy_and_torch(backend, rng):
    """Results on resident buffers cross to CuPy (CAI v3, ordered by its stream key) and torch
    (DLPack) without a copy, equal to numpy, and a change through the view is seen by vyre."""
    torch = pytest.importorskip("torch")
    x = rng.integers(0, 2**31, 300_001).astype(np.uint32)
    handle = backend.allocate_resident(x.nbytes)
    backend.upload_resident(handle, x)
    out = lib.inclusive_scan(lib.ResidentArray(handle, np.uint32, x.size))  # on the backend's stream
    view = cupy.asarray(out)  # waits for the backend's stream through the interface's stream key
    assert view.data.ptr == out.__cuda_array_interface__["data"][0]
    np.testing.assert_array_equal(cupy.asnumpy(view), np.cumsum(x, dtype=np.uint32))
    tensor = torch.from_dlpack(out)
    assert tensor.data_ptr() == view.data.ptr and tensor.dtype == torch.uint32
    np.testing.assert_array_equal(tensor.cpu().numpy(), np.cumsum(x, dtype=np.uint32))
    view[:5] = 7  # written through CuPy, read by vyre
    cupy.cuda.Device().synchronize()
    assert int(lib.reduce(lib.ResidentArray(out.handle, np.uint32, 5))) == 35
    empty = lib.inclusive_scan(lib.ResidentArray(handle, np.uint32, 0))
    assert cupy.asarray(empty).size == 0
    backend.free_resident(out.handle)
    with pytest.raises(InvalidHandle):
        _ = out.__cuda_array_interface__
    backend.free_resident(handle)
