"""Kernels on the arrays users already have: vyre on CuPy/torch arrays next to Triton, torch and CuPy.

Times the plain calls users make - ``saxpy(a, x, y)`` with CuPy arrays, with torch tensors, with
numpy arrays - next to the same kernel on vyre's resident buffers and the same kernel written in
Triton, in torch and as a CuPy ElementwiseKernel, in
loops of ``CALLS`` calls with no synchronisation between them (one at the end), at 2^16 and 2^26
f32 elements; then a naive 256-bin histogram with global atomics in vyre and Triton, next to
torch's and CuPy's ``bincount``. Prints a table,
writes ``--json`` and draws ``--png``. Every vyre result is checked against numpy first.

    python3 benchmarks/bench_inplace.py --json out/bench_inplace.json --png docs/inplace_bench.png
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import vyre

CALLS = 200
SIZES = (1 << 16, 1 << 26)


@vyre.kernel(workgroup_size=256)
def saxpy(a: vyre.f32, x: vyre.In[vyre.f32], y: vyre.InOut[vyre.f32]):
    i = vyre.gid()
    if i < len(x):
        y[i] = a * x[i] + y[i]


@vyre.kernel(workgroup_size=256)
def histogram(data: vyre.In[vyre.u32], bins: vyre.InOut[vyre.u32]):
    i = vyre.gid()
    if i < len(data):
        vyre.atomic_add(bins, data[i] & 255, 1)


def _loop_us(fn, calls: int = CALLS, repeats: int = 5) -> float:
    """Median over ``repeats`` of the wall time per call of ``calls`` calls and one final sync."""
    import cupy
    import torch

    fn()
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        cupy.cuda.Device().synchronize()
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return float(np.median(times))


def _triton_saxpy():
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(x_ptr, y_ptr, a, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, a * x + y, mask=mask)

    def run(a, x, y):
        n = x.numel()
        kernel[(triton.cdiv(n, 1024),)](x, y, a, n, BLOCK=1024)

    return run


def _triton_histogram():
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(d_ptr, bins_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        d = tl.load(d_ptr + offs, mask=mask)
        tl.atomic_add(bins_ptr + (d & 255), 1, mask=mask)

    def run(d, bins):
        n = d.numel()
        kernel[(triton.cdiv(n, 1024),)](d, bins, n, BLOCK=1024)

    return run


def bench_saxpy(n: int) -> dict:
    import cupy
    import torch

    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    gx, gy = cupy.asarray(x), cupy.asarray(y)
    (out,) = saxpy(2.0, gx, gy)
    assert out is gy and np.array_equal(cupy.asnumpy(gy), np.float32(2.0) * x + y), "vyre saxpy is wrong"
    tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
    triton_saxpy = _triton_saxpy()
    ew = cupy.ElementwiseKernel("float32 a, float32 x", "float32 y", "y = a * x + y", "vyre_bench_saxpy")
    backend = vyre.default_backend()
    handles = [backend.allocate_resident(nbytes) for nbytes in (4, x.nbytes, y.nbytes)]
    for h, data in zip(handles, (np.float32(2.0).tobytes(), x, y)):
        backend.upload_resident(h, data)
    pipe = saxpy.compile()
    rows = {
        "vyre resident buffers": _loop_us(lambda: pipe.dispatch_resident(handles)),
        "vyre kernel, CuPy arrays": _loop_us(lambda: saxpy(2.0, gx, gy)),
        "vyre kernel, torch tensors": _loop_us(lambda: saxpy(2.0, tx, ty)),
        "Triton": _loop_us(lambda: triton_saxpy(2.0, tx, ty)),
        "torch (y.add_(x, alpha=a))": _loop_us(lambda: ty.add_(tx, alpha=2.0)),
        "CuPy ElementwiseKernel": _loop_us(lambda: ew(np.float32(2.0), gx, gy)),
    }
    if n <= 1 << 20:
        hx, hy = x.copy(), y.copy()
        rows["vyre kernel, numpy arrays"] = _loop_us(lambda: saxpy(2.0, hx, hy), calls=20, repeats=3)
    copy = _loop_us(lambda: cupy.copyto(gy, gx))
    for h in handles:
        backend.free_resident(h)
    return {"n": n, "us_per_call": rows, "copy_us": copy,
            "saxpy_gbps": {k: 12 * n / v / 1e3 for k, v in rows.items()}}


def bench_histogram(n: int) -> dict:
    import cupy
    import torch

    rng = np.random.default_rng(n + 1)
    data = rng.integers(0, 1 << 32, n, dtype=np.uint32)
    gd, gbins = cupy.asarray(data), cupy.zeros(256, cupy.uint32)
    histogram(gd, gbins)
    assert np.array_equal(cupy.asnumpy(gbins), np.bincount(data & 255, minlength=256)), "vyre histogram is wrong"
    td, tbins = torch.from_numpy(data.view(np.int32)).cuda(), torch.zeros(256, dtype=torch.int32, device="cuda")
    triton_hist = _triton_histogram()
    return {"n": n, "us_per_call": {
        "vyre kernel, CuPy arrays": _loop_us(lambda: histogram(gd, gbins)),
        "Triton": _loop_us(lambda: triton_hist(td, tbins)),
        "torch.bincount": _loop_us(lambda: torch.bincount(td & 255, minlength=256)),
        "cupy.bincount": _loop_us(lambda: cupy.bincount(gd & 255, minlength=256)),
    }}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=None)
    parser.add_argument("--png", default=None)
    args = parser.parse_args()
    import cupy

    card = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    result = {"card": card, "calls": CALLS, "saxpy": [bench_saxpy(n) for n in SIZES],
              "histogram": [bench_histogram(n) for n in SIZES]}
    print(f"card: {card}; {CALLS} calls per loop, one sync at the end; microseconds per call")
    for part in ("saxpy", "histogram"):
        for row in result[part]:
            base = row["us_per_call"]["Triton"]
            print(f"{part} n=2^{row['n'].bit_length() - 1}:")
            for name, us in row["us_per_call"].items():
                print(f"  {name:32s} {us:10.2f} us  {us / base:6.2f}x Triton's time")
            if "copy_us" in row:
                print(f"  {'copy of x into y (CuPy)':32s} {row['copy_us']:10.2f} us")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.png:
        _draw(result, args.png)


def _draw(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(result["saxpy"]), figsize=(12, 4))
    for ax, row in zip(axes, result["saxpy"]):
        names = list(row["us_per_call"])
        ax.barh(names, [row["us_per_call"][k] for k in names], color="#4477aa")
        ax.set_xlabel("microseconds per call (lower is better)")
        ax.set_title(f"SAXPY, 2^{row['n'].bit_length() - 1} f32, {result['calls']} calls, {result['card']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
