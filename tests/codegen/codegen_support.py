"""Helpers for the codegen tests: batch assembly with ptxas and small program builders."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

import pytest

from vyre.ir import BufferDecl, DataType, Expr, Node, Program

PTXAS = shutil.which("ptxas")
needs_ptxas = pytest.mark.skipif(PTXAS is None, reason="ptxas is not on PATH (install the CUDA toolkit)")
TARGETS = ("80", "90")
_ENTRY = re.compile(r"^\.visible \.entry \w+\(", re.M)


def merge_modules(ptx: Mapping[str, str]) -> tuple[str, list[tuple[int, str]]]:
    """One PTX module holding every kernel of ``ptx`` (entries renamed), and (first line, name) spans."""
    header: list[str] = []
    externs: set[str] = set()
    version = "0.0"
    for text in ptx.values():
        head, _, _ = text.partition(".visible .entry")
        v = re.search(r"^\.version (\S+)", head, re.M).group(1)
        version = max(version, v, key=lambda s: tuple(map(int, s.split("."))))
        if not header:
            header = [ln for ln in head.splitlines() if ln.startswith((".target", ".address_size"))]
        externs.update(ln for ln in head.splitlines() if ln.startswith(".extern"))  # dynamic shared memory
    out = [f".version {version}", *header, *sorted(externs)]
    spans: list[tuple[int, str]] = []
    for k, (name, text) in enumerate(ptx.items()):
        entry = text[text.index(".visible .entry"):]
        spans.append((len(out) + 1, name))
        out.extend(_ENTRY.sub(f".visible .entry k{k}(", entry).splitlines())
    return "\n".join(out) + "\n", spans


def _owner(spans: list[tuple[int, str]], line: int) -> str:
    name = spans[0][1]
    for first, n in spans:
        if first <= line:
            name = n
    return name


def assemble(ptx: Mapping[str, str], sm: str) -> list[str]:
    """Assemble all kernels for ``sm_<sm>`` in one ptxas run; returns failure messages by kernel."""
    text, spans = merge_modules(ptx)
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(text)
    proc = subprocess.run([PTXAS, "--gpu-name", f"sm_{sm}", "-o", "/dev/null", f.name],
                          capture_output=True, text=True)
    if proc.returncode == 0:
        return []
    lines = text.splitlines()
    failures = []
    for m in re.finditer(r"line (\d+); (.*)", proc.stderr):
        n = int(m.group(1))
        failures.append(f"{_owner(spans, n)}: {m.group(2)} :: {lines[n - 1].strip() if n <= len(lines) else ''}")
    return failures or [proc.stderr]


def assemble_all_targets(ptx_by_target: Mapping[str, Mapping[str, str]]) -> list[str]:
    """``assemble`` for several targets in parallel; the combined failure list."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = pool.map(lambda item: [f"sm_{item[0]} {f}" for f in assemble(item[1], item[0])],
                           ptx_by_target.items())
        return [f for r in results for f in r]


def emit_for_targets(programs: Mapping[str, Program], targets: Iterable[str] = TARGETS) -> dict[str, dict[str, str]]:
    from vyre_cuda import emit_ptx

    return {sm: {name: emit_ptx(p, sm=sm) for name, p in programs.items()} for sm in targets}


# ---- program builders ------------------------------------------------------------------------------
D = DataType
ARITH = (D.U32, D.I32, D.F32, D.BOOL, D.U64, D.I64, D.F64)


def _in(name: str, binding: int, dtype: DataType) -> BufferDecl:
    return BufferDecl.read(name, binding, dtype)


def elementwise(build, in_types: tuple[DataType, ...], out_type: DataType, name: str = "unit",
                wg: tuple[int, int, int] = (64, 1, 1)) -> Program:
    """``out[i] = build(in0[i], in1[i], ...)`` with inputs of ``in_types``."""
    i = Expr.var("i")
    bufs = [_in(f"in{k}", k, t) for k, t in enumerate(in_types)]
    bufs.append(BufferDecl.output("out", len(in_types), out_type, 1024))
    args = [Expr.load(f"in{k}", i) for k in range(len(in_types))]
    return Program(bufs, wg, [Node.let("i", Expr.invocation_id(0)), Node.store("out", i, build(*args))], name=name)
