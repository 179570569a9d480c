"""Front-end overhead: decorating a 30-line kernel, and the host time a kernel call adds.

Run anywhere: ``python benchmarks/bench_frontend.py [--backend ID] [--json PATH]``. On a GPU
machine the default backend is ``cuda``; without one it is the CPU reference oracle (the call
overhead is then measured against a much slower dispatch, so its noise is larger).

1. Decorate: ``vyre.kernel(...)(fn)`` on the 30-line ``stencil`` below: source read, ``ast``
   parse, lowering and validation. Median of 50 (the first call also reads the file).
2. Call overhead: ``kernel(a, x, y)`` (scalar ``a`` as a Python float) against
   ``pipeline.dispatch([a_bytes, x, y])`` on the same ``CompiledPipeline``, as single calls that
   alternate which runs first; the added time is the difference of the two medians. Also the
   front end's own work alone (scalar conversion and the dispatch path of ``Kernel.__call__``
   with the pipeline's ``dispatch`` replaced by a function that returns at once): that number
   has no device noise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import vyre  # noqa: E402

N = 1024


def stencil(a: vyre.f32, x: vyre.In[vyre.f32], y: vyre.InOut[vyre.f32], hist: vyre.Out[vyre.u32, 16]):
    """A 30-line kernel: a 5-point stencil, a clamp, a loop, a shared tile and atomics."""
    tile = vyre.shared(vyre.f32, 256)
    i = vyre.gid()
    lid = vyre.lid()
    tile[lid] = x[i]
    vyre.barrier()
    left = tile[lid - 1] if lid > 0 else x[i - 1]
    right = tile[lid + 1] if lid < 255 else x[i + 1]
    if i >= len(y):
        return
    acc = 0.0
    for k in range(1, 3):
        acc += x[i + k] * 0.25
        acc += x[i - k] * 0.25
    v = a * (left + right) + acc
    if v > 100.0:
        v = 100.0
    elif v < -100.0:
        v = -100.0
    else:
        v = v * 0.5
    y[i] = vyre.fma(v, a, y[i])
    bucket = vyre.u32(abs(v)) % 16
    vyre.atomic_add(hist, bucket, 1)
    if vyre.is_nan(v) or vyre.is_inf(v):
        y[i] = 0.0
    scaled = vyre.i32(v * 8.0)
    if scaled < 0:
        scaled = -scaled
    y[i] += vyre.f32(scaled & 7)
    y[i] = min(max(y[i], -1000.0), 1000.0)


def time_decorate(reps: int = 50) -> dict:
    start = time.perf_counter()
    vyre.kernel(workgroup_size=256)(stencil)
    first = (time.perf_counter() - start) * 1e3
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        vyre.kernel(workgroup_size=256)(stencil)
        times.append((time.perf_counter() - start) * 1e3)
    return {"decorate_first_ms": first, "decorate_median_ms": statistics.median(times)}


def _batch_us(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def time_call(backend, batches: int, calls: int) -> dict:
    kernel = vyre.kernel(workgroup_size=256)(stencil)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(N, dtype=np.float32), rng.standard_normal(N, dtype=np.float32)
    pipeline = backend.compile(kernel.program)
    kernel._pipeline = pipeline  # the kernel's default pipeline, on the backend measured
    a_bytes = struct.pack("<f", 1.5)
    inputs = [a_bytes, x, y]
    assert all(np.array_equal(p, q) for p, q in zip(kernel(1.5, x, y), pipeline.dispatch(inputs)))

    def via_kernel():
        return kernel(1.5, x, y)

    def via_pipeline():
        return pipeline.dispatch(inputs)

    for fn in (via_kernel, via_pipeline):
        _batch_us(fn, calls)  # warm-up
    kernel_ns, pipeline_ns = [], []
    clock = time.perf_counter_ns
    for i in range(batches * calls):  # single calls, alternating which goes first: neither always follows the other
        pair = ((via_kernel, kernel_ns), (via_pipeline, pipeline_ns))
        for fn, times in (pair if i % 2 else pair[::-1]):
            start = clock()
            fn()
            times.append(clock() - start)
    k, p = statistics.median(kernel_ns) / 1e3, statistics.median(pipeline_ns) / 1e3

    class Returns:
        """Stands in for the pipeline so that only the kernel's own work is timed."""

        @staticmethod
        def dispatch(args):
            return args

    kernel._pipeline = Returns()
    own = min(_batch_us(via_kernel, 20_000) for _ in range(5))
    return {"pipeline_dispatch_us": p, "kernel_call_us": k, "added_us": k - p, "frontend_work_us": own}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", help="backend id (default: best available, else the oracle)")
    parser.add_argument("--json", help="write the results here (default: $OUT/bench_frontend.json when $OUT is set)")
    args = parser.parse_args()
    backend = vyre.acquire(args.backend) if args.backend else vyre.acquire(allow_reference=True)
    on_gpu = backend.id != "reference"
    results = {"backend": backend.id, "device": backend.device_profile().get("name", backend.id)}
    results.update(time_decorate())
    results.update(time_call(backend, batches=15 if on_gpu else 7, calls=400 if on_gpu else 20))
    print(f"front end on {results['device']} ({results['backend']})")
    print(f"  decorate 30-line kernel     {results['decorate_median_ms']:8.2f} ms "
          f"(first {results['decorate_first_ms']:.2f} ms; target < 20 ms)")
    print(f"  pipeline.dispatch           {results['pipeline_dispatch_us']:8.2f} us")
    print(f"  kernel(...) call            {results['kernel_call_us']:8.2f} us")
    print(f"  added by the kernel call    {results['added_us']:8.2f} us (target < 2 us; difference of medians)")
    print(f"  front-end work alone        {results['frontend_work_us']:8.2f} us (scalar conversion + call path)")
    path = args.json or (os.path.join(os.environ["OUT"], "bench_frontend.json") if os.environ.get("OUT") else None)
    if path:
        Path(path).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {path}")
    backend.shutdown()


if __name__ == "__main__":
    main()
