"""Workloads on the device: vyre.lib.graph (and the other workloads as they land) against scipy and
a hand-written CuPy version of the same algorithm, in one run on one card.

Run on a GPU machine: ``python benchmarks/bench_workloads.py [--scale 22] [--edge-factor 8] [--only graph]``.
Prints a table headed by the card's name and writes ``$OUT/bench_workloads.json`` (or ``--json PATH``).
The default run ends with the target rows of ``benchmarks/workload_targets.py`` (fixed inputs, each
row next to its target; JSON keys ``targets`` and ``target_sizes``); ``--targets`` (or ``--issue``)
runs those alone, ``--quick`` with one timed call each, ``--toy --backend reference`` at toy sizes
on the CPU oracle.

- BFS and connected components on an R-MAT graph (``2**scale`` vertices, ``edge_factor * 2**scale``
  edges stored both ways): scipy.sparse.csgraph on the host (its BFS timed as the
  ``breadth_first_order`` call alone); vyre through the plain call
  (``graph.bfs(indptr, indices, source, undirected=True)``: upload, search, download) and on a graph
  uploaded once (``graph.Graph``: search and download only); on CuPy arrays of the same CSR, which
  vyre binds in place (no copy of the edges; results are CuPy arrays, copied on the device): a
  ``graph.Graph`` built once from them (``vyre (CuPy arrays, Graph)``) and the plain calls
  (``vyre (CuPy arrays, plain call)``, ``undirected=False``, so no symmetry check per call), each
  timed up to a CuPy sync, with the host-to-device and device-to-device bytes vyre moved while
  each ran (``backend.metrics()``: edges bound in place cross neither); the same algorithms written by hand in
  CUDA C as CuPy ``RawKernel``s on device-resident CuPy arrays (direction-optimising BFS with the
  same kernels, switching rule and one two-word readback per level; ECL-CC style components over
  an edge-source column built once, with one flag readback per sweep). Also prints each BFS
  level's direction, frontier and wall time for vyre and the hand-written version.
- Transitive closure of a random directed graph: vyre's semi-naive evaluation against a numpy
  semi-naive evaluator on the same graph, and vyre alone on a larger one.
- Structural equivalence and congruence closure of a random e-graph of 2**20 e-nodes against a
  Python reference (grouping by operator and children; union-find).
- Equality saturation (``egraph.saturate``, commutativity and associativity of + and *, 3
  iterations) of random terms of about 2**16 e-nodes against egglog's ``run`` on the same terms;
  vyre's two paths (apply and compaction on the device, and ``device=False`` on the host) both
  timed. ``--only saturate`` runs this row alone (``--saturate-log2`` sets the size).
- ``text.find_all`` over 1 GiB of random bytes (data resident on the device and the plain call
  from host bytes) against numpy's vectorised comparison of shifted views; ``text.find_all_many``
  with 1,000 needles of 4 to 32 bytes over the same CuPy array, against 1,000 ``find_all`` calls.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vyre.lib import datalog, egraph, graph, text  # noqa: E402
from vyre_cuda.bench import add_chart_arguments, redraw_if_asked, wall_s  # noqa: E402

CUDA_SOURCE = r"""
#define UNREACHED 0xFFFFFFFFu
#define FIND_HOPS 32
#define HOOK_TRIES 16
#define JUMP_HOPS 64

extern "C" __global__ void edge_sources(const unsigned* indptr, unsigned* sources, unsigned n, unsigned shift) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x, v = i >> shift, lanes = 1u << shift;
    if (v >= n) return;
    for (unsigned e = indptr[v] + (i & (lanes - 1)); e < indptr[v + 1]; e += lanes) sources[e] = v;
}
extern "C" __global__ void cc_init(const unsigned* indptr, const unsigned* indices, unsigned* parent, unsigned n) {
    unsigned v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    unsigned start = indptr[v];
    parent[v] = start < indptr[v + 1] ? min(v, indices[start]) : v;
}
__device__ unsigned find_root(unsigned* parent, unsigned x) {  // path halving, bounded hops
    unsigned cur = parent[x], prev = x;
    for (int hop = 0; hop < FIND_HOPS; ++hop) {
        unsigned up = parent[cur];
        if (up >= cur) break;
        parent[prev] = up; prev = cur; cur = up;
    }
    return cur;
}
extern "C" __global__ void cc_hook(const unsigned* sources, const unsigned* indices, unsigned* parent,
                                   unsigned* flag, unsigned n, unsigned m, int once) {
    unsigned e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= m) return;
    unsigned v = sources[e], u = indices[e];
    if (u >= n || (once && v >= u)) return;
    unsigned a = find_root(parent, v), b = find_root(parent, u);
    for (int t = 0; t < HOOK_TRIES && a != b; ++t) {
        unsigned hi = max(a, b), lo = min(a, b), old = atomicCAS(&parent[hi], hi, lo);
        a = old == hi ? lo : old;
        b = lo;
    }
    if (a != b) *flag = 1;
}
extern "C" __global__ void cc_compress(unsigned* parent, unsigned* flag, unsigned n) {
    unsigned v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    unsigned start = parent[v], p = start;
    bool done = false;
    for (int hop = 0; hop < JUMP_HOPS; ++hop) {
        unsigned pp = parent[p];
        if (pp == p) { done = true; break; }
        p = pp;
    }
    if (p != start) parent[v] = p;
    if (!done) *flag = 1;
}
extern "C" __global__ void bfs_init(const unsigned* indptr, unsigned* levels, unsigned* frontier, unsigned* stats,
                                    unsigned source, unsigned n) {
    unsigned v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v < n) levels[v] = v == source ? 0u : UNREACHED;
    if (v == 0) { frontier[0] = source; stats[0] = 1; stats[1] = indptr[source + 1] - indptr[source]; }
}
extern "C" __global__ void top_down(const unsigned* indptr, const unsigned* indices, unsigned* levels,
                                    const unsigned* frontier, const unsigned* stats, unsigned* next,
                                    unsigned* next_stats, unsigned level, unsigned n, unsigned shift) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x, slot = i >> shift, lanes = 1u << shift;
    if (slot >= stats[0]) return;
    unsigned v = frontier[slot];
    for (unsigned e = indptr[v] + (i & (lanes - 1)); e < indptr[v + 1]; e += lanes) {
        unsigned u = indices[e];
        if (u < n && levels[u] == UNREACHED && atomicCAS(&levels[u], UNREACHED, level + 1) == UNREACHED) {
            next[atomicAdd(&next_stats[0], 1u)] = u;
            atomicAdd(&next_stats[1], indptr[u + 1] - indptr[u]);
        }
    }
}
extern "C" __global__ void bottom_up(const unsigned* indptr, const unsigned* indices, unsigned* levels,
                                     unsigned* next, unsigned* next_stats, unsigned level, unsigned n) {
    unsigned v = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31, deg = 0;
    bool found = false;
    if (v < n && levels[v] == UNREACHED) {
        unsigned start = indptr[v], end = indptr[v + 1];
        for (unsigned e = start; e < end; ++e) {
            unsigned u = indices[e];
            if (u < n && levels[u] == level) { found = true; break; }
        }
        if (found) { levels[v] = level + 1; deg = end - start; }
    }
    unsigned ballot = __ballot_sync(0xFFFFFFFFu, found), edges = __reduce_add_sync(0xFFFFFFFFu, deg), base = 0;
    if (lane == 0 && ballot) { base = atomicAdd(&next_stats[0], __popc(ballot)); atomicAdd(&next_stats[1], edges); }
    base = __shfl_sync(0xFFFFFFFFu, base, 0);
    if (found) next[base + __popc(ballot & ((1u << lane) - 1))] = v;
}
"""
KERNELS = ("edge_sources", "cc_init", "cc_hook", "cc_compress", "bfs_init", "top_down", "bottom_up")


class CupyGraph:
    """The same BFS and components algorithms as vyre.lib.graph, written by hand in CUDA C and driven
    from CuPy: the edge-source column built at construction (vyre's Graph keeps it after first use)."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, undirected: bool) -> None:
        import cupy

        self.cp = cupy
        self.n, self.m, self.undirected = indptr.size - 1, indices.size, undirected
        self.host_indptr = indptr
        self.indptr, self.indices = cupy.asarray(indptr), cupy.asarray(indices)
        module = cupy.RawModule(code=CUDA_SOURCE)
        self.k = {name: module.get_function(name) for name in KERNELS}
        shift = graph.lanes_shift(self.n)
        self.sources = cupy.empty(max(self.m, 1), dtype=cupy.uint32)
        self.k["edge_sources"](self._grid(self.n << shift), (256,),
                               (self.indptr, self.sources, np.uint32(self.n), np.uint32(shift)))

    def _grid(self, count: int) -> tuple[int]:
        return ((count + 255) // 256,)

    def components(self) -> np.ndarray:
        cp, n, m = self.cp, self.n, self.m
        parent = cp.empty(n, dtype=cp.uint32)
        flag = cp.zeros(1, dtype=cp.uint32)
        self.k["cc_init"](self._grid(n), (256,), (self.indptr, self.indices, parent, np.uint32(n)))
        while True:
            self.k["cc_hook"](self._grid(m), (256,), (self.sources, self.indices, parent, flag, np.uint32(n),
                                                       np.uint32(m), np.int32(self.undirected)))
            self.k["cc_compress"](self._grid(n), (256,), (parent, flag, np.uint32(n)))
            if not int(flag.get()[0]):
                return parent.get()
            flag.fill(0)

    def bfs(self, source: int, alpha: float = 14.0, beta: float = 24.0, trace: list | None = None) -> np.ndarray:
        cp, n = self.cp, self.n
        levels = cp.empty(n, dtype=cp.uint32)
        frontier, nxt = cp.empty(n, dtype=cp.uint32), cp.empty(n, dtype=cp.uint32)
        stats, next_stats = cp.empty(2, dtype=cp.uint32), cp.zeros(2, dtype=cp.uint32)
        self.k["bfs_init"](self._grid(n), (256,), (self.indptr, levels, frontier, stats, np.uint32(source),
                                                   np.uint32(n)))
        size, edges = 1, int(self.host_indptr[source + 1] - self.host_indptr[source])
        unvisited_edges, level, bottom_up = self.m - edges, 0, False
        while size:
            if self.undirected and not bottom_up and edges * alpha > unvisited_edges:
                bottom_up = True
            elif bottom_up and size * beta < n:
                bottom_up = False
            started = time.perf_counter()
            if bottom_up:
                self.k["bottom_up"](self._grid(n), (256,), (self.indptr, self.indices, levels, nxt, next_stats,
                                                            np.uint32(level), np.uint32(n)))
            else:  # about one lane per edge of an average frontier vertex, 32 to 1024 per vertex
                shift = graph.lanes_shift(size, edges / size)
                self.k["top_down"](self._grid(size << shift), (256,),
                                   (self.indptr, self.indices, levels, frontier, stats, nxt, next_stats,
                                    np.uint32(level), np.uint32(n), np.uint32(shift)))
            stats.fill(0)
            words = next_stats.get()
            if trace is not None:
                trace.append(("bottom-up" if bottom_up else "top-down", size, edges, time.perf_counter() - started))
            size, edges = (int(w) for w in words)
            unvisited_edges -= edges
            frontier, nxt, stats, next_stats = nxt, frontier, next_stats, stats
            level += 1
        return levels.get()


def scipy_levels(matrix, source: int) -> np.ndarray:
    from scipy.sparse.csgraph import breadth_first_order

    order, pred = breadth_first_order(matrix, source, directed=True, return_predecessors=True)
    levels = np.full(matrix.shape[0], graph.UNREACHED, dtype=np.uint32)
    levels[source] = 0
    for v in order[1:]:
        levels[v] = levels[pred[v]] + 1
    return levels


def scipy_labels(matrix) -> np.ndarray:
    """Each vertex's component as the smallest vertex id in it (vyre's labels), from scipy's components."""
    from scipy.sparse.csgraph import connected_components as scipy_cc

    n = matrix.shape[0]
    _, comp = scipy_cc(matrix, directed=False)
    smallest = np.full(comp.max() + 1, n, dtype=np.int64)
    np.minimum.at(smallest, comp, np.arange(n))
    return smallest[comp].astype(np.uint32)


def rmat_csr(scale: int, edge_factor: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The benchmark graph: R-MAT edges stored both ways as CSR, and the search's source vertex."""
    n = 1 << scale
    src, dst = graph.rmat_edges(scale, edge_factor, seed=1)
    a, b = np.concatenate([src, dst]), np.concatenate([dst, src])
    order = np.argsort(a, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.uint32)
    np.cumsum(np.bincount(a, minlength=n), out=indptr[1:])
    return indptr, b[order].astype(np.uint32), int(src[0])


def bench_graph(backend, scale: int, edge_factor: int, reps: int) -> list[dict]:
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import breadth_first_order
    from scipy.sparse.csgraph import connected_components as scipy_cc

    indptr, indices, source = rmat_csr(scale, edge_factor)
    n, m = indptr.size - 1, indices.size
    matrix = csr_matrix((np.ones(m, dtype=np.int8), indices, indptr), shape=(n, n))

    expected_cc = scipy_labels(matrix)
    expected_levels = scipy_levels(matrix, source)
    reached = int((expected_levels != graph.UNREACHED).sum())
    traversed = int(np.diff(indptr)[expected_levels != graph.UNREACHED].sum())

    hand = CupyGraph(indptr, indices, undirected=True)
    rows = []
    with graph.Graph(indptr, indices, backend=backend, undirected=True) as g:
        assert np.array_equal(g.bfs(source), expected_levels), "vyre BFS differs from scipy"
        assert np.array_equal(g.connected_components(), expected_cc), "vyre components differ from scipy"
        assert np.array_equal(hand.bfs(source), expected_levels), "CuPy BFS differs from scipy"
        assert np.array_equal(hand.components(), expected_cc), "CuPy components differ from scipy"
        timings = {
            "bfs": {
                "scipy": wall_s(lambda: breadth_first_order(matrix, source, directed=True,
                                                             return_predecessors=True), 1),
                "vyre (plain call)": wall_s(lambda: graph.bfs(indptr, indices, source, backend=backend,
                                                               undirected=True), reps),
                "vyre (Graph, resident)": wall_s(lambda: g.bfs(source), reps),
                "cupy hand-written": wall_s(lambda: hand.bfs(source), reps),
            },
            "connected_components": {
                "scipy": wall_s(lambda: scipy_cc(matrix, directed=False), 1),
                "vyre (plain call)": wall_s(lambda: graph.connected_components(indptr, indices, backend=backend,
                                                                                undirected=True), reps),
                "vyre (Graph, resident)": wall_s(g.connected_components, reps),
                "cupy hand-written": wall_s(hand.components, reps),
            },
        }
        traces = {"vyre (Graph, resident)": [], "cupy hand-written": []}
        g.bfs(source, trace=traces["vyre (Graph, resident)"])
        hand.bfs(source, trace=traces["cupy hand-written"])
    moved = time_on_cupy_arrays(backend, indptr, indices, source, (expected_levels, expected_cc), timings, reps)
    print_levels(traces)
    for workload, times in timings.items():
        for path, t in times.items():
            row = {"workload": workload, "path": path, "seconds": t, "vertices": n, "edges": m,
                   "x_scipy": times["scipy"] / t, "x_cupy": t / times["cupy hand-written"]}
            if workload == "bfs":
                row["gteps"] = traversed / t / 1e9
                row["reached"] = reached
            rows.append(row | moved.get(path, {}))
    return rows, traces


def time_on_cupy_arrays(backend, indptr: np.ndarray, indices: np.ndarray, source: int,
                        expected: tuple[np.ndarray, np.ndarray], timings: dict, reps: int) -> dict[str, dict]:
    """Time BFS and components on CuPy arrays of the CSR (bound in place) into ``timings``; per path,
    the bytes vyre moved host to device and device to device while it ran (checks, warm-up and
    timed calls included), next to the edges' size."""
    import cupy

    ptr_d, idx_d = cupy.asarray(indptr), cupy.asarray(indices)
    sync = cupy.cuda.get_current_stream().synchronize
    levels_want, labels_want = expected
    moved = {}

    def transfers(before: dict) -> dict:
        after = backend.metrics()
        return {"h2d_bytes": after.get("cuda_h2d_bytes", 0) - before.get("cuda_h2d_bytes", 0),
                "d2d_bytes": after.get("cuda_d2d_bytes", 0) - before.get("cuda_d2d_bytes", 0),
                "edges_bytes": int(indices.nbytes)}

    path = "vyre (CuPy arrays, Graph)"
    sync()
    before = backend.metrics()
    with graph.Graph(ptr_d, idx_d, backend=backend, undirected=True) as g:
        assert np.array_equal(cupy.asnumpy(g.bfs(source)), levels_want), "vyre BFS on CuPy arrays differs from scipy"
        assert np.array_equal(cupy.asnumpy(g.connected_components()), labels_want), \
            "vyre components on CuPy arrays differ from scipy"
        timings["bfs"][path] = wall_s(lambda: (g.bfs(source), sync()), reps)
        timings["connected_components"][path] = wall_s(lambda: (g.connected_components(), sync()), reps)
    moved[path] = transfers(before)

    path = "vyre (CuPy arrays, plain call)"
    sync()
    before = backend.metrics()
    assert np.array_equal(cupy.asnumpy(graph.bfs(ptr_d, idx_d, source, backend=backend)), levels_want), \
        "vyre BFS (plain call) on CuPy arrays differs from scipy"
    assert np.array_equal(cupy.asnumpy(graph.connected_components(ptr_d, idx_d, backend=backend)), labels_want), \
        "vyre components (plain call) on CuPy arrays differ from scipy"
    timings["bfs"][path] = wall_s(lambda: (graph.bfs(ptr_d, idx_d, source, backend=backend), sync()), reps)
    timings["connected_components"][path] = wall_s(
        lambda: (graph.connected_components(ptr_d, idx_d, backend=backend), sync()), reps)
    moved[path] = transfers(before)
    for name, counts in moved.items():
        print(f"# {name}: {counts['h2d_bytes']:,} bytes host to device, {counts['d2d_bytes']:,} device to device "
              f"(the edges: {counts['edges_bytes']:,} bytes)")
    return moved


def print_levels(traces: dict[str, list]) -> None:
    """One line per BFS level: direction, frontier size and edges, and each path's wall time."""
    names = list(traces)
    print(f"# BFS per level (ms): {', '.join(names)}")
    for level, steps in enumerate(zip(*traces.values())):
        direction, size, edges, _ = steps[0]
        times = " ".join(f"{t * 1e3:8.3f}" for *_, t in steps)
        print(f"  level {level:2} {direction:9} frontier {size:9} vertices {edges:10} edges  {times}")


def numpy_closure(n: int, src: np.ndarray, dst: np.ndarray) -> int:
    """Semi-naive transitive closure in numpy (int64 pair keys); returns the number of pairs."""
    src, dst = src.astype(np.int64), dst.astype(np.int64)
    indices = dst[np.argsort(src, kind="stable")]
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    full = np.unique(src * n + dst)
    delta = full
    while delta.size:
        a, b = np.divmod(delta, n)
        deg = indptr[b + 1] - indptr[b]
        total = int(deg.sum())
        if total == 0:
            break
        pos = np.repeat(indptr[b], deg) + np.arange(total) - np.repeat(np.cumsum(deg) - deg, deg)
        delta = np.setdiff1d(np.unique(np.repeat(a, deg) * n + indices[pos]), full, assume_unique=True)
        full = np.union1d(full, delta)
    return int(full.size)


def networkx_closure_s(n: int, src: np.ndarray, dst: np.ndarray, pairs: int) -> float:
    """Seconds networkx takes for the same closure (checked to have ``pairs`` pairs)."""
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(zip(src.tolist(), dst.tolist()))
    start = time.perf_counter()
    closed = nx.transitive_closure(graph, reflexive=False)
    seconds = time.perf_counter() - start
    assert closed.number_of_edges() == pairs, "networkx closure differs"
    return seconds


CLOSURE_SIZES = ((2000, 2700), (4000, 6000), (6000, 9000))


def closure_graphs(sizes: tuple[tuple[int, int], ...] = CLOSURE_SIZES) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """The transitive-closure benchmark's random directed graphs ``(n, src, dst)``, one per ``(n, m)``, drawn
    in turn from one seeded generator (so each size is the same graph in every run and section)."""
    rng = np.random.default_rng(2)
    return [(n, rng.integers(0, n, m).astype(np.uint32), rng.integers(0, n, m).astype(np.uint32)) for n, m in sizes]


def bench_closure(backend) -> list[dict]:
    rows = []
    for n, src, dst in closure_graphs():
        m, with_numpy = src.size, n == CLOSURE_SIZES[0][0]

        def closure(n: int = n, src: np.ndarray = src, dst: np.ndarray = dst) -> object:
            return datalog.transitive_closure(n, src, dst, backend=backend)

        pairs = closure()[0].size
        t_vyre = wall_s(closure, 3)
        row = {"workload": "transitive_closure", "vertices": n, "edges": m, "pairs": pairs,
               "vyre_s": t_vyre, "pairs_per_s": pairs / t_vyre}
        if with_numpy:
            start = time.perf_counter()
            assert numpy_closure(n, src, dst) == pairs, "numpy closure differs"
            row["numpy_s"] = time.perf_counter() - start
            row["x_numpy"] = row["numpy_s"] / t_vyre
            row["networkx_s"] = networkx_closure_s(n, src, dst, pairs)
            row["x_networkx"] = row["networkx_s"] / t_vyre
        rows.append(row)
    return rows


def python_pairs(eclass, op, offsets, lens, children) -> int:
    """Structurally equal e-class pairs by grouping on (op, children) in Python; returns the count."""
    groups: dict[tuple, set[int]] = {}
    kids = children.tolist()
    for c, o, off, ln in zip(eclass.tolist(), op.tolist(), offsets.tolist(), lens.tolist()):
        groups.setdefault((o, *kids[off:off + ln]), set()).add(c)
    return len({(a, b) for g in groups.values() if len(g) > 1 for a in g for b in g if a < b})


def python_closure(eclass, op, offsets, lens, children) -> np.ndarray:
    classes = int(max(eclass.max(), children.max())) + 1
    parent = np.arange(classes)

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    while True:
        canon = np.array([find(c) for c in range(classes)])
        groups: dict[tuple, int] = {}
        merged = False
        kids = canon[children].tolist()
        for c, o, off, ln in zip(canon[eclass].tolist(), op.tolist(), offsets.tolist(), lens.tolist()):
            key = (o, *kids[off:off + ln])
            other = groups.setdefault(key, c)
            ra, rb = find(other), find(c)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
                merged = True
        if not merged:
            return np.array([find(c) for c in range(classes)], dtype=np.uint32)


def egraph_columns(nodes_log2: int = 20) -> tuple[np.ndarray, ...]:
    """A random e-graph of ``2**nodes_log2`` e-nodes over a quarter as many e-classes:
    ``(eclass, op, offsets, lens, children)``."""
    rng = np.random.default_rng(3)
    nodes, classes = 1 << nodes_log2, 1 << (nodes_log2 - 2)
    eclass = rng.integers(0, classes, nodes).astype(np.uint32)
    lens = rng.integers(0, 3, nodes).astype(np.uint32)
    # leaves are distinct constants (their own op); inner nodes use 8 operators over random children,
    # so about 30,000 pairs of unary nodes coincide and congruence spreads from them
    op = np.where(lens == 0, 8 + np.arange(nodes), rng.integers(0, 8, nodes)).astype(np.uint32)
    offsets = np.zeros(nodes, np.uint32)
    offsets[1:] = np.cumsum(lens)[:-1]
    children = rng.integers(0, classes, int(lens.sum())).astype(np.uint32)
    return eclass, op, offsets, lens, children


def bench_egraph(backend) -> list[dict]:
    cols = egraph_columns()
    nodes = cols[0].size
    start = time.perf_counter()
    want_pairs = python_pairs(*cols)
    t_py_pairs = time.perf_counter() - start
    start = time.perf_counter()
    want_closure = python_closure(*cols)
    t_py_closure = time.perf_counter() - start
    assert egraph.structural_equivalence(*cols, backend=backend)[0].size == want_pairs, "pairs differ"
    assert np.array_equal(egraph.congruence_closure(*cols, backend=backend), want_closure), "closure differs"
    t_pairs = wall_s(lambda: egraph.structural_equivalence(*cols, backend=backend), 3)
    t_closure = wall_s(lambda: egraph.congruence_closure(*cols, backend=backend), 3)
    return [{"workload": "structural_equivalence", "enodes": nodes, "pairs": want_pairs, "vyre_s": t_pairs,
             "python_s": t_py_pairs, "x_python": t_py_pairs / t_pairs},
            {"workload": "congruence_closure", "enodes": nodes, "vyre_s": t_closure, "python_s": t_py_closure,
             "x_python": t_py_closure / t_closure}]


SATURATE_ITERATIONS = 3


def bench_saturate(backend, nodes_log2: int = 16, iterations: int = SATURATE_ITERATIONS, reps: int = 3) -> list[dict]:
    """``egraph.saturate`` with commutativity and associativity of + and * on random terms of about
    2**nodes_log2 e-nodes, next to egglog's ``(run iterations)`` on the same terms (absent: no
    column; the e-class count is then checked against vyre on the CPU oracle). Both vyre paths are
    timed: ``vyre_s`` (apply and compaction on the device, the default) and ``vyre_host_s``
    (``device=False``: apply and compaction in numpy on the host); their results must be equal."""
    import vyre
    from benchmarks import egglog_oracle as eo

    terms = eo.terms_of_size(2**nodes_log2)
    sig = egraph.Signature(eo.SIGNATURE)
    cols, _ = egraph.term_columns(terms, sig)

    def run(be: object = backend, device: bool = True) -> egraph.Saturation:
        return egraph.saturate(*cols, eo.COMM_ASSOC, iterations, signature=sig, backend=be, device=device)

    row: dict = {"workload": "saturate", "enodes": cols[0].size, "iterations": iterations}
    if eo.available():
        row["egglog_s"], want = eo.egglog_seconds(terms, eo.COMM_ASSOC, iterations)
    else:
        with vyre.acquire("reference") as oracle:
            want = run(oracle).classes
    out, host = run(), run(device=False)
    assert out.classes == want, f"saturate: {out.classes} e-classes, the judge {want}"
    assert out.history == host.history and np.array_equal(out.canonical, host.canonical), "device and host paths"
    assert all(np.array_equal(a, b) for a, b in zip(out.columns, host.columns, strict=True)), "device and host columns"
    row |= {"classes": out.classes, "enodes_after": out.columns[0].size, "vyre_s": wall_s(run, reps),
            "vyre_host_s": wall_s(lambda: run(device=False), reps)}
    row["x_host_path"] = row["vyre_host_s"] / row["vyre_s"]
    if "egglog_s" in row:
        row["x_egglog"] = row["egglog_s"] / row["vyre_s"]
    return [row]


def haystack(size: int) -> np.ndarray:
    """The text benchmarks' haystack: random bytes of 16 values (a 4-byte needle matches every 65,536 bytes)."""
    return np.random.default_rng(4).integers(0, 16, size, dtype=np.uint8)


def cut_needles(hay: np.ndarray, count: int) -> list[bytes]:
    """``count`` needles of 4 to 32 bytes cut from ``hay`` at random places (so each occurs)."""
    rng = np.random.default_rng(29)
    return [bytes(hay[at:at + int(rng.integers(4, 33))]) for at in rng.integers(0, hay.size - 32, count)]


def bench_text(backend) -> list[dict]:
    import cupy

    size = 1 << 30
    hay = haystack(size)
    needle = bytes(hay[12345:12349])
    start = time.perf_counter()
    view = np.lib.stride_tricks.sliding_window_view(hay, len(needle))
    mask = view[:, 0] == needle[0]
    for k in range(1, len(needle)):
        mask &= view[:, k] == needle[k]
    want = np.flatnonzero(mask).astype(np.uint32)
    t_numpy = time.perf_counter() - start
    device = cupy.asarray(hay)
    assert np.array_equal(text.find_all(hay, needle, backend=backend), want), "host find_all differs"
    assert np.array_equal(cupy.asnumpy(text.find_all(device, needle, backend=backend)), want), "device find_all"
    t_host = wall_s(lambda: text.find_all(hay, needle, backend=backend), 3)
    t_dev = wall_s(lambda: (text.find_all(device, needle, backend=backend), cupy.cuda.Device().synchronize()), 5)
    return [{"workload": "find_all", "bytes": size, "matches": int(want.size), "path": path, "seconds": t,
             "gb_per_s": size / t / 1e9, "x_numpy": t_numpy / t}
            for path, t in (("numpy", t_numpy), ("vyre (host bytes)", t_host), ("vyre (CuPy array)", t_dev))
            ] + bench_text_many(backend, hay, device)


def bench_text_many(backend, hay: np.ndarray, device) -> list[dict]:
    """``find_all_many`` with 1,000 needles of 4 to 32 bytes (slices of the haystack, so each occurs)
    from the CuPy array, checked against 1,000 one-needle ``find_all`` calls merged, and timed
    against them."""
    import cupy

    needles = cut_needles(hay, 1000)

    def one_by_one() -> list:
        return [text.find_all(device, needle, backend=backend) for needle in needles]

    want = [cupy.asnumpy(a) for a in one_by_one()]
    offsets, ids = (cupy.asnumpy(a) for a in text.find_all_many(device, needles, backend=backend))
    assert bool(np.all(np.diff(offsets.astype(np.int64)) >= 0)), "find_all_many's offsets are not sorted"
    for i, one in enumerate(want):  # each needle's matches, in offset order, equal its own find_all
        assert np.array_equal(offsets[ids == i], one), f"find_all_many differs from find_all for needle {i}"
    t_many = wall_s(lambda: (text.find_all_many(device, needles, backend=backend), cupy.cuda.Device().synchronize()),
                    5)
    t_each = wall_s(lambda: (one_by_one(), cupy.cuda.Device().synchronize()), 1)
    return [{"workload": "find_all_many", "bytes": hay.size, "needles": len(needles), "matches": int(offsets.size),
             "path": path, "seconds": t, "gb_per_s": hay.size / t / 1e9, "x_one_by_one": t_each / t}
            for path, t in (("vyre, 1,000 find_all calls (CuPy array)", t_each), ("vyre (CuPy array)", t_many))]


def draw(result: dict, png: Path) -> None:
    """Speed-up of each workload over its CPU baseline, and of the hand-written CuPy graph kernels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars: list[tuple[str, float, str]] = []
    for r in result.get("graph", []):
        if r["path"] != "scipy":
            bars.append((f"{r['workload']}\n{r['path']}", r["x_scipy"], "scipy"))
    for r in result.get("closure", []):
        if "x_numpy" in r:
            bars.append((f"transitive_closure\n{r['pairs']} pairs", r["x_numpy"], "numpy semi-naive"))
    for r in result.get("egraph", []):
        bars.append((f"{r['workload']}\n{r['enodes']} e-nodes", r["x_python"], "Python"))
    for r in result.get("saturate", []):
        if "x_egglog" in r:
            bars.append((f"saturate {r['iterations']} iterations\n{r['enodes']} e-nodes", r["x_egglog"], "egglog"))
    for r in result.get("text", []):
        if r["workload"] == "find_all" and r["path"] != "numpy":
            bars.append((f"find_all 1 GiB\n{r['path']}", r["x_numpy"], "numpy"))
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(bars) + 1.5))
    ax.barh([b[0] for b in bars], [b[1] for b in bars], color="tab:blue")
    for i, (_, x, base) in enumerate(bars):
        ax.annotate(f"{x:.1f}x {base}", (x, i), xytext=(4, -3), textcoords="offset points", fontsize=8)
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel("speed-up over the CPU baseline (log scale)")
    ax.set_title(f"vyre.lib workloads on {result['card']}")
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"wrote {png}")


def card_name(backend: object = None) -> str:
    """The card's name, or the oracle's for a backend that binds no device arrays."""
    if backend is not None and not graph.binds(backend):
        return f"CPU oracle ({getattr(backend, 'id', 'reference')})"
    import cupy

    return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=22)
    parser.add_argument("--edge-factor", type=int, default=8)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--only", choices=("all", "graph", "text", "saturate"), default="all",
                        help="graph: BFS and components only; text: find_all and find_all_many only; "
                             "saturate: equality saturation only (both vyre paths and egglog)")
    parser.add_argument("--saturate-log2", type=int, default=16,
                        help="e-nodes (log2) of the saturate row's input terms (default 16)")
    parser.add_argument("--targets", "--issue", dest="targets", action="store_true",
                        help="only the target rows (benchmarks/workload_targets.py), on their fixed inputs")
    parser.add_argument("--quick", action="store_true",
                        help="target rows with one timed call each and the e-graph checked against vyre's sorted "
                             "path instead of Python (about 2 minutes on an H100)")
    parser.add_argument("--toy", action="store_true",
                        help="target rows at toy sizes (with --backend reference, on the CPU oracle)")
    parser.add_argument("--backend", default="cuda", help="backend id (default cuda)")
    add_chart_arguments(parser, ROOT / "docs" / "workloads.png")
    args = parser.parse_args()
    if redraw_if_asked(args, draw):
        return
    import vyre

    backend = vyre.acquire(args.backend)
    result: dict = {"card": card_name(backend), "graph": [], "bfs_levels": []}
    if not args.targets:
        result |= measure(backend, args)
    if args.targets or args.only == "all":
        from benchmarks import workload_targets as targets

        sizes = targets.TOY if args.toy else targets.QUICK if args.quick else targets.FULL
        result["targets"] = targets.run(backend, args.backend, sizes)
        result["target_sizes"] = {"name": "toy" if args.toy else "quick" if args.quick else "full",
                                  **dataclasses.asdict(sizes)}
        print(f"# {result['card']}: the target rows ({result['target_sizes']['name']} run)")
        targets.print_rows(result["targets"])
    path = args.json or os.path.join(os.environ.get("OUT", "."), "bench_workloads.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {path}")


def measure(backend: object, args: argparse.Namespace) -> dict:
    """The comparison rows (graphs against scipy and hand-written CuPy; closure, e-graphs, text), printed."""
    graphs = args.only in ("all", "graph")
    rows, levels = bench_graph(backend, args.scale, args.edge_factor, args.reps) if graphs else ([], [])
    if args.only == "all":
        others = {"closure": bench_closure(backend), "egraph": bench_egraph(backend),
                  "saturate": bench_saturate(backend, args.saturate_log2, reps=args.reps),
                  "text": bench_text(backend)}
    elif args.only == "saturate":
        others = {"saturate": bench_saturate(backend, args.saturate_log2, reps=args.reps)}
    else:
        others = {"text": bench_text(backend)} if args.only == "text" else {}
    if rows:
        print(f"# {card_name(backend)}: R-MAT scale {args.scale}, edge factor {args.edge_factor} (stored both ways)")
        print(f"{'workload':22} {'path':32} {'ms':>10} {'x scipy':>9} {'/ cupy':>8} {'GTEPS':>7}")
    for r in rows:
        gteps = f"{r['gteps']:7.2f}" if "gteps" in r else ""
        print(f"{r['workload']:22} {r['path']:32} {r['seconds'] * 1e3:10.2f} {r['x_scipy']:9.1f} "
              f"{r['x_cupy']:8.2f} {gteps}")
    for name, items in others.items():
        print(f"# {name}")
        for r in items:
            print("  " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()))
    return {"graph": rows, "bfs_levels": levels, **others}


if __name__ == "__main__":
    main()
