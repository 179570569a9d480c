"""The PTX emitter runs composed ops call by value through ``vyre.ir.expand``, like the oracle."""

from __future__ import annotations

from codegen_support import assemble, needs_ptxas

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ops import OpDef, register_op
from vyre_cuda import emit_ptx

U32 = DataType.U32
GID = Expr.invocation_id(0)
TWICE = OpDef("codegen_test.expand.twice", (U32,), U32, expand=lambda x: Expr.add(x, x))
UNUSED = OpDef("codegen_test.expand.unused", (U32, U32), U32, expand=lambda a, b: a)
register_op(TWICE)
register_op(UNUSED)


def _program(value: Expr) -> Program:
    return Program([BufferDecl.output("acc", 0, U32, 1), BufferDecl.output("out", 1, U32, 64)], (32, 1, 1),
                   [Node.store("out", GID, value)])


def _bump() -> Expr:
    return Expr.atomic(AtomicOp.ADD, "acc", Expr.u32(0), Expr.u32(1))


def test_an_atomic_argument_is_emitted_once_however_often_the_expansion_uses_it():
    ptx = emit_ptx(_program(Expr.call(TWICE.id, Expr.call(TWICE.id, _bump()))))
    assert ptx.count("atom.") == 1


def test_an_unused_atomic_argument_is_still_emitted():
    ptx = emit_ptx(_program(Expr.call(UNUSED.id, GID, _bump())))
    assert ptx.count("atom.") == 1


@needs_ptxas
def test_expanded_calls_assemble():
    programs = {"twice": _program(Expr.call(TWICE.id, _bump())),
                "unused": _program(Expr.call(UNUSED.id, Expr.call(TWICE.id, GID), _bump()))}
    assert not assemble({k: emit_ptx(p) for k, p in programs.items()}, "90")
