"""``python -m vyre.fuzz``: differential fuzzing of a backend against the oracle."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vyre.cli import Parser, UsageError, run_command


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m vyre.fuzz", description=__doc__)
    parser.add_argument("--backend", default=None, help="backend id (default: best available)")
    parser.add_argument("--count", type=int, default=200, help="generated programs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--input-sets", type=int, default=3, help="random input sets per program")
    parser.add_argument("--corpus", type=Path, default=Path("tests/fuzz/corpus"),
                        help="where shrunk failing cases are written")
    args = parser.parse_args(argv)
    return run_command(lambda: _run(args), prog="python -m vyre.fuzz")


def _run(args: argparse.Namespace) -> int:
    import vyre
    from vyre.fuzz import fuzz

    if args.count < 0 or args.input_sets < 1 or args.seed < 0:
        raise UsageError(f"--count {args.count}, --input-sets {args.input_sets}, --seed {args.seed}: out of range",
                         "pass --count N >= 0, --input-sets K >= 1 and --seed S >= 0.")
    backend = vyre.acquire(args.backend)
    step = max(1, args.count // 20)

    def progress(done: int, total: int) -> None:
        if done % step == 0 or done == total:
            print(f"  {done}/{total} programs", file=sys.stderr, flush=True)

    report = fuzz(backend, args.count, args.seed, args.input_sets, args.corpus, progress)
    print(f"backend {backend.id}: {report.summary()}")
    for line in report.mismatches:
        print("  MISMATCH", line)
    return 1 if report.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
