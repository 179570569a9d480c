"""CPU fuzzing of the decoders and the validator: malformed input only ever gives ValidationError.

Wire and text inputs are random or mutated encodings of generated programs, plus hand-crafted
hostile shapes (deep and long text, huge literals and strings, varint-heavy wire blobs) and
mutations of them; a decoded program must re-encode to the very same input (the wire form is
canonical). The wire decoder's peak allocation is bounded by a constant multiple of the input
size and by the node cap; every crafted input is decided within a time limit.
"""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Callable

import pytest

from tests.stopwatch import stopwatch
from vyre.driver.errors import ValidationError
from vyre.fuzz.wire_blobs import body_head, literal, signed, varint
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ir.expr import ALL_OPS
from vyre.ir.generate import generate_program
from vyre.ir.node import If, Let, Loop, Region, Store
from vyre.ir.shape import MAX_DEPTH, MAX_NODES
from vyre.ir.text import MAX_LINE_CHARS, MAX_LITERAL_CHARS, parse, to_text
from vyre.ir.validate import findings
from vyre.ir.wire import BARRIER, HEADER_SIZE, LET, OPS, from_wire, to_wire

#: Each decoded IR node is a Python object of ~200 bytes (an Expr plus its operand tuple) while
#: the compact encoding spends as little as 1 byte on one, so the tight bound is ~215x; and the
#: decoder builds at most MAX_NODES nodes, whatever the input size.
ALLOC_FACTOR = 256
ALLOC_CONSTANT = 64 * 1024
ALLOC_CEILING = 4 * 1024 * 1024 + 256 * MAX_NODES  # strings of a few MiB plus every node
#: seconds within which any one crafted input must be decided (measured: well under 0.2 s each)
CRAFTED_SECONDS = 2.0


def corpus() -> list[Program]:
    opts = ({}, {"subgroups": True}, {"approximate": True, "max_depth": 4, "max_stmts": 20})
    return [generate_program(seed, **opts[seed % 3]) for seed in range(1000, 1090)] + \
        [generate_program(seed, wide=True, subgroups=seed % 2 == 0) for seed in range(2000, 2030)]


CORPUS = corpus()
WIRES = [to_wire(p) for p in CORPUS]
TEXTS = [to_text(p) for p in CORPUS]


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(7)
        pos = rng.randrange(len(out) + 1)
        if kind == 0 and out:
            out[min(pos, len(out) - 1)] ^= 1 << rng.randrange(8)
        elif kind == 1 and out:
            out[min(pos, len(out) - 1)] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        elif kind == 2:
            out[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif kind == 3:
            del out[pos:pos + rng.randint(1, 16)]
        elif kind == 4:
            del out[pos:]
        elif kind == 5:
            other = rng.choice(WIRES)[HEADER_SIZE:]
            start = rng.randrange(len(other))
            out[pos:pos] = other[start:start + rng.randint(1, 40)]
        else:
            out[pos:pos] = out[pos:pos + rng.randint(1, 30)]
    return bytes(out)


def wire_inputs(count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    inputs = []
    for i in range(count):
        kind = i % 10
        if kind == 0:  # random bytes, sometimes behind a valid header
            raw = bytes(rng.randrange(256) for _ in range(rng.randint(0, 80)))
            inputs.append(signed(raw) if rng.random() < 0.7 else raw)
        elif kind == 1:  # a mutated header
            inputs.append(mutate_bytes(rng.choice(WIRES)[:HEADER_SIZE + 8], rng) + rng.choice(WIRES)[HEADER_SIZE + 8:])
        else:  # a mutated body, usually re-signed so that the body decoder sees it
            body = mutate_bytes(rng.choice(WIRES)[HEADER_SIZE:], rng)
            inputs.append(signed(body) if rng.random() < 0.9 else rng.choice(WIRES)[:HEADER_SIZE] + body)
    return inputs


def outcome(decode: Callable[[object], Program], data: object) -> Program | None:
    """The decoded program, or None for a ValidationError; anything else fails the test."""
    try:
        return decode(data)
    except ValidationError as err:
        assert err.findings and all(f.code and f.fix for f in err.findings)
        return None


def test_wire_decoder_fuzz() -> None:
    decoded = 0
    for i, data in enumerate(wire_inputs(10_500, seed=1)):
        program = outcome(from_wire, data)
        if program is not None:
            decoded += 1
            assert to_wire(program) == data, f"input {i} decoded but is not canonical"
            findings(program)  # the validator copes with whatever decodes
    assert decoded > 0


def peak_allocation(data: bytes) -> int:
    tracemalloc.start()
    try:
        outcome(from_wire, data)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def adversarial_wires() -> list[bytes]:
    chain = Expr.subgroup_size()
    for _ in range(MAX_DEPTH - 4):
        chain = Expr.neg(chain)
    wide = Expr.call("w", *[Expr.subgroup_size()] * 5000)
    programs = [
        Program([], (1, 1, 1), [Node.store("a", chain, chain)] * 60),
        Program([], (1, 1, 1), [Node.let("x", wide)] * 4),
        Program([], (1, 1, 1), [Node.return_()] * 20000),
        Program([], (1, 1, 1), [Node.block([Node.block([])])] * 5000),
        Program([BufferDecl.read("n" * 4096, 0, DataType.U32)], (1, 1, 1), []),
    ]
    return [to_wire(p) for p in programs]


def crafted_wires() -> list[bytes]:
    """Varint-heavy blobs: long, non-minimal and huge varints, counts past the node cap, many strings."""
    head, let = body_head("x"), bytes([LET, 0])  # let <string 0> = ...
    lit_tag = literal(DataType.U32, 0)[:-1]  # a U32 literal without its bits
    n, million = MAX_NODES // 2 + 10, 10**6
    return [
        signed(head + varint(n) + (let + literal(DataType.U32, 0xFFFFFFFF)) * n),  # lets of 5-byte literals
        signed(head + varint(n) + (let + lit_tag + b"\x80\x80\x00") * n),  # non-minimal varints
        signed(head + varint(MAX_NODES + 1) + bytes([BARRIER]) * (MAX_NODES + 1)),  # one statement over the cap
        signed(head + varint(1) + let + bytes([OPS.index("call")]) + varint(0) + varint(million)
               + literal(DataType.U32, 0) * million),
        signed(head + varint(3) + let + lit_tag + b"\xff" * 9 + b"\x01"),  # a 10-byte varint literal
        signed(varint(200_000) + b"".join(varint(3) + b"%03d" % (i % 1000) for i in range(200_000))),  # repeats
        signed(body_head("x")[:-1] + varint(2**62) + b"\0" * 64),  # 2**62 buffers claimed
        signed(head + varint(1) + let + bytes([OPS.index("neg")]) * 100_000 + literal(DataType.U32, 0)),  # deep
    ]


CRAFTED_WIRES = crafted_wires()


def test_wire_decoder_on_crafted_blobs() -> None:
    rng = random.Random(6)
    for data in CRAFTED_WIRES + [mutate_bytes(w, rng) for w in CRAFTED_WIRES for _ in range(3)]:
        with stopwatch() as watch:
            program = outcome(from_wire, data)
        assert watch.seconds < CRAFTED_SECONDS, len(data)
        assert program is None or to_wire(program) == data


def test_wire_decoder_allocation_is_bounded() -> None:
    rng = random.Random(2)
    samples = WIRES[:40] + adversarial_wires() + wire_inputs(200, seed=3)
    samples.append(signed(b"\x7f" + b"\x80" * 9 + b"\x01"))  # a huge count prefix
    samples.append(signed(b"\x00\x00\x02\x02\x02\xff\xff\xff\xff\x0f"))  # 2**32 buffers claimed
    for data in samples + [mutate_bytes(w, rng) for w in samples[:40]] + CRAFTED_WIRES:
        peak = peak_allocation(data)
        assert peak <= min(ALLOC_FACTOR * len(data) + ALLOC_CONSTANT, ALLOC_CEILING), (len(data), peak)


def mutate_text(text: str, rng: random.Random) -> str:
    lines = text.split("\n")
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(6)
        i = rng.randrange(len(lines))
        line = lines[i]
        if kind == 0 and len(lines) > 1:
            del lines[i]
        elif kind == 1:
            lines.insert(rng.randrange(len(lines) + 1), line)
        elif kind == 2:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == 3 and line:
            p = rng.randrange(len(line))
            lines[i] = line[:p] + line[p + rng.randint(1, 6):]
        elif kind == 4:
            p = rng.randrange(len(line) + 1)
            junk = "".join(rng.choice('(){}[],=:@".\\#-_0x9aZ é\u2028\t') for _ in range(rng.randint(1, 4)))
            lines[i] = line[:p] + junk + line[p:]
        else:
            words = ["add", "let", "set", "if", "loop", "}", "{", "true", "u32:7", "f32:nan", "i32:-1", "load",
                     "cast(bool,", "atomic_add(", "block {", "} else {", "return", "barrier", "region", "call("]
            p = rng.randrange(len(line) + 1)
            lines[i] = line[:p] + rng.choice(words) + line[p:]
    return "\n".join(lines)


def text_inputs(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        if i % 8 == 0:
            alphabet = "program workgroup(1,1,1)\n{}let x=u32:0\"\\"
            out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))))
        else:
            out.append(mutate_text(rng.choice(TEXTS), rng))
    return out


def crafted_texts() -> list[str]:
    """Deep and long text: nesting past the cap, lines and literals at and past their caps, huge strings."""
    head = "program workgroup(4, 1, 1)\nbuffer o: output u32[4] @0\n"
    deep = MAX_DEPTH + 5
    wide = ", ".join(["u32:1"] * 20_000)
    return [
        head + "if true {\n" * deep + "}\n" * deep,
        head + "let x = " + "neg(" * deep + "u32:1" + ")" * deep + "\n",
        head + "let x = " + "neg(" * 100_000 + "\n",
        head + "let x = " + "(" * (MAX_LINE_CHARS + 1) + "\n",
        head + "let x = f32:" + "7" * (MAX_LITERAL_CHARS - 4) + "\nstore o[u32:0] = cast(u32, x)\n",
        head + "let x = f32:" + "7" * 50_000 + "e\n",
        head + "let x = u32:" + "9" * 5_000 + "\n",
        head + 'let "' + "\\u{41}" * 20_000 + '" = u32:1\n',
        head + 'let "' + "a" * 100_000 + "\n",
        head + f"let x = call(f, {wide})\n",
        head + "block {\n" * 100 + "\n" * 100_000 + "}\n" * 100,
        head + "# comment\n" * 50_000 + "barrier\n",
        head + "store o[u32:0] = u32:1\n" * (MAX_NODES // 4),
    ]


CRAFTED_TEXTS = crafted_texts()


def test_text_parser_on_crafted_shapes() -> None:
    rng = random.Random(7)
    inputs = CRAFTED_TEXTS + [mutate_text(t, rng) for t in CRAFTED_TEXTS if len(t) < 200_000 for _ in range(3)]
    parsed = 0
    for text in inputs:
        with stopwatch() as watch:
            program = outcome(parse, text)
        assert watch.seconds < CRAFTED_SECONDS, text[:80]
        if program is not None:
            parsed += 1
            assert parse(to_text(program)) == program
    assert parsed >= 3


def test_text_parser_fuzz() -> None:
    parsed = 0
    for i, text in enumerate(text_inputs(2_400, seed=4)):
        program = outcome(parse, text)
        if program is not None:
            parsed += 1
            assert parse(to_text(program)) == program, f"text input {i} does not round-trip"
            findings(program)
    assert parsed > 100


# ---- the validator on random and garbage programs ------------------------------------------------
BROKEN_LIT = Expr("lit", dtype="u32", value="x")  # even its repr fails
GARBAGE_VALUES = (None, 0, 1, 3, -1, 2**40, True, "x", AtomicOp.ADD, DataType.U8, DataType.U32, 1.5, BROKEN_LIT,
                  Expr.u32(1), ("tuple",))


def garbage_expr(rng: random.Random, depth: int) -> Expr:
    args = tuple(garbage_expr(rng, depth - 1) if depth and rng.random() < 0.8 else rng.choice(GARBAGE_VALUES[:4])
                 for _ in range(rng.randint(0, 3)))
    return Expr(rng.choice(ALL_OPS), args, rng.choice((None, DataType.U32, DataType.F16, "u32", BROKEN_LIT)),
                rng.choice(GARBAGE_VALUES), rng.choice((None, "", "a", 5, "\ud800", BROKEN_LIT)))


def garbage_program(rng: random.Random) -> Program:
    e = garbage_expr(rng, 3)
    body = [rng.choice((Let(rng.choice(("x", 5, BROKEN_LIT)), e), Store("a", e, e), Loop("i", e, e, ("not a node",)),
                        Node.if_(e, [Node.barrier()]), Let("y", "not an expr"), If(e, 5, ()), Region(e, ()),
                        Let("ok", Expr.u32(1))))
            for _ in range(rng.randint(1, 4))]
    buffers = [BufferDecl(rng.choice(("a", "", 3)), rng.choice((0, -1, "0", 2**70)), rng.choice((DataType.U32, "u8")),
                          rng.choice((0, 4, -1, 2**70)), rng.choice((BufferDecl.read("a", 0, DataType.U32).access, 1)))
               for _ in range(rng.randint(0, 3))]
    return Program(buffers, (rng.choice((0, 1, 64, 2**70)), 1, 1), body)


def test_validator_and_encoders_on_garbage() -> None:
    rng = random.Random(5)
    for i in range(1_500):
        program = garbage_program(rng)
        assert isinstance(findings(program), list)
        for encode in (to_text, to_wire):
            try:
                encoded = encode(program)
            except ValidationError:
                continue
            decode = parse if encode is to_text else from_wire
            assert decode(encoded) == program, f"garbage program {i} encoded but does not round-trip"


@pytest.mark.parametrize("seed", range(3))
def test_validator_on_mutated_programs(seed: int) -> None:
    rng = random.Random(seed)
    accepted = rejected = 0
    for _ in range(400):
        program = outcome(parse, mutate_text(rng.choice(TEXTS), rng))
        if program is None:
            continue
        found = findings(program)
        assert all(f.code and f.message and f.fix for f in found)
        if found:
            rejected += 1
        else:
            accepted += 1
    assert rejected > 0 and accepted > 0
