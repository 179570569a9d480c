"""Fixed points that loop on the device (BFS levels, components sweeps, bit-matrix Datalog rounds) and
``find_all_many`` on ``cuda``, against the oracle, host references and the sorted-relation path."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workloads"))

from graphs import cases, csr, symmetric  # noqa: E402

from vyre.lib import datalog, graph, text  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def oracle():
    from vyre.reference.backend import ReferenceBackend

    be = ReferenceBackend()
    yield be
    be.shutdown()


@pytest.mark.parametrize("name", sorted(cases()))
def test_device_loop_bfs_traced_and_untraced_agree(backend, name):
    # the same steps driven by dispatch_until (conditional WHILE node) and one level per host call
    n, src, dst = cases(seed=9)[name]
    indptr, indices = symmetric(n, src, dst)
    with graph.Graph(indptr, indices, backend=backend, undirected=True) as g:
        for source in (0, n - 1):
            for alpha, beta in ((0.0, 24.0), (14.0, 24.0), (3.0, 4.0), (float("inf"), 0.0)):
                want = graph.reference_levels(indptr, indices, source)
                assert np.array_equal(g.bfs(source, alpha, beta), want), (name, source, alpha)
                trace: list = []
                assert np.array_equal(g.bfs(source, alpha, beta, trace=trace), want)
                assert [t[1] for t in trace] == np.bincount(want[want != graph.UNREACHED]).tolist()


@pytest.mark.parametrize("undirected", [False, True])
def test_device_loop_bfs_on_graphs_larger_than_the_grid(backend, undirected):
    # more vertices than the fixed grid's lanes: every step strides over several trips
    scale = 19
    src, dst = graph.rmat_edges(scale, edge_factor=4, seed=21)
    n = 1 << scale
    indptr, indices = symmetric(n, src, dst) if undirected else csr(n, src, dst)
    with graph.Graph(indptr, indices, backend=backend, undirected=undirected) as g:
        assert g._lanes < n
        for source in (int(src[0]), int(src[1])):
            assert np.array_equal(g.bfs(source), graph.reference_levels(indptr, indices, source))


def test_bfs_on_device_arrays_runs_without_a_host_wait(backend):
    """A ``Graph`` over CuPy arrays enqueues the source, the search and the result copy with no
    synchronisation; repeated and alternating sources (the source word is written only when it
    changes) give the reference's levels."""
    cupy = pytest.importorskip("cupy")
    n, src, dst = cases(seed=4)["random"]
    indptr, indices = symmetric(n, src, dst)
    with graph.Graph(cupy.asarray(indptr), cupy.asarray(indices), backend=backend, undirected=True) as g:
        g.bfs(0)
        cupy.cuda.get_current_stream().synchronize()
        for source in (0, 0, n - 1, 0, n // 2, n // 2):
            syncs = backend.metrics()["cuda_sync_points"]
            levels = g.bfs(source)
            assert backend.metrics()["cuda_sync_points"] == syncs, source
            assert np.array_equal(cupy.asnumpy(levels), graph.reference_levels(indptr, indices, source)), source


def test_device_loop_bfs_on_a_long_path(backend):
    # 20,000 levels in one conditional-WHILE launch, from both ends and the middle
    n = 20_000
    indptr, indices = symmetric(n, np.arange(n - 1), np.arange(1, n))
    with graph.Graph(indptr, indices, backend=backend, undirected=True) as g:
        for source in (0, n // 2, n - 1):
            assert np.array_equal(g.bfs(source), np.abs(np.arange(n) - source).astype(np.uint32))


def test_device_loop_components_equal_the_oracle(backend, oracle):
    rng = np.random.default_rng(8)
    for n, src, dst in [(5000, np.arange(4999, 0, -1), np.arange(4998, -1, -1)),   # a chain: several sweeps
                        (4000, rng.integers(0, 4000, 3000), rng.integers(0, 4000, 3000)),
                        (3000, rng.integers(0, 3000, 20000), rng.integers(0, 3000, 20000))]:
        for undirected in (False, True):
            indptr, indices = symmetric(n, src, dst) if undirected else csr(n, src, dst)
            got = graph.connected_components(indptr, indices, backend=backend, undirected=undirected)
            assert np.array_equal(got, graph.connected_components(indptr, indices, backend=oracle))


@pytest.mark.parametrize("n,m", [(37, 60), (600, 900), (2000, 2700)])
def test_bit_matrix_closure_equals_sorted_relations(backend, oracle, n, m):
    rng = np.random.default_rng(n)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    got = datalog.transitive_closure(n, src, dst, backend=backend)
    want = datalog.transitive_closure(n, src, dst, backend=backend, dense=False)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    if n <= 600:
        assert all(np.array_equal(a, b) for a, b in zip(got, datalog.transitive_closure(n, src, dst, backend=oracle)))


@pytest.mark.parametrize("n", [45, 700, 3000])
def test_bit_matrix_same_generation_equals_sorted_relations(backend, oracle, n):
    rng = np.random.default_rng(n)
    child = rng.permutation(n)[: n - n // 10]
    parent = rng.integers(0, n, child.size)
    got = datalog.same_generation(n, parent, child, backend=backend)
    want = datalog.same_generation(n, parent, child, backend=backend, dense=False)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    if n <= 700:
        assert all(np.array_equal(a, b) for a, b in zip(got, datalog.same_generation(n, parent, child,
                                                                                     backend=oracle)))


def python_find_all_many(haystack: bytes, needles: list[bytes]) -> list[tuple[int, int]]:
    return sorted((m.start(), i) for i, needle in enumerate(needles)
                  for m in re.finditer(b"(?=" + re.escape(needle) + b")", haystack))


def test_find_all_many_equals_python_and_the_oracle(backend, oracle):
    import cupy

    rng = np.random.default_rng(13)
    hay = rng.integers(0, 4, 1 << 20, dtype=np.uint8)
    needles = [bytes(hay[i:i + int(k)]) for i, k in zip(rng.integers(0, (1 << 20) - 40, 1000),
                                                        rng.integers(4, 33, 1000))]
    needles += [bytes(rng.integers(0, 4, 6, dtype=np.uint8)) for _ in range(200)]
    want = python_find_all_many(hay.tobytes(), needles)
    offsets, ids = text.find_all_many(cupy.asarray(hay), needles, backend=backend)
    assert isinstance(offsets, cupy.ndarray) and isinstance(ids, cupy.ndarray)
    assert list(zip(cupy.asnumpy(offsets).tolist(), cupy.asnumpy(ids).tolist())) == want
    small = hay[:5000]
    short = needles[:50] + [b"\x01", b"\x01\x02"]
    got = text.find_all_many(small, short, backend=backend)
    expected = text.find_all_many(small, short, backend=oracle)
    assert all(np.array_equal(a, b) for a, b in zip(got, expected))


def test_symmetry_check_on_the_device(backend, oracle):
    from vyre.driver.errors import InvalidProgram

    scale = 16
    src, dst = graph.rmat_edges(scale, edge_factor=8, seed=5)
    n = 1 << scale
    indptr, indices = symmetric(n, src, dst)
    with graph.Graph(indptr, indices, backend=backend, undirected=True) as g:
        assert g.stored_both_ways()
    both_src, both_dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    a, b = next((s, d) for s, d in zip(src, dst) if s != d)
    keep = ~((both_src == b) & (both_dst == a))   # every copy of b -> a goes: a -> b is one-way
    one_way = csr(n, both_src[keep], both_dst[keep])
    with pytest.raises(InvalidProgram, match=f"edge {a} -> {b} is not stored both ways"):
        graph.Graph(*one_way, backend=backend, undirected=True)
    with graph.Graph(*one_way, backend=backend) as g:
        assert not g.stored_both_ways()


@pytest.mark.parametrize("nodes,classes", [(3000, 700), (1 << 18, 1 << 16)])
def test_congruence_rounds_on_the_device_equal_the_sorted_path(backend, oracle, nodes, classes):
    from vyre.lib import egraph

    rng = np.random.default_rng(nodes)
    lens = rng.integers(0, 3, nodes).astype(np.uint32)
    offsets = np.zeros(nodes, np.uint32)
    offsets[1:] = np.cumsum(lens)[:-1]
    cols = (rng.integers(0, classes, nodes).astype(np.uint32), rng.integers(0, 4, nodes).astype(np.uint32),
            offsets, lens, rng.integers(0, classes, int(lens.sum())).astype(np.uint32))
    with egraph.EGraph(*cols, backend=backend) as g:
        got = g.congruence_closure()
        assert g.path == "hash"
        if nodes <= 3000:  # the sorted path's rounds each go through the host: compared where it is quick
            assert np.array_equal(got, g.sorted_congruence_closure())
    if nodes <= 3000:
        assert np.array_equal(got, egraph.congruence_closure(*cols, backend=oracle))
    # closed under congruence: e-nodes with one operator and equal canonical children share a class
    assert np.array_equal(got[got], got)
    eclass, op, offsets, lens, children = cols
    canon = got[children]
    seen: dict = {}
    for r in range(nodes):
        key = (int(op[r]), tuple(canon[offsets[r]:offsets[r] + lens[r]].tolist()))
        assert seen.setdefault(key, got[eclass[r]]) == got[eclass[r]]


@pytest.mark.parametrize("kind", ["cupy", "numpy"])
def test_repeated_bfs_replays_the_compiled_search(backend, kind, monkeypatch):
    """From the third search on a ``Graph`` (the second captures the graphs over the caller's arrays),
    ``bfs`` replays the backend's compiled loop (``compile_until``) with only the source written; it
    gives the reference's levels from fresh sources, and takes the general calls again while graphs
    or conditional loops are switched off, or after another graph's searches."""
    cupy = pytest.importorskip("cupy")
    n, src, dst = cases(seed=5)["random"]
    indptr, indices = symmetric(n, src, dst)
    other_ptr, other_idx = symmetric(*cases(seed=6)["random"])
    arrays = (cupy.asarray(indptr), cupy.asarray(indices)) if kind == "cupy" else (indptr, indices)
    rng = np.random.default_rng(12)
    host = cupy.asnumpy if kind == "cupy" else np.asarray
    with graph.Graph(*arrays, backend=backend, undirected=True) as g:
        for step, source in enumerate(int(s) for s in rng.integers(0, n, 12)):
            if step == 6:
                monkeypatch.setenv("VYRE_CUDA_GRAPHS", "0")
            if step == 7:
                monkeypatch.delenv("VYRE_CUDA_GRAPHS")
                monkeypatch.setenv("VYRE_CUDA_CONDITIONAL", "0")
            if step == 8:
                monkeypatch.delenv("VYRE_CUDA_CONDITIONAL")
                with graph.Graph(other_ptr, other_idx, backend=backend, undirected=True) as other:
                    assert np.array_equal(other.bfs(1), graph.reference_levels(other_ptr, other_idx, 1))
            assert np.array_equal(host(g.bfs(source)), graph.reference_levels(indptr, indices, source)), step
            (search,) = g._loops.values()
            if step in (2, 3, 4, 5, 10, 11):
                assert search.replays is not None, step
        assert g.bfs(0, alpha=0.0).shape == (n,)  # another direction rule: its own compiled loop
        assert len(g._loops) == 2
    assert not g._loops


@pytest.mark.parametrize("method", ["afforest", "sweep"])
@pytest.mark.parametrize("undirected", [True, False])
def test_components_on_device_arrays_run_without_a_host_wait(backend, oracle, method, undirected):
    """Components of a ``Graph`` over CuPy arrays are enqueued with no synchronisation (the loop's
    flag is watched, not read) and from the second call on replay the compiled loop; every call
    gives the oracle's labels."""
    cupy = pytest.importorskip("cupy")
    n, src, dst = cases(seed=8)["random"]
    indptr, indices = symmetric(n, src, dst) if undirected else csr(n, src, dst)
    want = graph.connected_components(indptr, indices, backend=oracle, undirected=undirected)
    with graph.Graph(cupy.asarray(indptr), cupy.asarray(indices), backend=backend, undirected=undirected) as g:
        g.connected_components(method=method)
        cupy.cuda.get_current_stream().synchronize()
        for call in range(4):
            syncs = backend.metrics()["cuda_sync_points"]
            labels = g.connected_components(method=method)
            assert backend.metrics()["cuda_sync_points"] == syncs, call
            assert np.array_equal(cupy.asnumpy(labels), want), call
        assert g._loops[("components", method, n + 64)].replays is not None
