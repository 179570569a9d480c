"""Programs of the adversarial catalogue (docs/security.md): hostile identifiers and out-of-bounds indices.

Shared by the host tests (which check the oracle's answers), the GPU tests (which compare a backend
with the oracle) and anyone checking a new backend. Every case is a ``vyre.ir.generate.Case``:
program, inputs in ``program.inputs`` order, and dispatch config.
"""

from __future__ import annotations

import numpy as np

from vyre.driver.config import DispatchConfig
from vyre.ir.expr import AtomicOp, Expr
from vyre.ir.generate import Case
from vyre.ir.node import Node
from vyre.ir.program import BufferDecl, Program
from vyre.ir.types import DataType

D = DataType
GID, LID = Expr.invocation_id(0), Expr.local_id(0)
N = 32  # invocations (one workgroup) and elements per buffer
POISON = 0xAB  # byte that fills buffers whose untouched elements a test checks

#: names a program may use that look like PTX, comments, registers, or are not ASCII; the last
#: ones aim at the kernel name, which a backend may derive from the program name (the cuda
#: backend's fallback entry ``vyre_main``, its shared-memory symbol, PTX's ``WARP_SZ``, a leading
#: digit, a name too long to keep whole)
HOSTILE_NAMES = {
    "ptx_statement": "a;\n ret; }",
    "register": "%r1",
    "comment": "//",
    "entry_directive": ".visible .entry vyre_main(",
    "param_name": "vyre_main_param_0",
    "unicode": "名前ω\u200b",
    "nul": "a\0b",
    "quotes_backslash": 'q"\\n\'',
    "crlf_tab": "x\r\n\ty",
    "reserved_word": "u32",
    "fallback_entry": "vyre_main",
    "shared_symbol": "vyre_smem",
    "predefined_identifier": "WARP_SZ",
    "digit_first": "9lives",
    "long_identifier": "k" * 300,
}

#: U32 index expressions out of bounds for every buffer of the cases below (``neg`` holds negative I32s)
OOB_INDICES = {
    "u32_max": Expr.u32(0xFFFFFFFF),
    "i32_minus_1": Expr.cast(D.U32, Expr.i32(-1)),
    "i32_min": Expr.cast(D.U32, Expr.i32(-(2**31))),
    "runtime_negative": Expr.cast(D.U32, Expr.load("neg", GID)),
    "past_the_end": Expr.add(GID, Expr.buf_len("neg")),
}

#: storage types whose out-of-bounds loads and stores the catalogue covers (atomics: ``ATOMIC_TYPES``)
STORAGE_TYPES = (D.U32, D.I32, D.F32, D.BOOL, D.U8, D.I16, D.F16, D.BF16, D.U64, D.I64, D.F64)
ATOMIC_TYPES = (D.U32, D.I32, D.U64, D.I64)
#: a literal of each integer type atomics take
_INT_LITERAL = {D.U32: Expr.u32, D.I32: Expr.i32, D.U64: Expr.u64, D.I64: Expr.i64}
NEG = BufferDecl.read("neg", 0, D.I32)


def named_program(name: str) -> Program:
    """A program that puts ``name`` everywhere a name can go: buffers, variables, loop, region, program."""
    src, dst, tile = name, name + "#dst", name + "#tile"
    v, acc, i = name + "#v", name + "#acc", name + "#i"
    body = [
        Node.let(v, Expr.load(src, GID)),
        Node.store(tile, LID, Expr.var(v)),
        Node.barrier(),
        Node.let(acc, Expr.var(v)),
        Node.region(name, [
            Node.loop(i, Expr.u32(0), Expr.u32(4), [
                Node.assign(acc, Expr.add(Expr.var(acc), Expr.load(tile, Expr.add(Expr.var(i), LID)))),
            ]),
        ]),
        Node.store(dst, GID, Expr.var(acc)),
    ]
    buffers = [BufferDecl.read(src, 0, D.U32), BufferDecl.output(dst, 1, D.U32, 64),
               BufferDecl.workgroup(tile, 64, D.U32)]
    return Program(buffers, (32, 1, 1), body, name=name)


def poisoned(dtype: DataType, n: int = N) -> np.ndarray:
    """``n`` elements of ``dtype`` whose bytes are all ``POISON``."""
    return np.full(n * dtype.size, POISON, np.uint8).view(dtype.np_dtype)


def negatives(n: int = N, seed: int = 0) -> np.ndarray:
    """``n`` random negative I32 values (as indices cast to U32 they are >= 2^31)."""
    return (-np.random.default_rng(seed).integers(1, 2**31, n, dtype=np.int64)).astype(np.int32)


def _case(buffers: list[BufferDecl], body: list[Node], inputs: list[np.ndarray]) -> Case:
    return Case(Program(buffers, (N, 1, 1), body), inputs, DispatchConfig(grid=(1, 1, 1)))


def oob_load_case(dtype: DataType, index: Expr) -> Case:
    """``got[i] = src[index]`` and ``got_shared[i] = tile[index]`` into poisoned buffers: all typed zeros."""
    arith = dtype.arith
    buffers = [NEG, BufferDecl.read("src", 1, dtype), BufferDecl.read_write("got", 2, arith),
               BufferDecl.read_write("got_shared", 3, arith), BufferDecl.workgroup("tile", N, dtype)]
    body = [Node.store("tile", LID, Expr.load("src", GID)), Node.barrier(),
            Node.store("got", GID, Expr.load("src", index)),
            Node.store("got_shared", GID, Expr.load("tile", index))]
    src = np.random.default_rng(1).integers(1, 255, N * dtype.size, dtype=np.uint8).view(dtype.np_dtype)
    return _case(buffers, body, [negatives(), src, poisoned(arith), poisoned(arith)])


def oob_store_case(dtype: DataType, index: Expr | None) -> Case:
    """Copy poisoned ``dst`` into a tile, store to ``dst[index]`` and ``tile[index]`` (none when ``index`` is
    None), copy the tile out to ``shared_out``: out-of-bounds stores leave both as they were."""
    value = {D.F32: Expr.f32(1.5), D.BOOL: Expr.bool(True), D.I32: Expr.i32(-7), D.F64: Expr.f64(1.5),
             D.I64: Expr.i64(-7), D.U64: Expr.u64(7)}.get(dtype.arith, Expr.u32(7))
    stores = [] if index is None else [Node.store("dst", index, value), Node.store("tile", index, value)]
    buffers = [NEG, BufferDecl.read_write("dst", 1, dtype), BufferDecl.read_write("shared_out", 2, dtype),
               BufferDecl.workgroup("tile", N, dtype)]
    body = [Node.store("tile", LID, Expr.load("dst", GID)), Node.barrier(), *stores, Node.barrier(),
            Node.store("shared_out", GID, Expr.load("tile", LID))]
    before = poisoned(dtype)
    return _case(buffers, body, [negatives(), before, np.zeros_like(before)])


def oob_atomic_case(op: AtomicOp, dtype: DataType, index: Expr) -> Case:
    """The atomic on ``acc[index]`` and ``tile[index]``; old values go to poisoned ``old``/``old_shared``.

    Out of bounds, both return 0 and ``acc`` and the tile (copied out to ``tile_out``) keep the poison.
    COMPARE_EXCHANGE expects the poison value, so a wrongly performed exchange would write.
    """
    lit = _INT_LITERAL[dtype]
    poison_word = int(poisoned(dtype, 1)[0])
    expected = lit(poison_word) if op.base is AtomicOp.COMPARE_EXCHANGE else None
    atomic = {space: Expr.atomic(op, space, index, lit(5), expected) for space in ("acc", "tile")}
    buffers = [NEG, BufferDecl.read_write("acc", 1, dtype), BufferDecl.read_write("old", 2, dtype),
               BufferDecl.read_write("old_shared", 3, dtype), BufferDecl.read_write("tile_out", 4, dtype),
               BufferDecl.workgroup("tile", N, dtype)]
    body = [Node.store("tile", LID, Expr.load("acc", GID)), Node.barrier(),
            Node.store("old", GID, atomic["acc"]), Node.store("old_shared", GID, atomic["tile"]), Node.barrier(),
            Node.store("tile_out", GID, Expr.load("tile", LID))]
    acc = poisoned(dtype)
    return _case(buffers, body, [negatives(), acc, poisoned(dtype), poisoned(dtype), np.zeros_like(acc)])


__all__ = [
    "ATOMIC_TYPES", "HOSTILE_NAMES", "OOB_INDICES", "POISON", "STORAGE_TYPES", "named_program", "negatives",
    "oob_atomic_case", "oob_load_case", "oob_store_case", "poisoned",
]
