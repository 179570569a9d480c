"""The binary wire form of programs: ``to_wire``, ``from_wire`` and ``fingerprint``.

Layout: ``b"VYRE"``, u16 version (2; version 1 is still read), u16 flags (0), the 32-byte BLAKE2b digest of the body,
then the body (integers little-endian; ``uv`` = unsigned LEB128 varint, ``sv`` = zigzag varint)::

    body    := strings name:uv wx:sv wy:sv wz:sv buffers stmts
    strings := n:uv (len:uv utf8-bytes)*n        every name, in first-use order; a name is
                                                 referenced by its index (program name: index+1,
                                                 0 = None)
    buffers := n:uv (name:uv access:u8 dtype:u8 binding:sv count:sv)*n
    stmts   := n:uv stmt*n
    stmt    := 0 let name:uv expr | 1 assign name:uv expr | 2 store buffer:uv expr expr
             | 3 if expr stmts stmts | 4 loop var:uv expr expr stmts | 5 barrier
             | 6 block stmts | 7 region generator:uv stmts | 8 return
    expr    := op:u8 [dtype:u8] [value] [name:uv] [n:uv] expr*   (fields per vyre.ir.shape.SHAPES:
               value is uv bits for lit, u8 axis for ids, u8 AtomicOp for atomic; n only for
               the ops of variable arity, atomic and call)

Enum codes are the positions in the tables below and never change within a version. Version 2
added the dtype codes 10-12 (U64, I64, F64) and 64-bit literal bits; a version-1 blob is the same
encoding without them, so it still decodes (and re-encodes as version 2 with the same body). Only the
canonical encoding is accepted (decoding then re-encoding gives the same bytes), so one program
has exactly one wire form and one fingerprint.

Decoding is bounded and fails early. Before anything is built: the input is at most
``MAX_WIRE_BYTES`` and the header and BLAKE2b digest match. While decoding: every count is
checked against the bytes left and the nodes left (``MAX_NODES`` statements, expressions and
buffer declarations in all, nesting at most ``MAX_DEPTH``), names are at most ``MAX_NAME_BYTES`` and unique, and a
varint that is not minimal is refused at once. So decoding takes time linear in the input and
allocates the decoded strings (at most the input size) plus one IR object per node (at most
``MAX_NODES`` of them, about 200 bytes each).
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any

from vyre.driver.errors import Finding, ValidationError
from vyre.ir.expr import AtomicOp, Expr, name_of
from vyre.ir.node import Assign, Barrier, Block, If, Let, Loop, Node, Region, Store
from vyre.ir.op import Op
from vyre.ir.program import Access, BufferDecl, Program
from vyre.ir.shape import (
    MAX_DEPTH,
    MAX_NAME_BYTES,
    MAX_NODES,
    SHAPES,
    buffer_well_formed,
    describe,
    name_problem,
    node_well_formed,
    shape_problem,
)
from vyre.ir.types import DataType

MAGIC = b"VYRE"
VERSION = 2
#: wire versions ``from_wire`` reads -> the dtype codes each knows (version 1 had no 64-bit types)
READABLE_VERSIONS = {1: 10, 2: 13}
_HEADER = struct.Struct("<4sHH32s")
HEADER_SIZE = _HEADER.size

D = DataType
DTYPES = (D.U8, D.U16, D.U32, D.I8, D.I16, D.I32, D.F16, D.BF16, D.F32, D.BOOL, D.U64, D.I64, D.F64)
ACCESSES = (Access.READ, Access.READ_WRITE, Access.OUTPUT, Access.UNIFORM, Access.WORKGROUP)
ATOMICS = tuple(AtomicOp)  # declaration order: codes 0-7 as in the first format, the relaxed twins 8-15
#: op codes: an op's code is its position in ``Op`` (``Op.wire_code``)
OPS: tuple[Op, ...] = tuple(Op)
LET, ASSIGN, STORE, IF, LOOP, BARRIER, BLOCK, REGION, RETURN = range(9)
_INDEX = {**{v: i for i, v in enumerate(DTYPES)}, **{v: i for i, v in enumerate(ACCESSES)},
          **{v: i for i, v in enumerate(ATOMICS)}}
_OP_CODE = {op: op.wire_code for op in OPS}
_INT64 = 1 << 63
#: Longest wire blob ``from_wire`` reads (header included); far above any program at the node cap.
MAX_WIRE_BYTES = 64 * 1024 * 1024


def _error(code: str, message: str) -> ValidationError:
    return ValidationError([Finding(code, message, "send the exact bytes Program.to_wire() produced")])


def _encode_error(code: str, message: str) -> ValidationError:
    return ValidationError([Finding(code, message, "correct the program (vyre.validate lists every problem) "
                                                   "before encoding it")])


# ==== encoding ==================================================================================
class _Encoder:
    def __init__(self) -> None:
        self.out = bytearray()
        self.strings: dict[str, int] = {}
        self.nodes = 0

    def uv(self, v: int) -> None:
        while v > 0x7F:
            self.out.append((v & 0x7F) | 0x80)
            v >>= 7
        self.out.append(v)

    def sv(self, v: int, what: str) -> None:
        if isinstance(v, bool) or not isinstance(v, int) or not -_INT64 <= v < _INT64:
            raise _encode_error("not_encodable", f"{what} {describe(v)} is not a 64-bit int")
        self.uv((v << 1) ^ (v >> 63))

    def intern(self, s: str) -> int:
        """The string-table index of ``s`` (added on first use)."""
        problem = name_problem(s)
        if problem and (problem[0] != "empty_name"):
            raise _encode_error(problem[0], problem[1])
        return self.strings.setdefault(s, len(self.strings))

    def name(self, s: str) -> None:
        self.uv(self.intern(s))

    def tick(self, depth: int) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _encode_error("program_too_large", f"more than {MAX_NODES} statements, expressions and "
                                "buffer declarations")
        if depth > MAX_DEPTH:
            raise _encode_error("nesting_too_deep", f"nesting deeper than {MAX_DEPTH} levels")

    def enum(self, v: object, what: str) -> None:
        code = _INDEX.get(v) if isinstance(v, (DataType, Access, AtomicOp)) else None
        if code is None:
            raise _encode_error("malformed_buffer", f"{what} {describe(v)} is not a valid enum value")
        self.out.append(code)

    def expr(self, e: Expr, depth: int) -> None:
        self.tick(depth)
        problem = shape_problem(e) if isinstance(e, Expr) else f"{describe(e)} is not an Expr"
        if problem:
            raise _encode_error("malformed_expr", problem)
        shape = SHAPES[e.op]
        self.out.append(_OP_CODE[e.op])
        if shape.dtype:
            self.enum(e.dtype, "dtype")
        if shape.value == "bits":
            self.uv(e.value)
        elif shape.value == "axis":
            self.out.append(e.value)
        elif shape.value == "atomic":
            self.enum(e.value, "atomic op")
        if shape.name:
            self.name(name_of(e))
        if not shape.fixed_arity:
            self.uv(len(e.args))
        for a in e.args:
            self.expr(a, depth + 1)

    def stmts(self, body: tuple[Node, ...], depth: int) -> None:
        self.uv(len(body))
        for node in body:
            self.stmt(node, depth)

    def stmt(self, node: Node, depth: int) -> None:
        self.tick(depth)
        if not node_well_formed(node):
            raise _encode_error("malformed_node", f"{describe(node)} is not a well-formed statement")
        d = depth + 1
        if isinstance(node, (Let, Assign)):
            self.out.append(LET if isinstance(node, Let) else ASSIGN)
            self.name(node.name)
            self.expr(node.value, d)
        elif isinstance(node, Store):
            self.out.append(STORE)
            self.name(node.buffer)
            self.expr(node.index, d)
            self.expr(node.value, d)
        elif isinstance(node, If):
            self.out.append(IF)
            self.expr(node.cond, d)
            self.stmts(node.then, d)
            self.stmts(node.otherwise, d)
        elif isinstance(node, Loop):
            self.out.append(LOOP)
            self.name(node.var)
            self.expr(node.start, d)
            self.expr(node.end, d)
            self.stmts(node.body, d)
        elif isinstance(node, Block):
            self.out.append(BLOCK)
            self.stmts(node.body, d)
        elif isinstance(node, Region):
            self.out.append(REGION)
            self.name(node.generator)
            self.stmts(node.body, d)
        else:
            self.out.append(BARRIER if isinstance(node, Barrier) else RETURN)


def _encode_body(program: Program) -> bytes:
    enc = _Encoder()
    enc.uv(0 if program.name is None else enc.intern(program.name) + 1)  # 0: no name
    for v in program.workgroup_size:
        enc.sv(v, "workgroup size")
    enc.uv(len(program.buffers))
    for b in program.buffers:
        enc.tick(0)
        if not buffer_well_formed(b):
            raise _encode_error("malformed_buffer", "a buffer declaration has fields of the wrong type")
        enc.name(b.name)
        enc.enum(b.access, "access")
        enc.enum(b.dtype, "dtype")
        enc.sv(b.binding, "binding")
        enc.sv(b.count, "count")
    enc.stmts(program.body, 1)
    table = _Encoder()
    table.uv(len(enc.strings))
    for s in enc.strings:  # dicts keep first-use order
        raw = s.encode("utf-8")
        table.uv(len(raw))
        table.out += raw
    return bytes(table.out + enc.out)


def to_wire(program: Program) -> bytes:
    """The wire bytes of ``program`` (header, digest, body)."""
    body = _encode_body(program)
    return _HEADER.pack(MAGIC, VERSION, 0, hashlib.blake2b(body, digest_size=32).digest()) + body


def fingerprint(program: Program) -> bytes:
    """32-byte BLAKE2b digest of the wire body: equal programs give equal fingerprints."""
    return hashlib.blake2b(_encode_body(program), digest_size=32).digest()


# ==== decoding ==================================================================================
class _Decoder:
    def __init__(self, data: memoryview, dtypes: tuple[DataType, ...] = DTYPES) -> None:
        """``dtypes``: the dtype codes of the blob's wire version."""
        self.data = data
        self.dtypes = dtypes
        self.pos = 0
        self.strings: list[str] = []
        self.nodes = 0

    def left(self) -> int:
        return len(self.data) - self.pos

    def u8(self, what: str) -> int:
        if self.pos >= len(self.data):
            raise _error("wire_truncated", f"input ends while reading {what} at byte {self.pos}")
        self.pos += 1
        return self.data[self.pos - 1]

    def uv(self, what: str, limit: int = (1 << 64) - 1) -> int:
        v = shift = 0
        while True:
            b = self.u8(what)
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift >= 70:
                raise _error("wire_value", f"varint for {what} at byte {self.pos} is too long")
        if b == 0 and shift:
            raise _error("wire_noncanonical", f"varint for {what} ending at byte {self.pos} has a redundant zero byte")
        if v > limit:
            raise _error("wire_value", f"{what} {v} is over {limit}")
        return v

    def sv(self, what: str) -> int:
        v = self.uv(what)
        return (v >> 1) ^ -(v & 1)

    def count(self, what: str, nodes: bool = True) -> int:
        """A list length: each element takes at least one byte (and, for ``nodes``, one node of the
        budget), so it cannot exceed the bytes left or the nodes left."""
        n = self.uv(what)
        if n > self.left():
            raise _error("wire_truncated", f"{what} {n} is more than the {self.left()} bytes left")
        if nodes and n > MAX_NODES - self.nodes:
            raise _error("wire_limit", f"{what} {n} would take the program over {MAX_NODES} statements, "
                                       "expressions and buffer declarations")
        return n

    def enum(self, table: tuple, what: str):
        code = self.u8(what)
        if code >= len(table):
            raise _error("wire_value", f"{what} code {code} is not valid")
        return table[code]

    def name(self, what: str) -> str:
        index = self.uv(what)
        if index >= len(self.strings):
            raise _error("wire_value", f"{what} refers to string {index} of {len(self.strings)}")
        return self.strings[index]

    def string_table(self) -> None:
        seen: set[str] = set()
        for _ in range(self.count("string count", nodes=False)):
            n = self.uv("string length", MAX_NAME_BYTES)
            if n > self.left():
                raise _error("wire_truncated", f"string of {n} bytes but only {self.left()} left")
            raw = bytes(self.data[self.pos:self.pos + n])
            self.pos += n
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise _error("wire_utf8", f"string is not valid UTF-8 ({err.reason})") from None
            if text in seen:
                raise _error("wire_noncanonical", f"string {len(self.strings)} repeats an earlier one")
            seen.add(text)
            self.strings.append(text)

    def tick(self, depth: int) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _error("wire_limit", f"more than {MAX_NODES} statements, expressions and "
                                "buffer declarations")
        if depth > MAX_DEPTH:
            raise _error("wire_limit", f"nesting deeper than {MAX_DEPTH} levels")

    def expr(self, depth: int) -> Expr:
        self.tick(depth)
        op = self.enum(OPS, "expression op")
        shape = SHAPES[op]
        dtype = self.enum(self.dtypes, "dtype") if shape.dtype else None
        value: Any = None  # Expr.value: bits, an axis or an AtomicOp, after the op's shape
        if shape.value == "bits":
            value = self.uv("literal bits", 2**64 - 1)
        elif shape.value == "axis":
            value = self.u8("axis")
        elif shape.value == "atomic":
            value = self.enum(ATOMICS, "atomic op")
        name = self.name("name") if shape.name else None
        n = shape.min_args if shape.fixed_arity else self.count("operand count")
        if n < shape.min_args or (shape.max_args is not None and n > shape.max_args):
            raise _error("wire_value", f"{op} with {n} operands at byte {self.pos}")
        args = []
        for _ in range(n):
            args.append(self.expr(depth + 1))
        bad_lit = op == Op.LIT and (not dtype.is_arith or (dtype is D.BOOL and value > 1))
        if bad_lit or (shape.value == "axis" and value > 2):
            raise _error("wire_value", f"invalid {op} attributes at byte {self.pos}")
        return Expr(op, tuple(args), dtype, value, name)  # the canonical re-encoding checks the rest

    def stmts(self, depth: int) -> tuple[Node, ...]:
        return tuple(self.stmt(depth) for _ in range(self.count("statement count")))

    def stmt(self, depth: int) -> Node:
        self.tick(depth)
        tag = self.u8("statement tag")
        d = depth + 1
        if tag in (LET, ASSIGN):
            name = self.name("variable name")
            return (Node.let if tag == LET else Node.assign)(name, self.expr(d))
        if tag == STORE:
            buf = self.name("buffer name")
            return Node.store(buf, self.expr(d), self.expr(d))
        if tag == IF:
            return Node.if_(self.expr(d), self.stmts(d), self.stmts(d))
        if tag == LOOP:
            var = self.name("loop variable")
            return Node.loop(var, self.expr(d), self.expr(d), self.stmts(d))
        if tag == BLOCK:
            return Node.block(self.stmts(d))
        if tag == REGION:
            return Node.region(self.name("region generator"), self.stmts(d))
        if tag in (BARRIER, RETURN):
            return Node.barrier() if tag == BARRIER else Node.return_()
        raise _error("wire_tag", f"unknown statement tag {tag} at byte {self.pos - 1}")

    def program(self) -> Program:
        self.string_table()
        name_ref = self.uv("program name")
        name = None if name_ref == 0 else self.name_at(name_ref - 1)
        wg = tuple(self.sv("workgroup size") for _ in range(3))
        buffers = []
        n_buffers = self.count("buffer count")
        self.nodes += n_buffers  # each declaration takes a node of the budget, as in the text form
        for _ in range(n_buffers):
            bname = self.name("buffer name")
            access = self.enum(ACCESSES, "access")
            dtype = self.enum(self.dtypes, "dtype")
            buffers.append(BufferDecl(bname, self.sv("binding"), dtype, self.sv("count"), access))
        body = self.stmts(1)
        if self.left():
            raise _error("wire_trailing", f"{self.left()} bytes after the program")
        return Program(buffers, wg, body, name)

    def name_at(self, index: int) -> str:
        if index >= len(self.strings):
            raise _error("wire_value", f"program name refers to string {index} of {len(self.strings)}")
        return self.strings[index]


def from_wire(data: bytes, *, canonical: bool = True) -> Program:
    """Decode wire bytes; any malformed input raises ``ValidationError`` (codes ``wire_*``).

    ``canonical=False`` skips re-encoding the program to prove the body canonical (one program, one
    byte string, and well formed): only for a reader that validates the program before any use and
    never compares bytes (the specialisation cache, ``vyre.frontend.spec_cache``)."""
    try:
        view = memoryview(data).cast("B")
    except TypeError:
        raise _error("wire_value", f"expected bytes, got {type(data).__name__}") from None
    except ValueError as exc:  # a released memoryview, or one whose format cannot be cast to bytes
        raise _error("wire_value", f"cannot read the {type(data).__name__} as bytes ({exc})") from None
    if len(view) > MAX_WIRE_BYTES:
        raise _error("wire_limit", f"{len(view)} bytes is more than the {MAX_WIRE_BYTES}-byte limit")
    if len(view) < HEADER_SIZE:
        raise _error("wire_truncated", f"{len(view)} bytes is shorter than the {HEADER_SIZE}-byte header")
    magic, version, flags, digest = _HEADER.unpack_from(view)
    if magic != MAGIC:
        raise _error("wire_magic", f"magic is {bytes(magic)!r}, expected {MAGIC!r}")
    if version not in READABLE_VERSIONS:
        raise _error("wire_version", f"wire version {version} is not supported (this reads versions "
                     f"{', '.join(map(str, READABLE_VERSIONS))})")
    if flags != 0:
        raise _error("wire_flags", f"flags {flags:#06x} are not supported (must be 0)")
    body = view[HEADER_SIZE:]
    if hashlib.blake2b(body, digest_size=32).digest() != digest:
        raise _error("wire_digest", "the body does not match its BLAKE2b digest (corrupted or altered)")
    program = _Decoder(body, DTYPES[:READABLE_VERSIONS[version]]).program()
    if not canonical:
        return program
    try:
        again = _encode_body(program)
    except ValidationError as err:  # decoded, but not a well-formed program
        raise _error("wire_value", err.findings[0].message) from None
    if again != body:
        raise _error("wire_noncanonical", "the body is not in canonical form (string table order, varints)")
    return program
