"""Breadth-first search levels on the host: the oracle's fast path for ``vyre.lib.graph`` searches.

The IR level loop (``vyre.lib.graph_kernels``) interprets two or three programs per level, about
0.4 ms a level on the oracle, so a search with many levels (a long path: one level per vertex) takes
minutes. BFS levels are unique (each vertex's hop distance from the source along the stored edges;
neighbour ids ``>= n`` are ignored; ``0xFFFFFFFF`` = unreached), whatever order or direction the
levels are expanded in, so the oracle computes them here level by level: small frontiers one vertex
at a time in Python (a few microseconds a level), large ones as numpy gathers over the whole
frontier. The results equal the IR programs' (``tests/workloads/test_graph.py`` checks
both against each other on random graphs).
"""

from __future__ import annotations

import numpy as np

UNREACHED = np.uint32(0xFFFFFFFF)
#: frontiers of at most this many vertices are expanded one vertex at a time (no numpy call per level)
SMALL_FRONTIER = 64
#: edge lists longer than this are filtered with numpy even in a small frontier (a hub)
SMALL_DEGREE = 32


def bfs_levels(indptr: np.ndarray, indices: np.ndarray, source: int) -> np.ndarray:
    """Levels from ``source`` over the CSR ``(indptr, indices)`` (u32 arrays, ``indptr`` checked CSR)."""
    n = indptr.size - 1
    levels = np.full(n, UNREACHED, dtype=np.uint32)
    levels[source] = 0
    frontier: list[int] | np.ndarray = [int(source)]
    level = 0
    while len(frontier):
        level += 1
        if len(frontier) <= SMALL_FRONTIER:
            found = _expand_small(indptr, indices, levels, list(frontier), level)
        else:
            found = _expand_large(indptr, indices, levels, np.asarray(frontier, dtype=np.int64), level)
        frontier = found.tolist() if isinstance(found, np.ndarray) and found.size <= SMALL_FRONTIER else found
    return levels


def _expand_small(indptr: np.ndarray, indices: np.ndarray, levels: np.ndarray, frontier: list[int],
                  level: int) -> list[int]:
    """The next frontier of a few vertices: each unreached neighbour gets ``level``, in Python scalars."""
    n, found = levels.size, []
    for v in frontier:
        begin, end = int(indptr[v]), int(indptr[v + 1])
        if end - begin > SMALL_DEGREE:
            found.extend(_claim(indices[begin:end], levels, level).tolist())
            continue
        for w in indices[begin:end].tolist():
            if w < n and levels[w] == UNREACHED:
                levels[w] = level
                found.append(w)
    return found


def _expand_large(indptr: np.ndarray, indices: np.ndarray, levels: np.ndarray, frontier: np.ndarray,
                  level: int) -> np.ndarray:
    """The next frontier of many vertices: every frontier edge gathered at once, then claimed."""
    begins = indptr[frontier].astype(np.int64)
    counts = indptr[frontier + 1].astype(np.int64) - begins
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    # edge k of the frontier's edge lists, laid end to end, sits at begins[i] + (k - first[i])
    first = np.cumsum(counts) - counts
    positions = np.repeat(begins - first, counts) + np.arange(total, dtype=np.int64)
    return _claim(indices[positions], levels, level)


def _claim(neighbours: np.ndarray, levels: np.ndarray, level: int) -> np.ndarray:
    """Give ``level`` to the unreached vertices among ``neighbours`` (ids ``>= n`` ignored); return them, once each."""
    neighbours = neighbours[neighbours < levels.size]
    fresh = np.unique(neighbours[levels[neighbours] == UNREACHED]).astype(np.int64)
    levels[fresh] = level
    return fresh
