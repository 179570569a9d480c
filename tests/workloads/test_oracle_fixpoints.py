"""Long fixed points on the oracle: exact results on paths, and a time bound against the slow path.

A path graph makes BFS take one level per vertex and the transitive closure one semi-naive
iteration per vertex, so both are thousands of tiny dispatches: what the oracle's per-dispatch
work (bound steps, compiled programs, no buffer copies) is for. The results are pinned against
numpy; the bounds are generous (at least 10x what these took on a 2-core CI host) and only
catch a return to per-dispatch work that grows with the buffers or the program. BFS here runs its
IR level loop (``host_bfs`` off); the oracle's default host search is timed in
``tests/host/test_oracle_long_fixpoints.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from graphs import csr, symmetric

import vyre
from tests.stopwatch import stopwatch
from vyre.lib import datalog, graph

UNREACHED = np.uint32(0xFFFFFFFF)


@pytest.fixture(scope="module")
def oracle():
    """An oracle that interprets BFS's IR level loop (its default is a host search)."""
    with vyre.acquire("reference") as backend:
        backend.unwrap().host_bfs = False
        yield backend


def path(n: int, undirected: bool) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the path 0 -> 1 -> ... -> n-1 (both ways when ``undirected``)."""
    src, dst = np.arange(n - 1), np.arange(1, n)
    return symmetric(n, src, dst) if undirected else csr(n, src, dst)


def path_levels(n: int, source: int, undirected: bool) -> np.ndarray:
    """BFS levels on that path, by numpy: the distance along it (unreached behind a directed source)."""
    offset = np.arange(n, dtype=np.int64) - source
    levels = np.abs(offset) if undirected else np.where(offset >= 0, offset, int(UNREACHED))
    return levels.astype(np.uint32)


@pytest.mark.parametrize("undirected", [False, True])
@pytest.mark.parametrize("source", [0, 1234, 2999])
def test_bfs_on_a_path_matches_numpy(oracle, undirected, source):
    indptr, indices = path(3000, undirected)
    levels = graph.bfs(indptr, indices, source, backend=oracle, undirected=undirected)
    assert np.array_equal(levels, path_levels(3000, source, undirected))


def test_closure_of_a_path_matches_numpy(oracle):
    n = 48
    a, c = datalog.transitive_closure(n, np.arange(n - 1), np.arange(1, n), backend=oracle)
    want_a, want_c = np.triu_indices(n, 1)  # every (i, j) with i < j, in lexicographic order
    assert np.array_equal(a, want_a.astype(np.uint32)) and np.array_equal(c, want_c.astype(np.uint32))


def test_long_fixed_points_stay_fast(oracle):
    indptr, indices = path(20_000, False)
    with stopwatch() as bfs:
        levels = graph.bfs(indptr, indices, 0, backend=oracle)
    assert np.array_equal(levels, np.arange(20_000, dtype=np.uint32))
    with stopwatch() as closure:
        a, _ = datalog.transitive_closure(64, np.arange(63), np.arange(1, 64), backend=oracle)
    assert a.size == 64 * 63 // 2
    # the BFS levels loop on the device: two steps a level (the search and a one-invocation decide
    # step), about 0.6 ms a level on the oracle alone, several times that on a slow host (CPU seconds: tests.stopwatch)
    assert bfs.seconds < 60 and closure.seconds < 40, \
        f"BFS {bfs.seconds:.1f} s, closure {closure.seconds:.1f} s: the slow path is back"
