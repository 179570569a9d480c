"""Stream-order stress: random ``vyre.lib`` calls, each checked against numpy at once, in several
processes sharing one GPU, with streams held back on purpose.

Each worker process loops for ``--seconds``. A step picks:
- an input kind: CuPy arrays on the default stream, numpy arrays or ``ResidentArray``s;
- a call: ``select``, ``sort``, ``reduce``, ``unique`` or ``inclusive_scan``;
- a size from a fixed set of odd sizes (so memory and bindings are reused between shapes).

Now and then it also:
- holds the backend's stream or the default stream back with a kernel that spins for up to
  ``--hold-ms``, so work on the other stream would overtake it if nothing ordered the two;
- drops the library's scratch (``release_scratch``: bindings close, their memory goes back to the
  heap while calls may still be queued).

A result that differs from numpy is printed with the steps before it. The exit status is the
number of mismatches (0: all equal).

    python3 benchmarks/stress_streams.py --procs 12 --seconds 60
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from functools import cache
from typing import Any

import numpy as np

SIZES = (1, 7, 1000, 5003, (1 << 16) + 3, 300_001)
SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
"""


@cache
def _spin_kernel() -> Any:
    import cupy

    return cupy.RawKernel(SPIN, "spin")


def hold(stream: Any, ms: float) -> None:
    """Hold ``stream`` back for about ``ms`` milliseconds: one thread spinning on the SM clock."""
    import cupy

    khz = cupy.cuda.Device().attributes["ClockRate"]
    with stream:
        _spin_kernel()((1,), (1,), (np.int64(khz * ms),))


def _keys(rng: np.random.Generator, n: int, dtype: type) -> np.ndarray:
    if dtype is np.float32:
        x = rng.standard_normal(n).astype(np.float32)
        x[:: max(1, n // 7)] = -0.0
        return x
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, n, dtype=np.int64).astype(dtype)


def worker(seed: int, seconds: float, hold_ms: float) -> int:
    """One process's loop; returns the number of mismatches."""
    import cupy

    import vyre
    from vyre import lib
    from vyre.lib import ResidentArray
    from vyre.lib.scratch import raw_backend

    raw = raw_backend(vyre.default_backend())
    rng = np.random.default_rng(seed)
    steps: list[tuple] = []
    bad = calls = 0
    end = time.time() + seconds
    while time.time() < end and bad < 5:
        dtype = (np.uint32, np.int32, np.float32)[rng.integers(3)]
        n = int(SIZES[rng.integers(len(SIZES))])
        op = ("select", "sort", "reduce", "unique", "scan")[rng.integers(5)]
        if dtype is np.float32 and op in ("reduce", "unique", "scan"):
            continue
        kind = ("cupy", "cupy", "numpy", "resident")[rng.integers(4)]
        x = _keys(rng, n, dtype)
        flags = (rng.integers(0, 3, n) == 0).astype(np.uint32)
        handles = []
        if kind == "cupy":
            d, f = cupy.asarray(x), cupy.asarray(flags)
        elif kind == "numpy":
            d, f = x, flags
        else:
            handles = [raw.allocate_resident(max(a.nbytes, 4)) for a in (x, flags)]
            for h, a in zip(handles, (x, flags)):
                raw.upload_resident(h, a)
            d, f = ResidentArray(handles[0], x.dtype, n, raw), ResidentArray(handles[1], np.uint32, n, raw)
        event = rng.random()
        if event < 0.05:
            lib.release_scratch()
        elif event < 0.25:
            hold(raw.stream if rng.random() < 0.5 else cupy.cuda.Stream.null, hold_ms * rng.random())
        if op == "select":
            got, want = lib.select(d, f), (x[flags != 0],)
        elif op == "sort":
            got, want = lib.sort(d), (np.sort(x, kind="stable"),)
        elif op == "reduce":
            got, want = lib.reduce(d, "max"), (np.asarray([x.max()]),)
        elif op == "unique":
            got, want = lib.unique(d), np.unique(x, return_counts=True)
        else:
            got, want = lib.inclusive_scan(d, "min"), (np.minimum.accumulate(x),)
        outs = got if isinstance(got, tuple) else (got,)
        calls += 1
        steps.append((kind, op, np.dtype(dtype).name, n))
        if not all(np.array_equal(_host(g).reshape(-1), np.asarray(w).reshape(-1)) for g, w in zip(outs, want)):
            bad += 1
            print(f"MISMATCH seed {seed} step {calls}: {steps[-1]} after {steps[-6:-1]}", flush=True)
        if kind == "resident":
            lib.recycle(*[g for g in outs if isinstance(g, ResidentArray)])
            for h in handles:
                raw.free_resident(h)
    print(f"seed {seed}: {calls} calls, {bad} mismatches", flush=True)
    return bad


def _host(value: object) -> np.ndarray:
    """A result on the host: a ``ResidentArray`` through its CUDA array interface, a CuPy array
    copied, a host value as is."""
    import cupy

    from vyre.lib import ResidentArray

    return cupy.asnumpy(cupy.asarray(value) if isinstance(value, ResidentArray) else value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--procs", type=int, default=8, help="worker processes sharing the GPU")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=1, help="the first worker's seed (the others count on)")
    parser.add_argument("--hold-ms", type=float, default=2.0, help="longest spin that holds a stream back")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.seed, args.seconds, args.hold_ms)
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", "--seed", str(args.seed + i),
                               "--seconds", str(args.seconds), "--hold-ms", str(args.hold_ms)])
             for i in range(args.procs)]
    bad = sum(p.wait() for p in procs)
    print(f"{args.procs} processes: {bad} mismatches (or failed workers)")
    return min(bad, 125)


if __name__ == "__main__":
    sys.exit(main())
