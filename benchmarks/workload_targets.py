"""The workloads' target rows, measured on the given inputs in one run, each next to its target.

``python benchmarks/bench_workloads.py --issue [--quick]`` runs this section alone (the default run
of that script runs it after its own rows); ``--toy --backend reference`` runs it at toy sizes on
the CPU oracle. Every result is checked before its time is reported.

- Graphs: Graph500 Kronecker graphs of scale 21 and 22, edge factor 16 (``graph.rmat_edges``: the
  Graph500 initiator A=0.57, B=0.19, C=0.19), every edge stored both ways, and a 2048 x 2048 grid
  (4 neighbours; 4,095 BFS levels from a corner). BFS from 8 roots (Graph500: random vertices with
  an edge other than a self loop, fixed seed; on the grid the corner and 7 random roots) and
  connected components (Afforest, the default, and ``method="sweep"`` on the same graph, so both
  are compared in one run), on a ``graph.Graph`` of device arrays (CuPy on ``cuda``; numpy on the
  oracle, which binds none) with results left where they are: each call timed to a device
  synchronize, nothing downloaded; and the plain call from numpy (upload, search, download). BFS
  levels pass the Graph500 checks (``check_levels``), components must equal scipy's partition.
  GTEPS: Graph500's harmonic mean over the roots of the input edge tuples in the reached component
  (each undirected edge once) per second.
- Datalog: transitive closure of ``bench_workloads``' random graphs (2,000 vertices and 2,700 edges,
  4,000/6,000, 6,000/9,000) and same generation of a random forest (about 2.5 M pairs), each
  checked exactly; the first ``transitive_closure`` call in a fresh process, twice (the second
  finds every disk cache warm).
- E-graphs: congruence closure of 2**20 e-nodes on a resident ``egraph.EGraph`` (columns uploaded
  once; labels downloaded) and the plain call.
- Text: ``text.find_all_many`` of 1,000 needles of 4 to 32 bytes over 1 GiB from a device array;
  a 16 MiB prefix is searched separately and checked against Python's ``bytes.find``, and the full
  run's matches inside the prefix must equal it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_workloads import (  # noqa: E402
    closure_graphs,
    cut_needles,
    egraph_columns,
    haystack,
    python_closure,
    scipy_labels,
)
from vyre.lib import datalog, datalog_dense, egraph, graph, text  # noqa: E402

#: the targets, in seconds (``find_all_many``: bytes per second at least)
TARGETS = {("bfs", "kron21"): 0.6e-3, ("bfs", "kron22"): 0.5e-3, ("bfs", "grid2048"): 40e-3,
           ("components", "kron22"): 1.2e-3, ("components", "grid2048"): 1.0e-3,
           ("congruence_closure", "2^20 e-nodes"): 50e-3, ("first_call", "transitive_closure"): 0.5}
FIND_MANY_TARGET_GBS = 100.0


@dataclass(frozen=True)
class Sizes:
    """The inputs of one run (``FULL`` are the targets' inputs)."""

    kron_scales: tuple[int, ...] = (21, 22)
    edge_factor: int = 16
    grid_side: int = 2048
    roots: int = 8
    reps: int = 3                       # timed calls per root (BFS) or per workload, after a warm-up
    closure: tuple[tuple[int, int], ...] = ((2000, 2700), (4000, 6000), (6000, 9000))
    forest: tuple[int, int] = (30000, 100)  # vertices, trees: 2,478,868 same-generation pairs
    enodes_log2: int = 20
    text_bytes: int = 1 << 30
    needles: int = 1000
    prefix_bytes: int = 16 << 20
    python_egraph_check: bool = True    # else checked against the sorted path (the Python one takes ~25 s)


FULL = Sizes()
QUICK = replace(FULL, reps=1, python_egraph_check=False)
TOY = Sizes(kron_scales=(6, 7), edge_factor=4, grid_side=12, roots=3, reps=1, closure=((60, 80), (90, 120)),
            forest=(300, 4), enodes_log2=8, text_bytes=1 << 16, needles=20, prefix_bytes=1 << 12)


def require(ok: bool, what: str) -> None:
    """Stop the run on a wrong result (kept under ``python -O``, unlike ``assert``)."""
    if not ok:
        raise AssertionError(f"wrong result: {what}")


class Device:
    """Where a workload's arrays live: CuPy on a backend that binds device arrays (``cuda``), so results
    stay on the device; numpy on the oracle, which binds none (the same calls on host arrays)."""

    def __init__(self, backend: Any) -> None:
        self.on_gpu = graph.binds(backend)
        if self.on_gpu:
            import cupy

            self.xp: Any = cupy
        else:
            self.xp = np
        self.kind = "CuPy" if self.on_gpu else "numpy"

    def sync(self) -> None:
        """Wait for everything queued on the device (nothing to wait for on the host)."""
        if self.on_gpu:
            self.xp.cuda.Device().synchronize()

    def put(self, array: np.ndarray) -> Any:
        return self.xp.asarray(array)

    @staticmethod
    def host(array: Any) -> np.ndarray:
        return graph.host_copy(array)


def timed(fn: Callable[[], Any], sync: Callable[[], None], reps: int) -> tuple[list[float], Any]:
    """Wall seconds of ``reps`` calls of ``fn``, each up to ``sync()`` returning, and the last result."""
    times, result = [], None
    for _ in range(reps):
        start = time.perf_counter()
        result = fn()
        sync()
        times.append(time.perf_counter() - start)
    return times, result


def nothing() -> None:
    """The sync of calls whose results are host arrays (they return when done)."""


# ---- graphs ----------------------------------------------------------------------------------------
@dataclass
class BenchGraph:
    """A test graph stored both ways: the CSR on the device and on the host, each edge's source row on
    the device (for the checks), the BFS roots and the input edge tuples (undirected edges)."""

    name: str
    indptr: Any
    indices: Any
    sources: Any
    host_indptr: np.ndarray
    host_indices: np.ndarray
    roots: list[int]
    tuples: int

    @property
    def n(self) -> int:
        return self.host_indptr.size - 1


def both_ways(dev: Device, name: str, n: int, src: np.ndarray, dst: np.ndarray, roots: list[int]) -> BenchGraph:
    """The CSR of every edge ``src[i] - dst[i]`` stored both ways (self loops and duplicates kept, as
    Graph500 does), sorted by source on the device."""
    xp = dev.xp
    s, d = dev.put(src), dev.put(dst)
    a, b = xp.concatenate([s, d]), xp.concatenate([d, s])
    order = xp.argsort(a)
    indptr = xp.zeros(n + 1, dtype=xp.uint32)
    indptr[1:] = xp.cumsum(xp.bincount(a, minlength=n)).astype(xp.uint32)
    indices = b[order].astype(xp.uint32)
    host_indptr, host_indices = dev.host(indptr), dev.host(indices)
    sources = dev.put(np.repeat(np.arange(n, dtype=np.uint32), np.diff(host_indptr)))
    return BenchGraph(name, indptr, indices, sources, host_indptr, host_indices, roots, int(src.size))


def graph500_roots(n: int, src: np.ndarray, dst: np.ndarray, count: int, seed: int, skip: int = -1) -> list[int]:
    """``count`` distinct random vertices with an edge other than a self loop (Graph500's search keys),
    not ``skip``."""
    has_edge = np.zeros(n, dtype=bool)
    loop = src == dst
    has_edge[src[~loop]] = has_edge[dst[~loop]] = True
    if 0 <= skip < n:
        has_edge[skip] = False
    candidates = np.flatnonzero(has_edge)
    rng = np.random.default_rng(seed)
    return [int(v) for v in rng.choice(candidates, size=min(count, candidates.size), replace=False)]


def kron_graph(dev: Device, scale: int, edge_factor: int, roots: int) -> BenchGraph:
    """The Graph500 Kronecker graph of ``2**scale`` vertices and ``edge_factor * 2**scale`` edges."""
    src, dst = graph.rmat_edges(scale, edge_factor, seed=1)
    n = 1 << scale
    return both_ways(dev, f"kron{scale}", n, src, dst, graph500_roots(n, src, dst, roots, seed=scale))


def grid_graph(dev: Device, side: int, roots: int) -> BenchGraph:
    """The ``side`` x ``side`` 4-neighbour lattice (vertex ``row * side + column``); the roots are the
    corner 0 (``2 * side - 1`` levels) and random others."""
    ids = np.arange(side * side, dtype=np.uint32).reshape(side, side)
    src = np.concatenate([ids[:, :-1].ravel(), ids[:-1, :].ravel()])
    dst = np.concatenate([ids[:, 1:].ravel(), ids[1:, :].ravel()])
    picked = [0, *graph500_roots(side * side, src, dst, roots - 1, seed=side, skip=0)]
    return both_ways(dev, f"grid{side}", side * side, src, dst, picked)


def check_levels(xp: Any, sources: Any, indices: Any, levels: Any, source: int) -> tuple[int, int, int]:
    """Graph500's checks of BFS levels on a graph stored both ways (``xp``: numpy or CuPy, where the
    arrays are): the source alone is at level 0, every edge joins two reached or two unreached
    vertices whose levels differ by at most 1, and every other reached vertex has a neighbour one
    level up. Together they hold only for the exact hop distances and the source's component.
    Returns (reached vertices, levels, input edge tuples in the component)."""
    lev = levels.astype(xp.int64)
    lev[levels == graph.UNREACHED] = -1
    require(int(lev[source]) == 0 and int(xp.count_nonzero(lev == 0)) == 1, f"level 0 is not the source {source} alone")
    a, b = lev[sources], lev[indices]
    require(not bool(xp.any((a >= 0) != (b >= 0))), "an edge joins a reached and an unreached vertex")
    require(not bool(xp.any(xp.abs(a - b) > 1)), "an edge's ends are more than one level apart")
    up = xp.zeros(lev.size, dtype=bool)
    up[sources[b == a - 1]] = True
    require(bool(xp.all(up[lev > 0])), "a reached vertex has no neighbour one level up")
    return int(xp.count_nonzero(lev >= 0)), int(lev.max()) + 1, int(xp.count_nonzero(a >= 0)) // 2


def expected_labels(g: BenchGraph) -> tuple[np.ndarray, str]:
    """Components as vyre labels them (the smallest vertex id of each), from scipy, or from the CPU
    oracle where scipy is absent; and which judged."""
    try:
        from scipy.sparse import csr_matrix
    except ImportError:
        return graph.connected_components(g.host_indptr, g.host_indices, backend="reference"), "oracle"
    matrix = csr_matrix((np.ones(g.host_indices.size, np.int8), g.host_indices, g.host_indptr), shape=(g.n, g.n))
    return scipy_labels(matrix), "scipy"


def graph_rows(backend: Any, dev: Device, g: BenchGraph, reps: int) -> list[dict]:
    """BFS from every root and components of ``g``: on a ``Graph`` of its device arrays (results left on
    the device) and by the plain call from numpy; every result checked."""
    want_labels, judge = expected_labels(g)

    def check_bfs(levels: Any, root: int) -> tuple[int, int, int]:
        return check_levels(dev.xp, g.sources, g.indices, levels, root)

    def check_cc(labels: Any, path: str) -> None:
        require(np.array_equal(dev.host(labels), want_labels), f"{g.name} components ({path}) differ from {judge}")

    def bfs_row(path: str, run: Callable[[int], Any], sync: Callable[[], None], reps: int) -> dict:
        run(g.roots[0])
        sync()  # warm-up: binds the steps and captures the loop
        per_root, found = [], []
        for root in g.roots:
            times, levels = timed(lambda root=root: run(root), sync, reps)
            per_root.append(statistics.median(times))
            found.append(check_bfs(dev.put(levels), root))  # the plain call's levels are numpy
        tuples = [f[2] for f in found]
        return {"workload": "bfs", "path": path, "seconds": statistics.median(per_root), "per_root_s": per_root,
                "roots": g.roots, "reached": [f[0] for f in found], "levels": [f[1] for f in found],
                "traversed_tuples": tuples, "check": "graph500",
                "gteps": len(per_root) / sum(t / e for t, e in zip(per_root, tuples) if e) / 1e9}

    def cc_row(path: str, run: Callable[[], Any], sync: Callable[[], None], reps: int,
               method: str = "afforest") -> dict:
        check_cc(run(), path)  # the warm-up call
        sync()
        times, labels = timed(run, sync, reps)
        check_cc(labels, path)
        return {"workload": "components", "path": path, "method": method, "seconds": statistics.median(times),
                "check": judge}

    resident = f"vyre ({dev.kind} arrays in and out, Graph)"
    rows = []
    with graph.Graph(g.indptr, g.indices, backend=backend, undirected=True) as on_device:
        rows.append(bfs_row(resident, on_device.bfs, dev.sync, reps))
        rows.append(cc_row(resident, on_device.connected_components, dev.sync, reps))
        # the ECL-CC sweep (every edge hooked) next to the default Afforest, on the same graph
        rows.append(cc_row(f"{resident}, method='sweep'",
                           lambda: on_device.connected_components(method="sweep"), dev.sync, reps, "sweep"))
    # the same search on a copy whose rows list their neighbours by degree, highest first (built once,
    # Graph500's untimed kernel 1: its time is reported as build_s)
    by_degree = f"vyre ({dev.kind} arrays in and out, Graph of neighbours_by_degree)"
    started = time.perf_counter()
    ptr2, idx2 = graph.neighbours_by_degree(g.indptr, g.indices, backend=backend)
    dev.sync()
    build_s = time.perf_counter() - started
    with graph.Graph(ptr2, idx2, backend=backend, undirected=True) as hubs_first:
        rows.append(bfs_row(by_degree, hubs_first.bfs, dev.sync, reps) | {"build_s": build_s})
    del idx2
    plain = "vyre (numpy in and out, plain call)"
    ptr, idx = g.host_indptr, g.host_indices
    rows.append(bfs_row(plain, lambda root: graph.bfs(ptr, idx, root, backend=backend, undirected=True),
                        nothing, 1))
    rows.append(cc_row(plain, lambda: graph.connected_components(ptr, idx, backend=backend, undirected=True),
                       nothing, reps))
    for row in rows:
        row |= {"graph": g.name, "vertices": g.n, "edges_stored": int(g.host_indices.size), "edge_tuples": g.tuples}
        target = TARGETS.get((row["workload"], g.name))
        if target is not None and row["path"] in (resident, by_degree):
            row |= {"target_s": target, "meets_target": row["seconds"] <= target}
    return rows


def bench_graphs(backend: Any, dev: Device, sizes: Sizes) -> list[dict]:
    rows = []
    makers: list[Callable[[], BenchGraph]] = [lambda s=s: kron_graph(dev, s, sizes.edge_factor, sizes.roots)
                                              for s in sizes.kron_scales]
    makers.append(lambda: grid_graph(dev, sizes.grid_side, sizes.roots))
    for make in makers:
        rows += graph_rows(backend, dev, make(), sizes.reps)  # one graph on the device at a time
    return rows


# ---- Datalog ---------------------------------------------------------------------------------------
def check_closure(n: int, src: np.ndarray, dst: np.ndarray, got_src: np.ndarray, got_dst: np.ndarray) -> None:
    """The closure's pairs, row by row, equal scipy's BFS from every vertex (a vertex is in its own row
    when it reaches one of its predecessors)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import breadth_first_order

    matrix = csr_matrix((np.ones(src.size, np.int8), (src, dst)), shape=(n, n))
    into = matrix.T.tocsr()
    bounds = np.searchsorted(got_src, np.arange(n + 1))
    for a in range(n):
        reached = breadth_first_order(matrix, a, directed=True, return_predecessors=False)
        on_cycle = np.isin(into.indices[into.indptr[a]:into.indptr[a + 1]], reached).any()
        want = np.sort(reached if on_cycle else reached[reached != a])
        require(np.array_equal(got_dst[bounds[a]:bounds[a + 1]], want), f"transitive closure's row {a}")


def random_forest(n: int, trees: int) -> tuple[np.ndarray, np.ndarray]:
    """``(parent, child)`` of a random forest: vertices ``0 .. trees - 1`` are roots, each other vertex
    ``v`` hangs under a uniform random vertex below ``v``."""
    child = np.arange(trees, n, dtype=np.uint32)
    parent = (np.random.default_rng(5).random(child.size) * child).astype(np.uint32)
    return parent, child


def forest_generations(n: int, parent: np.ndarray, child: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same-generation pairs of a forest, sorted: ``(x, y)``, ``x != y``, of one tree and one depth
    (siblings, then children of pairs, as the rules say), found from each vertex's root and depth."""
    up = np.arange(n, dtype=np.int64)
    up[child] = parent
    depth = (up != np.arange(n)).astype(np.int64)
    while True:  # pointer jumping: depth counts the hops to up[v], which ends at v's root
        nxt = up[up]
        moved = nxt != up
        if not moved.any():
            break
        depth += np.where(moved, depth[up], 0)
        up = nxt
    order = np.lexsort((depth, up))
    key = up[order] * n + depth[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    counts = np.diff(np.r_[starts, n])
    size, first = np.repeat(counts, counts), np.repeat(starts, counts)  # per sorted vertex: its group
    x = np.repeat(order, size)
    within = np.arange(x.size) - np.repeat(np.cumsum(size) - size, size)
    y = order[np.repeat(first, size) + within]
    keep = x != y
    x, y = x[keep], y[keep]
    by = np.lexsort((y, x))
    return x[by].astype(np.uint32), y[by].astype(np.uint32)


def first_call(backend_id: str, n: int, m: int) -> dict:
    """The first and second ``transitive_closure`` call (the closure benchmark's first graph, of ``n``
    vertices and ``m`` edges) in a fresh process whose backend was started before timing, run twice:
    the second process finds the disk caches as the first left them."""
    child = (
        "import json, sys, time\n"
        "import vyre\n"
        "from benchmarks.bench_workloads import closure_graphs\n"
        "from vyre.lib import datalog\n"
        f"backend = vyre.acquire({backend_id!r})\n"
        f"((n, src, dst),) = closure_graphs((({n}, {m}),))\n"
        "out = []\n"
        "for _ in range(2):\n"
        "    start = time.perf_counter()\n"
        "    pairs = datalog.transitive_closure(n, src, dst, backend=backend)[0].size\n"
        "    out.append(time.perf_counter() - start)\n"
        "print(json.dumps({'first_s': out[0], 'second_s': out[1], 'pairs': int(pairs)}))\n")
    path = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    runs = []
    for _ in range(2):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", child], cwd=ROOT, env=env, capture_output=True, text=True,
                              check=False)
        if done.returncode:
            raise SystemExit(f"the first-call process failed:\n{done.stderr}")
        runs.append(json.loads(done.stdout.splitlines()[-1]) | {"process_s": time.perf_counter() - start})
    return {"workload": "first_call", "call": "transitive_closure", "vertices": n, "edges": m,
            "pairs": runs[-1]["pairs"], "seconds": runs[-1]["first_s"], "runs": runs,
            "target_s": TARGETS["first_call", "transitive_closure"],
            "meets_target": runs[-1]["first_s"] <= TARGETS["first_call", "transitive_closure"]}


def bench_datalog(backend: Any, backend_id: str, sizes: Sizes) -> list[dict]:
    rows = []
    for n, src, dst in closure_graphs(sizes.closure):
        s, d = datalog.transitive_closure(n, src, dst, backend=backend)
        check_closure(n, src, dst, s, d)
        times, _ = timed(lambda n=n, src=src, dst=dst: datalog.transitive_closure(n, src, dst, backend=backend),
                         nothing, sizes.reps)
        t = statistics.median(times)
        rows.append({"workload": "transitive_closure", "vertices": n, "edges": int(src.size), "pairs": int(s.size),
                     "seconds": t, "pairs_per_s": s.size / t, "check": "scipy BFS from every vertex"})
    n, trees = sizes.forest
    parent, child = random_forest(n, trees)
    want = forest_generations(n, parent, child)
    for dense in (None, False):
        def run(dense: bool | None = dense) -> tuple[np.ndarray, np.ndarray]:
            return datalog.same_generation(n, parent, child, backend=backend, dense=dense)

        got = run()
        require(all(np.array_equal(a, b) for a, b in zip(got, want)), f"same generation (dense={dense})")
        times, _ = timed(run, nothing, sizes.reps)
        t = statistics.median(times)
        bits = dense is None and n <= datalog_dense.MAX_VERTICES
        rows.append({"workload": "same_generation", "vertices": n, "trees": trees, "edges": int(child.size),
                     "pairs": int(want[0].size), "seconds": t, "pairs_per_s": want[0].size / t,
                     "path": "bit matrices (default)" if bits else "sorted relations",
                     "check": "pairs of one tree and depth"})
    rows.append(first_call(backend_id, *sizes.closure[0]))
    return rows


# ---- e-graphs and text -----------------------------------------------------------------------------
def bench_egraph(backend: Any, sizes: Sizes) -> list[dict]:
    """Congruence closure on a resident ``EGraph`` (its columns uploaded once) and by the plain call."""
    cols = egraph_columns(sizes.enodes_log2)
    name = f"2^{sizes.enodes_log2} e-nodes"
    with egraph.EGraph(*cols, backend=backend) as g:
        if sizes.python_egraph_check:
            want, judge = python_closure(*cols), "Python union-find"
        else:
            want, judge = g.sorted_congruence_closure(), "vyre's sorted path"
        require(np.array_equal(g.congruence_closure(), want), f"congruence closure differs from {judge}")
        path = g.path
        resident, labels = timed(g.congruence_closure, nothing, sizes.reps)
        require(np.array_equal(labels, want), "congruence closure (timed) differs")
    plain, _ = timed(lambda: egraph.congruence_closure(*cols, backend=backend), nothing, sizes.reps)
    target = TARGETS.get(("congruence_closure", name))
    row = {"workload": "congruence_closure", "enodes": int(cols[0].size), "path": path, "check": judge,
           "seconds": statistics.median(resident), "plain_call_s": statistics.median(plain)}
    if target is not None:
        row |= {"target_s": target, "meets_target": row["seconds"] <= target}
    return [row]


def python_find_many(hay: bytes, needles: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Every ``(offset, needle index)`` of every needle in ``hay``, overlaps included, sorted."""
    found = []
    for i, needle in enumerate(needles):
        at = hay.find(needle)
        while at >= 0:
            found.append((at, i))
            at = hay.find(needle, at + 1)
    found.sort()
    pairs = np.array(found, dtype=np.uint32).reshape(-1, 2)
    return pairs[:, 0], pairs[:, 1]


def bench_text(backend: Any, dev: Device, sizes: Sizes) -> list[dict]:
    """``find_all_many`` over a device array, timed to a device synchronize; checked on the prefix."""
    hay = haystack(sizes.text_bytes)
    needles = cut_needles(hay, sizes.needles)
    lens = np.array([len(x) for x in needles], dtype=np.int64)
    on_device = dev.put(hay)
    prefix = sizes.prefix_bytes
    want = python_find_many(hay[:prefix].tobytes(), needles)
    got = [dev.host(a) for a in text.find_all_many(on_device[:prefix], needles, backend=backend)]
    require(all(np.array_equal(a, b) for a, b in zip(got, want)), "find_all_many on the prefix differs from Python")
    full = [dev.host(a) for a in text.find_all_many(on_device, needles, backend=backend)]
    inside = full[0].astype(np.int64) + lens[full[1]] <= prefix
    require(all(np.array_equal(a[inside], b) for a, b in zip(full, want)), "find_all_many's matches in the prefix")
    times, _ = timed(lambda: text.find_all_many(on_device, needles, backend=backend), dev.sync, max(sizes.reps, 5))
    t = statistics.median(times)
    return [{"workload": "find_all_many", "path": f"vyre ({dev.kind} array in and out)", "bytes": hay.size,
             "needles": len(needles), "matches": int(full[0].size), "seconds": t, "gb_per_s": hay.size / t / 1e9,
             "target_gb_per_s": FIND_MANY_TARGET_GBS, "meets_target": hay.size / t / 1e9 >= FIND_MANY_TARGET_GBS,
             "check": f"Python bytes.find on the first {prefix:,} bytes"}]


# ---- the section -----------------------------------------------------------------------------------
def run(backend: Any, backend_id: str, sizes: Sizes) -> dict[str, list[dict]]:
    """Every row of the section (graphs, Datalog, e-graphs, text), checked and timed."""
    dev = Device(backend)
    return {"graphs": bench_graphs(backend, dev, sizes), "datalog": bench_datalog(backend, backend_id, sizes),
            "egraph": bench_egraph(backend, sizes), "text": bench_text(backend, dev, sizes)}


def verdict(row: dict) -> str:
    """The row's target and whether it was met, for the table."""
    if "target_s" in row:
        return f"<= {row['target_s'] * 1e3:g} ms: {'met' if row['meets_target'] else 'NOT met'}"
    if "target_gb_per_s" in row:
        return f">= {row['target_gb_per_s']:g} GB/s: {'met' if row['meets_target'] else 'NOT met'}"
    return ""


def print_rows(result: dict[str, list[dict]]) -> None:
    """The section's table: time (and rate), next to the target."""
    print("# graphs: median over the roots (and calls); GTEPS as Graph500 counts it: input edge tuples in the "
          "reached component, each undirected edge once, harmonic mean over the roots")
    print(f"{'input':14} {'workload':20} {'path':54} {'ms':>10} {'rate':>16}  target")
    for r in result["graphs"]:
        rate = f"{r['gteps']:.3g} GTEPS" if "gteps" in r else ""
        print(f"{r['graph']:14} {r['workload']:20} {r['path']:54} {r['seconds'] * 1e3:10.3f} {rate:>16}  {verdict(r)}")
        if "levels" in r:
            print(f"{'':14} {'':20} roots {r['roots']}: ms {[round(t * 1e3, 3) for t in r['per_root_s']]}, "
                  f"levels {r['levels']}, edge tuples traversed {r['traversed_tuples']}"
                  + (f"; neighbours_by_degree {r['build_s'] * 1e3:.1f} ms" if "build_s" in r else ""))
    for r in result["datalog"]:
        what = f"{r['vertices']}/{r['edges']}" if "edges" in r else str(r["vertices"])
        rate = f"{r['pairs_per_s'] / 1e6:.3g} M pairs/s" if "pairs_per_s" in r else ""
        path = r.get("path", "fresh process, 2nd run" if r["workload"] == "first_call" else "")
        print(f"{what:14} {r['workload']:20} {path:54} {r['seconds'] * 1e3:10.3f} {rate:>16}  {verdict(r)}"
              f"  ({r['pairs']:,} pairs)")
    for r in result["egraph"]:
        print(f"{r['enodes']:<14} {r['workload']:20} {'vyre (EGraph, ' + r['path'] + ' path)':54} "
              f"{r['seconds'] * 1e3:10.3f} {'':>16}  {verdict(r)}  (plain call {r['plain_call_s'] * 1e3:.3f} ms)")
    for r in result["text"]:
        print(f"{r['bytes']:<14} {r['workload']:20} {r['path']:54} {r['seconds'] * 1e3:10.3f} "
              f"{r['gb_per_s']:11.3g} GB/s  {verdict(r)}  ({r['matches']:,} matches)")
