"""Draw a CUPTI timeline (torch.profiler's Chrome trace) as a PNG: a range and the kernels it launched.

    python benchmarks/profile_sort.py --trace sort_trace.json
    python benchmarks/trace_timeline.py sort_trace.json --png docs/profile_sort.png

Draws the window of the last range named ``--range`` (default ``vyre.lib.sort``, the range
``profile_sort.py`` opens around each sort where the backend pushes its ``vyre`` NVTX range):
the range on the host, the driver's launch calls under it, the range as CUPTI projects it on the
GPU, and one row per CUDA stream with every kernel labelled by its name. Prints the kernels of the
window as a table too. Needs matplotlib.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

Event = dict[str, Any]
LAUNCHES = ("cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernel", "cuGraphLaunch", "cudaGraphLaunch")


def spans(events: list[Event], category: str, name: str | None = None) -> list[Event]:
    """Complete events (``ph == "X"``) of ``category`` (and ``name``), by start time."""
    found = [e for e in events if e.get("ph") == "X" and e.get("cat") == category
             and (name is None or e.get("name") == name)]
    return sorted(found, key=lambda e: float(e["ts"]))


def window(events: list[Event], name: str) -> tuple[float, float, float]:
    """The start of the last host range ``name``, and the start and end of its GPU projection
    (the host range's own span when CUPTI projected none)."""
    host = spans(events, "user_annotation", name)
    if not host:
        raise SystemExit(f"no range named {name!r} in the trace")
    lo = float(host[-1]["ts"])
    gpu = [e for e in spans(events, "gpu_user_annotation", name) if float(e["ts"]) >= lo]
    if not gpu:
        return lo, lo, lo + float(host[-1]["dur"])
    return lo, float(gpu[0]["ts"]), float(gpu[0]["ts"]) + float(gpu[0]["dur"])


def inside(items: list[Event], lo: float, hi: float) -> list[Event]:
    return [e for e in items if float(e["ts"]) >= lo and float(e["ts"]) + float(e["dur"]) <= hi + 1.0]


def draw(rows: list[tuple[str, list[Event]]], lo: float, png: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({e["name"] for label, row in rows if label.startswith("CUDA stream") for e in row})
    colours = plt.get_cmap("tab10").colors
    fig, ax = plt.subplots(figsize=(13, 1.2 + 0.6 * len(rows) + 0.22 * len(names)))
    for y, (label, row) in enumerate(reversed(rows)):
        for e in row:
            x0, w = float(e["ts"]) - lo, max(float(e["dur"]), 0.2)
            kernel = label.startswith("CUDA stream")
            colour = colours[names.index(e["name"]) % len(colours)] if kernel else "#9ecae1"
            ax.broken_barh([(x0, w)], (y - 0.38, 0.76), facecolors=colour, edgecolor="black", linewidth=0.4)
            if not kernel and w > 40:
                ax.text(x0 + w / 2, y, e["name"], ha="center", va="center", fontsize=7, clip_on=True)
    ax.set_yticks(range(len(rows)), [label for label, _ in reversed(rows)])
    ax.set_xlabel("microseconds from the start of the range")
    ax.set_title(title)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[i % len(colours)]) for i in range(len(names))]
    ax.legend(handles, names, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=2, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=120, bbox_inches="tight")
    print(f"wrote {png}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path, help="a Chrome trace from torch.profiler (export_chrome_trace)")
    parser.add_argument("--range", default="vyre.lib.sort", help="draw the last range of this name")
    parser.add_argument("--png", type=Path, default=Path("profile_timeline.png"))
    parser.add_argument("--title", default="CUPTI (torch.profiler): one vyre.lib.sort of 2^24 u32 keys")
    args = parser.parse_args()
    data = json.loads(args.trace.read_text())
    events: list[Event] = data["traceEvents"] if isinstance(data, dict) else data
    lo, gpu_lo, hi = window(events, args.range)
    kernels = inside(spans(events, "kernel"), gpu_lo, hi)  # what the range launched, not earlier work
    launches = [e for e in inside(spans(events, "cuda_driver") + spans(events, "cuda_runtime"), lo, hi)
                if e["name"] in LAUNCHES]
    rows: list[tuple[str, list[Event]]] = [
        (f"host: {args.range}", inside(spans(events, "user_annotation", args.range), lo, hi)),
        ("host: kernel launches", launches),
        (f"GPU: {args.range}", inside(spans(events, "gpu_user_annotation", args.range), lo, hi + 1e6)[:1]),
    ]
    for stream in sorted({int(e.get("args", {}).get("stream", e.get("tid", 0))) for e in kernels}):
        rows.append((f"CUDA stream {stream}",
                     [e for e in kernels if int(e.get("args", {}).get("stream", e.get("tid", 0))) == stream]))
    for e in kernels:
        print(f"{float(e['ts']) - lo:9.1f} us  {float(e['dur']):8.1f} us  {e['name']}")
    draw(rows, lo, args.png, args.title)


if __name__ == "__main__":
    main()
