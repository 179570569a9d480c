"""Shared command line of the example scripts: run the program, check it with numpy, or --write it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import vyre
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
    vyre.validate(program)
    backend = vyre.acquire(args.backend) if args.backend else vyre.acquire(allow_reference=True)
    with backend:
        demo(backend, program, args.n)
    print(f"{program.name}: ok on {backend.id}")
