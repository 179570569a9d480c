"""64-bit types in the text and wire formats: literals round-trip exactly, and version-1 blobs still load."""

from __future__ import annotations

import hashlib
import math

import pytest

from vyre.driver.errors import ValidationError
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ir.text import parse, to_text
from vyre.ir.wire import HEADER_SIZE, MAGIC, from_wire, to_wire

D = DataType

#: ``to_wire`` of the program ``v1_program()`` as written by wire version 1 (before 64-bit types)
V1_BLOB = bytes.fromhex(
    "5659524501000000eab939d9709f11347b7a1410240036f21e79add38ca2913a4a1b8a9214d70f74070776315f626c6f62016101"
    "6e016f01770169036f6c640140020204010008000002010502000302020410040401014004000504000006450002020002000005"
    "f9ffffff0f02030105430244020101050008808080f8030008818080fe070313010600050301020406000002ffffffff0f00")


def v1_program() -> Program:
    i = Expr.var("i")
    return Program(
        [BufferDecl.read("a", 0, D.F32), BufferDecl.read_write("n", 1, D.I32), BufferDecl.output("o", 2, D.U32, 8),
         BufferDecl.workgroup("w", 32, D.U16)], (32, 1, 1),
        [Node.let("i", Expr.invocation_id(0)),
         Node.let("old", Expr.atomic(AtomicOp.ADD, "n", Expr.u32(0), Expr.i32(-7))),
         Node.store("o", i, Expr.cast(D.U32, Expr.fma(Expr.load("a", i), Expr.f32(0.5),
                                                      Expr.f32_from_bits(0x7FC00001)))),
         Node.if_(Expr.lt(Expr.var("old"), Expr.i32(3)), [Node.store("w", Expr.local_id(0), Expr.u32(0xFFFFFFFF))])],
        name="v1_blob")


def wide_program() -> Program:
    i = Expr.var("i")
    literals = [Expr.u64(0), Expr.u64(2**64 - 1), Expr.i64(-(2**63)), Expr.i64(2**63 - 1), Expr.f64(0.1),
                Expr.f64(-0.0), Expr.f64(5e-324), Expr.f64_from_bits(0x7FF0000000000000),
                Expr.f64_from_bits(0xFFF0000000000000), Expr.f64_from_bits(0x7FF8000000000000),
                Expr.f64_from_bits(0x7FF4000000000001), Expr.f64(1.7976931348623157e308)]
    body = [Node.let("i", Expr.invocation_id(0))]
    body += [Node.let(f"l{k}", lit) for k, lit in enumerate(literals)]
    body += [Node.store("u", i, Expr.shl(Expr.load("u", i), Expr.u32(63))),
             Node.store("s", i, Expr.atomic(AtomicOp.MIN, "s", Expr.u32(0), Expr.cast(D.I64, Expr.load("f", i)))),
             Node.store("f", i, Expr.fma(Expr.load("f", i), Expr.var("l4"), Expr.cast(D.F64, Expr.var("l1"))))]
    return Program([BufferDecl.read_write("u", 0, D.U64), BufferDecl.read_write("s", 1, D.I64),
                    BufferDecl.read_write("f", 2, D.F64)], (64, 1, 1), body, name="wide")


def test_version_1_blob_still_decodes() -> None:
    assert from_wire(V1_BLOB) == v1_program()
    assert to_wire(v1_program())[HEADER_SIZE:] == V1_BLOB[HEADER_SIZE:]  # the same body, now version 2


def test_version_1_blob_cannot_carry_64_bit_types() -> None:
    body = to_wire(wide_program())[HEADER_SIZE:]
    digest = hashlib.blake2b(body, digest_size=32).digest()
    with pytest.raises(ValidationError) as info:
        from_wire(MAGIC + (1).to_bytes(2, "little") + b"\0\0" + digest + body)
    assert tuple(info.value.codes) == ("wire_value",) and "dtype code 10" in str(info.value)


def test_wide_literals_round_trip_through_text_and_wire() -> None:
    p = wide_program()
    text = to_text(p)
    for word in ("u64:18446744073709551615", "i64:-9223372036854775808", "f64:0.1", "f64:-0.0", "f64:5e-324",
                 "f64:inf", "f64:-inf", "f64:nan", "f64:0x7ff4000000000001", "u64[0]", "f64[0]"):
        assert word in text
    assert parse(text) == p
    assert from_wire(to_wire(p)) == p


@pytest.mark.parametrize(("text", "message"), [
    ("u64:18446744073709551616", "outside"), ("i64:9223372036854775808", "outside"),
    ("f64:0x1ffffffffffffffff", "bad f64"), ("u64:1.5", "bad u64"),
])
def test_bad_wide_literals_are_parse_errors(text: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        parse(f"program workgroup(1, 1, 1)\nlet x = {text}\n")


def test_literal_constructors_check_their_range() -> None:
    with pytest.raises(ValueError, match="outside"):
        Expr.u64(2**64)
    with pytest.raises(ValueError, match="outside"):
        Expr.i64(2**63)
    assert repr(Expr.i64(-5)) == "Expr.i64(-5)" and repr(Expr.f64(0.1)) == "Expr.f64(0.1)"
    assert repr(Expr.f64(math.inf)) == "Expr.f64_from_bits(0x7FF0000000000000)"
