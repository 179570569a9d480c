"""Every path a user takes next to its best path, CuPy, torch and the copy bandwidth, in one run.

Run on a GPU machine: ``python benchmarks/bench_dispatch.py [--quick] [--json PATH]`` prints a table
headed by the card's name and writes the JSON (default ``$OUT/bench_dispatch.json``). Given a JSON,
``python benchmarks/bench_dispatch.py --chart PATH.json [--png docs/bench_dispatch.png]`` draws the
chart (needs matplotlib; the GPU machine need not have it).

Rows (one card, one process, side by side):

1. XOR of two 256 MiB u32 buffers into an ``output`` buffer with ``dispatch_resident``, next to the
   same program writing a ``read_write`` buffer, ``cupy.bitwise_xor(out=)``, ``torch.bitwise_xor(out=)``
   and a device-to-device copy of the same bytes: GB/s (two reads and a write) and % of copy bandwidth.
2. Host µs per launch of a 4-buffer kernel (three reads and an ``output``): ``CompiledPipeline.
   dispatch_resident`` and ``backend.dispatch_resident`` next to a CuPy ``RawKernel`` launch of the
   same PTX, ``cuLaunchKernel`` with pre-packed arguments and ``torch.bitwise_xor`` of the same size.
3. ``dispatch_sequence`` of the same 64 steps called again and again: wall µs a step including its
   one synchronisation, next to a compiled sequence's graph replay and a CuPy-captured graph of the
   64 launches.
4. Warm start: a fresh process with a warm disk cache, ms from ``acquire()`` returning to the first
   ``dispatch`` returning (median of 3 processes), next to the bare ``cuModuleLoadData`` of the cubin.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vyre.ir import BufferDecl, DataType, Expr, Node, Program  # noqa: E402
from vyre_cuda.bench import device_ms, host_us, wall_s  # noqa: E402  (CUDA-event medians; host µs per call)

U32 = DataType.U32
MiB = 1 << 20
STEPS = 64
TINY_N = 4096
LAUNCH_N = 256  # one workgroup: the device never holds the launches back


# ---- programs ---------------------------------------------------------------------------------------------
def xor_program(out_access: str, n: int) -> Program:
    """``c = a ^ b`` with ``c`` an ``output`` (of ``n`` elements) or a ``read_write`` buffer."""
    i = Expr.var("i")
    c = BufferDecl.output("c", 2, U32, n) if out_access == "output" else BufferDecl.read_write("c", 2, U32)
    return Program([BufferDecl.read("a", 0, U32), BufferDecl.read("b", 1, U32), c], (256, 1, 1),
                   [Node.let("i", Expr.invocation_id(0)),
                    Node.store("c", i, Expr.bitxor(Expr.load("a", i), Expr.load("b", i)))], name=f"xor_{out_access}")


def four_buffer_program(n: int) -> Program:
    """``d = (a ^ b) + c``: three reads and an ``output`` (5 kernel arguments with the parameter block)."""
    i = Expr.var("i")
    value = Expr.add(Expr.bitxor(Expr.load("a", i), Expr.load("b", i)), Expr.load("c", i))
    return Program([BufferDecl.read("a", 0, U32), BufferDecl.read("b", 1, U32), BufferDecl.read("c", 2, U32),
                    BufferDecl.output("d", 3, U32, n)], (256, 1, 1),
                   [Node.let("i", Expr.invocation_id(0)), Node.store("d", i, value)], name="four_buffers")


def step_program() -> Program:
    """``x = x * 3 + 1`` on a ``read_write`` buffer: one step of the sequence."""
    i = Expr.var("i")
    return Program([BufferDecl.read_write("x", 0, U32)], (256, 1, 1),
                   [Node.let("i", Expr.invocation_id(0)),
                    Node.store("x", i, Expr.add(Expr.mul(Expr.load("x", i), Expr.u32(3)), Expr.u32(1)))], name="step")


# ---- timing ---------------------------------------------------------------------------------------------
def wall_us(fn: Callable[[], object], reps: int) -> float:
    """Median wall µs of a synchronous ``fn`` after one warm-up call."""
    return wall_s(fn, reps) * 1e6


# ---- 1. bandwidth -----------------------------------------------------------------------------------------
def bandwidth(be, nbytes: int, reps: int) -> dict:
    import cupy

    n = nbytes // 4
    rng = np.random.default_rng(1)
    handles = [be.allocate_resident(nbytes) for _ in range(3)]
    for h in handles[:2]:
        be.upload_resident(h, rng.integers(0, 2**32, n, dtype=np.uint32))
    stream = be.stream
    gbs = {}
    traffic = 3 * nbytes
    for access in ("output", "read_write"):
        program = xor_program(access, n)
        ms = device_ms(lambda p=program: be.dispatch_resident(p, handles), stream, reps)
        gbs[f"vyre_xor_{access}"] = traffic / ms / 1e6
    a, b, c = (be.view(h, np.uint32) for h in handles)
    with stream:  # CuPy and torch run on the backend's stream, so each path is timed alike
        gbs["cupy_bitwise_xor"] = traffic / device_ms(lambda: cupy.bitwise_xor(a, b, out=c), stream, reps) / 1e6
        gbs["copy"] = 2 * nbytes / device_ms(lambda: c.data.copy_from_device_async(a.data, nbytes, stream),
                                            stream, reps) / 1e6
    try:
        import torch

        ta, tb, tc = (torch.from_dlpack(x.view(np.int32)) for x in (a, b, c))  # torch has no uint32 xor
        ts = torch.cuda.ExternalStream(stream.ptr)
        with torch.cuda.stream(ts):
            gbs["torch_bitwise_xor"] = traffic / device_ms(lambda: torch.bitwise_xor(ta, tb, out=tc), stream,
                                                           reps) / 1e6
    except Exception as exc:  # noqa: BLE001 - torch is optional
        gbs["torch_error"] = str(exc)
    for h in handles:
        be.free_resident(h)
    copy = gbs["copy"]
    return {"nbytes": nbytes, "gbps": {k: v for k, v in gbs.items() if isinstance(v, float)},
            "pct_of_copy": {k: 100 * v / copy for k, v in gbs.items() if isinstance(v, float)},
            **({"torch_error": gbs["torch_error"]} if "torch_error" in gbs else {})}


# ---- 2. host cost per launch ----------------------------------------------------------------------------
def launch_cost(be, calls: int, rounds: int = 3) -> dict:
    """Host µs per launch of each path, measured in ``rounds`` interleaved rounds (best round kept)."""
    import cupy

    from vyre_cuda import entry_name

    n = LAUNCH_N
    program = four_buffer_program(n)
    handles = [be.allocate_resident(n * 4) for _ in range(4)]
    for h in handles:
        be.upload_resident(h, np.arange(n, dtype=np.uint32))
    sync, stream = be.stream.synchronize, be.stream
    pipe = be.compile(program)
    pipe.dispatch_resident(handles)
    binding = pipe.resources.resident
    plan = binding.plan
    launch, args = plan.prebound(stream.ptr)
    saved = os.environ.get("VYRE_CUDA_LAUNCH")
    os.environ["VYRE_CUDA_LAUNCH"] = "pyctypes"  # the same pipeline launching through ctypes
    pipe_ctypes = be.compile(program)
    pipe_ctypes.dispatch_resident(handles)
    os.environ.pop("VYRE_CUDA_LAUNCH") if saved is None else os.environ.update(VYRE_CUDA_LAUNCH=saved)
    launch_ct, args_ct = pipe_ctypes.resources.resident.plan.prebound(stream.ptr)
    paths = {"pipeline_dispatch_resident": lambda: pipe.dispatch_resident(handles),
             "backend_dispatch_resident": lambda: be.dispatch_resident(program, handles),
             "pipeline_dispatch_resident_pyctypes": lambda: pipe_ctypes.dispatch_resident(handles),
             f"prepacked_launch_{plan.mode}": lambda: launch(*args),
             "prepacked_launch_pyctypes": lambda: launch_ct(*args_ct)}
    tmp = tempfile.TemporaryDirectory()
    path = Path(tmp.name) / "four.ptx"
    path.write_text(binding.prepared.ptx)
    raw = cupy.RawModule(path=str(path)).get_function(entry_name(program))
    ptrs = [*(buf.ptr for buf in binding.buffers), plan.params.ptr]
    kargs = tuple(cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(p, 16, None), 0) for p in ptrs)
    g, b = plan.grid, plan.block
    paths["cupy_rawkernel"] = lambda: raw(g, b, kargs, stream=stream)
    out: dict = {}
    try:
        import torch

        tx, ty = (torch.from_dlpack(be.view(h, np.float32)) for h in (handles[0], handles[1]))
        torch_stream = torch.cuda.ExternalStream(stream.ptr)

        def torch_add() -> None:
            with torch.cuda.stream(torch_stream):
                torch.add(tx, tx, out=ty)

        paths["torch_add"] = torch_add
    except Exception as exc:  # noqa: BLE001 - torch is optional
        out["torch_error"] = str(exc)
    best: dict[str, float] = {}
    for _ in range(rounds):
        for name, fn in paths.items():
            us = host_us(fn, sync, calls)
            best[name] = min(best.get(name, us), us)
    out = {**best, **out}
    tmp.cleanup()
    pipe.close()
    pipe_ctypes.close()
    for h in handles:
        be.free_resident(h)
    return out


# ---- 3. a repeated 64-step sequence ---------------------------------------------------------------------
def sequences(be, reps: int) -> dict:
    import cupy

    from vyre_cuda.testing import compile_sequence

    h = be.allocate_resident(TINY_N * 4)
    be.upload_resident(h, np.arange(TINY_N, dtype=np.uint32))
    program = step_program()
    steps = [(program, [h]) for _ in range(STEPS)]
    read = [(h, 0, 4)]
    out = {"dispatch_sequence_us_per_step": wall_us(lambda: be.dispatch_sequence(steps, read), reps) / STEPS,
           "dispatch_sequence_new_list_us_per_step":
               wall_us(lambda: be.dispatch_sequence([(program, [h]) for _ in range(STEPS)], read), reps) / STEPS,
           "dispatch_repeated_us_per_step":
               wall_us(lambda: be.dispatch_repeated([], [(program, [h])], STEPS, read), reps) / STEPS}
    seq = compile_sequence(be, steps)
    out["compiled_sequence_run_us_per_step"] = wall_us(lambda: seq.run(read), reps) / STEPS
    out["compiled_sequence_device_us_per_step"] = device_ms(seq.launch, be.stream, reps) * 1e3 / STEPS
    seq.close()
    # CuPy: the same kernel captured 64 times into one graph, replayed and synchronised
    with tempfile.TemporaryDirectory() as tmp:
        from vyre_cuda import entry_name

        prep = be.prepared(program)
        path = Path(tmp) / "step.ptx"
        path.write_text(prep.ptx)
        raw = cupy.RawModule(path=str(path)).get_function(entry_name(program))
        x = be.view(h, np.uint32)
        params = cupy.asarray(np.array([TINY_N, TINY_N], np.uint32))
        stream = cupy.cuda.Stream(non_blocking=True)
        grid = (-(-TINY_N // 256), 1, 1)
        with stream:
            stream.begin_capture()
            for _ in range(STEPS):
                raw(grid, (256, 1, 1), (x, params))
            graph = stream.end_capture()

        def replay() -> None:
            graph.launch(stream)
            stream.synchronize()

        out["cupy_graph_us_per_step"] = wall_us(replay, reps) / STEPS
    be.free_resident(h)
    return out


# ---- 4. warm start ----------------------------------------------------------------------------------------
WARM = """
    import json, sys, time
    import numpy as np
    import vyre
    from vyre.ir import BufferDecl, DataType, Expr, Node, Program
    U32 = DataType.U32
    i = Expr.var("i")
    p = Program([BufferDecl.read("a", 0, U32), BufferDecl.read("b", 1, U32), BufferDecl.read_write("c", 2, U32)],
                (256, 1, 1), [Node.let("i", Expr.invocation_id(0)),
                              Node.store("c", i, Expr.bitxor(Expr.load("a", i), Expr.load("b", i)))], name="warm")
    a = np.arange(1024, dtype=np.uint32)
    t0 = time.perf_counter()
    be = vyre.acquire("cuda")
    t1 = time.perf_counter()
    if sys.argv[1] == "phases":  # the preparation alone (validate, emit, cache lookup, load), then the rest
        be.prepared(p)
        t_prep = time.perf_counter()
    out = be.dispatch(p, [a, a, a])
    t2 = time.perf_counter()
    assert not out[0].any()
    m = be.metrics()
    key = be.prepared(p).kernel.key
    cubin = be.modules.disk.get(key, ".cubin") if be.modules.disk is not None else None
    import cupy
    t3 = time.perf_counter()
    if cubin is not None:
        cupy.cuda.function.Module().load(cubin)
    t4 = time.perf_counter()
    if sys.argv[1] == "phases":
        prep = be.prepared(p)
        print(json.dumps({"prepare_ms": (t_prep - t1) * 1e3, "dispatch_after_prepare_ms": (t2 - t_prep) * 1e3,
                          "validate_or_emit_ms": prep.emit_ns / 1e6, "load_ms": prep.load_ns / 1e6}))
        sys.exit(0)
    print(json.dumps({"acquire_ms": (t1 - t0) * 1e3, "first_dispatch_ms": (t2 - t1) * 1e3,
                      "cuModuleLoadData_ms": (t4 - t3) * 1e3 if cubin is not None else None,
                      "disk_cache_hits": m["cuda_disk_cache_hits"], "index_hits": m["cuda_index_hits"]}))
"""


def warm_start(runs: int = 3) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "VYRE_CUDA_CACHE_DIR": cache, "PYTHONPATH": str(ROOT)}
        results = []
        for k in range(runs + 2):  # the first run fills the cache, the last times the phases
            mode = "phases" if k == runs + 1 else "whole"
            done = subprocess.run([sys.executable, "-c", textwrap.dedent(WARM), mode], capture_output=True,
                                  text=True, env=env, timeout=300, check=False)
            if done.returncode:
                return {"error": done.stderr[-2000:]}
            if k:
                results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        phases = results.pop()
    keys = ("acquire_ms", "first_dispatch_ms", "cuModuleLoadData_ms")
    return {**{k: statistics.median(r[k] for r in results) for k in keys if results[0][k] is not None},
            **phases, "disk_cache_hits": min(r["disk_cache_hits"] for r in results),
            "index_hits": min(r["index_hits"] for r in results), "runs": runs}


# ---- report ---------------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller buffers and fewer repetitions")
    parser.add_argument("--json", help="where to write the results (default $OUT/bench_dispatch.json)")
    parser.add_argument("--chart", help="draw the chart from this JSON instead of measuring")
    parser.add_argument("--png", default=str(ROOT / "docs" / "bench_dispatch.png"), help="chart output")
    args = parser.parse_args()
    if args.chart:
        draw(json.loads(Path(args.chart).read_text()), Path(args.png))
        return
    import vyre

    be = vyre.acquire("cuda")
    quick = args.quick
    r = {"card": be.info.name, "cc": be.info.compute_capability, "driver": be.info.driver_version,
         "bandwidth": bandwidth(be, (32 if quick else 256) * MiB, 5 if quick else 20),
         "launch_us": launch_cost(be, 500 if quick else 2000),
         "sequence": sequences(be, 20 if quick else 100),
         "warm_start": warm_start(2 if quick else 3)}
    be.shutdown()
    path = Path(args.json or Path(os.environ.get("OUT", ".")) / "bench_dispatch.json")
    path.write_text(json.dumps(r, indent=1))
    print_table(r)


def print_table(r: dict) -> None:
    print(f"== {r['card']} (sm_{r['cc']}, driver {r['driver']})")
    bw = r["bandwidth"]
    print(f"-- XOR of two {bw['nbytes'] >> 20} MiB buffers: GB/s (% of copy)")
    for k, v in bw["gbps"].items():
        print(f"   {k:40s} {v:8.0f}  {bw['pct_of_copy'][k]:6.1f}%")
    print("-- host us per launch, 4 buffers")
    for k, v in r["launch_us"].items():
        print(f"   {k:40s} {v:8.2f}" if isinstance(v, float) else f"   {k:40s} {v}")
    print(f"-- {STEPS}-step sequence, wall us a step incl. one sync")
    for k, v in r["sequence"].items():
        print(f"   {k:40s} {v:8.3f}")
    print("-- warm start (fresh process, warm disk cache), ms")
    for k, v in r["warm_start"].items():
        print(f"   {k:40s} {v}")


def draw(r: dict, png: Path) -> None:
    """Two panels: % of copy bandwidth of the XOR paths, host µs per launch of the launch paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    pct = r["bandwidth"]["pct_of_copy"]
    names = list(pct)
    left.barh(names, [pct[n] for n in names], color=["#2b6cb0" if n.startswith("vyre") else "#a0aec0" for n in names])
    left.axvline(100, color="k", lw=0.8, ls="--")
    left.set_xlabel("% of device-to-device copy bandwidth (higher is better)")
    left.set_title(f"XOR of two {r['bandwidth']['nbytes'] >> 20} MiB buffers")
    for y, n in enumerate(names):
        left.text(pct[n] + 1, y, f"{pct[n]:.0f}%", va="center", fontsize=8)
    us = {k: v for k, v in r["launch_us"].items() if isinstance(v, float)}
    names = list(us)
    right.barh(names, [us[n] for n in names], color=["#2b6cb0" if "dispatch" in n else "#a0aec0" for n in names])
    right.set_xlabel("host µs per launch (lower is better)")
    right.set_title("one launch of a 4-buffer kernel")
    for y, n in enumerate(names):
        right.text(us[n] + 0.05, y, f"{us[n]:.2f}", va="center", fontsize=8)
    fig.suptitle(f"vyre-cuda dispatch paths on {r['card']}")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    print(f"wrote {png}")


if __name__ == "__main__":
    main()
