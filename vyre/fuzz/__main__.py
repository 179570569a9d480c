"""``python -m vyre.fuzz``: differential fuzzing of a backend against the oracle."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vyre.cli import Parser, UsageError, run_command
from vyre.fuzz.paths import PATHS


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m vyre.fuzz", description=__doc__)
    parser.add_argument("--backend", default=None, help="backend id (default: best available)")
    parser.add_argument("--count", type=int, default=200, help="generated programs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--input-sets", type=int, default=3, help="random input sets per program")
    parser.add_argument("--corpus", type=Path, default=Path("tests/fuzz/corpus"),
                        help="where shrunk failing cases are written")
    parser.add_argument("--long-process", action="store_true",
                        help="every dispatch path in turn, coarsening settings interleaved, memory dirtied "
                             "between programs (finds results that depend on what ran before)")
    parser.add_argument("--path", default=None, choices=PATHS,
                        help="every run through this one dispatch path (inplace: inputs as CuPy arrays)")
    parser.add_argument("--wide", action="store_true",
                        help="generate programs that also use the 64-bit types U64, I64 and F64")
    parser.add_argument("--replay", type=Path, default=None, metavar="CASE.vyre",
                        help="replay one corpus case, after the programs that ran before it when it was found")
    args = parser.parse_args(argv)
    return run_command(lambda: _run(args), prog="python -m vyre.fuzz")


def _run(args: argparse.Namespace) -> int:
    import vyre
    from vyre.fuzz import fuzz

    if args.count < 0 or args.input_sets < 1 or args.seed < 0:
        raise UsageError(f"--count {args.count}, --input-sets {args.input_sets}, --seed {args.seed}: out of range",
                         "pass --count N >= 0, --input-sets K >= 1 and --seed S >= 0.")
    backend = vyre.acquire(args.backend)
    if args.replay is not None:
        return _replay(backend, args.replay)
    step = max(1, args.count // 20)

    def progress(done: int, total: int) -> None:
        if done % step == 0 or done == total:
            print(f"  {done}/{total} programs", file=sys.stderr, flush=True)

    report = fuzz(backend, args.count, args.seed, args.input_sets, args.corpus, progress, args.long_process,
                  path=args.path, wide=args.wide)
    print(f"backend {backend.id}: {report.summary()}")
    for line in report.mismatches:
        print("  MISMATCH", line)
    return 1 if report.mismatches else 0


def _replay(backend, path: Path) -> int:
    from vyre.fuzz import read_case, replay

    if not path.is_file() or not path.with_suffix(".json").is_file():
        raise UsageError(f"--replay {path}: no such case (a .vyre file with its .json beside it)",
                         "pass a case written to the corpus, e.g. tests/fuzz/corpus/NAME.vyre.")
    case = read_case(path)
    before = f"after {case.history.index} programs of seed {case.history.seed}" if case.history else "alone"
    detail = replay(backend, case)
    print(f"backend {backend.id}: case {case.name} ({before}): {'MISMATCH ' + detail if detail else 'agrees'}")
    return 1 if detail else 0


if __name__ == "__main__":
    sys.exit(main())
