"""``vyre run``: turn ``--input NAME=SOURCE`` flags into buffers, dispatch, summarise the outputs."""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import secrets
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vyre.cli import FileRefused, UsageError, load_program, printable, progress, read_regular_file
from vyre.driver.config import DispatchConfig
from vyre.ir.program import BufferDecl, Program
from vyre.ir.types import DataType

# An input (a file, @random:N or @zeros:N) holds at most this many elements (an IR index is a u32),
# and never more bytes than half the host memory still available.
MAX_GENERATED_ELEMENTS = 2**32 - 1
#: ``--out`` file names: a buffer name made of these characters (not starting with ``.`` or ``-``) is kept
SAFE_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")
MAX_FILE_STEM = 200
_KEPT_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def count_arg(text: str) -> int | None:
    """``text`` as a non-negative int when it is written with ASCII digits only, else None.

    ``str.isdigit`` accepts ``"²"`` and other digits ``int`` refuses; command-line numbers are ASCII.
    """
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() else None


def available_memory() -> int | None:
    """Bytes of host memory still available: Linux's MemAvailable, else free pages, else None."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def input_limit(decl: BufferDecl) -> tuple[int, str]:
    """The most bytes one input of ``decl`` may hold (``MAX_GENERATED_ELEMENTS``, half the free memory),
    and the limit in words."""
    limit, words = MAX_GENERATED_ELEMENTS * max(decl.dtype.size, 1), f"{MAX_GENERATED_ELEMENTS} elements"
    free = available_memory()
    if free is not None:
        limit, words = min(limit, free // 2), f"{words} and {free // 2} bytes (half the free memory)"
    return limit, words


def check_generated_size(decl: BufferDecl, source: str, count: int) -> None:
    """Refuse an ``@random``/``@zeros`` size beyond ``input_limit``."""
    nbytes = count * max(decl.dtype.size, 1)
    limit, words = input_limit(decl)
    if count > MAX_GENERATED_ELEMENTS or nbytes > limit:
        raise UsageError(f"{source} for buffer {decl.name!r} asks for {count} elements ({nbytes} bytes); "
                         f"generated inputs are limited to {words}",
                         f"write a smaller {printable(decl.name)}=@{source[1:].partition(':')[0]}:N.")


def parse_input_flags(flags: list[str]) -> dict[str, str]:
    """``["a=x.bin", "b=@random:16"]`` -> ``{"a": "x.bin", "b": "@random:16"}``."""
    out: dict[str, str] = {}
    for flag in flags:
        name, sep, source = flag.partition("=")
        if not sep or not name or not source:
            raise UsageError(f"--input {flag!r} is not NAME=SOURCE", "write --input NAME=FILE or NAME=@random:N.")
        out[name] = source
    return out


def random_elements(dtype: DataType, count: int, rng: np.random.Generator) -> np.ndarray:
    """Seeded random data of ``dtype``: full-range integers, floats in [-1, 1), BOOL 0/1."""
    if dtype is DataType.BOOL:
        return rng.integers(0, 2, count, dtype=np.uint32)
    if dtype.is_int:
        info = np.iinfo(dtype.np_dtype)
        return rng.integers(info.min, info.max, count, dtype=dtype.np_dtype, endpoint=True)
    values = rng.uniform(-1.0, 1.0, count)
    values = values if dtype is DataType.F64 else values.astype(np.float32)
    if dtype is DataType.BF16:
        return (values.view(np.uint32) >> 16).astype(np.uint16)  # truncated bf16 bits
    return values.astype(dtype.np_dtype)


def load_input(decl: BufferDecl, source: str, rng: np.random.Generator) -> object:
    """The bytes for one input buffer: a raw binary file, ``@random[:N]`` or ``@zeros[:N]``."""
    if not source.startswith("@"):
        try:
            return read_regular_file(source, input_limit(decl)[0], "raw binary file")
        except FileRefused as exc:
            raise UsageError(f"cannot read input file {source} for buffer {decl.name!r}: {exc.problem}",
                             f"{exc.fix}, or @random:N.") from None
    kind, _, size = source[1:].partition(":")
    if kind not in ("random", "zeros"):
        raise UsageError(f"unknown input source {source!r} for buffer {decl.name!r}",
                         "use FILE, @random[:N] or @zeros[:N].")
    count = count_arg(size) if size else decl.count
    if count is None:
        raise UsageError(f"element count {size!r} in {source!r} is not a number", f"write @{kind}:N with digits 0-9.")
    if not count:
        raise UsageError(f"buffer {decl.name!r} is sized at dispatch time, so {source!r} needs a size",
                         f"write {decl.name}=@{kind}:N with N elements.")
    check_generated_size(decl, source, count)
    if kind == "zeros":
        return np.zeros(count, dtype=decl.dtype.np_dtype)
    return random_elements(decl.dtype, count, rng)


def gather_inputs(program: Program, flags: dict[str, str], seed: int) -> list[object]:
    """One input per input buffer, in declaration order; unknown or missing names are errors."""
    wanted = {b.name: b for b in program.inputs}
    unknown = sorted(set(flags) - set(wanted))
    if unknown:
        raise UsageError(f"--input names {printable(', '.join(unknown))} are not input buffers of the program "
                         f"(inputs: {printable(', '.join(wanted)) or 'none'})",
                         "name one of the program's input buffers.")
    missing = [printable(name) for name in wanted if name not in flags]
    if missing:
        raise UsageError(f"no --input for buffer(s) {', '.join(missing)}",
                         f"pass --input {missing[0]}=FILE or {missing[0]}=@random:N for each input buffer.")
    rng = np.random.default_rng(seed)
    return [load_input(b, flags[b.name], rng) for b in program.inputs]


def summarize(name: str, decl: BufferDecl, array: np.ndarray, show: int) -> str:
    """A few lines about one output: first elements, sum and a histogram when it has few values
    (``name`` is printed with control characters escaped)."""
    head = ", ".join(str(v) for v in array[:show].tolist())
    more = ", ..." if array.size > show else ""
    lines = [f"{printable(name)}: {decl.dtype.value}[{array.size}] = [{head}{more}]"]
    if array.size == 0:
        return lines[0]
    if decl.dtype.is_float and decl.dtype is not DataType.BF16:
        wide = array.astype(np.float64)
        finite = wide[np.isfinite(wide)]
        lines.append(f"  sum={finite.sum():.6g} min={finite.min() if finite.size else 'n/a'} "
                     f"max={finite.max() if finite.size else 'n/a'} nan={int(np.isnan(wide).sum())}")
        return "\n".join(lines)
    wide = array if array.dtype == np.uint64 else array.astype(np.int64)  # U64 keeps its values
    total = sum(int(v) for v in wide.tolist()) if wide.dtype == np.uint64 else int(wide.sum())
    lines.append(f"  sum={total} min={int(wide.min())} max={int(wide.max())} "
                 f"nonzero={int(np.count_nonzero(wide))}")
    values, counts = np.unique(wide, return_counts=True)
    if values.size <= 16:
        lines.append("  histogram: " + ", ".join(f"{v}x{c}" for v, c in zip(values.tolist(), counts.tolist())))
    return "\n".join(lines)


def _elements(spec: str | None, program: Program, inputs: Sequence[Any]) -> int | None:
    """``--elements``: a number, or an input buffer's name meaning that input's element count."""
    if spec is None:
        return None
    if count_arg(spec) is not None:
        return count_arg(spec)
    for decl, data in zip(program.inputs, inputs):
        if decl.name == spec:
            return memoryview(data).nbytes // decl.dtype.size
    raise UsageError(f"--elements {spec!r} is neither a number nor an input buffer",
                     "write --elements N (digits 0-9) or --elements NAME of an input buffer.")


def _grid(spec: str | None) -> tuple[int, int, int] | None:
    """``--grid X,Y,Z`` as three non-negative ints."""
    if spec is None:
        return None
    parts = [count_arg(p) for p in spec.split(",")]
    if len(parts) != 3 or None in parts:
        raise UsageError(f"--grid {spec!r} is not X,Y,Z", "write three numbers (digits 0-9), e.g. --grid 64,1,1.")
    return tuple(parts)  # type: ignore[return-value]


def output_file_name(name: str) -> str:
    """The ``--out`` file of buffer ``name``: ``NAME.bin`` when ``SAFE_FILE_NAME`` matches, else the UTF-8
    bytes percent-encoded (``%`` too, ``.``/``-`` first) and, past ``MAX_FILE_STEM``, cut and ended with
    ``~`` and a hash. Never a path (no ``/``, not ``.``-first): distinct names give distinct files."""
    if SAFE_FILE_NAME.fullmatch(name):
        return name + ".bin"
    raw = name.encode("utf-8", "surrogatepass")
    stem = "".join(chr(b) if b in _KEPT_BYTES and (i or b not in b".-") else f"%{b:02X}" for i, b in enumerate(raw))
    if len(stem) > MAX_FILE_STEM:
        stem = f"{stem[:MAX_FILE_STEM - 17]}~{hashlib.sha256(raw).hexdigest()[:16]}"
    return (stem or "%") + ".bin"


def check_outputs_absent(program: Program, out_dir: Path, force: bool) -> None:
    """Refuse, before anything runs, to overwrite an existing output file unless ``--force``."""
    if force:
        return
    for decl in program.outputs:
        name = output_file_name(decl.name)
        if os.path.lexists(out_dir / name):
            raise UsageError(f"--out {out_dir}: {name} (output {printable(decl.name)!r}) already exists",
                             "pass --force to overwrite it, or pass --out DIR with another directory.")


def write_output(out_dir: Path, name: str, data: bytes, force: bool) -> None:
    """Write ``out_dir/name`` as a new file (``O_EXCL``, never through a symlink); with ``force``, through a
    new temporary file renamed over it, so a planted symlink is replaced, not followed."""
    dir_fd = os.open(out_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    target = f".{name}.tmp-{os.getpid()}-{secrets.token_hex(4)}" if force else name
    try:
        try:
            fd = os.open(target, _CREATE, 0o666, dir_fd=dir_fd)
        except FileExistsError:
            raise UsageError(f"--out {out_dir}: {name} already exists (created while the program ran)",
                             "pass --force to overwrite it, or pass --out DIR with another directory.") from None
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if force:
            os.replace(target, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        if force:
            try:
                os.unlink(target, dir_fd=dir_fd)
            except OSError:
                pass
        raise
    finally:
        os.close(dir_fd)


def check_arguments(args: argparse.Namespace) -> Path | None:
    """Refuse bad ``--seed``, ``--show`` and ``--out`` before anything runs; return the output directory."""
    if args.seed < 0:
        raise UsageError(f"--seed {args.seed} is negative", "pass --seed 0 or a larger number.")
    if args.show < 0:
        raise UsageError(f"--show {args.show} is negative", "pass --show K with K >= 0 elements per output.")
    if args.out is None:
        return None
    out_dir = Path(args.out)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {args.out} is an existing file, not a directory",
                         "pass --out DIR with DIR a directory (created if missing), not a file.")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {args.out}: cannot create the directory: {exc.strerror}",
                         "pass --out DIR in a location you can write to.") from None
    if not os.access(out_dir, os.W_OK):
        raise UsageError(f"--out {args.out} is not writable", "pass --out DIR in a location you can write to.")
    return out_dir


def _config(args: argparse.Namespace, program: Program, inputs: list[object]) -> DispatchConfig:
    return DispatchConfig(grid=_grid(args.grid), elements=_elements(args.elements, program, inputs), label="vyre run")


def run_file(args: argparse.Namespace) -> int:
    """The ``vyre run`` verb."""
    import vyre

    out_dir = check_arguments(args)
    program = load_program(args.file)
    vyre.validate(program)
    if out_dir is not None:
        check_outputs_absent(program, out_dir, args.force)
    inputs = gather_inputs(program, parse_input_flags(args.input), args.seed)
    config = _config(args, program, inputs)
    backend = vyre.acquire(args.backend) if args.backend else vyre.acquire(allow_reference=True)
    label = f"{backend.id} (CPU reference oracle)" if backend.id == "reference" else backend.id
    progress(f"running {printable(program.name or Path(args.file).stem)} on {label}...")
    start = time.perf_counter()
    with backend:
        outputs = backend.dispatch(program, inputs, config)
    progress(f"done in {time.perf_counter() - start:.3f} s")
    print(f"backend: {label}")
    for decl, array in zip(program.outputs, outputs):
        print(summarize(decl.name, decl, array, args.show))
        if out_dir is not None:
            name = output_file_name(decl.name)
            write_output(out_dir, name, np.ascontiguousarray(array).tobytes(), args.force)
            print(f"  wrote {printable(str(out_dir / name))}")
    return 0
