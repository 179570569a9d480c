"""The oracle at interactive speed on long fixed points: BFS along a 100,000-vertex path (100,000
levels) and the transitive closure of a 200-vertex path (200 semi-naive rounds), exact results.

BFS runs the oracle's host search (``ReferenceBackend.host_bfs``, its default), the closure the
dense Datalog IR programs. Each took well under 1 s on a 2-core development host; the 10 s bounds
only catch a return to per-level interpretation (BFS: about 40 s) or per-round host work.
"""

from __future__ import annotations

import numpy as np
import pytest

import vyre
from tests.stopwatch import stopwatch
from vyre.lib import datalog, graph

BOUND_S = 10.0


@pytest.fixture(scope="module")
def oracle():
    with vyre.acquire("reference") as backend:
        yield backend


def path_csr(n: int, undirected: bool) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the path 0 - 1 - ... - n-1: each vertex's edges to its next (and, undirected, its previous) one."""
    if not undirected:
        indptr = np.minimum(np.arange(n + 1), n - 1).astype(np.uint32)
        return indptr, np.arange(1, n, dtype=np.uint32)
    degree = np.full(n, 2, np.int64)
    degree[[0, -1]] = 1
    indptr = np.concatenate([[0], np.cumsum(degree)]).astype(np.uint32)
    pairs = np.stack([np.arange(-1, n - 1), np.arange(1, n + 1)], axis=1).ravel()
    return indptr, pairs[(pairs >= 0) & (pairs < n)].astype(np.uint32)


def timed(call):
    """``call()`` and its CPU seconds (``tests.stopwatch``)."""
    with stopwatch() as watch:
        result = call()
    return result, watch.seconds


def test_bfs_along_a_100000_vertex_path(oracle):
    n = 100_000
    indptr, indices = path_csr(n, undirected=False)
    levels, seconds = timed(lambda: graph.bfs(indptr, indices, 0, backend=oracle))
    assert np.array_equal(levels, np.arange(n, dtype=np.uint32))
    assert seconds < BOUND_S, f"BFS over {n} levels took {seconds:.1f} s"


def test_bfs_from_the_middle_of_an_undirected_path(oracle):
    n, source = 100_000, 31_337
    indptr, indices = path_csr(n, undirected=True)
    with graph.Graph(indptr, indices, backend=oracle, undirected=True) as g:  # the symmetry check is not timed
        levels, seconds = timed(lambda: g.bfs(source))
    assert np.array_equal(levels, np.abs(np.arange(n) - source).astype(np.uint32))
    assert seconds < BOUND_S, f"BFS over {n - source} levels took {seconds:.1f} s"


def test_closure_of_a_200_vertex_path(oracle):
    n = 200
    (a, c), seconds = timed(lambda: datalog.transitive_closure(n, np.arange(n - 1), np.arange(1, n), backend=oracle))
    want_a, want_c = np.triu_indices(n, 1)  # every (i, j) with i < j, in lexicographic order
    assert np.array_equal(a, want_a.astype(np.uint32)) and np.array_equal(c, want_c.astype(np.uint32))
    assert seconds < BOUND_S, f"the closure of a {n}-vertex path took {seconds:.1f} s"
