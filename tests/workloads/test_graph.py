"""vyre.lib.graph on the oracle against scipy.sparse.csgraph and a host BFS."""

from __future__ import annotations

import numpy as np
import pytest
from graphs import cases, csr, symmetric
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components as scipy_components

import vyre
from vyre.driver.errors import InvalidProgram
from vyre.lib import graph

CASES = cases()


@pytest.fixture(scope="module")
def oracle():
    with vyre.acquire("reference") as backend:
        yield backend


def expected_labels(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    n = indptr.size - 1
    matrix = csr_matrix((np.ones(indices.size), indices, indptr), shape=(n, n))
    _, comp = scipy_components(matrix, directed=True, connection="weak")
    smallest = np.full(comp.max() + 1 if n else 0, n, dtype=np.int64)
    np.minimum.at(smallest, comp, np.arange(n))
    return smallest[comp].astype(np.uint32)


@pytest.mark.parametrize("name", sorted(CASES))
def test_components_match_scipy(oracle, name):
    n, src, dst = CASES[name]
    indptr, indices = csr(n, src, dst)  # one direction only: components must treat it as undirected
    labels = graph.connected_components(indptr, indices, backend=oracle)
    assert labels.dtype == np.uint32
    assert np.array_equal(labels, expected_labels(indptr, indices))


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("undirected", [False, True])
def test_bfs_matches_host_bfs(oracle, name, undirected):
    n, src, dst = CASES[name]
    indptr, indices = symmetric(n, src, dst) if undirected else csr(n, src, dst)
    for source in {0, n // 2, n - 1}:
        levels = graph.bfs(indptr, indices, source, backend=oracle, undirected=undirected,
                           bottom_up_fraction=0.05)
        assert np.array_equal(levels, graph.reference_levels(indptr, indices, source)), (name, source)


def test_bfs_bottom_up_and_top_down_agree(oracle):
    n, src, dst = CASES["dense"]
    indptr, indices = symmetric(n, src, dst)
    top = graph.bfs(indptr, indices, 3, backend=oracle, undirected=True, bottom_up_fraction=2.0)
    bottom = graph.bfs(indptr, indices, 3, backend=oracle, undirected=True, bottom_up_fraction=0.0)
    assert np.array_equal(top, bottom)


def test_out_of_range_neighbours_are_ignored(oracle):
    indptr = np.array([0, 2, 3, 3], dtype=np.uint32)
    indices = np.array([1, 0xFFFFFFFF, 7], dtype=np.uint32)
    assert graph.bfs(indptr, indices, 0, backend=oracle).tolist() == [0, 1, 0xFFFFFFFF]
    assert graph.connected_components(indptr, indices, backend=oracle).tolist() == [0, 0, 2]


def test_bad_inputs_are_errors_with_a_fix(oracle):
    good_ptr, good_idx = csr(4, np.array([0, 1]), np.array([1, 2]))
    for ptr, idx in [(np.zeros(0), good_idx), (np.array([0, 3, 1, 2, 2]), good_idx),
                     (good_ptr.astype(np.float32), good_idx), (good_ptr, np.array([-1, 2]))]:
        with pytest.raises(InvalidProgram, match="Fix:"):
            graph.connected_components(ptr, idx, backend=oracle)
    for source in (-1, 4, True, 1.5):
        with pytest.raises(InvalidProgram, match="Fix:"):
            graph.bfs(good_ptr, good_idx, source, backend=oracle)


def test_empty_graph(oracle):
    assert graph.connected_components(np.zeros(1, np.uint32), np.zeros(0, np.uint32), backend=oracle).size == 0


@pytest.mark.parametrize("name", sorted(CASES))
def test_from_edges_matches_a_stable_host_build(oracle, name):
    n, src, dst = CASES[name]
    indptr, indices = graph.from_edges(n, src, dst, backend=oracle)
    want_ptr, want_idx = csr(n, src, dst)
    assert indptr.dtype == np.uint32 and indices.dtype == np.uint32
    assert np.array_equal(indptr, want_ptr) and np.array_equal(indices, want_idx)


def test_from_edges_refuses_bad_edges(oracle):
    for n, src, dst in [(3, [0, 1], [1]), (3, [0, 3], [1, 2]), (3, [0], [-1]), (-1, [], []), (True, [], [])]:
        with pytest.raises(InvalidProgram, match="Fix:"):
            graph.from_edges(n, np.array(src), np.array(dst), backend=oracle)
