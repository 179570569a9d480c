"""Speed of the CPU reference oracle (median of a few runs).

1. element-wise U32 arithmetic over 2^20 invocations;
2. a 256-bin histogram over 2^20 elements: 256-invocation workgroups, workgroup atomics,
   a barrier, then global atomics;
3. long fixed points: BFS along a 100,000-vertex path (100,000 levels) with the oracle's host
   search, BFS along a 2,000-vertex path interpreting the IR level loop (``host_bfs`` off), and the
   transitive closure of a 200-vertex path (dense Datalog IR programs).

Run: ``python benchmarks/oracle_speed.py [--elements N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable

import numpy as np

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.lib import datalog, graph
from vyre.reference.backend import ReferenceBackend
from vyre.reference.interpreter import execute

U32 = DataType.U32
WG = 256


def elementwise(n: int) -> tuple[Program, Callable[[], dict[str, np.ndarray]]]:
    """``out[i] = ((a[i] * 2654435761) ^ (b[i] >> 7)) + rotate_left(a[i], 13)`` with a bounds guard."""
    i, a, b = Expr.invocation_id(0), Expr.var("a"), Expr.var("b")
    body = [
        Node.if_(Expr.lt(i, Expr.buf_len("out")), [
            Node.let("a", Expr.load("x", i)),
            Node.let("b", Expr.load("y", i)),
            Node.store("out", i, Expr.add(Expr.bitxor(Expr.mul(a, Expr.u32(2654435761)), Expr.shr(b, Expr.u32(7))),
                                          Expr.rotate_left(a, Expr.u32(13)))),
        ]),
    ]
    program = Program([BufferDecl.read("x", 0, U32), BufferDecl.read("y", 1, U32),
                       BufferDecl.output("out", 2, U32, n)], (WG, 1, 1), body, name="elementwise")
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 2**32, n, dtype=np.uint32), rng.integers(0, 2**32, n, dtype=np.uint32)
    return program, lambda: {"x": x, "y": y, "out": np.zeros(n, np.uint32)}


def histogram(n: int) -> tuple[Program, Callable[[], dict[str, np.ndarray]]]:
    """Per-workgroup histogram in workgroup memory, merged into the global one with atomics."""
    i, lid = Expr.invocation_id(0), Expr.local_id(0)
    body = [
        Node.if_(Expr.lt(i, Expr.buf_len("data")), [
            Node.let("bin", Expr.bitand(Expr.load("data", i), Expr.u32(WG - 1))),
            Node.let("_", Expr.atomic(AtomicOp.ADD, "local", Expr.var("bin"), Expr.u32(1))),
        ]),
        Node.barrier(),
        Node.let("count", Expr.load("local", lid)),
        Node.if_(Expr.ne(Expr.var("count"), Expr.u32(0)), [
            Node.let("_g", Expr.atomic(AtomicOp.ADD, "hist", lid, Expr.var("count"))),
        ]),
    ]
    program = Program([BufferDecl.read("data", 0, U32), BufferDecl.output("hist", 1, U32, WG),
                       BufferDecl.workgroup("local", WG, U32)], (WG, 1, 1), body, name="histogram")
    data = np.random.default_rng(1).integers(0, 2**32, n, dtype=np.uint32)
    return program, lambda: {"data": data, "hist": np.zeros(WG, np.uint32)}


def median_seconds(program: Program, make_arrays: Callable[[], dict[str, np.ndarray]], n: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        arrays = make_arrays()
        start = time.perf_counter()
        execute(program, arrays, (-(-n // WG), 1, 1))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def path_bfs(n: int, host_bfs: bool) -> Callable[[], None]:
    """BFS from vertex 0 along the directed path 0 -> ... -> n-1 on a fresh oracle, levels checked."""
    indptr = np.minimum(np.arange(n + 1), n - 1).astype(np.uint32)
    indices = np.arange(1, n, dtype=np.uint32)

    def run() -> None:
        backend = ReferenceBackend()
        backend.host_bfs = host_bfs
        try:
            assert np.array_equal(graph.bfs(indptr, indices, 0, backend=backend), np.arange(n, dtype=np.uint32))
        finally:
            backend.shutdown()
    return run


def path_closure(n: int) -> Callable[[], None]:
    """The transitive closure of the path 0 -> ... -> n-1 on a fresh oracle, pairs counted."""
    def run() -> None:
        backend = ReferenceBackend()
        try:
            a, _ = datalog.transitive_closure(n, np.arange(n - 1), np.arange(1, n), backend=backend)
            assert a.size == n * (n - 1) // 2
        finally:
            backend.shutdown()
    return run


def median_call_seconds(run: Callable[[], None], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=1 << 20)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n = args.elements
    print(f"vyre reference oracle, {n} elements, median of {args.repeat} runs "
          f"({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, numpy {np.__version__})")
    workloads = (("elementwise u32", elementwise, 0.5), ("histogram wg+global atomics", histogram, 3.0))
    for name, workload, target in workloads:
        program, make = workload(n)
        seconds = median_seconds(program, make, n, args.repeat)
        print(f"  {name:<30} {seconds * 1e3:8.1f} ms   (target < {target * 1e3:.0f} ms)")
    # (name, run, levels or rounds, target seconds): the IR level loop is timed on a shorter path
    fixpoints = (("BFS, 100,000-vertex path, host search", path_bfs(100_000, True), 100_000, 2.0),
                 ("BFS, 2,000-vertex path, IR level loop", path_bfs(2_000, False), 2_000, None),
                 ("closure of a 200-vertex path", path_closure(200), 200, 2.0))
    print("long fixed points (a fresh oracle each run):")
    for name, run, levels, target in fixpoints:
        seconds = median_call_seconds(run, args.repeat)
        bound = f", target < {target * 1e3:.0f} ms" if target else ""
        print(f"  {name:<40} {seconds * 1e3:8.1f} ms   ({seconds / levels * 1e6:.1f} us per level or round{bound})")


if __name__ == "__main__":
    main()
