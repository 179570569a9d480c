"""First call of ``vyre.lib`` functions in a fresh process: the host time spent lowering their
``@vk.kernel`` programs, which no cubin cache saves.

Run anywhere: ``python benchmarks/bench_first_call.py [--backend ID] [--repeat N] [--json PATH]
[--base [LABEL=]DIR ...]``. Each function runs in ``N`` fresh processes (default 5), each of which imports
``vyre.lib``, then times ``fn(x)`` twice on ``x = np.arange(5000, dtype=np.uint32)`` with the
backend ``ID`` (default ``reference``: the CPU oracle). The first call lowers (or reads from the
specialisation cache, ``docs/kernels.md``) every program the call needs; the second reuses them.
The table gives the median of each. ``VYRE_SPEC_CACHE=0`` in the environment measures a cold
lowering; by default the script runs every function once beforehand so that the cache is warm,
as it is for a user after the first run. ``--base [LABEL=]DIR`` (repeatable) also measures another checkout (put on
``PYTHONPATH``), e.g. the commit before a change, in the same run; the checkouts take turns.
Bytecode is cached under a temporary ``PYTHONPYCACHEPREFIX`` (even with
``PYTHONDONTWRITEBYTECODE`` set), as an installed package has its ``.pyc`` files.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CALLS = {
    "inclusive_scan": "lib.inclusive_scan(x)",
    "exclusive_scan": "lib.exclusive_scan(x)",
    "reduce": "lib.reduce(x)",
    "select_if": "lib.select_if(x, 100, 4000)",
    "histogram": "lib.histogram(x % 64, 64)",
    "sort": "lib.sort(x[::-1].copy())",
    "unique": "lib.unique(x % 100)",
    "run_length_encode": "lib.run_length_encode(x // 7)",
    "segmented_reduce": "lib.segmented_reduce(x, np.arange(0, 5000, 50, dtype=np.uint32))",
}

CHILD = """
import time, sys
import numpy as np
import vyre
from vyre import lib
vyre.default_backend()  # started before timing: plugin loading is not the call's cost
x = np.arange(5000, dtype=np.uint32)
out = []
for _ in range(2):
    t0 = time.perf_counter()
    {call}
    out.append(time.perf_counter() - t0)
print(out[0] * 1e3, out[1] * 1e3)
"""


def first_second(root: Path, backend: str, call: str, env: dict[str, str]) -> tuple[float, float]:
    """(first, second) call time in ms of ``call`` in a fresh process importing vyre from ``root``."""
    env = {**env, "PYTHONPATH": str(root), "VYRE_BACKEND": backend}
    code = CHILD.format(backend=backend, call=call)
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True,
                         check=False)
    if out.returncode != 0:
        raise SystemExit(f"{call} failed in {root}:\n{out.stderr}")
    first, second = out.stdout.split()[-2:]
    return float(first), float(second)


def measure(roots: dict[str, Path], backend: str, repeat: int, env: dict[str, str], names: list[str]
            ) -> dict[str, dict[str, tuple[float, float]]]:
    """Median (first, second) per checkout and function; the checkouts take turns, so a change in
    the machine's load hits them alike."""
    runs: dict[str, dict[str, list[tuple[float, float]]]] = {label: {n: [] for n in names} for label in roots}
    for _ in range(repeat):
        for name in names:
            for label, root in roots.items():
                runs[label][name].append(first_second(root, backend, CALLS[name], env))
    return {label: {n: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs))
                    for n, rs in by_name.items()} for label, by_name in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="reference")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--base", action="append", default=[], metavar="[LABEL=]DIR",
                        help="another checkout to measure the same way (repeatable)")
    parser.add_argument("--only", nargs="*", choices=sorted(CALLS), help="measure just these functions")
    args = parser.parse_args()
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="vyre-bench-pyc-")
    roots = {"this": ROOT}
    for i, base in enumerate(args.base):
        label, _, path = base.rpartition("=") if "=" in base else (f"base{i + 1 if i else ''}", "", base)
        roots[label] = Path(path).resolve()
    names = args.only or list(CALLS)
    for root in roots.values():  # warm whatever caches a first run fills (cubins, specialisations)
        for name in names:
            first_second(root, args.backend, CALLS[name], env)
    results = measure(roots, args.backend, args.repeat, env, names)
    width = {label: max(12, len(label) + 9) for label in results}
    print("function".ljust(20) + "".join(f"{label + ' first':>{width[label]}}{label + ' second':>{width[label]}}"
                                         for label in results))
    for name in names:
        print(name.ljust(20) + "".join(f"{r[name][0]:{width[label]}.1f}{r[name][1]:{width[label]}.1f}"
                                       for label, r in results.items()))
    if args.json:
        args.json.write_text(json.dumps({label: {n: {"first_ms": f, "second_ms": s} for n, (f, s) in r.items()}
                                         for label, r in results.items()}, indent=1))


if __name__ == "__main__":
    main()
