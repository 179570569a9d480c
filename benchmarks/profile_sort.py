"""Profile one library sort on the GPU: the kernels that ran, by name, and the NVTX ranges around them.

    python benchmarks/profile_sort.py [--n 16777216] [--runs 3]
    nsys profile -t cuda,nvtx -o vyre-sort python benchmarks/profile_sort.py   # the timeline

Prints, and writes to ``$OUT/profile_sort.json`` when ``OUT`` is set:

- ``ranges``: every NVTX range message the backend pushed, in order with repeats collapsed
  (``vyre_cuda.profiling.recording``; the script wraps each sort in ``vyre.lib.sort``);
- ``loaded_kernels``: the kernel of each program the backend prepared, by the name the driver
  knows it by (``cuFuncGetName`` through cuda.bindings), with the program name;
- ``cupti_kernels``: when torch with CUDA is importable, every kernel CUPTI saw during the timed
  runs (``torch.profiler``), with its launch count and device time: what Nsight shows too.

The first sort (compiling the kernels) runs outside the CUPTI window but inside ``recording``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import vyre  # noqa: E402
from vyre import lib  # noqa: E402


def collapse(messages: list[str]) -> list[list[Any]]:
    """``[[message, repeats], ...]`` with consecutive repeats counted."""
    out: list[list[Any]] = []
    for m in messages:
        if out and out[-1][0] == m:
            out[-1][1] += 1
        else:
            out.append([m, 1])
    return out


def cupti_kernels(run: Any, trace: Path | None = None) -> dict[str, dict[str, float]] | str:
    """Kernels CUPTI saw while ``run(annotate)`` ran (torch.profiler), or why there are none.

    ``annotate(name)`` is torch's ``record_function``: a range in the trace around each sort, where
    the backend pushes its ``vyre`` NVTX range. With ``trace``, the Chrome trace is written there
    (``benchmarks/trace_timeline.py`` draws it).
    """
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile, record_function
    except ImportError as exc:
        return f"torch is not importable ({exc}): run under nsys for the timeline"
    if not torch.cuda.is_available():
        return "torch has no CUDA device"
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            run(record_function)
    except RuntimeError as exc:  # e.g. CUPTI already taken by another profiler (nsys)
        run(None)
        return f"torch.profiler could not record ({exc})"
    if trace is not None:
        prof.export_chrome_trace(str(trace))
    kernels: dict[str, dict[str, float]] = {}
    for event in prof.events():
        if str(getattr(event, "device_type", "")).endswith("CUDA"):
            row = kernels.setdefault(event.name, {"launches": 0, "device_us": 0.0})
            row["launches"] += 1
            row["device_us"] += float(getattr(event, "device_time", None) or getattr(event, "cuda_time", 0.0))
    return kernels or "CUPTI recorded no kernel (is another profiler attached?)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--n", type=int, default=1 << 24, help="keys to sort (u32)")
    parser.add_argument("--runs", type=int, default=3, help="sorts inside the CUPTI window")
    parser.add_argument("--trace", type=Path, help="write torch.profiler's Chrome trace of the CUPTI window here")
    args = parser.parse_args()

    import cupy

    from vyre_cuda.testing import driver, profiler

    backend = vyre.acquire("cuda")
    keys = np.random.default_rng(1).integers(0, 2**32, args.n, dtype=np.uint32)
    device_keys = cupy.asarray(keys)  # CuPy in, CuPy out: the sort's kernels without host copies

    def sort_once(annotate: Any = None) -> Any:
        with profiler.nvtx_range("vyre.lib.sort"), (annotate("vyre.lib.sort") if annotate else nullcontext()):
            out = lib.sort(device_keys, backend=backend)  # runs on CuPy's current stream
        cupy.cuda.Device().synchronize()
        return out

    with profiler.recording() as ranges:
        first = sort_once()
        cupti = cupti_kernels(lambda annotate: [sort_once(annotate) for _ in range(args.runs)], args.trace)
    got = first.get() if hasattr(first, "get") else np.asarray(first)
    assert (got == np.sort(keys)).all(), "the sort is wrong"

    loaded = sorted({(driver.function_name(p.kernel.ptr) or "?", p.program.name or "<unnamed>")
                     for p in backend.programs.by_key.values()})
    report = {"n": args.n, "device": backend.info.name,
              "nvtx_backend": profiler.backend(), "nvtx_tool_attached": profiler.tool_attached(),
              "ranges": collapse(ranges), "loaded_kernels": [list(k) for k in loaded], "cupti_kernels": cupti}
    print(f"sorted {args.n} u32 keys on {report['device']}; NVTX through {report['nvtx_backend']}"
          f" (tool attached: {report['nvtx_tool_attached']})")
    print("NVTX ranges (domain 'vyre'):")
    for message, repeats in report["ranges"]:
        print(f"  {message}" + (f"  x{repeats}" if repeats > 1 else ""))
    print("kernels loaded (driver name <- program name):")
    for kernel, program in loaded:
        print(f"  {kernel} <- {program}")
    if isinstance(cupti, dict):
        print(f"kernels CUPTI saw in {args.runs} sorts:")
        for name, row in sorted(cupti.items(), key=lambda kv: -kv[1]["device_us"]):
            print(f"  {name}: {row['launches']} launches, {row['device_us']:.1f} µs")
    else:
        print(f"CUPTI: {cupti}")
    out = os.environ.get("OUT")
    if out:
        (Path(out) / "profile_sort.json").write_text(json.dumps(report, indent=1))
    backend.shutdown()


if __name__ == "__main__":
    main()
