"""``vyre run``: turn ``--input NAME=SOURCE`` flags into buffers, dispatch, summarise the outputs."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from vyre.driver.config import DispatchConfig
from vyre.driver.errors import InvalidProgram
from vyre.ir.program import BufferDecl, Program
from vyre.ir.types import DataType


def parse_input_flags(flags: list[str]) -> dict[str, str]:
    """``["a=x.bin", "b=@random:16"]`` -> ``{"a": "x.bin", "b": "@random:16"}``."""
    out: dict[str, str] = {}
    for flag in flags:
        name, sep, source = flag.partition("=")
        if not sep or not name or not source:
            raise InvalidProgram(f"--input {flag!r} is not NAME=SOURCE", "write --input NAME=FILE or NAME=@random:N.")
        out[name] = source
    return out


def random_elements(dtype: DataType, count: int, rng: np.random.Generator) -> np.ndarray:
    """Seeded random data of ``dtype``: full-range integers, floats in [-1, 1), BOOL 0/1."""
    if dtype is DataType.BOOL:
        return rng.integers(0, 2, count, dtype=np.uint32)
    if dtype.is_int:
        info = np.iinfo(dtype.np_dtype)
        return rng.integers(info.min, info.max, count, dtype=dtype.np_dtype, endpoint=True)
    values = rng.uniform(-1.0, 1.0, count).astype(np.float32)
    if dtype is DataType.BF16:
        return (values.view(np.uint32) >> 16).astype(np.uint16)  # truncated bf16 bits
    return values.astype(dtype.np_dtype)


def load_input(decl: BufferDecl, source: str, rng: np.random.Generator) -> object:
    """The bytes for one input buffer: a raw binary file, ``@random[:N]`` or ``@zeros[:N]``."""
    if not source.startswith("@"):
        try:
            return Path(source).read_bytes()
        except OSError as exc:
            raise InvalidProgram(f"cannot read input file {source} for buffer {decl.name!r}: {exc.strerror}",
                                 "pass an existing raw binary file or @random:N.") from None
    kind, _, size = source[1:].partition(":")
    if kind not in ("random", "zeros"):
        raise InvalidProgram(f"unknown input source {source!r} for buffer {decl.name!r}",
                             "use FILE, @random[:N] or @zeros[:N].")
    if size and not size.isdigit():
        raise InvalidProgram(f"element count {size!r} in {source!r} is not a number", f"write @{kind}:N.")
    count = int(size) if size else decl.count
    if not count:
        raise InvalidProgram(f"buffer {decl.name!r} is sized at dispatch time, so {source!r} needs a size",
                             f"write {decl.name}=@{kind}:N with N elements.")
    if kind == "zeros":
        return np.zeros(count, dtype=decl.dtype.np_dtype)
    return random_elements(decl.dtype, count, rng)


def gather_inputs(program: Program, flags: dict[str, str], seed: int) -> list[object]:
    """One input per input buffer, in declaration order; unknown or missing names are errors."""
    wanted = {b.name: b for b in program.inputs}
    unknown = sorted(set(flags) - set(wanted))
    if unknown:
        raise InvalidProgram(f"--input names {', '.join(unknown)} are not input buffers of the program "
                             f"(inputs: {', '.join(wanted) or 'none'})", "name one of the program's input buffers.")
    missing = [name for name in wanted if name not in flags]
    if missing:
        raise InvalidProgram(f"no --input for buffer(s) {', '.join(missing)}",
                             f"pass --input {missing[0]}=FILE or {missing[0]}=@random:N for each input buffer.")
    rng = np.random.default_rng(seed)
    return [load_input(b, flags[b.name], rng) for b in program.inputs]


def summarize(name: str, decl: BufferDecl, array: np.ndarray, show: int) -> str:
    """A few lines about one output: first elements, sum and a histogram when it has few values."""
    head = ", ".join(str(v) for v in array[:show].tolist())
    more = ", ..." if array.size > show else ""
    lines = [f"{name}: {decl.dtype.value}[{array.size}] = [{head}{more}]"]
    if array.size == 0:
        return lines[0]
    if decl.dtype.is_float and decl.dtype is not DataType.BF16:
        wide = array.astype(np.float64)
        finite = wide[np.isfinite(wide)]
        lines.append(f"  sum={finite.sum():.6g} min={finite.min() if finite.size else 'n/a'} "
                     f"max={finite.max() if finite.size else 'n/a'} nan={int(np.isnan(wide).sum())}")
        return "\n".join(lines)
    wide = array.astype(np.int64)
    lines.append(f"  sum={int(wide.sum())} min={int(wide.min())} max={int(wide.max())} "
                 f"nonzero={int(np.count_nonzero(wide))}")
    values, counts = np.unique(wide, return_counts=True)
    if values.size <= 16:
        lines.append("  histogram: " + ", ".join(f"{v}x{c}" for v, c in zip(values.tolist(), counts.tolist())))
    return "\n".join(lines)


def _elements(spec: str | None, program: Program, inputs: list[object]) -> int | None:
    """``--elements``: a number, or an input buffer's name meaning that input's element count."""
    if spec is None or spec.isdigit():
        return None if spec is None else int(spec)
    for decl, data in zip(program.inputs, inputs):
        if decl.name == spec:
            return memoryview(data).nbytes // decl.dtype.size
    raise InvalidProgram(f"--elements {spec!r} is neither a number nor an input buffer",
                         "write --elements N or --elements NAME of an input buffer.")


def _config(args: argparse.Namespace, program: Program, inputs: list[object]) -> DispatchConfig:
    grid = None
    if args.grid:
        parts = args.grid.split(",")
        if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
            raise InvalidProgram(f"--grid {args.grid!r} is not X,Y,Z", "write e.g. --grid 64,1,1.")
        grid = tuple(int(p) for p in parts)
    return DispatchConfig(grid=grid, elements=_elements(args.elements, program, inputs), label="vyre run")


def run_file(args: argparse.Namespace) -> int:
    """The ``vyre run`` verb."""
    import vyre
    from vyre.cli import load_program, progress

    program = load_program(args.file)
    vyre.validate(program)
    inputs = gather_inputs(program, parse_input_flags(args.input), args.seed)
    config = _config(args, program, inputs)
    backend = vyre.acquire(args.backend) if args.backend else vyre.acquire(allow_reference=True)
    label = f"{backend.id} (CPU reference oracle)" if backend.id == "reference" else backend.id
    progress(f"running {program.name or Path(args.file).stem} on {label}...")
    start = time.perf_counter()
    with backend:
        outputs = backend.dispatch(program, inputs, config)
    progress(f"done in {time.perf_counter() - start:.3f} s")
    print(f"backend: {label}")
    out_dir = Path(args.out) if args.out else None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    for decl, array in zip(program.outputs, outputs):
        print(summarize(decl.name, decl, array, args.show))
        if out_dir is not None:
            path = out_dir / f"{decl.name}.bin"
            path.write_bytes(np.ascontiguousarray(array).tobytes())
            print(f"  wrote {path}")
    return 0
