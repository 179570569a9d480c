"""Trace a small workload on the reference oracle and draw it: the picture in docs/plugins.md.

    python3 plugins/vyre-trace/demo_trace.py [OUT.png] [--json TRACE.json]

Two threads run the example programs (xor, saxpy, histogram) through ``dispatch``, a compiled
pipeline and ``dispatch_sequence``, and one dispatch fails; the tracer is registered in-process
(no install needed), writes the Chrome trace, and ``vyre_trace.render`` draws it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np

import vyre
from vyre.driver.config import DispatchConfig
from vyre.driver.registry import get_plugin_manager
from vyre.ir import parse

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def program(name: str):
    return parse((ROOT / "examples" / f"{name}.vyre").read_text(encoding="utf-8"))


def worker(seed: int, n: int) -> None:
    """One thread's dispatches: default grid, explicit elements, explicit grid, a pipeline, a sequence."""
    rng = np.random.default_rng(seed)
    backend = vyre.acquire("reference")
    xor, saxpy, hist = program("xor"), program("saxpy"), program("histogram")
    words = rng.integers(0, 2**32, n, dtype=np.uint32)
    backend.dispatch(xor, [words, words[::-1].copy()])
    backend.dispatch(hist, [words], DispatchConfig(elements=n, label="histogram"))
    x = rng.standard_normal(n).astype(np.float32)
    backend.dispatch(saxpy, [np.float32([2.0]), x, x.copy()], DispatchConfig(grid=(n // 256, 1, 1)))
    pipe = backend.compile(xor)
    for _ in range(2):
        pipe.dispatch([words, words])
    handles = [backend.allocate_resident(words.nbytes) for _ in range(2)]
    backend.dispatch_sequence([(xor, handles, None), (xor, handles, None)])
    try:
        backend.dispatch(xor, [words])  # one input too few: a failed dispatch, outlined in red
    except vyre.errors.VyreError:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=ROOT / "docs" / "vyre-trace.png")
    parser.add_argument("--json", type=Path, default=None, help="also keep the Chrome-trace JSON here")
    parser.add_argument("-n", type=int, default=1 << 16, help="elements per buffer (default 65536)")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))  # the plugin's own package, installed or not
    from vyre_trace.render import render
    from vyre_trace.tracer import Tracer, write_chrome_trace

    get_plugin_manager().register(Tracer(fmt="chrome"), name="demo-trace")
    threads = [threading.Thread(target=worker, args=(seed, args.n)) for seed in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    trace_path = args.json or Path(tempfile.mkdtemp()) / "vyre-trace.json"
    write_chrome_trace(trace_path)
    render(json.loads(trace_path.read_text()), args.out, title="vyre-trace: two threads on the reference oracle")
    print(f"wrote {trace_path} and {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
