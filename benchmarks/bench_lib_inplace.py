"""vyre.lib on the arrays users have: CuPy arrays in and out, next to ResidentArrays, CuPy and torch.

At 2^28 keys (u32; int32 views for torch), each call timed as a loop of a few calls with one
sync at the end: ``reduce``, ``inclusive_scan``, ``sort``, ``histogram`` (256 bins), ``select_if``
and ``unique`` on CuPy arrays, the same calls on ``ResidentArray``s (results recycled), and the
CuPy and torch functions that do the same. At 2^16, ``reduce``, ``inclusive_scan`` and ``sort``
called ``CALLS`` times in a loop (one sync at the end) on CuPy arrays next to torch and CuPy, the
three loops taking turns ``ROUNDS`` times (the median turn is reported).
The telemetry counters say how many bytes crossed the host and how many host waits the CuPy
loops made. Results are checked against CuPy first. Prints a table and writes ``--json``.

    python3 benchmarks/bench_lib_inplace.py --json out/bench_lib_inplace.json
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from bench_inplace import _loop_us

import vyre
from vyre import lib

BIG, SMALL, CALLS = 1 << 28, 1 << 16, 200
ROUNDS = 9  # turns of each 2^16 loop; the median is reported


def _calls(x, t, res):
    """name -> (vyre on CuPy, vyre on a ResidentArray, CuPy, torch); None where there is no peer."""
    import cupy
    import torch

    x8 = x & 255
    t8 = t & 255
    r8 = res[1]

    def resident(fn):
        def run():
            lib.recycle(fn(), backend=res[2])
        return run

    return {
        "reduce": (lambda: lib.reduce(x), resident(lambda: _as_tuple(lib.reduce(res[0]))), lambda: x.sum(),
                   lambda: t.sum()),
        "inclusive_scan": (lambda: lib.inclusive_scan(x), resident(lambda: lib.inclusive_scan(res[0])),
                           lambda: cupy.cumsum(x), lambda: torch.cumsum(t, 0)),
        "sort": (lambda: lib.sort(x), resident(lambda: lib.sort(res[0])), lambda: cupy.sort(x),
                 lambda: torch.sort(t)),
        "histogram": (lambda: lib.histogram(x8, 256), resident(lambda: lib.histogram(r8, 256)),
                      lambda: cupy.bincount(x8, minlength=256), lambda: torch.bincount(t8, minlength=256)),
        "select_if": (lambda: lib.select_if(x, 0, 1 << 30), resident(lambda: lib.select_if(res[0], 0, 1 << 30)),
                      lambda: x[x < (1 << 30)], lambda: t[t < (1 << 30)]),
        "unique": (lambda: lib.unique(x8), resident(lambda: lib.unique(r8)),
                   lambda: cupy.unique(x8, return_counts=True), lambda: torch.unique(t8, return_counts=True)),
    }


def _as_tuple(value):
    return () if not isinstance(value, lib.ResidentArray) else (value,)


def bench_big(rng) -> dict:
    import cupy
    import torch

    host = rng.integers(0, 2**31, BIG, dtype=np.int64).astype(np.uint32)
    x = cupy.asarray(host)
    t = torch.as_tensor(x.view(cupy.int32), device="cuda")
    backend = vyre.default_backend()
    h, h8 = backend.allocate_resident(BIG * 4), backend.allocate_resident(BIG * 4)
    backend.upload_resident(h, x)
    backend.upload_resident(h8, x & 255)
    res = (lib.ResidentArray(h, np.uint32), lib.ResidentArray(h8, np.uint32), backend)
    assert bool((lib.sort(x) == cupy.sort(x)).all()), "sort"
    assert int(lib.reduce(x)) == int(x.sum(dtype=cupy.uint32)), "reduce"
    assert bool((lib.inclusive_scan(x) == cupy.cumsum(x, dtype=cupy.uint32)).all()), "inclusive_scan"
    out = {}
    for name, (on_cupy, on_resident, with_cupy, with_torch) in _calls(x, t, res).items():
        before = backend.metrics()
        row = {"vyre_cupy_ms": _loop_us(on_cupy, 10, 3) / 1e3}
        after = backend.metrics()
        row["host_bytes"] = sum(after.get(k, 0) - before.get(k, 0) for k in ("cuda_h2d_bytes", "cuda_d2h_bytes"))
        row["syncs_per_call"] = (after["cuda_sync_points"] - before["cuda_sync_points"]) / 11
        row["vyre_resident_ms"] = _loop_us(on_resident, 10, 3) / 1e3
        row["cupy_ms"] = _loop_us(with_cupy, 10, 3) / 1e3
        row["torch_ms"] = _loop_us(with_torch, 10, 3) / 1e3
        out[name] = row
    backend.free_resident(h), backend.free_resident(h8)
    return out


def bench_small(rng) -> dict:
    import cupy
    import torch

    x = cupy.asarray(rng.integers(0, 2**31, SMALL, dtype=np.int64).astype(np.uint32))
    t = torch.as_tensor(x.view(cupy.int32), device="cuda")
    backend = vyre.default_backend()
    rows = {
        "reduce": (lambda: lib.reduce(x), lambda: t.sum(), lambda: x.sum()),
        "inclusive_scan": (lambda: lib.inclusive_scan(x), lambda: torch.cumsum(t, 0), lambda: cupy.cumsum(x)),
        "sort": (lambda: lib.sort(x), lambda: torch.sort(t), lambda: cupy.sort(x)),
    }
    out = {}
    for name, (vy, with_torch, with_cupy) in rows.items():
        before = backend.metrics()
        rounds: dict[str, list[float]] = {"vyre_cupy_us": [], "torch_us": [], "cupy_us": []}
        for _ in range(ROUNDS):  # the three loops take turns, so a slow spell of the host hits all of them
            for label, fn in zip(rounds, (vy, with_torch, with_cupy)):
                rounds[label].append(_loop_us(fn, CALLS, 1))
        syncs = backend.metrics()["cuda_sync_points"] - before["cuda_sync_points"]
        out[name] = {label: float(np.median(times)) for label, times in rounds.items()} | {"syncs": syncs}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=None)
    parser.add_argument("--small-only", action="store_true", help="only the 2^16 loops")
    args = parser.parse_args()
    import cupy

    rng = np.random.default_rng(7)
    result = {"device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
              "small": bench_small(rng), "big": {} if args.small_only else bench_big(rng)}
    print(f"{result['device']}: 2^16, {CALLS} calls in a loop (us per call)")
    for name, r in result["small"].items():
        print(f"  {name:15s} vyre {r['vyre_cupy_us']:7.1f}  torch {r['torch_us']:7.1f}  cupy {r['cupy_us']:7.1f}  "
              f"vyre/torch {r['vyre_cupy_us'] / r['torch_us']:.2f}x time  host waits {r['syncs']}")
    print("2^28 u32 (ms per call)")
    for name, r in result["big"].items():
        print(f"  {name:15s} cupy-in {r['vyre_cupy_ms']:7.3f}  resident {r['vyre_resident_ms']:7.3f}  "
              f"CuPy {r['cupy_ms']:7.3f}  torch {r['torch_ms']:7.3f}  host bytes {r['host_bytes']}  "
              f"waits/call {r['syncs_per_call']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
