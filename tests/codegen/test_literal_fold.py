"""Float ops on literal operands are folded by the code generator with the oracle's functions.

The driver's PTX JIT folds such ops itself and rounds an exact tie the wrong way (the fuzzer's
``fuzz_jit_float_literal_tie`` case: ``sub.rn.f32`` of 0xC12027AC and 0xC2C37D49 gave 0x42AF7853,
IEEE and the oracle 0x42AF7854), so the PTX must never hand it two float literals to combine.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.reference import run
from vyre_cuda import emit_ptx

F32, F64 = DataType.F32, DataType.F64
TIE = 2.0 ** -24  # half an ulp of 1.0f
TIE64 = 2.0 ** -53

CASES = {
    "sub_fuzz_tie": (F32, Expr.sub(Expr.f32_from_bits(0xC12027AC), Expr.f32_from_bits(0xC2C37D49))),
    "abs_diff_fuzz_tie": (F32, Expr.abs_diff(Expr.f32_from_bits(0xC12027AC), Expr.f32_from_bits(0xC2C37D49))),
    "add_tie_even_down": (F32, Expr.add(Expr.f32(1.0), Expr.f32(TIE))),
    "add_tie_even_up": (F32, Expr.add(Expr.f32(1.0 + 2.0 ** -23), Expr.f32(TIE))),
    "mul_tie": (F32, Expr.mul(Expr.f32(1.0 + 2.0 ** -12), Expr.f32(1.0 + 2.0 ** -12))),
    "fma_tie": (F32, Expr.fma(Expr.f32(1.0), Expr.f32(1.0 + 2.0 ** -23), Expr.f32(TIE))),
    "div": (F32, Expr.div(Expr.f32(1.0), Expr.f32(3.0))),
    "sqrt": (F32, Expr.sqrt(Expr.f32(2.0))),
    "nested": (F32, Expr.mul(Expr.add(Expr.f32(1.0), Expr.f32(TIE)), Expr.sub(Expr.f32(3.5), Expr.f32(-0.0)))),
    "f64_add_tie": (F64, Expr.add(Expr.f64(1.0 + 2.0 ** -52), Expr.f64(TIE64))),
    "f64_sub_tie": (F64, Expr.sub(Expr.f64(1.0), Expr.f64(-TIE64))),
    "f64_fma_tie": (F64, Expr.fma(Expr.f64(1.0), Expr.f64(1.0), Expr.f64(TIE64))),
}


def program_of(dtype: DataType, value: Expr, lets: bool = False) -> Program:
    i = Expr.var("i")
    body = [Node.let("i", Expr.invocation_id(0))]
    if lets:  # the operands through never-assigned lets
        names = [f"a{k}" for k in range(len(value.args))]
        body += [Node.let(n, a) for n, a in zip(names, value.args, strict=True)]
        value = Expr(value.op, tuple(Expr.var(n) for n in names), value.dtype, value.value, value.name)
    return Program([BufferDecl.output("o", 0, dtype, 4)], (64, 1, 1), [*body, Node.store("o", i, value)], name="fold")


def _stored_literal(ptx: str, dtype: DataType) -> int:
    """The bits of the literal the kernel stores (its one ``st.global``)."""
    stored = re.search(r"st\.global\.u(?:32|64) \[[^\]]+\], (%r[d]?\d+);", ptx)
    assert stored, ptx
    mov = re.search(rf"mov\.b(?:32|64) {re.escape(stored.group(1))}, 0x([0-9A-F]+);", ptx)
    assert mov, f"the stored value is not a literal:\n{ptx}"
    return int(mov.group(1), 16)


@pytest.mark.parametrize("lets", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_literal_float_ops_are_folded_to_the_oracles_bits(name: str, lets: bool) -> None:
    dtype, value = CASES[name]
    program = program_of(dtype, value, lets)
    ptx = emit_ptx(program)
    body = ptx[ptx.index(".entry"):]
    assert not re.search(r"\b(add|sub|mul|div|fma|sqrt)\.rn\.f(32|64)\b", body), body
    (want,) = run(program, [], None)
    raw = np.uint32 if dtype is F32 else np.uint64
    assert _stored_literal(body, dtype) == int(want.view(raw)[0])


def test_an_assigned_variable_is_not_folded() -> None:
    """A ``let`` that is assigned later is a variable, not a literal: its op is emitted."""
    i = Expr.var("i")
    body = [Node.let("i", Expr.invocation_id(0)), Node.let("a", Expr.f32(1.0)),
            Node.if_(Expr.eq(i, Expr.u32(3)), [Node.assign("a", Expr.f32(2.0))]),
            Node.store("o", i, Expr.add(Expr.var("a"), Expr.f32(TIE)))]
    program = Program([BufferDecl.output("o", 0, F32, 4)], (64, 1, 1), body, name="assigned")
    assert "add.rn.f32" in emit_ptx(program)


def test_nan_operands_are_left_to_the_device() -> None:
    """NaN payloads are the device's business: an op with a NaN literal is emitted as it is."""
    program = program_of(F32, Expr.add(Expr.f32_from_bits(0x7FC00001), Expr.f32(1.0)))
    assert "add.rn.f32" in emit_ptx(program)
