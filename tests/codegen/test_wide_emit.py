"""The 64-bit forms of the emitter: the instructions each lowering must use (ptxas assembles them all
in test_assemble.py, which includes every 64-bit op, cast, atomic and subgroup program)."""

from __future__ import annotations

import re

import pytest
from catalogue import all_programs
from codegen_support import assemble, elementwise, needs_ptxas

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ir.layout import workgroup_layout
from vyre_cuda import emit_ptx

D = DataType
PROGRAMS = all_programs()


def _ptx(name: str) -> str:
    return emit_ptx(PROGRAMS[name])


@pytest.mark.parametrize(("op", "opcode"), [("shl", "shl.b64"), ("shr", "shr.u64")])
def test_64_bit_shift_amounts_are_masked_to_6_bits(op: str, opcode: str) -> None:
    text = _ptx(f"{op}.U64")
    assert re.search(r"and\.b32 %r\d+, %r\d+, 63;", text) and opcode in text
    assert ", 31;" not in text
    assert "shr.s64" in _ptx("shr.I64")


def test_64_bit_rotates_combine_two_shifts() -> None:
    text = _ptx("rotate_right.I64")
    assert "shf." not in text and "shr.b64" in text and "shl.b64" in text and "or.b64" in text


@pytest.mark.parametrize(("op", "t", "suffix"), [
    (AtomicOp.ADD, D.U64, "add.u64"), (AtomicOp.ADD, D.I64, "add.u64"), (AtomicOp.ADD, D.F64, "add.f64"),
    (AtomicOp.MIN, D.I64, "min.s64"), (AtomicOp.MAX, D.U64, "max.u64"), (AtomicOp.AND, D.I64, "and.b64"),
    (AtomicOp.OR, D.U64, "or.b64"), (AtomicOp.XOR, D.U64, "xor.b64"), (AtomicOp.EXCHANGE, D.I64, "exch.b64"),
    (AtomicOp.COMPARE_EXCHANGE, D.U64, "cas.b64"),
])
def test_64_bit_atomics(op: AtomicOp, t: DataType, suffix: str) -> None:
    for space in ("global", "shared"):
        text = _ptx(f"atomic.{op.name}.{t.name}.{space}")
        assert re.search(rf"atom\.acq_rel\.(gpu|cta)\.{space}\.{re.escape(suffix)} %rd\d+, ", text), text
    relaxed = _ptx(f"atomic.{op.name}_RELAXED.{t.name}.global")
    assert f"atom.relaxed.gpu.global.{suffix}" in relaxed and "fence.sc" not in relaxed


def test_64_bit_atomic_read_is_a_64_bit_relaxed_load() -> None:
    program = Program([BufferDecl.read_write("a", 0, D.U64), BufferDecl.output("o", 1, D.U64, 64)], (64, 1, 1),
                      [Node.store("o", Expr.invocation_id(0),
                                  Expr.atomic(AtomicOp.OR, "a", Expr.u32(0), Expr.u64(0), relaxed=True))])
    assert re.search(r"ld\.relaxed\.gpu\.global\.b64 %rd\d+, ", emit_ptx(program))


def test_64_bit_values_cross_lanes_as_two_halves() -> None:
    text = _ptx("subgroups.wide")
    assert text.count("shfl.sync.idx.b32") == 4  # two 64-bit shuffles, two halves each
    assert text.count("shfl.sync.bfly.b32") == 3 * 5 * 2  # three sums, five steps, two halves
    assert "add.rn.f64" in text and "add.u64" in text


@pytest.mark.parametrize(("src", "dst", "opcode"), [
    (D.U64, D.F32, "cvt.rn.f32.u64"), (D.I64, D.F64, "cvt.rn.f64.s64"), (D.F64, D.I64, "cvt.rzi.s64.f64"),
    (D.F32, D.U64, "cvt.rzi.u64.f32"), (D.F64, D.U32, "cvt.rzi.u32.f64"), (D.I32, D.U64, "cvt.s64.s32"),
    (D.U32, D.I64, "cvt.u64.u32"), (D.I64, D.U32, "cvt.u32.u64"), (D.F32, D.F64, "cvt.f64.f32"),
    (D.F64, D.F32, "cvt.rn.f32.f64"), (D.F64, D.BOOL, "setp.neu.f64"), (D.BOOL, D.F64, "selp.b64"),
])
def test_casts(src: DataType, dst: DataType, opcode: str) -> None:
    assert opcode in _ptx(f"cast.{src.name}.{dst.name}")


def test_same_width_integer_casts_move_no_bits() -> None:
    text = _ptx("cast.U64.I64")
    assert "cvt." not in text.split("griddepcontrol.wait")[-1]


def test_64_bit_workgroup_buffers_are_8_byte_aligned() -> None:
    decls = [BufferDecl.workgroup("a", 3, D.U8), BufferDecl.workgroup("b", 2, D.F64),
             BufferDecl.workgroup("c", 1, D.U32), BufferDecl.workgroup("d", 1, D.I64)]
    assert workgroup_layout(decls) == ({"a": 0, "b": 8, "c": 24, "d": 32}, 40)
    assert workgroup_layout(decls[2:3] + decls[:1]).offsets == {"c": 0, "a": 4}  # 32-bit layouts unchanged


@needs_ptxas
def test_64_bit_literals_assemble_bit_exact() -> None:
    value = Expr.add(Expr.bitxor(Expr.load("a", Expr.var("i")), Expr.u64(0xFEDCBA9876543210)), Expr.u64(2**64 - 1))
    text = emit_ptx(elementwise(lambda a: Expr.bitxor(a, Expr.u64(0xFEDCBA9876543210)), (D.U64,), D.U64))
    assert "0xFEDCBA9876543210" in text
    program = Program([BufferDecl.read("a", 0, D.U64), BufferDecl.output("o", 1, D.U64, 64)], (64, 1, 1),
                      [Node.let("i", Expr.invocation_id(0)), Node.store("o", Expr.var("i"), value)])
    assert assemble({"lit": emit_ptx(program, sm="90")}, "90") == []
