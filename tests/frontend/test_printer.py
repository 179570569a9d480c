"""The vyre.ir -> Python printer: generated programs printed as kernels lower back to equal programs."""

from __future__ import annotations

import pytest

from vyre.frontend import kernel_from_source, to_python
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.ir.generate import generate_program

PLAIN, SUBGROUP = 750, 250  # 1,000 programs: a few seconds


@pytest.mark.parametrize(("first", "count", "opts"), [
    (0, PLAIN, {}),
    (50_000, SUBGROUP, {"subgroups": True, "approximate": True}),
])
def test_generated_programs_round_trip(first, count, opts):
    mismatches = []
    for seed in range(first, first + count):
        program = generate_program(seed, **opts)
        text = to_python(program)
        if kernel_from_source(text, filename=f"<seed {seed}>").program != program:
            mismatches.append(seed)
    assert not mismatches, f"seeds {mismatches[:10]} print to kernels that lower differently"


def test_printed_text_reads_like_a_kernel():
    i = Expr.var("i")
    program = Program(
        [BufferDecl.read("x", 1, DataType.F32), BufferDecl.output("x y", 0, DataType.F32, 8),
         BufferDecl.workgroup("tile", 8, DataType.F32)],
        (8, 1, 1),
        [Node.let("i", Expr.invocation_id(0)),
         Node.store("tile", i, Expr.mul(Expr.load("x", i), Expr.add(Expr.f32(1.0), Expr.f32(2.0)))),
         Node.barrier(),
         Node.if_(Expr.and_(Expr.lt(i, Expr.u32(4)), Expr.not_(Expr.eq(i, Expr.u32(2)))),
                  [Node.store("x y", i, Expr.neg(Expr.load("tile", i)))]),
         Node.loop("len", Expr.u32(0), Expr.u32(2), [])],
        name="demo")
    text = to_python(program)
    assert "def demo(x: vyre.In[vyre.f32], _n0: vyre.Out[vyre.f32, 8]):" in text
    assert "names={'_n0': 'x y', '_n1': 'len'}" in text and "bindings={'x': 1, '_n0': 0}" in text
    assert "    tile = vyre.shared(vyre.f32, 8)" in text
    assert "tile[i] = x[i] * (vyre.f32(1.0) + vyre.f32(2.0))" in text
    assert "if i < vyre.u32(4) and not i == vyre.u32(2):" in text
    assert kernel_from_source(text).program == program


def test_workgroup_buffers_first_cannot_be_printed():
    program = Program([BufferDecl.workgroup("t", 4, DataType.U32), BufferDecl.read("x", 0, DataType.U32)],
                      (4, 1, 1), [])
    with pytest.raises(ValueError, match="Fix: declare workgroup buffers last"):
        to_python(program)
