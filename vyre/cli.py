"""The ``vyre`` command line: ``backends``, ``ops``, ``plugins``, ``run``, ``validate`` and plugin verbs.

Errors print what failed and a ``Fix:`` line naming the command-line flag to change, and exit
non-zero: 2 for usage and validation errors, 1 for runtime errors. No error shows a traceback
unless ``VYRE_DEBUG=1`` is set.
"""

from __future__ import annotations

import argparse
import os
import re
import stat
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from vyre import __version__, settings
from vyre.driver import registry
from vyre.driver.errors import Finding, InvalidProgram, InvalidSetting, ValidationError, VyreError

if TYPE_CHECKING:
    from vyre.ir.text import SourceMap

ENV_DEBUG = settings.DEBUG


class UsageError(VyreError):
    """A command-line argument is wrong (exit status 2)."""

    default_fix = "run `vyre COMMAND --help` for the accepted arguments."


USAGE_ERRORS = (ValidationError, InvalidProgram, InvalidSetting, UsageError)

# Library errors give Python advice ("pass DispatchConfig(grid=...)"); on the command line the
# same error names the flag instead. Each rule rewrites one Python phrase of a Fix sentence.
CLI_ADVICE: tuple[tuple[str, str | Callable[[re.Match[str]], str]], ...] = (
    (r"grid=\(gx, gy, gz\) to the kernel call, or DispatchConfig\(grid=\([^)]*\)\) to backend\.dispatch",
     "--grid X,Y,Z (e.g. --grid 64,1,1)"),
    (r"DispatchConfig\(grid=\([^)]*\)\)", "--grid X,Y,Z (e.g. --grid 64,1,1)"),
    (r"DispatchConfig\(elements=N\)", "--elements N (or --elements NAME of an input buffer)"),
    (r"ptx_version='?([0-9.]+)'? or newer \(or None to choose automatically\)",
     r"--ptx-version \1 or newer (or leave --ptx-version out to choose one)"),
    (r"use one of (sm_[0-9a-z]+(?:, sm_[0-9a-z]+)*)", r"pass --sm with one of \1 (e.g. --sm 90)"),
    (r"(?:vyre\.)?acquire\('reference'\) / (?:vyre\.)?acquire\(allow_reference=True\) / --backend reference",
     "--backend reference"),
    (r"(?:use )?vyre\.acquire\(allow_reference=True\)", "use --backend reference"),
    (r"acquire a new backend (?:with vyre\.acquire\('cuda'\)(?: \([^)]*\))?(?: after dropping [^;.]*)?"
     r"|\(vyre\.acquire\(\)\) and rerun)",
     "rerun the command (it starts a fresh backend)"),
)


# The command line reads .vyre text: the IR's Fix phrases name the builder (Expr.cast, Node.let ...),
# which the text spells differently. Each rule rewrites one builder phrase in the .vyre grammar.
TEXT_ADVICE: tuple[tuple[str, str | Callable[[re.Match[str]], str]], ...] = (
    (r"Expr\.cast\(DataType\.(\w+), \.\.\.\)", lambda m: f"cast({m[1].lower()}, ...)"),
    (r"with Expr\.cast\b", "with cast(DTYPE, x)"),
    (r"Expr\.ne\(x, Expr\.u32\(0\)\)", "ne(x, u32:0)"),
    (r"with Expr\.select", "with select(c, a, b)"),
    (r"with Node\.let\b(?!\()", "with `let NAME = EXPR`"),
    (r"with Node\.let\('([^']*)', \.\.\.\)", r"with `let \1 = ...`"),
    (r"add a BufferDecl named ('[^']*') to the program's buffers", r"declare it with a `buffer` line"),
    (r"declare buffers with BufferDecl\.[\w/]+", "declare buffers as `buffer NAME: ACCESS DTYPE[COUNT] @BINDING`"),
    (r"build (?:statements|expressions) with the (?:Node|Expr)\.\* constructors", "write the .vyre grammar"),
)


def cli_fix(fix: str) -> str:
    """``fix`` in command-line words: Python calls become flags, builder calls .vyre text syntax."""
    for pattern, advice in (*CLI_ADVICE, *TEXT_ADVICE):
        fix = re.sub(pattern, advice, fix)
    return fix


class Parser(argparse.ArgumentParser):
    """``argparse`` whose usage errors end with a ``Fix:`` line like every other vyre error."""

    def error(self, message: str):  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\nFix: run `{self.prog} --help` for the accepted arguments.\n")


def progress(message: str) -> None:
    """One progress line on stderr (stdout stays for results)."""
    print(f"vyre: {message}", file=sys.stderr, flush=True)


def printable(text: str) -> str:
    """``text`` with every character that is not printable (terminal controls, format characters such
    as U+202E, line breaks) written as a Python escape: for names that come from a program."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class FileRefused(Exception):
    """A file ``read_regular_file`` will not read: ``problem`` says why, ``fix`` what to pass instead (no
    final period, so that a caller can add its own alternative)."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(problem)
        self.problem, self.fix = problem, fix


_FILE_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def read_regular_file(path: str, limit: int, what: str = "file") -> bytes:
    """The bytes of regular file ``path``, at most ``limit`` of them; ``FileRefused`` (whose Fix names
    ``what``, e.g. ``".vyre file"``) for anything else.

    The type and size are checked on the open descriptor before a byte is read (opened non-blocking,
    so a FIFO cannot stall us), and no more than ``limit`` + 1 bytes are ever read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise FileRefused(exc.strerror or str(exc), f"pass the path of an existing {what} you can read") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((name for test, name in _FILE_KINDS if test(st.st_mode)), "a special file")
            raise FileRefused(f"it is {kind}, not a regular file",
                              f"pass a regular {what} (copy data from a pipe or device into a file first)")
        too_big = FileRefused(f"it has {st.st_size} bytes, over the limit of {limit} bytes",
                              f"pass a {what} of at most {limit} bytes")
        if st.st_size > limit:
            raise too_big
        chunks, left = [], limit + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 24))):
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise too_big  # it grew after the check
        return b"".join(chunks)
    finally:
        os.close(fd)


def load_program(path: str):
    """Parse and validate a ``.vyre`` text file; each finding names ``path:line`` as ``vyre validate`` does."""
    from vyre.ir.validate import findings

    program, source_map = load_located(path)
    found = findings(program)
    if found:
        raise ValidationError([located(f, path, source_map) for f in found])
    return program


def located(finding: Finding, path: str, source_map: SourceMap | None) -> Finding:
    """``finding`` with ``path:line:`` of the statement it is about in front of its message."""
    line = source_map.line_of(finding.path) if source_map is not None and finding.path else None
    where = f"{path}:{line}: " if line else f"{path}: "
    return Finding(finding.code, where + finding.message, finding.fix, finding.path)


def load_located(path: str):
    """Parse a ``.vyre`` text file (a regular file of at most ``MAX_TEXT_CHARS`` bytes) into a Program and
    its ``SourceMap`` (IR paths -> lines)."""
    from vyre.ir.text import MAX_TEXT_CHARS, parse_with_source_map

    try:
        text = read_regular_file(path, MAX_TEXT_CHARS, ".vyre file").decode("utf-8")
    except FileRefused as exc:
        raise InvalidProgram(f"cannot read {path}: {exc.problem}", f"{exc.fix}.") from None
    except UnicodeDecodeError as exc:
        raise InvalidProgram(f"{path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})",
                             "pass a .vyre text file saved as UTF-8 (Program.to_text() writes one).") from None
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
                print(f"[{f.code}] {f.message}{where}\n    Fix: {cli_fix(f.fix)}.")
            continue
        except InvalidProgram as exc:
            bad += 1
            print(f"{path}: {exc.message}\n    Fix: {cli_fix(exc.fix)}")
            continue
        print(f"{path}: ok")
    return 2 if bad else 0


def cmd_run(args: argparse.Namespace) -> int:
    from vyre.cli_run import run_file

    return run_file(args)


def cmd_ops(args: argparse.Namespace) -> int:
    from vyre.cli_inspect import list_ops

    return list_ops()


def cmd_plugins(args: argparse.Namespace) -> int:
    from vyre.cli_inspect import list_plugins

    return list_plugins()


# ---- parser and entry point --------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="vyre", description="vyre GPU compute IR: run, check and inspect programs.")
    parser.add_argument("--version", action="version", version=f"vyre {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("backends", help="list discovered backends, their rank and whether they can start")
    p.set_defaults(func=cmd_backends)
    p = sub.add_parser("ops", help="list registered ops for Expr.call and which backends run them")
    p.set_defaults(func=cmd_ops)
    p = sub.add_parser("plugins", help="list loaded plugins, their distributions and the hooks they implement")
    p.set_defaults(func=cmd_plugins)
    p = sub.add_parser("validate", help="validate .vyre files and print findings with fixes")
    p.add_argument("files", nargs="+", metavar="FILE.vyre")
    p.set_defaults(func=cmd_validate)
    p = sub.add_parser("run", help="run a .vyre program on the best available backend")
    p.add_argument("file", metavar="FILE.vyre")
    p.add_argument("--input", "-i", action="append", default=[], metavar="NAME=SOURCE",
                   help="SOURCE: a raw binary FILE, @random[:N] (seeded random elements) or @zeros[:N]")
    p.add_argument("--backend", "-b", metavar="ID", help="backend id (ID or ID:N); default: best available")
    p.add_argument("--out", metavar="DIR", help="write each output to DIR/NAME.bin (DIR is created if missing; a "
                   "name that is not A-Z a-z 0-9 _ . - is percent-encoded, so every file stays inside DIR)")
    p.add_argument("--force", action="store_true", help="overwrite existing files in --out DIR (default: refuse)")
    p.add_argument("--seed", type=int, default=0, help="seed of @random inputs, 0 or more (default 0)")
    p.add_argument("--elements", metavar="N|NAME",
                   help="elements the grid covers: a number or an input buffer's name (default: the largest buffer)")
    p.add_argument("--grid", metavar="X,Y,Z", help="explicit grid of workgroups")
    p.add_argument("--show", type=int, default=8, metavar="K", help="elements printed per output (default 8)")
    p.set_defaults(func=cmd_run)
    try:
        registry.get_plugin_manager().hook.vyre_cli_commands(subparsers=sub)
    except Exception as exc:  # a broken plugin verb must not break the built-in ones
        progress(f"warning: a plugin failed to add its commands: {type(exc).__name__}: {exc}")
    return parser


def report_error(exc: VyreError, prog: str = "vyre") -> int:
    """Print ``exc`` as ``error:`` + ``Fix:`` lines (command-line advice); return its exit code."""
    if isinstance(exc, ValidationError):  # every finding already carries its Fix sentence
        print(f"{prog}: error: {cli_fix(exc.message)}", file=sys.stderr)
    else:
        print(f"{prog}: error: {exc.message.rstrip('.')}\nFix: {cli_fix(exc.fix)}", file=sys.stderr)
    return 2 if isinstance(exc, USAGE_ERRORS) else 1


def run_command(call: Callable[[], int | None], prog: str = "vyre") -> int:
    """Run a command-line verb: every error becomes ``error:`` + ``Fix:`` lines and an exit status.

    A ``VyreError`` keeps its message; anything else (a bug, a plugin's crash, the host out of
    memory) prints one line instead of a traceback, unless ``VYRE_DEBUG=1`` asks for it.
    """
    try:
        return int(call() or 0)
    except VyreError as exc:
        _debug_traceback()
        return report_error(exc, prog)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # stdout was closed early (`vyre ops | head -1`): nothing left to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except MemoryError:
        _debug_traceback()
        print(f"{prog}: error: out of host memory\nFix: use smaller inputs (@random:N with a smaller N).",
              file=sys.stderr)
        return 1
    except OSError as exc:
        _debug_traceback()
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"{prog}: error: {exc.strerror or exc}{where}\nFix: check that the path exists and is writable; "
              f"set {ENV_DEBUG}=1 to see where it failed.", file=sys.stderr)
        return 1
    except Exception as exc:  # the last line of defence: users get one line and a Fix, not a traceback
        _debug_traceback()
        message = str(exc).splitlines()[0] if str(exc) else ""
        print(f"{prog}: internal error: {type(exc).__name__}: {message}\nFix: this is a bug in vyre or a plugin; "
              f"rerun with {ENV_DEBUG}=1 to see the traceback and report it.", file=sys.stderr)
        return 1


def _debug_traceback() -> None:
    if settings.debug():
        traceback.print_exc()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    return run_command(lambda: args.func(args))


if __name__ == "__main__":  # run the imported module, so that its error classes are the ones raised
    from vyre import cli

    sys.exit(cli.main())
