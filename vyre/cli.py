"""The ``vyre`` command line: ``backends``, ``run``, ``validate`` and the verbs plugins add.

Errors print what failed and a ``Fix:`` line and exit non-zero: 2 for usage and validation
errors, 1 for runtime errors. A ``VyreError`` never shows a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from vyre import __version__
from vyre.driver import registry
from vyre.driver.errors import InvalidProgram, ValidationError, VyreError

USAGE_ERRORS = (ValidationError, InvalidProgram)


def progress(message: str) -> None:
    """One progress line on stderr (stdout stays for results)."""
    print(f"vyre: {message}", file=sys.stderr, flush=True)


def load_program(path: str):
    """Parse a ``.vyre`` text file into a Program (errors name the file)."""
    return load_located(path)[0]


def load_located(path: str):
    """Parse a ``.vyre`` text file into a Program and its ``SourceMap`` (IR paths -> lines)."""
    from vyre.ir.text import parse_with_source_map

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidProgram(f"cannot read {path}: {exc.strerror}",
                             "pass the path of an existing .vyre file.") from None
    return parse_with_source_map(text)


# ---- verbs --------------------------------------------------------------------------------------
def cmd_backends(args: argparse.Namespace) -> int:
    """List discovered backends with rank, availability (and why not) and device."""
    rows = registry.registered_backends()
    print(f"{'id':<12} {'rank':>5}  {'dispatches':<10} {'version':<10} {'distribution':<16} status")
    for info in rows:
        status = _probe(info.id) if info.dispatches else "registered (does not dispatch)"
        print(f"{info.id:<12} {info.rank:>5}  {'yes' if info.dispatches else 'no':<10} {info.version or '-':<10} "
              f"{info.distribution or '-':<16} {status}")
    if not rows:
        print("(no backends registered)")
    for problem in registry.plugin_errors():
        print(f"warning: {problem}")
    return 0


def _probe(backend_id: str) -> str:
    try:
        backend = registry.start_backend(backend_id)
    except VyreError as exc:
        return f"unavailable: {registry.failure_reason(exc)}"
    try:
        device = backend.device_profile().get("name", "?")
    except Exception as exc:  # a probe must not stop the listing
        device = f"? ({type(exc).__name__})"
    finally:
        try:
            backend.shutdown()
        except Exception:  # noqa: S110 - best effort: the probe is over either way
            pass
    return f"available, device: {device}"


def cmd_validate(args: argparse.Namespace) -> int:
    """Validate each file; print every finding with its code and Fix line."""
    from vyre import validate

    bad = 0
    for path in args.files:
        source_map = None
        try:
            program, source_map = load_located(path)
            validate(program)
        except ValidationError as exc:
            bad += 1
            print(f"{path}: {len(exc.findings)} finding(s)")
            for f in exc.findings:
                line = source_map.line_of(f.path) if source_map else None
                where = f" (at {f.path})" if f.path and source_map else ""  # parse errors name their line
                print(f"  {path}:{line}: " if line else "  ", end="")
                print(f"[{f.code}] {f.message}{where}\n    Fix: {f.fix}.")
            continue
        except InvalidProgram as exc:
            bad += 1
            print(f"{path}: {exc.message}\n    Fix: {exc.fix}")
            continue
        print(f"{path}: ok")
    return 2 if bad else 0


def cmd_run(args: argparse.Namespace) -> int:
    from vyre.cli_run import run_file

    return run_file(args)


# ---- parser and entry point --------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vyre", description="vyre GPU compute IR: run, check and inspect programs.")
    parser.add_argument("--version", action="version", version=f"vyre {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("backends", help="list discovered backends, their rank and whether they can start")
    p.set_defaults(func=cmd_backends)
    p = sub.add_parser("validate", help="validate .vyre files and print findings with fixes")
    p.add_argument("files", nargs="+", metavar="FILE.vyre")
    p.set_defaults(func=cmd_validate)
    p = sub.add_parser("run", help="run a .vyre program on the best available backend")
    p.add_argument("file", metavar="FILE.vyre")
    p.add_argument("--input", "-i", action="append", default=[], metavar="NAME=SOURCE",
                   help="SOURCE: a raw binary FILE, @random[:N] (seeded random elements) or @zeros[:N]")
    p.add_argument("--backend", "-b", metavar="ID", help="backend id (ID or ID:N); default: best available")
    p.add_argument("--out", metavar="DIR", help="write each output to DIR/NAME.bin")
    p.add_argument("--seed", type=int, default=0, help="seed of @random inputs (default 0)")
    p.add_argument("--elements", metavar="N|NAME",
                   help="DispatchConfig.elements: a number or an input buffer's name (default: the SPEC 3 rule)")
    p.add_argument("--grid", metavar="X,Y,Z", help="explicit grid of workgroups")
    p.add_argument("--show", type=int, default=8, metavar="K", help="elements printed per output (default 8)")
    p.set_defaults(func=cmd_run)
    try:
        registry.get_plugin_manager().hook.vyre_cli_commands(subparsers=sub)
    except Exception as exc:  # a broken plugin verb must not break the built-in ones
        progress(f"warning: a plugin failed to add its commands: {type(exc).__name__}: {exc}")
    return parser


def report_error(exc: VyreError) -> int:
    """Print ``exc`` as ``error:`` + ``Fix:`` lines; return its exit code."""
    if isinstance(exc, ValidationError):  # every finding already carries its Fix line
        print(f"vyre: error: {exc.message}", file=sys.stderr)
    else:
        print(f"vyre: error: {exc.message.rstrip('.')}\nFix: {exc.fix}", file=sys.stderr)
    return 2 if isinstance(exc, USAGE_ERRORS) else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except VyreError as exc:
        return report_error(exc)
    except KeyboardInterrupt:
        print("vyre: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
