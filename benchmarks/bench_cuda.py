"""vyre-cuda against CuPy, hand-written CuPy RawKernels, PyTorch and the card's copy bandwidth.

Run on a GPU machine: ``python benchmarks/bench_cuda.py [--quick]``. Prints one table headed by the
card's name and writes ``$OUT/bench_cuda.json`` (or ``--json PATH``) with every number.

Workloads: (a) u32 XOR of two 256 MiB buffers, (b) f32 SAXPY over 2**26 elements, both through
resident handles and ``dispatch_resident``; (c) compile: emit + load of a never-seen program,
a second dispatch, and a fresh process with a warm disk cache; (d) host time per launch.
Device times are CUDA events around each call, after warm-up, median of >= 20 calls.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vyre.driver.config import DispatchConfig  # noqa: E402
from vyre.ir import BufferDecl, DataType, Expr, Node, Program  # noqa: E402

U32, F32 = DataType.U32, DataType.F32
MiB = 1 << 20


# ---- timing -----------------------------------------------------------------------------------------
def device_ms(fn: Callable[[], object], stream, reps: int, warmup: int = 3) -> float:
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


def host_us(fn: Callable[[], object], sync: Callable[[], object], calls: int) -> float:
    """Median host time per call (µs) over 5 batches of ``calls`` un-synchronised calls."""
    for _ in range(50):
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
                    Node.store("y", i, Expr.add(Expr.mul(Expr.load("alpha", Expr.u32(0)), Expr.load("x", i)),
                                                Expr.load("y", i)))], name="bench_saxpy")


def unrolled(name: str, decls: list[BufferDecl], n: int, ways: int,
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
    return unrolled("bench_saxpy", saxpy_program().buffers, n, ways,
                    lambda at: ("y", Expr.add(Expr.mul(Expr.load("alpha", Expr.u32(0)), Expr.load("x", at)),
                                              Expr.load("y", at))))


def tiny_program() -> Program:
    i = Expr.var("i")
    return Program([BufferDecl.read("a", 0, U32), BufferDecl.read("b", 1, U32), BufferDecl.read("c", 2, U32),
                    BufferDecl.read_write("d", 3, U32)],
                   (64, 1, 1),
                   [Node.let("i", Expr.invocation_id(0)),
                    Node.store("d", i, Expr.add(Expr.load("d", i), Expr.bitxor(Expr.load("a", i),
                                                                               Expr.load("b", i))))],
                   name="bench_tiny")


RAW_SRC = r"""
extern "C" __global__ void xor_k(const unsigned* a, const unsigned* b, unsigned* c, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] ^ b[i]; }
extern "C" __global__ void saxpy_k(const float* alpha, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = __fadd_rn(__fmul_rn(alpha[0], x[i]), y[i]); }
extern "C" __global__ void tiny_k(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* d,
                                  const unsigned* p) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < p[1]) d[i] += a[i] ^ b[i]; }
"""


# ---- workloads ---------------------------------------------------------------------------------------
def copy_bandwidth(reps: int) -> float:
    """Device-to-device copy of a 1 GiB buffer: 2 x bytes / time (GB/s)."""
    import cupy

    src = cupy.ones(1 << 28, dtype=cupy.uint32)
    dst = cupy.empty_like(src)
    stream = cupy.cuda.get_current_stream()
    ms = device_ms(lambda: dst.__setitem__(Ellipsis, src), stream, reps)
    return 2 * (1 << 30) / (ms * 1e-3) / 1e9


def streaming(be, name: str, program: Program, n: int, host: list[np.ndarray], raw_name: str,
              cupy_op: Callable, torch_op: Callable | None, reps: int, program_x4: Program | None = None) -> dict:
    """Device time and GB/s of a streaming kernel: vyre (resident), CuPy op, CuPy RawKernel, torch."""
    import cupy

    nbytes = 3 * n * 4
    handles = [be.allocate_resident(a.nbytes) for a in host]
    for h, a in zip(handles, host):
        be.upload_resident(h, a)
    row: dict = {"workload": name, "bytes_per_call": nbytes}
    row["vyre_ms"] = device_ms(lambda: be.dispatch_resident(program, handles), be.stream, reps)
    if program_x4 is not None:
        grid = DispatchConfig(grid=(-(-n // (4 * 256)), 1, 1))
        row["vyre_x4_ms"] = device_ms(lambda: be.dispatch_resident(program_x4, handles, grid), be.stream, reps)
    garrs = [cupy.asarray(a) for a in host]
    stream = cupy.cuda.get_current_stream()
    row["cupy_op_ms"] = device_ms(lambda: cupy_op(*garrs), stream, reps)
    try:
        kernel = cupy.RawModule(code=RAW_SRC).get_function(raw_name)
        grid = ((n + 255) // 256,)
        row["cupy_raw_ms"] = device_ms(lambda: kernel(grid, (256,), (*garrs, np.uint32(n))), stream, reps)
    except Exception as exc:  # noqa: BLE001 - NVRTC may be missing
        row["cupy_raw_error"] = f"{type(exc).__name__}: {exc}"[:200]
    if torch_op is not None:
        import torch

        # torch has no CUDA uint32 bitwise ops: use int32 views (same bits, same bytes moved)
        tarrs = [torch.as_tensor(g.view(cupy.int32) if g.dtype == cupy.uint32 else g, device="cuda") for g in garrs]
        ptr = torch.cuda.current_stream().cuda_stream
        ts = cupy.cuda.ExternalStream(ptr) if ptr else cupy.cuda.Stream.null
        row["torch_ms"] = device_ms(lambda: torch_op(*tarrs), ts, reps)
    for h in handles:
        be.free_resident(h)
    for key in [k for k in row if k.endswith("_ms")]:
        row[key.replace("_ms", "_gbps")] = nbytes / (row[key] * 1e-3) / 1e9
    return row  # alpha (4 bytes) is not counted: 3 buffers of n words move per call


CHILD = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
t_start = time.perf_counter()
from vyre_cuda.plugin import create_backend
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
be = create_backend()
import cupy
cupy.cuda.runtime.free(0)
t_ready = time.perf_counter()
salt = int(sys.argv[2])
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
    """Cold (empty caches) and warm (fresh process, warm disk cache) first-dispatch times."""
    salt = int.from_bytes(os.urandom(3), "little") | 1
    with tempfile.TemporaryDirectory() as cache:
        env = {k: v for k, v in os.environ.items() if k != "CUDA_CACHE_PATH"}
        env["VYRE_CUDA_CACHE_DIR"] = cache
        out = {}
        for label in ("cold", "warm"):
            proc = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), str(salt)], env=env, capture_output=True,
                                  text=True, timeout=300)
            if proc.returncode:
                out[label] = {"error": proc.stderr[-800:]}
            else:
                out[label] = json.loads(proc.stdout.strip().splitlines()[-1])
        return out


def launch_overhead(be, calls: int) -> dict:
    """Host µs per launch: dispatch_resident (4 buffers), CuPy RawKernel (5 args), bare cuLaunchKernel."""
    import cupy

    program = tiny_program()
    n = 256
    handles = [be.allocate_resident(n * 4) for _ in range(4)]
    for h in handles:
        be.upload_resident(h, np.ones(n, np.uint32))
    out = {"vyre_dispatch_resident_us": host_us(lambda: be.dispatch_resident(program, handles),
                                                be.stream.synchronize, calls)}
    from vyre_cuda.launch import LAUNCH_MODES, LaunchPlan

    prep = be.prepared(program)
    out["default_launch_mode"] = prep.plan.mode
    for mode in LAUNCH_MODES:
        plan = LaunchPlan(prep.kernel.ptr, prep.plan.grid, prep.block, 0, prep.plan.nargs, "bench", mode=mode)
        plan.bind_values(prep.plan._bound)
        if plan.mode == mode:
            out[f"launchplan_{mode}_us"] = host_us(lambda p=plan: p.launch(be.stream.ptr), be.stream.synchronize,
                                                   calls)
    try:
        kernel = cupy.RawModule(code=RAW_SRC).get_function("tiny_k")
        g = [cupy.ones(n, cupy.uint32) for _ in range(4)] + [cupy.asarray(np.array([n, n, n, n, n], np.uint32))]
        stream = cupy.cuda.Stream(non_blocking=True)
        out["cupy_rawkernel_5args_us"] = host_us(lambda: kernel((4,), (64,), tuple(g), stream=stream),
                                                 stream.synchronize, calls)
    except Exception as exc:  # noqa: BLE001
        out["cupy_rawkernel_error"] = f"{type(exc).__name__}: {exc}"[:200]
    for h in handles:
        be.free_resident(h)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller buffers and fewer repetitions")
    parser.add_argument("--json", default=None, help="where to write the JSON results")
    args = parser.parse_args()
    reps = 20 if args.quick else 30
    n = (1 << 24) if args.quick else (1 << 26)
    from vyre_cuda.plugin import create_backend

    be = create_backend()
    try:
        import torch

        torch_ok = torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        torch_ok = False
    rng = np.random.default_rng()
    results: dict = {"card": be.info.name, "cc": be.info.compute_capability, "driver": be.info.driver_version,
                     "n": n, "reps": reps}
    results["copy_gbps"] = copy_bandwidth(reps)
    a, b = (rng.integers(0, 2**32, n, dtype=np.uint32) for _ in range(2))
    results["xor"] = streaming(
        be, "xor u32", xor_program(), n, [a, b, np.zeros(n, np.uint32)], "xor_k",
        lambda x, y, z: __import__("cupy").bitwise_xor(x, y, out=z),
        (lambda x, y, z: __import__("torch").bitwise_xor(x, y, out=z)) if torch_ok else None, reps,
        xor_unrolled(n))
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    alpha = np.array([1.5], np.float32)
    results["saxpy"] = streaming(
        be, "saxpy f32", saxpy_program(), n, [alpha, x, y], "saxpy_k",
        lambda al, xx, yy: yy.__iadd__(al * xx),
        (lambda al, xx, yy: yy.add_(xx, alpha=1.5)) if torch_ok else None, reps, saxpy_unrolled(n))
    for key in ("xor", "saxpy"):
        for impl in ("vyre", "vyre_x4"):
            if f"{impl}_gbps" in results[key]:
                results[key][f"{impl}_pct_of_copy"] = 100 * results[key][f"{impl}_gbps"] / results["copy_gbps"]
    results["compile"] = compile_times()
    results["launch"] = launch_overhead(be, 2000 if args.quick else 10000)
    be.shutdown()
    print_table(results)
    target = args.json or (os.path.join(os.environ["OUT"], "bench_cuda.json") if os.environ.get("OUT") else None)
    if target:
        Path(target).write_text(json.dumps(results, indent=2, default=str))
        print(f"\nwrote {target}")


def print_table(r: dict) -> None:
    print(f"\nvyre-cuda benchmarks on {r['card']} (sm_{r['cc']}, driver {r['driver']}), n={r['n']}, "
          f"median of {r['reps']}")
    print(f"device-to-device copy bandwidth: {r['copy_gbps']:.0f} GB/s")
    print(f"{'workload':<12}{'impl':<14}{'ms':>9}{'GB/s':>9}{'% copy':>9}")
    for key in ("xor", "saxpy"):
        row = r[key]
        for impl in ("vyre", "vyre_x4", "cupy_op", "cupy_raw", "torch"):
            if f"{impl}_ms" in row:
                gbps = row[f"{impl}_gbps"]
                print(f"{row['workload']:<12}{impl:<14}{row[f'{impl}_ms']:>9.3f}{gbps:>9.0f}"
                      f"{100 * gbps / r['copy_gbps']:>8.1f}%")
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


if __name__ == "__main__":
    main()
