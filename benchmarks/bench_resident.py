"""Resident execution: launch overhead, graph replay of a 64-step sequence, staged 1 GiB transfers.

Run on a GPU machine: ``python benchmarks/bench_resident.py [--quick]``. Prints one table headed by
the card's name and writes ``$OUT/bench_resident.json`` (or ``--json PATH``).

1. Host µs per launch of one tiny kernel with 4 buffers (5 kernel arguments with the parameter
   block): ``CompiledPipeline.dispatch_resident`` vs ``backend.dispatch_resident`` vs a CuPy
   ``RawKernel`` of the same PTX vs ``cuLaunchKernel`` through ctypes with pre-packed arguments.
2. A 64-step sequence of tiny kernels: as one replayed CUDA graph (``CompiledSequence.launch``,
   programmatic launches on sm_90+), as the same graph with plain launches (``VYRE_CUDA_PDL=0``),
   and as 64 launches issued eagerly: device µs per step and host µs per replay / per step.
3. 1 GiB upload and download through pinned staging (``upload_resident``/``download_resident``)
   vs CuPy's ``cupy.asarray`` / ``.get()`` of the same bytes.

Host times: median of 5 batches of un-synchronised calls after warm-up. Device times: CUDA events.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vyre.ir import BufferDecl, DataType, Expr, Node, Program  # noqa: E402
from vyre_cuda.bench import device_ms, host_us, wall_s  # noqa: E402

U32 = DataType.U32
GiB = 1 << 30
STEPS = 64
TINY_N = 256


def tiny_program(k: int = 0) -> Program:
    """``d += (a ^ b) + c + k``: 4 buffers, 256 invocations."""
    i = Expr.var("i")
    value = Expr.add(Expr.add(Expr.bitxor(Expr.load("a", i), Expr.load("b", i)), Expr.load("c", i)), Expr.u32(k))
    return Program([BufferDecl.read("a", 0, U32), BufferDecl.read("b", 1, U32), BufferDecl.read("c", 2, U32),
                    BufferDecl.read_write("d", 3, U32)],
                   (64, 1, 1),
                   [Node.let("i", Expr.invocation_id(0)), Node.store("d", i, Expr.add(Expr.load("d", i), value))],
                   name=f"tiny{k}")


# ---- timing ---------------------------------------------------------------------------------------------
def device_us(fn: Callable[[], object], stream, reps: int) -> float:
    """Median device µs of ``fn`` (CUDA events on ``stream``)."""
    return device_ms(fn, stream, reps, warmup=1) * 1e3


# ---- 1. launch overhead -----------------------------------------------------------------------------------
def ctypes_baselines(kernel: int, g: tuple, b: tuple, stream_ptr: int, argv_ptr: int, sync, calls: int) -> dict:
    """``cuLaunchKernel`` with pre-packed arguments: ctypes with argtypes, and pre-converted ctypes values."""
    import ctypes

    try:
        cdll, pydll = ctypes.CDLL("libcuda.so.1"), ctypes.PyDLL("libcuda.so.1")
    except OSError:
        return {}
    u, p = ctypes.c_uint, ctypes.c_void_p
    typed = cdll.cuLaunchKernel
    typed.argtypes = [p, u, u, u, u, u, u, u, p, p, p]
    typed.restype = ctypes.c_int
    raw = pydll.cuLaunchKernel
    raw.restype = ctypes.c_int
    head = (p(kernel), *(u(v) for v in (*g, *b, 0)), p(stream_ptr), p(argv_ptr), None)
    return {"ctypes_cuLaunchKernel_prepacked_us":
            host_us(lambda: typed(kernel, g[0], g[1], g[2], b[0], b[1], b[2], 0, stream_ptr, argv_ptr, None),
                    sync, calls),
            "ctypes_cuLaunchKernel_preconverted_us": host_us(lambda: raw(*head), sync, calls)}


def launch_overhead(be, calls: int) -> dict:
    import cupy

    program = tiny_program()
    handles = [be.allocate_resident(TINY_N * 4) for _ in range(4)]
    for h in handles:
        be.upload_resident(h, np.arange(TINY_N, dtype=np.uint32))
    sync = be.stream.synchronize
    pipe = be.compile(program)
    out = {"pipeline_dispatch_resident_us": host_us(lambda: pipe.dispatch_resident(handles), sync, calls),
           "backend_dispatch_resident_us": host_us(lambda: be.dispatch_resident(program, handles), sync, calls)}
    binding = pipe.resources.resident
    plan, stream_ptr = binding.plan, be.stream.ptr
    g, b = plan.grid, plan.block
    out.update(ctypes_baselines(plan.kernel_ptr, g, b, stream_ptr, plan.argv_ptr, sync, calls))
    out["launchplan_launch_us"] = host_us(lambda: plan.launch(stream_ptr), sync, calls)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tiny.ptx"
        path.write_text(binding.prepared.ptx)
        from vyre_cuda import entry_name

        raw = cupy.RawModule(path=str(path)).get_function(entry_name(binding.prepared.program))
        ptrs = [*(buf.ptr for buf in binding.buffers), plan.params.ptr]
        args = tuple(cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(p, 16, None), 0) for p in ptrs)
        stream = be.stream
        out["cupy_rawkernel_5args_us"] = host_us(lambda: raw(g, b, args, stream=stream), sync, calls)
    pipe.close()
    for h in handles:
        be.free_resident(h)
    return out


# ---- 2. a 64-step sequence: graph vs eager ----------------------------------------------------------------
def sequence_replay(be, reps: int, calls: int) -> dict:
    from vyre_cuda.testing import compile_sequence

    handles = [be.allocate_resident(TINY_N * 4) for _ in range(4)]
    for h in handles:
        be.upload_resident(h, np.arange(TINY_N, dtype=np.uint32))
    steps = [(tiny_program(k % 8), handles) for k in range(STEPS)]
    os.environ["VYRE_CUDA_GRAPHS"] = "1"
    sync = be.stream.synchronize
    os.environ["VYRE_CUDA_PDL"] = "0"  # the same graph with plain launches: each kernel waits for the last
    plain = compile_sequence(be, steps)
    plain.launch()
    plain_dev = device_us(plain.launch, be.stream, reps)
    plain.close()
    os.environ["VYRE_CUDA_PDL"] = "1"
    seq = compile_sequence(be, steps)
    seq.launch()
    graph_dev = device_us(seq.launch, be.stream, reps)
    replays = min(calls, 300)  # each replay is ~64 µs of device work: keep the launch queue short
    graph_host = host_us(seq.launch, sync, replays)
    entry = seq.entry
    raw_host = host_us(lambda: entry.graph.launch(be.stream), sync, replays) if entry and entry.graph else None
    full_host = host_us(lambda: be.dispatch_sequence(steps), sync, replays)
    os.environ["VYRE_CUDA_GRAPHS"] = "0"
    eager = compile_sequence(be, steps)  # made with graphs off: launch() issues the 64 launches
    eager_dev = device_us(eager.launch, be.stream, reps)
    eager_host = host_us(eager.launch, sync, replays)
    os.environ["VYRE_CUDA_GRAPHS"] = "1"
    eager.close()
    seq.close()
    for h in handles:
        be.free_resident(h)
    return {"steps": STEPS, "graph_device_us_per_step": graph_dev / STEPS,
            "graph_plain_launches_device_us_per_step": plain_dev / STEPS, "graph_host_us_per_replay": graph_host,
            "cupy_graph_launch_host_us": raw_host, "dispatch_sequence_host_us_with_sync": full_host,
            "eager_device_us_per_step": eager_dev / STEPS, "eager_host_us_per_step": eager_host / STEPS}


# ---- 3. staged 1 GiB transfers ------------------------------------------------------------------------------
def transfers(be, nbytes: int, reps: int) -> dict:
    import cupy

    host = np.random.default_rng(1).integers(0, 256, nbytes, dtype=np.uint8)
    h = be.allocate_resident(nbytes)

    def upload() -> None:
        be.upload_resident(h, host)
        be.stream.synchronize()

    up = wall_s(upload, reps)
    down = wall_s(lambda: be.download_resident(h), reps)
    assert np.array_equal(be.download_resident(h, nbytes - 4096, 4096), host[-4096:])
    alternatives = staging_alternatives(be, h, host, reps)
    dev = cupy.asarray(host)
    cupy_up = wall_s(lambda: (cupy.asarray(host), cupy.cuda.Device().synchronize()), reps)
    cupy_down = wall_s(dev.get, reps)
    be.free_resident(h)
    del dev
    cupy.get_default_memory_pool().free_all_blocks()
    gbps = lambda s: nbytes / s / 1e9  # noqa: E731
    return {"bytes": nbytes, "upload_gbps": gbps(up), "download_gbps": gbps(down),
            "cupy_asarray_gbps": gbps(cupy_up), "cupy_get_gbps": gbps(cupy_down),
            "upload_pct_of_cupy": 100 * cupy_up / up, "download_pct_of_cupy": 100 * cupy_down / down,
            **{k: gbps(v) for k, v in alternatives.items()}}


def staging_alternatives(be, h, host: np.ndarray, reps: int) -> dict:
    """Evidence for the staging design (seconds): a plain pageable ``cudaMemcpy`` each way, and an
    upload through two 64 MiB pinned slots filled by 4 threads (numpy copies release the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    import cupy

    rt, n, dst = cupy.cuda.runtime, host.nbytes, be.resident.resolve(h).ptr
    out = np.empty_like(host)
    chunk, parts = 64 << 20, 4
    slots = [np.frombuffer(cupy.cuda.alloc_pinned_memory(chunk), np.uint8, chunk) for _ in range(2)]
    events = [cupy.cuda.Event(disable_timing=True) for _ in range(2)]
    stream = be.stream

    def fill(slot: np.ndarray, off: int, size: int, pool: ThreadPoolExecutor) -> None:
        step = -(-size // parts)
        list(pool.map(lambda k: slot.__setitem__(slice(k * step, min(size, (k + 1) * step)),
                                                 host[off + k * step:off + min(size, (k + 1) * step)]), range(parts)))

    def threaded_upload() -> None:
        with ThreadPoolExecutor(parts) as pool:
            for i, off in enumerate(range(0, n, chunk)):
                size = min(chunk, n - off)
                events[i % 2].synchronize()
                fill(slots[i % 2], off, size, pool)
                rt.memcpyAsync(dst + off, slots[i % 2].ctypes.data, size, 1, stream.ptr)
                events[i % 2].record(stream)
            stream.synchronize()

    result = {"direct_pageable_upload_gbps": wall_s(lambda: rt.memcpy(dst, host.ctypes.data, n, 1), reps),
              "direct_pageable_download_gbps": wall_s(lambda: rt.memcpy(out.ctypes.data, dst, n, 2), reps),
              "threaded_pinned_upload_gbps": wall_s(threaded_upload, reps)}
    assert np.array_equal(be.download_resident(h, n - 4096, 4096), host[-4096:])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls, 256 MiB transfers")
    parser.add_argument("--json", default=None, help="where to write the JSON results")
    args = parser.parse_args()
    calls = 2000 if args.quick else 10000
    reps = 10 if args.quick else 30
    from vyre_cuda.backend import CudaBackend

    be = CudaBackend()
    results: dict = {"card": be.info.name, "cc": be.info.compute_capability, "driver": be.info.driver_version}
    results["launch"] = launch_overhead(be, calls)
    print("launch:", json.dumps(results["launch"]))
    results["sequence"] = sequence_replay(be, reps, calls)
    print("sequence:", json.dumps(results["sequence"]))
    results["transfer"] = transfers(be, GiB // 4 if args.quick else GiB, 3 if args.quick else 5)
    print("transfer:", json.dumps(results["transfer"]))
    be.shutdown()
    print_table(results)
    target = args.json or (os.path.join(os.environ["OUT"], "bench_resident.json") if os.environ.get("OUT") else None)
    if target:
        Path(target).write_text(json.dumps(results, indent=2, default=str))
        print(f"\nwrote {target}")


def print_table(r: dict) -> None:
    launch, seq, xfer = r["launch"], r["sequence"], r["transfer"]
    print(f"\nvyre-cuda resident execution on {r['card']} (sm_{r['cc']}, driver {r['driver']})")
    print(f"{'measurement':<58}{'value':>10}  target")
    rows = [
        ("host µs / CompiledPipeline.dispatch_resident (4 buffers)", launch["pipeline_dispatch_resident_us"], "<= 5.5"),
        ("host µs / backend.dispatch_resident (4 buffers)", launch["backend_dispatch_resident_us"], ""),
        ("host µs / CuPy RawKernel, same PTX, 5 args", launch["cupy_rawkernel_5args_us"], ""),
        ("host µs / ctypes cuLaunchKernel, pre-packed args", launch.get("ctypes_cuLaunchKernel_prepacked_us"), ""),
        ("host µs / same, ctypes values pre-converted", launch.get("ctypes_cuLaunchKernel_preconverted_us"), ""),
        ("host µs / LaunchPlan.launch", launch["launchplan_launch_us"], ""),
        (f"device µs / step, {seq['steps']}-step graph replay", seq["graph_device_us_per_step"], "<= 1.0"),
        ("device µs / step, same graph, plain launches (VYRE_CUDA_PDL=0)",
         seq.get("graph_plain_launches_device_us_per_step"), ""),
        (f"device µs / step, {seq['steps']} eager launches", seq["eager_device_us_per_step"], ""),
        ("host µs / graph replay (CompiledSequence.launch)", seq["graph_host_us_per_replay"], "<= 5"),
        ("host µs / cupy Graph.launch", seq["cupy_graph_launch_host_us"], ""),
        ("host µs / step, eager", seq["eager_host_us_per_step"], ""),
        (f"host µs / dispatch_sequence ({seq['steps']} steps, 1 sync)", seq["dispatch_sequence_host_us_with_sync"], ""),
        (f"GB/s upload_resident ({xfer['bytes'] >> 20} MiB)", xfer["upload_gbps"], ""),
        ("GB/s cupy.asarray", xfer["cupy_asarray_gbps"], ""),
        ("% of CuPy, upload", xfer["upload_pct_of_cupy"], ">= 80"),
        (f"GB/s download_resident ({xfer['bytes'] >> 20} MiB)", xfer["download_gbps"], ""),
        ("GB/s ndarray.get()", xfer["cupy_get_gbps"], ""),
        ("% of CuPy, download", xfer["download_pct_of_cupy"], ">= 80"),
        ("GB/s plain pageable cudaMemcpy H2D (reference)", xfer.get("direct_pageable_upload_gbps"), ""),
        ("GB/s plain pageable cudaMemcpy D2H (reference)", xfer.get("direct_pageable_download_gbps"), ""),
        ("GB/s 4-thread pinned staging upload (prototype)", xfer.get("threaded_pinned_upload_gbps"), ""),
    ]
    for label, value, target in rows:
        shown = "n/a" if value is None else f"{value:.2f}"
        print(f"{label:<58}{shown:>10}  {target}")


if __name__ == "__main__":
    main()
