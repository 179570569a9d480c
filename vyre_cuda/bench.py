"""Measurements behind ``vyre bench`` (also used by ``benchmarks/bench_cuda.py``).

- Streaming: u32 XOR of two buffers and f32 SAXPY through resident handles and
  ``dispatch_resident`` (one element per invocation, and 4 per invocation), against the card's
  device-to-device copy bandwidth and CuPy's own op on the same data. Callers may add baselines.
- Compile: the first dispatch of a never-seen program in a fresh process with an empty cache
  (cold), then in another fresh process with that cache (warm).
- Launch: host µs per ``dispatch_resident`` of a tiny 4-buffer kernel against a bare
  ``LaunchPlan.launch`` of the same kernel in each launch mode.

Device times: CUDA events around each call after warm-up, median. Host times: median of 5
batches of un-synchronised calls after warm-up.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vyre.driver.config import DispatchConfig
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre_cuda._runtime.settings import CACHE_DIR

U32, F32 = DataType.U32, DataType.F32
ROOT = Path(__file__).resolve().parents[1]
IMPLS = ("vyre", "vyre_x4", "cupy_op", "cupy_raw", "torch")  # table order; absent columns are skipped

#: a baseline: given the workload's device arrays (CuPy), ``(fn, stream)`` to time with CUDA events
Baseline = Callable[[list[Any]], tuple[Callable[[], object], Any]]


# ---- timing -----------------------------------------------------------------------------------------
def device_ms(fn: Callable[[], object], stream: Any, reps: int, warmup: int = 3) -> float:
    """Median device time (ms) of ``fn`` measured with CUDA events on ``stream``."""
    import cupy

    for _ in range(warmup):
        fn()
    stream.synchronize()
    times = []
    for _ in range(reps):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        fn()
        end.record(stream)
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end))
    return statistics.median(times)


def wall_s(fn: Callable[[], object], reps: int) -> float:
    """Median wall seconds of a synchronous ``fn`` over ``reps`` calls, after one warm-up call."""
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def host_us(fn: Callable[[], object], sync: Callable[[], object], calls: int) -> float:
    """Median host time per call (µs) over 5 batches of ``calls`` un-synchronised calls."""
    for _ in range(200):
        fn()
    sync()
    batches = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        batches.append((time.perf_counter() - t0) / calls * 1e6)
        sync()
    return statistics.median(batches)


# ---- programs -----------------------------------------------------------------------------------------
def xor_program() -> Program:
    i = Expr.var("i")
    return Program([BufferDecl.read("a", 0, U32), BufferDecl.read("b", 1, U32), BufferDecl.read_write("c", 2, U32)],
                   (256, 1, 1),
                   [Node.let("i", Expr.invocation_id(0)),
                    Node.store("c", i, Expr.bitxor(Expr.load("a", i), Expr.load("b", i)))], name="bench_xor")


def saxpy_program() -> Program:
    i = Expr.var("i")
    return Program([BufferDecl.uniform("alpha", 0, F32, 1), BufferDecl.read("x", 1, F32),
                    BufferDecl.read_write("y", 2, F32)],
                   (256, 1, 1),
                   [Node.let("i", Expr.invocation_id(0)),
                    Node.store("y", i, _saxpy_value(i))], name="bench_saxpy")


def _saxpy_value(at: Expr) -> Expr:
    return Expr.add(Expr.mul(Expr.load("alpha", Expr.u32(0)), Expr.load("x", at)), Expr.load("y", at))


def unrolled(name: str, decls: tuple[BufferDecl, ...], n: int, ways: int,
             store: Callable[[Expr], tuple[str, Expr]]) -> Program:
    """Each invocation handles ``ways`` elements ``n / ways`` apart: every load first, then the stores.

    The same work as the one-element program, written so each thread keeps several loads in flight.
    """
    step = n // ways
    i = Expr.invocation_id(0)
    idx = [Expr.add(i, Expr.u32(k * step)) if k else i for k in range(ways)]
    lets, stores = [], []
    for k, at in enumerate(idx):
        target, value = store(at)
        lets.append(Node.let(f"v{k}", value))
        stores.append(Node.store(target, at, Expr.var(f"v{k}")))
    return Program(decls, (256, 1, 1), lets + stores, name=f"{name}_x{ways}")


def xor_unrolled(n: int, ways: int = 4) -> Program:
    return unrolled("bench_xor", xor_program().buffers, n, ways,
                    lambda at: ("c", Expr.bitxor(Expr.load("a", at), Expr.load("b", at))))


def saxpy_unrolled(n: int, ways: int = 4) -> Program:
    return unrolled("bench_saxpy", saxpy_program().buffers, n, ways, lambda at: ("y", _saxpy_value(at)))


def tiny_program() -> Program:
    """``d += a ^ b`` over 4 buffers (5 kernel arguments with the parameter block): launch overhead."""
    i = Expr.var("i")
    return Program([BufferDecl.read("a", 0, U32), BufferDecl.read("b", 1, U32), BufferDecl.read("c", 2, U32),
                    BufferDecl.read_write("d", 3, U32)],
                   (64, 1, 1),
                   [Node.let("i", Expr.invocation_id(0)),
                    Node.store("d", i, Expr.add(Expr.load("d", i), Expr.bitxor(Expr.load("a", i),
                                                                               Expr.load("b", i))))],
                   name="bench_tiny")


# ---- streaming workloads ------------------------------------------------------------------------------
@dataclass
class Workload:
    """A streaming kernel: the program, its 4-way unrolled twin, host data and CuPy's op (in place)."""

    name: str
    program: Program
    program_x4: Program
    host: list[np.ndarray]
    cupy_op: Callable[..., object]
    moved_bytes: int  # bytes read + written per call (3 buffers of n words)


def workloads(n: int, rng: np.random.Generator) -> dict[str, Workload]:
    """``xor`` (c = a ^ b, u32) and ``saxpy`` (y = alpha * x + y, f32) over ``n`` elements."""
    import cupy

    a, b = (rng.integers(0, 2**32, n, dtype=np.uint32) for _ in range(2))
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    return {
        "xor": Workload("xor u32", xor_program(), xor_unrolled(n), [a, b, np.zeros(n, np.uint32)],
                        lambda ga, gb, gc: cupy.bitwise_xor(ga, gb, out=gc), 3 * n * 4),
        "saxpy": Workload("saxpy f32", saxpy_program(), saxpy_unrolled(n), [np.array([1.5], np.float32), x, y],
                          lambda al, gx, gy: gy.__iadd__(al * gx), 3 * n * 4),
    }


def streaming(be: Any, wl: Workload, reps: int, baselines: Mapping[str, Baseline] | None = None) -> dict:
    """Device ms and GB/s of ``wl``: vyre (resident, 1 and 4 elements per invocation), CuPy's op, baselines."""
    import cupy

    n = len(wl.host[-1])
    handles = [be.allocate_resident(a.nbytes) for a in wl.host]
    try:
        for h, a in zip(handles, wl.host):
            be.upload_resident(h, a)
        row: dict = {"workload": wl.name, "bytes_per_call": wl.moved_bytes}
        row["vyre_ms"] = device_ms(lambda: be.dispatch_resident(wl.program, handles), be.stream, reps)
        x4 = DispatchConfig(grid=(-(-n // (4 * 256)), 1, 1))
        row["vyre_x4_ms"] = device_ms(lambda: be.dispatch_resident(wl.program_x4, handles, x4), be.stream, reps)
    finally:
        for h in handles:
            be.free_resident(h)
    arrays = [cupy.asarray(a) for a in wl.host]
    row["cupy_op_ms"] = device_ms(lambda: wl.cupy_op(*arrays), cupy.cuda.get_current_stream(), reps)
    for label, make in (baselines or {}).items():
        try:
            fn, stream = make(arrays)
            row[f"{label}_ms"] = device_ms(fn, stream, reps)
        except Exception as exc:  # noqa: BLE001 - an optional baseline (NVRTC, torch) may be missing
            row[f"{label}_error"] = f"{type(exc).__name__}: {exc}"[:200]
    for key in [k for k in row if k.endswith("_ms")]:
        row[key.replace("_ms", "_gbps")] = wl.moved_bytes / (row[key] * 1e-3) / 1e9
    return row


def copy_bandwidth(reps: int, nbytes: int = 1 << 30) -> float:
    """Device-to-device copy of an ``nbytes`` buffer: 2 x bytes / time (GB/s, read + write)."""
    import cupy

    src = cupy.ones(nbytes // 4, dtype=cupy.uint32)
    dst = cupy.empty_like(src)
    ms = device_ms(lambda: dst.__setitem__(Ellipsis, src), cupy.cuda.get_current_stream(), reps)
    return 2 * nbytes / (ms * 1e-3) / 1e9


# ---- compile times ------------------------------------------------------------------------------------
_COMPILE_CHILD = r"""
import json, sys, time
t_start = time.perf_counter()
import numpy as np
from vyre_cuda.plugin import create_backend
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
be = create_backend()
t_ready = time.perf_counter()
salt = int(sys.argv[1])
i = Expr.var("i")
p = Program([BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("o", 1, DataType.U32, 4096)], (128, 1, 1),
            [Node.let("i", Expr.invocation_id(0)),
             Node.store("o", i, Expr.bitxor(Expr.mul(Expr.load("a", i), Expr.u32(salt)), Expr.u32(salt >> 3)))],
            name="compile_probe")
a = np.arange(4096, dtype=np.uint32)
t0 = time.perf_counter()
be.dispatch(p, [a])
t1 = time.perf_counter()
be.dispatch(p, [a])
t2 = time.perf_counter()
prep = be.prepared(p)
m = be.metrics()
print(json.dumps({"import_and_context_ms": (t_ready - t_start) * 1e3, "first_dispatch_ms": (t1 - t0) * 1e3,
                  "emit_ms": prep.emit_ns / 1e6, "load_ms": prep.load_ns / 1e6, "second_dispatch_ms": (t2 - t1) * 1e3,
                  "disk_hits": m.get("cuda_disk_cache_hits", 0), "disk_misses": m.get("cuda_disk_cache_misses", 0)}))
"""


def compile_times() -> dict:
    """Cold (empty caches) and warm (fresh process, warm disk cache) first-dispatch times of a new program."""
    salt = int.from_bytes(os.urandom(3), "little") | 1
    with tempfile.TemporaryDirectory() as cache:
        env = {k: v for k, v in os.environ.items() if k != "CUDA_CACHE_PATH"}
        env[CACHE_DIR] = cache
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        out = {}
        for label in ("cold", "warm"):
            proc = subprocess.run([sys.executable, "-c", _COMPILE_CHILD, str(salt)], env=env, capture_output=True,
                                  text=True, timeout=300, check=False)
            out[label] = ({"error": proc.stderr[-800:]} if proc.returncode
                          else json.loads(proc.stdout.strip().splitlines()[-1]))
        return out


# ---- launch overhead ----------------------------------------------------------------------------------
def launch_overhead(be: Any, calls: int) -> dict:
    """Host µs per launch: ``dispatch_resident`` (4 buffers) and a bare ``LaunchPlan.launch`` per mode."""
    from vyre_cuda._runtime.launch import LAUNCH_MODES, LaunchPlan

    program = tiny_program()
    n = 256
    handles = [be.allocate_resident(n * 4) for _ in range(4)]
    try:
        for h in handles:
            be.upload_resident(h, np.ones(n, np.uint32))
        sync = be.stream.synchronize
        out: dict = {"vyre_dispatch_resident_us": host_us(lambda: be.dispatch_resident(program, handles), sync, calls)}
        prep = be.prepared(program)
        out["default_launch_mode"] = prep.plan.mode
        for mode in LAUNCH_MODES:
            plan = LaunchPlan(prep.kernel.ptr, prep.plan.grid, prep.block, prep.dynamic_bytes, prep.plan.nargs,
                              "bench", mode=mode)
            plan.bind_values(prep.plan.bound)
            if plan.mode == mode:
                out[f"launchplan_{mode}_us"] = host_us(lambda p=plan: p.launch(be.stream.ptr), sync, calls)
    finally:
        for h in handles:
            be.free_resident(h)
    return out


# ---- the whole run ------------------------------------------------------------------------------------
def run(be: Any, quick: bool = False, baselines: Mapping[str, Mapping[str, Baseline]] | None = None,
        progress: Callable[[str], None] = lambda _msg: None) -> dict:
    """Every measurement on backend ``be``; ``baselines[workload]`` adds columns to a streaming row."""
    reps = 20 if quick else 30
    n = (1 << 24) if quick else (1 << 26)
    results: dict = {"card": be.info.name, "cc": be.info.compute_capability, "driver": be.info.driver_version,
                     "n": n, "reps": reps}
    progress("measuring device-to-device copy bandwidth")
    results["copy_gbps"] = copy_bandwidth(reps)
    for key, wl in workloads(n, np.random.default_rng()).items():
        progress(f"measuring {wl.name} ({n} elements)")
        row = streaming(be, wl, reps, (baselines or {}).get(key))
        for impl in ("vyre", "vyre_x4"):
            row[f"{impl}_pct_of_copy"] = 100 * row[f"{impl}_gbps"] / results["copy_gbps"]
        results[key] = row
    progress("measuring compile times (two fresh processes)")
    results["compile"] = compile_times()
    progress("measuring launch overhead")
    results["launch"] = launch_overhead(be, 2000 if quick else 10000)
    return results


def print_table(r: dict) -> None:
    """The results as a table headed by the card's name."""
    print(f"\nvyre-cuda benchmarks on {r['card']} (sm_{r['cc']}, driver {r['driver']}), n={r['n']}, "
          f"median of {r['reps']}")
    print(f"device-to-device copy bandwidth: {r['copy_gbps']:.0f} GB/s")
    print(f"{'workload':<12}{'impl':<14}{'ms':>9}{'GB/s':>9}{'% copy':>9}")
    for key in ("xor", "saxpy"):
        row = r[key]
        for impl in IMPLS:
            if f"{impl}_ms" in row:
                gbps = row[f"{impl}_gbps"]
                print(f"{row['workload']:<12}{impl:<14}{row[f'{impl}_ms']:>9.3f}{gbps:>9.0f}"
                      f"{100 * gbps / r['copy_gbps']:>8.1f}%")
            elif f"{impl}_error" in row:
                print(f"{row['workload']:<12}{impl:<14}  unavailable: {row[f'{impl}_error']}")
    for label, c in r["compile"].items():
        if "error" in c:
            print(f"compile {label}: ERROR {c['error']}")
            continue
        print(f"compile {label:<5}: first dispatch {c['first_dispatch_ms']:.2f} ms (emit {c['emit_ms']:.2f} ms, "
              f"load {c['load_ms']:.2f} ms), second {c['second_dispatch_ms']:.3f} ms, "
              f"disk hits {c['disk_hits']} misses {c['disk_misses']}, "
              f"import+context {c['import_and_context_ms']:.0f} ms")
    for k, v in r["launch"].items():
        print(f"launch {k}: {v:.2f}" if isinstance(v, float) else f"launch {k}: {v}")


def write_json(results: dict, path: str | None, name: str = "vyre_bench.json") -> str | None:
    """Write ``results`` to ``path``, else to ``$OUT/name`` when ``OUT`` is set; the path written, or None."""
    target = path or (os.path.join(os.environ["OUT"], name) if os.environ.get("OUT") else None)
    if target:
        Path(target).write_text(json.dumps(results, indent=2, default=str))
    return target


def add_chart_arguments(parser: Any, png: Path) -> None:
    """``--json`` (where results go), ``--chart`` (redraw from a JSON instead of measuring), ``--png``."""
    parser.add_argument("--json", default=None, help="where to write the results (default $OUT/<bench>.json)")
    parser.add_argument("--chart", help="draw the chart from this JSON instead of measuring (matplotlib)")
    parser.add_argument("--png", default=str(png), help="chart output")


def redraw_if_asked(args: Any, draw: Callable[[dict, Path], object]) -> bool:
    """Draw the chart from ``args.chart``'s JSON when given (True), else do nothing (False)."""
    if not args.chart:
        return False
    draw(json.loads(Path(args.chart).read_text()), Path(args.png))
    return True


__all__ = ["Baseline", "Workload", "add_chart_arguments", "compile_times", "copy_bandwidth", "device_ms",
           "host_us", "launch_overhead", "print_table", "redraw_if_asked", "run", "saxpy_program", "saxpy_unrolled",
           "streaming", "tiny_program", "unrolled", "workloads", "write_json", "xor_program", "xor_unrolled"]
