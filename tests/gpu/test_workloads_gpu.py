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
        assert np.array_equal(graph.connected_components(indptr, indices, backend=backend),
                              graph.connected_components(indptr, indices, backend=oracle))
        for source in (0, n - 1):
            got = graph.bfs(indptr, indices, source, backend=backend, undirected=undirected,
                            bottom_up_fraction=0.05)
            assert np.array_equal(got, graph.bfs(indptr, indices, source, backend=oracle,
                                                 undirected=undirected, bottom_up_fraction=0.05))


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
    assert np.array_equal(graph.connected_components(indptr, indices, backend=backend), smallest[comp])

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
