"""Shared command line of the example scripts: run the program, check it with numpy, or --write it.

Without a GPU (or without CuPy) the scripts run on the CPU reference oracle and say so; a backend
that cannot start is one error line with its Fix, not a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import vyre
from vyre.driver.errors import VyreError
from vyre.ir import Program


def main(build: Callable[[], Program], demo: Callable[[object, Program, int], None], file: str,
         default_n: int = 1 << 16) -> None:
    """``--write``: write ``<script>.vyre`` (the text form); otherwise run ``demo(backend, program, n)``."""
    parser = argparse.ArgumentParser(description=(build.__doc__ or "").strip())
    parser.add_argument("--write", action="store_true", help="write the program's .vyre text next to this script")
    parser.add_argument("--backend", help="backend id (default: best available, else the reference oracle)")
    parser.add_argument("-n", type=int, default=default_n, help=f"problem size (default {default_n})")
    args = parser.parse_args()
    program = build()
    if args.write:
        path = Path(file).with_suffix(".vyre")
        path.write_text(program.to_text(), encoding="utf-8")
        print(f"wrote {path}")
        return
    try:
        backend = vyre.acquire(args.backend) if args.backend else vyre.acquire(allow_reference=True)
        with backend:
            demo(backend, program, args.n)
    except VyreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    where = " (the CPU reference oracle: no GPU backend started)" if backend.id == "reference" else ""
    print(f"{program.name}: ok on {backend.id}{where}")
