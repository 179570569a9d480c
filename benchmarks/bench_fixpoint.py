"""Fixed-point loops: ``dispatch_until`` in a conditional CUDA graph node against batched readbacks.

Run on a GPU machine: ``python benchmarks/bench_fixpoint.py [--quick]``. Prints one table headed
by the card's name, writes ``$OUT/bench_fixpoint.json`` (or ``--json PATH``) and draws
``docs/fixpoint.png`` (or ``--png PATH``; ``--chart JSON`` redraws from a JSON file).

The loop: min-label propagation along ``width`` disjoint chains of ``length`` vertices, labels
descending along each chain, so the smallest label moves one hop per iteration and the loop takes
exactly ``length`` iterations (the last one changes nothing). One iteration is two kernels written
with ``@vyre.kernel`` (relax into ``new``, copy back into ``old``) plus the flag clear. Each case
runs with conditional graph nodes (the whole loop is one graph launch) and with
``VYRE_CUDA_CONDITIONAL=0`` (batches of 1, 2, 4 ... 64 iterations, one readback each), and, for
comparison, as a Python loop of ``dispatch_sequence`` calls that reads the flag back after every
iteration; all must give the same iteration count and labels, which must equal the known answer. Times: median wall
time of a whole ``dispatch_until`` call after a warm-up call, divided by the iterations.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import vyre  # noqa: E402
from vyre.driver.config import DispatchConfig  # noqa: E402
from vyre_cuda.bench import add_chart_arguments, redraw_if_asked  # noqa: E402

#: mode -> VYRE_CUDA_CONDITIONAL; None: a Python loop of ``dispatch_sequence`` reading the flag each iteration
MODES = {"conditional node": "1", "batched readback": "0", "readback per iteration": None}


@vyre.kernel(workgroup_size=256)
def relax(length: vyre.u32, old: vyre.In[vyre.u32], new: vyre.InOut[vyre.u32], flag: vyre.InOut[vyre.u32]):
    """``new[v]`` = the smallest label of ``v`` and its chain neighbours; sets the flag on a change."""
    v = vyre.gid()
    if v < len(old):
        m = old[v]
        if v % length != 0:
            m = min(m, old[v - 1])
        if (v + 1) % length != 0 and v + 1 < len(old):
            m = min(m, old[v + 1])
        new[v] = m
        if m != old[v]:
            flag[0] = 1


@vyre.kernel(workgroup_size=1)
def clear(flag: vyre.InOut[vyre.u32]):
    """``flag[0] = 0`` (the readback-per-iteration loop's first step)."""
    flag[0] = 0


@vyre.kernel(workgroup_size=256)
def copy_back(new: vyre.In[vyre.u32], old: vyre.InOut[vyre.u32]):
    """``old = new``."""
    v = vyre.gid()
    if v < len(old):
        old[v] = new[v]


def chain_labels(length: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Start labels (descending along each chain) and the fixed point (each chain's smallest label)."""
    start = (np.arange(width, dtype=np.uint32)[:, None] * np.uint32(length)
             + np.arange(length - 1, -1, -1, dtype=np.uint32)[None, :]).ravel()
    return start, np.repeat(np.arange(width, dtype=np.uint32) * np.uint32(length), length)


def loop_on_host(backend, steps: list, flag, limit: int) -> int:
    """The fixed point with one ``dispatch_sequence`` and one flag readback per iteration."""
    steps = [(clear.program, [flag], DispatchConfig(grid=(1, 1, 1))), *steps]
    for iteration in range(1, limit + 1):
        (word,) = backend.dispatch_sequence(steps, reads=[(flag, 0, 4)])
        if not word.view(np.uint32)[0]:
            return iteration
    return limit


def run_case(backend, length: int, width: int, reps: int) -> list[dict]:
    """Every mode on one chain set: checked results and wall times."""
    n = length * width
    start, expected = chain_labels(length, width)
    h_len, h_old, h_new, h_flag = (backend.allocate_resident(b) for b in (4, 4 * n, 4 * n, 4))
    backend.upload_resident(h_len, np.array([length], np.uint32))
    config = DispatchConfig(elements=n)
    steps = [(relax.program, [h_len, h_old, h_new, h_flag], config), (copy_back.program, [h_new, h_old], config)]
    rows = []
    try:
        for mode, switch in MODES.items():
            os.environ["VYRE_CUDA_CONDITIONAL"] = switch or "1"
            times, iterations = [], None
            for _ in range(reps + 1):  # the first call captures the graphs
                backend.upload_resident(h_old, start)
                backend.upload_resident(h_new, start)
                t0 = time.perf_counter()
                if switch is None:
                    iterations = loop_on_host(backend, steps, h_flag, 10 * length + 10)
                else:
                    iterations = backend.dispatch_until(steps, h_flag, 10 * length + 10)
                times.append(time.perf_counter() - t0)
            labels = backend.download_resident(h_old).view(np.uint32)
            assert iterations == length, (mode, length, width, iterations)
            assert np.array_equal(labels, expected), (mode, length, width)
            total = statistics.median(times[1:])
            rows.append({"mode": mode, "length": length, "width": width, "vertices": n, "iterations": iterations,
                         "total_ms": total * 1e3, "us_per_iteration": total / iterations * 1e6})
    finally:
        os.environ.pop("VYRE_CUDA_CONDITIONAL", None)
        for h in (h_len, h_old, h_new, h_flag):
            backend.free_resident(h)
    return rows


def draw(result: dict, png: Path) -> None:
    """Time per iteration against the iteration count, one line per mode and width."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.5, 5))
    styles = {"conditional node": "-o", "batched readback": "--s", "readback per iteration": ":^"}
    for width in sorted({r["width"] for r in result["rows"]}):
        for mode, style in styles.items():
            rows = [r for r in result["rows"] if r["width"] == width and r["mode"] == mode]
            ax.plot([r["iterations"] for r in rows], [r["us_per_iteration"] for r in rows], style,
                    label=f"{mode}, {width} chain{'s' if width > 1 else ''}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("iterations of the fixed-point loop (chain length)")
    ax.set_ylabel("µs per iteration (whole dispatch_until call)")
    ax.set_title(f"dispatch_until, label propagation along chains, on {result['card']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"wrote {png}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repetitions")
    parser.add_argument("--reps", type=int, default=None)
    add_chart_arguments(parser, ROOT / "docs" / "fixpoint.png")
    args = parser.parse_args()
    if redraw_if_asked(args, draw):
        return
    backend = vyre.acquire("cuda")
    lengths = (16, 128, 1024) if args.quick else (8, 32, 128, 512, 2048)
    widths = (1, 4096)
    reps = args.reps or (3 if args.quick else 7)
    reason = backend.sequences.conditional_reason()
    rows = [r for width in widths for length in lengths for r in run_case(backend, length, width, reps)]
    card = backend.info.name
    print(f"# {card}, driver {backend.info.driver_version}; conditional nodes: {reason or 'used'}")
    print(f"{'mode':22} {'chains':>7} {'iterations':>10} {'total ms':>10} {'µs/iteration':>13}")
    for r in rows:
        print(f"{r['mode']:22} {r['width']:7} {r['iterations']:10} {r['total_ms']:10.3f} {r['us_per_iteration']:13.2f}")
    result = {"card": card, "driver": backend.info.driver_version, "conditional": reason or "used", "rows": rows}
    path = args.json or os.path.join(os.environ.get("OUT", "."), "bench_fixpoint.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {path}")
    draw(result, Path(args.png))


if __name__ == "__main__":
    main()
