"""f32 -> f16/bf16 stores: the packed conversion on sm_80+ (ptxas folds the plain one wrongly)."""

from __future__ import annotations

import pytest
from codegen_support import assemble_all_targets, emit_for_targets, needs_ptxas

from vyre.ir import parse
from vyre_cuda import emit_ptx

# what the fuzzer found (seed 777007, program 915): ptxas 13.0 turned the plain cvt of this select
# into SEL 0, 0x3c00, storing 1.0 where the value is the smallest subnormal (0.0 as f16)
TEXT = """program narrow workgroup(64, 1, 1)
buffer c: read i16[34] @0
buffer out: output {t}[64] @1
let i = invocation_id(0)
store out[i] = select(cast(bool, load(c, i)), f32:0.0, f32:1e-45)
"""


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_sm80_and_later_narrow_through_the_packed_conversion(dtype: str) -> None:
    program = parse(TEXT.format(t=dtype))
    ptx = emit_ptx(program, sm="90")
    assert f"cvt.rn.{dtype}x2.f32" in ptx and f"cvt.rn.{dtype}.f32" not in ptx
    assert f"cvt.rn.{dtype}x2.f32" in emit_ptx(program, sm="80")


def test_older_targets_keep_the_plain_conversion() -> None:
    ptx = emit_ptx(parse(TEXT.format(t="f16")), sm="75")
    assert "cvt.rn.f16.f32" in ptx and "x2" not in ptx


@needs_ptxas
def test_both_forms_assemble() -> None:
    programs = {t: parse(TEXT.format(t=t)) for t in ("f16", "bf16")}
    ptx = emit_for_targets(programs, ("80", "90"))
    ptx["75"] = {"f16": emit_ptx(programs["f16"], sm="75")}
    assert not assemble_all_targets(ptx)
