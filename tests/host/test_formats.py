"""Text (.vyre) and wire formats: exact round trips, edge programs, and errors as ValidationError."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

import vyre
import vyre.ir
from vyre.driver.errors import ValidationError
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ir.generate import generate_program
from vyre.ir.shape import MAX_DEPTH
from vyre.ir.text import f32_text, parse, to_text
from vyre.ir.wire import HEADER_SIZE, MAGIC, OPS, VERSION, fingerprint, from_wire, to_wire

D = DataType
U = Expr.u32
GID = Expr.invocation_id(0)
ODD_NAMES = ("x y", 'q"uote', "new\nline", "tab\t", "back\\slash", "名前", "ünï", "in", "add", "true", "u32",
             "nul\0", "ls\u2028ps\u2029", "#hash", "emoji\U0001F600", "cr\r", "{brace}", "a..b", "0digit")


def roundtrip(p: Program) -> None:
    assert parse(to_text(p)) == p
    assert from_wire(to_wire(p)) == p


def generated(count: int) -> list[Program]:
    opts = ({}, {"subgroups": True}, {"approximate": True}, {"max_depth": 5, "max_stmts": 30})
    return [generate_program(seed, **opts[seed % 4]) for seed in range(count)]


# ---- round trips ------------------------------------------------------------------------------
def test_generated_programs_round_trip() -> None:
    programs = generated(1000)
    for p in programs:
        text = to_text(p)
        assert parse(text) == p, text
        wire = to_wire(p)
        assert from_wire(wire) == p
        assert fingerprint(p) == wire[8:HEADER_SIZE] == p.fingerprint()
    distinct = set(programs)
    assert len({fingerprint(p) for p in distinct}) == len(distinct)


def edge_program(name: str | None = "edges") -> Program:
    bits = (0x7FC00001, 0xFFC00000, 0x7F800001, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0xFF800000,
            0x3DCCCCCD, 0x00800000, 0x7FC00000, 0x7F800000)
    lets = [Node.let(f"f{i}", Expr.f32_from_bits(b)) for i, b in enumerate(bits)]
    lets += [Node.let(f"n{i}", U(0)) for i in range(3)]
    return Program(
        [BufferDecl.read(n, i, t) for i, (n, t) in enumerate(zip(ODD_NAMES, DataType))]
        + [BufferDecl.workgroup("w", 4, D.BF16), BufferDecl("wb", 7, D.U8, 3, vyre.ir.Access.WORKGROUP),
           BufferDecl.output("o", 99, D.U32, 1)],
        (1, 2, 3),
        [*lets,
         Node.let(ODD_NAMES[1], Expr.i32(-(2**31))), Node.let("big", U(0xFFFFFFFF)),
         Node.if_(Expr.bool(False), []), Node.if_(Expr.bool(True), [], [Node.return_()]),
         Node.loop(ODD_NAMES[2], U(0), U(0), []), Node.block([]), Node.region("", []), Node.region("gen\n\"x\"", []),
         Node.let("c", Expr.call("pack.op-1", U(1), Expr.cast(D.F32, Expr.bool(True)))),
         Node.let("c0", Expr.call("")),
         Node.let("cx", Expr.atomic(AtomicOp.COMPARE_EXCHANGE, "o", U(0), U(1), U(2))),
         Node.let("sg", Expr.subgroup_shuffle(Expr.subgroup_ballot(Expr.bool(True)), Expr.subgroup_local_id())),
         Node.store(ODD_NAMES[0], Expr.local_id(2), Expr.workgroup_id(1)),
         Node.barrier()],
        name,
    )


@pytest.mark.parametrize("name", [None, "", "edges", "workgroup", "program", *ODD_NAMES])
def test_edge_programs_round_trip(name: str | None) -> None:
    roundtrip(edge_program(name))


def test_invalid_but_well_formed_programs_round_trip() -> None:
    # the formats carry any well-formed program; validity is the validator's business
    p = Program([BufferDecl.read("", -3, D.U8, -1), BufferDecl.read("", -3, D.U8, 2**40)], (0, -5, 2**40),
                [Node.assign("", Expr.add(Expr.var(""), Expr.f32(1.0))), Node.store("nope", Expr.i32(-1), U(1))])
    roundtrip(p)


def test_lone_surrogate_names_text_only() -> None:
    p = Program([BufferDecl.output("s\ud800", 0, D.U32, 1)], (1, 1, 1), [])
    assert parse(to_text(p)) == p
    with pytest.raises(ValidationError) as info:
        to_wire(p)
    assert info.value.codes == ("invalid_name",)


def test_deepest_valid_nesting_round_trips() -> None:
    node: Node = Node.store("o", U(0), U(1))
    for _ in range(MAX_DEPTH - 2):
        node = Node.block([node])
    deep_stmt = Program([BufferDecl.output("o", 0, D.U32, 1)], (1, 1, 1), [node])
    e = U(1)
    for _ in range(MAX_DEPTH - 2):
        e = Expr.neg(e)
    deep_expr = Program([BufferDecl.output("o", 0, D.U32, 1)], (1, 1, 1), [Node.store("o", U(0), e)])
    for p in (deep_stmt, deep_expr):
        vyre.validate(p)
        roundtrip(p)


def test_too_deep_programs_are_not_encoded() -> None:
    e = U(1)
    for _ in range(MAX_DEPTH + 5):
        e = Expr.neg(e)
    p = Program([], (1, 1, 1), [Node.let("x", e)])
    for encode in (to_text, to_wire):
        with pytest.raises(ValidationError) as info:
            encode(p)
        assert info.value.codes == ("nesting_too_deep",)


def test_f32_literal_text() -> None:
    cases = {0x3F800000: "f32:1.0", 0x80000000: "f32:-0.0", 0x3DCCCCCD: "f32:0.1", 0x00000001: "f32:1e-45",
             0x7F800000: "f32:inf", 0xFF800000: "f32:-inf", 0x7FC00000: "f32:nan", 0x7FC00001: "f32:0x7fc00001",
             0xFFC00000: "f32:0xffc00000", 0x7F7FFFFF: "f32:3.4028235e+38"}
    for bits, text in cases.items():
        assert f32_text(bits) == text
        assert parse(f"program workgroup(1, 1, 1)\nlet x = {text}\n").body[0].value.value == bits


def test_text_is_readable() -> None:
    p = Program(
        [BufferDecl.read("x", 0, D.F32), BufferDecl.output("y", 1, D.F32, 64), BufferDecl.workgroup("t", 64, D.F32)],
        (64, 1, 1),
        [Node.let("i", GID),
         Node.if_(Expr.ge(Expr.var("i"), Expr.buf_len("x")), [Node.return_()], [Node.barrier()]),
         Node.loop("k", U(0), U(2), [
             Node.store("y", Expr.var("i"), Expr.mul(Expr.load("x", Expr.var("i")), Expr.f32(2.5)))])],
        name="scale",
    )
    assert to_text(p) == (
        "program scale workgroup(64, 1, 1)\n"
        "buffer x: read f32[0] @0\n"
        "buffer y: output f32[64] @1\n"
        "buffer t: workgroup f32[64]\n"
        "let i = invocation_id(0)\n"
        "if ge(i, buf_len(x)) {\n"
        "  return\n"
        "} else {\n"
        "  barrier\n"
        "}\n"
        "loop k in u32:0 .. u32:2 {\n"
        "  store y[i] = mul(load(x, i), f32:2.5)\n"
        "}\n"
    )
    assert p.to_text() == to_text(p) and vyre.ir.parse(p.to_text()) == p


def test_parser_is_lenient_about_layout() -> None:
    text = ("# a comment\r\n\r\n   program   demo   workgroup( 4 ,1,1 )  # trailing\r\n"
            "buffer o:output u32[4]@0\n"
            "\t\tstore o[invocation_id(0)]=add(u32:1,u32:2)\n"
            "if true{\n}else{\nreturn\n}\n"
            "loop i in u32:0..u32:3 {\n}\n")
    p = parse(text)
    assert p.name == "demo" and len(p.body) == 3
    assert parse(text.encode("utf-8")) == p


# ---- text errors -----------------------------------------------------------------------------
HEADER = "program workgroup(1, 1, 1)\n"
BAD_TEXTS = {
    "": 1, "\n\n": 3, "let x = u32:1\n": 1, "program workgroup(1, 1)\n": 1, "program a b workgroup(1,1,1)\n": 1,
    HEADER + "let x = \n": 2, HEADER + "let x = u32:1 u32:2\n": 2, HEADER + "let x = u32:4294967296\n": 2,
    HEADER + "let x = i32:2147483648\n": 2, HEADER + "let x = f32:1.2.3\n": 2, HEADER + "let x = f32:0x1234567890\n": 2,
    HEADER + "let x = frob(u32:1)\n": 2, HEADER + "let x = add(u32:1)\n": 2, HEADER + "let x = invocation_id(3)\n": 2,
    HEADER + "let x = cast(u128, u32:1)\n": 2, HEADER + 'let "x = u32:1\n': 2, HEADER + 'let "\\q" = u32:1\n': 2,
    HEADER + 'let "\\u{110000}" = u32:1\n': 2, HEADER + "if true {\n": 2, HEADER + "}\n": 2,
    HEADER + "block {\n} else {\n}\n": 3, HEADER + "barrier\nbuffer a: read u32[0] @0\n": 3,
    HEADER + "buffer a: read u32[0]\n": 2, HEADER + "buffer a: sideways u32[0] @0\n": 2,
    HEADER + "frobnicate\n": 2, HEADER + "let x = u32:1 $\n": 2, HEADER + "store o[u32:0 = u32:1\n": 2,
    HEADER + "loop i in u32:0 u32:4 {\n}\n": 2, HEADER + "let x = atomic_swap(o, u32:0, u32:1)\n": 2,
    HEADER + "let x = lit()\n": 2, HEADER + "barrier extra\n": 2, HEADER + "\n\nlet = u32:1\n": 4,
}


@pytest.mark.parametrize("text", sorted(BAD_TEXTS))
def test_parse_errors_name_the_line(text: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse(text)
    (finding,) = info.value.findings
    assert finding.code == "parse_error"
    assert finding.path == f"line {BAD_TEXTS[text]}"
    assert finding.message.startswith(f"line {BAD_TEXTS[text]}: ")


def test_parse_rejects_non_text() -> None:
    for bad in (b"\xff\xfe", 12, None):
        with pytest.raises(ValidationError):
            parse(bad)  # type: ignore[arg-type]


def test_deep_text_is_an_error_not_a_recursion_error() -> None:
    deep_blocks = HEADER + "block {\n" * 5000 + "}\n" * 5000
    deep_expr = HEADER + "let x = " + "neg(" * 5000 + "u32:1" + ")" * 5000 + "\n"
    for text in (deep_blocks, deep_expr):
        with pytest.raises(ValidationError) as info:
            parse(text)
        assert "deeper than" in info.value.findings[0].message


# ---- wire --------------------------------------------------------------------------------------
def resign(body: bytes, version: int = VERSION, flags: int = 0) -> bytes:
    digest = hashlib.blake2b(body, digest_size=32).digest()
    return MAGIC + version.to_bytes(2, "little") + flags.to_bytes(2, "little") + digest + body


def wire_code(data: bytes) -> str:
    with pytest.raises(ValidationError) as info:
        from_wire(data)
    (finding,) = info.value.findings
    return finding.code


def test_wire_header() -> None:
    data = to_wire(edge_program())
    assert data[:4] == b"VYRE" and data[4:6] == b"\x02\x00" and data[6:8] == b"\x00\x00"
    assert data[8:40] == hashlib.blake2b(data[40:], digest_size=32).digest()
    assert Program.from_wire(data) == edge_program()


def test_wire_errors() -> None:
    good = to_wire(edge_program())
    body = good[HEADER_SIZE:]
    assert wire_code(b"") == "wire_truncated"
    assert wire_code(good[:30]) == "wire_truncated"
    assert wire_code(b"VYRF" + good[4:]) == "wire_magic"
    assert wire_code(resign(body, version=3)) == "wire_version"
    assert wire_code(resign(body, version=0)) == "wire_version"
    assert wire_code(resign(body, flags=1)) == "wire_flags"
    assert wire_code(good[:-1] + bytes([good[-1] ^ 1])) == "wire_digest"
    assert wire_code(resign(body[:-1])) == "wire_truncated"
    assert wire_code(resign(body + b"\x00")) == "wire_trailing"
    empty = to_wire(Program([], (1, 1, 1), []))[HEADER_SIZE:]
    assert empty == b"\x00\x00\x02\x02\x02\x00\x00"
    assert wire_code(resign(empty[:-1] + b"\x01\x09")) == "wire_tag"  # statement tag 9
    assert wire_code(resign(empty[:-1] + b"\x01\x00\x00")) == "wire_value"  # let name: no strings
    one_string = b"\x01\x02\xc3\x28" + empty[1:]  # invalid UTF-8
    assert wire_code(resign(one_string)) == "wire_utf8"
    assert wire_code(resign(b"\x01\x00" + empty[1:])) == "wire_noncanonical"  # unused string
    assert wire_code(resign(b"\x00\x00\x82\x00\x02\x02\x00\x00")) == "wire_noncanonical"  # long varint
    assert wire_code(resign(b"\x00\x00\x02\x02\x02\x01\x00\x00\x00\x00\x00\x00")) == "wire_value"  # no name
    op = bytes([OPS.index("invocation_id")])
    let_axis = b"\x01\x01x" + empty[1:-1] + b"\x01\x00\x00" + op + b"\x03"
    assert wire_code(resign(let_axis)) == "wire_value"  # axis 3
    assert wire_code(bytearray(good[:-1])) == "wire_digest"
    assert wire_code("text") == "wire_value"  # type: ignore[arg-type]
    nested = b"\x00\x00\x02\x02\x02\x00\x01" + b"\x06\x01" * 500 + b"\x06\x00"
    assert wire_code(resign(nested)) == "wire_limit"


def test_fingerprint_is_stable_across_processes() -> None:
    code = ("from vyre.ir.generate import generate_program;"
            "print(generate_program(7, subgroups=True).fingerprint().hex())")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == generate_program(7, subgroups=True).fingerprint().hex()


def test_wire_op_table_covers_every_op() -> None:
    from vyre.ir.expr import ALL_OPS

    assert sorted(OPS) == sorted(ALL_OPS) and len(set(OPS)) == len(OPS)


def test_wire_atomic_codes_are_stable() -> None:
    """Atomic op codes are positions in ``AtomicOp``: the first format's 0-7 stay, relaxed twins are 8-15."""
    from vyre.ir.wire import ATOMICS

    first = ("add", "or", "and", "xor", "min", "max", "exchange", "compare_exchange")
    assert [op.value for op in ATOMICS] == [*first, *(f"{v}_relaxed" for v in first)]
