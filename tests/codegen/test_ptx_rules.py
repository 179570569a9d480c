"""Textual rules every emitted kernel keeps: F32 rounding modes, guarded global memory, no raw names."""

from __future__ import annotations

import re

import pytest
from catalogue import all_programs

from vyre_cuda import emit_ptx

PTX = {name: emit_ptx(p) for name, p in all_programs().items()}
#: the only unpredicated global memory instructions: parameter-block words. Workgroup memory
#: accesses are unpredicated where the emitter proved the index below the buffer's count
#: (``_codegen.ranges``; tests/codegen/test_ranges.py checks those proofs against the oracle) and
#: in the zero fill (loops bounded by the workgroup memory's size)
UNGUARDED = re.compile(r"\tld\.global\.nc\.u32 %r\d+, \[%rd\d+\+\d+\];"
                       r"|\t(ld|st|atom)(\.\w+)*\.shared(\.\w+)* .*;"
                       r"|\tfence\.sc\.cta;")


@pytest.mark.parametrize("pattern", [r"\.ftz", r"\.approx", r"\bmad\.(rn\.)?f32", r"\b(add|sub|mul|div|sqrt|rcp)\.f32"])
def test_f32_arithmetic_rounds_to_nearest_without_contraction(pattern: str) -> None:
    """Explicit .rn everywhere: no fused multiply-add but Expr.fma, no flush to zero, no approximations."""
    offenders = [name for name, text in PTX.items() if re.search(pattern, text)]
    assert not offenders, offenders[:10]


def test_every_global_memory_access_is_guarded() -> None:
    for name, text in PTX.items():
        for line in text.splitlines():
            if re.search(r"\b(ld|st|atom|fence)\.(global|shared|sc)", line) and not line.startswith("\t@"):
                assert UNGUARDED.fullmatch(line), f"{name}: {line}"


def test_fma_only_where_the_program_asks() -> None:
    for name, text in PTX.items():
        if "fma.rn.f32" in text:
            assert name.startswith("fma."), name
