"""vyre-cuda against CuPy, hand-written CuPy RawKernels, PyTorch and the card's copy bandwidth.

Run on a GPU machine: ``python benchmarks/bench_cuda.py [--quick]``. Prints one table headed by the
card's name and writes ``$OUT/bench_cuda.json`` (or ``--json PATH``) with every number.

The measurements are ``vyre_cuda.bench`` (what ``vyre bench`` runs: XOR and SAXPY through
``dispatch_resident`` vs copy bandwidth and CuPy's op, compile cold/warm, launch host time); this
script adds the columns that need NVRTC or PyTorch: a CuPy ``RawKernel`` of each streaming kernel,
the PyTorch op, and the host time of a CuPy ``RawKernel`` launch with 5 arguments.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vyre_cuda import bench  # noqa: E402

RAW_SRC = r"""
extern "C" __global__ void xor_k(const unsigned* a, const unsigned* b, unsigned* c, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] ^ b[i]; }
extern "C" __global__ void saxpy_k(const float* alpha, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = __fadd_rn(__fmul_rn(alpha[0], x[i]), y[i]); }
extern "C" __global__ void tiny_k(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* d,
                                  const unsigned* p) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < p[1]) d[i] += a[i] ^ b[i]; }
"""


def raw_kernel(name: str) -> bench.Baseline:
    """The hand-written CUDA C kernel ``name`` (compiled with NVRTC) over the workload's arrays."""
    def make(arrays: list[Any]) -> tuple:
        import cupy

        kernel = cupy.RawModule(code=RAW_SRC).get_function(name)
        n = len(arrays[-1])
        grid = ((n + 255) // 256,)
        return (lambda: kernel(grid, (256,), (*arrays, np.uint32(n)))), cupy.cuda.get_current_stream()
    return make


def torch_op(op: Any) -> bench.Baseline:
    """``op`` on torch tensors sharing the workload's memory (u32 as int32 views: same bits, same bytes)."""
    def make(arrays: list[Any]) -> tuple:
        import cupy
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch has no CUDA device")
        tensors = [torch.as_tensor(a.view(cupy.int32) if a.dtype == cupy.uint32 else a, device="cuda")
                   for a in arrays]
        ptr = torch.cuda.current_stream().cuda_stream
        stream = cupy.cuda.ExternalStream(ptr) if ptr else cupy.cuda.Stream.null
        return (lambda: op(*tensors)), stream
    return make


BASELINES: dict[str, dict[str, bench.Baseline]] = {
    "xor": {"cupy_raw": raw_kernel("xor_k"),
            "torch": torch_op(lambda x, y, z: __import__("torch").bitwise_xor(x, y, out=z))},
    "saxpy": {"cupy_raw": raw_kernel("saxpy_k"), "torch": torch_op(lambda al, xx, yy: yy.add_(xx, alpha=1.5))},
}


def rawkernel_launch_us(calls: int) -> dict:
    """Host µs per CuPy ``RawKernel`` launch of the tiny kernel with 5 arguments."""
    import cupy

    try:
        kernel = cupy.RawModule(code=RAW_SRC).get_function("tiny_k")
    except Exception as exc:  # noqa: BLE001 - NVRTC may be missing
        return {"cupy_rawkernel_error": f"{type(exc).__name__}: {exc}"[:200]}
    n = 256
    args = tuple(cupy.ones(n, cupy.uint32) for _ in range(4)) + (cupy.asarray(np.full(5, n, np.uint32)),)
    stream = cupy.cuda.Stream(non_blocking=True)
    return {"cupy_rawkernel_5args_us": bench.host_us(lambda: kernel((4,), (64,), args, stream=stream),
                                                     stream.synchronize, calls)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller buffers and fewer repetitions")
    parser.add_argument("--json", default=None, help="where to write the JSON results")
    args = parser.parse_args()
    from vyre_cuda.plugin import create_backend

    be = create_backend()
    try:
        results = bench.run(be, args.quick, BASELINES, lambda msg: print(f"bench_cuda: {msg}", file=sys.stderr))
        results["launch"].update(rawkernel_launch_us(2000 if args.quick else 10000))
    finally:
        be.shutdown()
    bench.print_table(results)
    target = bench.write_json(results, args.json, "bench_cuda.json")
    if target:
        print(f"\nwrote {target}")


if __name__ == "__main__":
    main()
