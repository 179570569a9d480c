"""The workloads of ``vyre.lib`` on ``cuda``: equal to the oracle at small sizes, to scipy at large ones."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workloads"))

from graphs import cases, csr, symmetric  # noqa: E402

from vyre.lib import graph  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def oracle():
    from vyre.reference.backend import ReferenceBackend

    return ReferenceBackend()


@pytest.mark.parametrize("name", sorted(cases()))
def test_small_graphs_equal_the_oracle(backend, oracle, name):
    n, src, dst = cases(seed=7)[name]
    for undirected in (False, True):
        indptr, indices = symmetric(n, src, dst) if undirected else csr(n, src, dst)
        assert np.array_equal(graph.connected_components(indptr, indices, backend=backend, undirected=undirected),
                              graph.connected_components(indptr, indices, backend=oracle))
        for source in (0, n - 1):
            for alpha, beta in ((0.0, 24.0), (14.0, 24.0), (float("inf"), 0.0)):
                got = graph.bfs(indptr, indices, source, backend=backend, undirected=undirected,
                                alpha=alpha, beta=beta)
                assert np.array_equal(got, graph.reference_levels(indptr, indices, source))


def test_rmat_graph_against_scipy(backend):
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import breadth_first_order
    from scipy.sparse.csgraph import connected_components as scipy_cc

    n_scale = 18
    src, dst = graph.rmat_edges(n_scale, edge_factor=8, seed=3)
    n = 1 << n_scale
    indptr, indices = symmetric(n, src, dst)
    matrix = csr_matrix((np.ones(indices.size, dtype=np.int8), indices, indptr), shape=(n, n))
    _, comp = scipy_cc(matrix, directed=False)
    smallest = np.full(comp.max() + 1, n, dtype=np.int64)
    np.minimum.at(smallest, comp, np.arange(n))
    for undirected in (False, True):
        labels = graph.connected_components(indptr, indices, backend=backend, undirected=undirected)
        assert np.array_equal(labels, smallest[comp])

    source = int(src[0])
    levels = graph.bfs(indptr, indices, source, backend=backend, undirected=True)
    order, pred = breadth_first_order(matrix, source, directed=True, return_predecessors=True)
    expected = np.full(n, graph.UNREACHED, dtype=np.uint32)
    expected[source] = 0
    for v in order[1:]:  # BFS order: a vertex's predecessor is settled before it
        expected[v] = expected[pred[v]] + 1
    assert np.array_equal(levels, expected)
    top_down_only = graph.bfs(indptr, indices, source, backend=backend)
    assert np.array_equal(top_down_only, expected)
    bottom_up_only = graph.bfs(indptr, indices, source, backend=backend, undirected=True, alpha=float("inf"), beta=0.0)
    assert np.array_equal(bottom_up_only, expected)


def test_neighbours_by_degree_on_numpy_and_cupy_equals_the_host_order(backend, oracle):
    """Each row sorted by its neighbours' degrees on the device (a u64 key sort), from numpy and in
    place from CuPy (CuPy out), equal to the oracle's order; BFS and components on it are unchanged."""
    cp = pytest.importorskip("cupy")
    scale = 16
    src, dst = graph.rmat_edges(scale, edge_factor=8, seed=5)
    n = 1 << scale
    indptr, clean = symmetric(n, src, dst)
    indices = clean.copy()
    indices[::1001] = n + 3  # ids >= n: degree 0, ignored by traversals
    want = graph.neighbours_by_degree(indptr, indices, backend=oracle)[1]
    got = graph.neighbours_by_degree(indptr, indices, backend=backend)[1]
    assert isinstance(got, np.ndarray) and np.array_equal(got, want)
    d_ptr, d_idx = cp.asarray(indptr), cp.asarray(indices)
    before = d_idx.copy()
    same_ptr, d_got = graph.neighbours_by_degree(d_ptr, d_idx, backend=backend)
    assert same_ptr is d_ptr and isinstance(d_got, cp.ndarray) and np.array_equal(d_got.get(), want)
    assert bool((d_idx == before).all())  # the caller's indices are read, never written
    d_ptr, d_clean = graph.neighbours_by_degree(cp.asarray(indptr), cp.asarray(clean), backend=backend)
    with graph.Graph(d_ptr, d_clean, backend=backend, undirected=True) as g:  # every edge still both ways
        for source in (int(src[0]), int(dst[7])):
            assert np.array_equal(g.bfs(source).get(), graph.reference_levels(indptr, clean, source))
        assert np.array_equal(g.connected_components().get(),
                              graph.connected_components(indptr, clean, backend=oracle))


def test_closure_egraph_and_text_equal_the_oracle(backend, oracle):
    from vyre.lib import datalog, egraph, text

    rng = np.random.default_rng(11)
    n, m = 120, 160
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    for a, b in zip(datalog.transitive_closure(n, src, dst, backend=backend),
                    datalog.transitive_closure(n, src, dst, backend=oracle)):
        assert np.array_equal(a, b)
    for a, b in zip(datalog.same_generation(n, src, dst, backend=backend),
                    datalog.same_generation(n, src, dst, backend=oracle)):
        assert np.array_equal(a, b)

    nodes, classes = 3000, 700
    lens = rng.integers(0, 3, nodes).astype(np.uint32)
    offsets = np.zeros(nodes, np.uint32)
    offsets[1:] = np.cumsum(lens)[:-1]
    cols = (rng.integers(0, classes, nodes).astype(np.uint32), rng.integers(0, 4, nodes).astype(np.uint32),
            offsets, lens, rng.integers(0, classes, int(lens.sum())).astype(np.uint32))
    for a, b in zip(egraph.structural_equivalence(*cols, backend=backend),
                    egraph.structural_equivalence(*cols, backend=oracle)):
        assert np.array_equal(a, b)
    assert np.array_equal(egraph.congruence_closure(*cols, backend=backend),
                          egraph.congruence_closure(*cols, backend=oracle))

    hay = rng.integers(0, 4, 100_003, dtype=np.uint8)
    needle = bytes(hay[500:503])
    assert np.array_equal(text.find_all(hay, needle, backend=backend), text.find_all(hay, needle, backend=oracle))


def test_large_text_on_the_device(backend):
    import cupy

    from vyre.lib import text

    rng = np.random.default_rng(12)
    hay = rng.integers(0, 8, (1 << 24) + 7, dtype=np.uint8)
    needle = bytes(hay[777:782])
    view = np.lib.stride_tricks.sliding_window_view(hay, len(needle))
    want = np.flatnonzero(np.all(view == np.frombuffer(needle, np.uint8), axis=1))
    got = text.find_all(cupy.asarray(hay), needle, backend=backend)
    assert isinstance(got, cupy.ndarray) and np.array_equal(cupy.asnumpy(got), want)
