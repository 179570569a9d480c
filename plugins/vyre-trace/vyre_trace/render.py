"""Draw a Chrome-trace JSON file (``VYRE_TRACE_FORMAT=chrome``) as a timeline PNG, one track per thread.

    python3 -m vyre_trace.render vyre-trace.json timeline.png

Needs matplotlib (``python3 -m pip install matplotlib``); the trace itself opens in ui.perfetto.dev.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

FAILED = "red"

def complete_events(trace: dict) -> list[dict]:
    """The ``ph: "X"`` events of a Chrome-trace object, by start time."""
    return sorted((e for e in trace.get("traceEvents", []) if e.get("ph") == "X"), key=lambda e: e["ts"])


def render(trace: dict, out: Path, title: str = "vyre-trace") -> Path:
    """Draw every complete event as a bar on its (pid, tid) track, coloured by dispatch kind (red: failed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    events = complete_events(trace)
    if not events:
        raise ValueError("the trace has no complete (ph: X) events. Fix: trace at least one dispatch.")
    tracks = sorted({(e["pid"], e["tid"]) for e in events})
    kinds = sorted({e.get("cat", "") for e in events})
    colours = {k: plt.get_cmap("tab10")(i % 10) for i, k in enumerate(kinds)}
    span = max(e["ts"] + e["dur"] for e in events) - events[0]["ts"] or 1.0
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.9 * len(tracks)), dpi=110)
    for e in events:
        row = tracks.index((e["pid"], e["tid"]))
        failed = bool(e.get("args", {}).get("error"))
        width = max(e["dur"], span / 250)  # a dispatch too short to see still gets a sliver
        ax.broken_barh([(e["ts"] / 1000.0, width / 1000.0)], (row - 0.35, 0.7),
                       facecolors=FAILED if failed else colours[e.get("cat", "")], edgecolor="black", linewidth=0.4)
        grid = e.get("args", {}).get("grid")
        if e["dur"] > span / 12:  # label only the bars wide enough to hold one
            label = e["name"] + (f" {'x'.join(map(str, grid))}" if grid else "")
            ax.text((e["ts"] + e["dur"] / 2) / 1000.0, row, label, ha="center", va="center", fontsize=7, clip_on=True)
    ax.set_yticks(range(len(tracks)), [f"pid {p} / tid {t}" for p, t in tracks])
    ax.set_ylim(-0.6, len(tracks) + 0.1)  # room for the legend above the top track
    ax.set_xlabel("time since the first dispatch (ms)")
    ax.set_title(title)
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in [*colours.values(), FAILED]],
              labels=[*kinds, "failed"], loc="upper right", fontsize=7, ncol=min(len(kinds) + 1, 5))
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m vyre_trace.render", description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path, help="a Chrome-trace JSON file written by vyre-trace")
    parser.add_argument("out", type=Path, help="the PNG to write")
    parser.add_argument("--title", default="vyre-trace", help="title of the picture")
    args = parser.parse_args(argv)
    try:
        trace = json.loads(args.trace.read_text(encoding="utf-8"))
        render(trace, args.out, args.title)
    except (OSError, ValueError, KeyError) as exc:
        print(f"vyre_trace.render: error: {exc}\nFix: pass a trace written with VYRE_TRACE_FORMAT=chrome and a "
              "writable PNG path.", file=sys.stderr)
        return 1
    except ImportError:
        print("vyre_trace.render: error: matplotlib is not installed. Fix: python3 -m pip install matplotlib",
              file=sys.stderr)
        return 1
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
