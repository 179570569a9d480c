"""Semi-naive Datalog over bit matrices, every round on the device (``dispatch_until``).

For a binary relation over ``n`` vertices (``n`` at most ``MAX_VERTICES``) the relation is an
``n x n`` bit matrix: row ``a`` holds the bits of every ``(a, c)``, ``W = ceil(n / 32)`` words a
row. Three matrices live on the device: ``full`` (every fact so far), ``delta`` (the last round's
new facts) and ``next`` (the facts this round finds). A round is a fixed list of two steps:

1. *join*: one invocation per word of ``delta``; for each set bit ``(a, b)`` it enumerates the
   rule's new facts (``compose``: ``(a, c)`` for ``b -> c``; ``expand``: ``(x, y)`` for ``a -> x``
   and ``b -> y``) and sets each one not in ``full`` in ``next`` (atomic or), raising the flag when
   it sets a bit that was clear;
2. *advance*: ``full |= next``, ``delta = next``, ``next = 0``, one invocation per word.

``backend.dispatch_until`` repeats the round while the flag is set: on ``cuda`` one conditional
WHILE graph launch. Deduplication and subtraction of ``full`` are a bit test, and the bit matrix
is already in lexicographic order, so the result needs no sort: per-row popcounts, the library's
scan, and one invocation per row writing its pairs. The host reads the pair count once and the
pairs.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre.driver.config import DispatchConfig
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.lib import graph as graphs

U32 = DataType.U32
WG = 256
V = Expr.var
MAX_VERTICES = 1 << 15  # three matrices of n * ceil(n / 32) words: 384 MiB at this size


def words_per_row(n: int) -> int:
    return (n + 31) // 32


_MATRIX_CONTEXT = (BufferDecl.read("indptr", 0, U32), BufferDecl.read("indices", 1, U32))


def _width() -> Expr:
    """``W``, the words of a row: from the CSR's vertex count."""
    return (Expr.buf_len("indptr") - 1 + 31) >> 5


def _children(vertex: Expr, var: str, body: list[Node]) -> Node:
    return Node.loop(var, Expr.load("indptr", vertex), Expr.load("indptr", vertex + 1), body)


def _set_bit(row: Expr, col: Expr, tag: str) -> list[Node]:
    """Set fact ``(row, col)`` in ``next`` unless ``full`` holds it; raise the flag if it was new."""
    at, mask = f"at_{tag}", f"mask_{tag}"
    return [
        Node.let(at, row * _width() + (col >> 5)),
        Node.let(mask, Expr.u32(1) << (col & 31)),
        Node.if_(Expr.eq(Expr.load("full", V(at)) & V(mask), Expr.u32(0)), [
            Node.let(f"old_{tag}", Expr.atomic(AtomicOp.OR, "next", V(at), V(mask), relaxed=True)),
            Node.if_(Expr.eq(V(f"old_{tag}") & V(mask), Expr.u32(0)), [Node.store("flag", Expr.u32(0), Expr.u32(1))]),
        ]),
    ]


def _facts(mode: str, a: Expr, b: Expr) -> list[Node]:
    """The rule's facts from ``(a, b)``: ``compose`` ``(a, c)`` for ``b -> c``; ``expand`` ``(x, y)`` for
    ``a -> x``, ``b -> y``; ``siblings`` (``b`` unused) ``(x, y)``, ``x != y``, for ``a -> x``, ``a -> y``."""
    x, y = Expr.load("indices", V("e1")), Expr.load("indices", V("e2"))
    if mode == "compose":
        return [_children(b, "e2", _set_bit(a, y, "c"))]
    if mode == "expand":
        return [_children(a, "e1", [Node.let("x", x), _children(b, "e2", _set_bit(V("x"), y, "x"))])]
    return [_children(a, "e1", [Node.let("x", x), _children(a, "e2", [
        Node.if_(Expr.ne(V("e1"), V("e2")), _set_bit(V("x"), y, "s"))])])]


@cache
def seed_program(mode: str) -> Program:
    """The first facts into ``next``: ``edges`` (``(a, c)`` for every edge) or ``siblings``; one
    invocation per vertex. An ``advance`` then makes them ``full`` and ``delta``."""
    a = Expr.invocation_id(0)
    facts = _facts("siblings", a, a) if mode == "siblings" else [_children(a, "e2", _set_bit(
        a, Expr.load("indices", V("e2")), "c"))]
    return Program(
        [*_MATRIX_CONTEXT, BufferDecl.read("full", 2, U32), BufferDecl.read_write("next", 3, U32),
         BufferDecl.read_write("flag", 4, U32, 1)],
        (WG, 1, 1),
        [Node.if_(Expr.lt(a, Expr.buf_len("indptr") - 1), facts)],
        name=f"datalog_dense_seed_{mode}",
    )


@cache
def join_program(mode: str) -> Program:
    """One invocation per word of ``delta``: every fact its set bits make, into ``next``."""
    i = Expr.invocation_id(0)
    width = _width()
    return Program(
        [*_MATRIX_CONTEXT, BufferDecl.read("delta", 2, U32), BufferDecl.read("full", 3, U32),
         BufferDecl.read_write("next", 4, U32), BufferDecl.read_write("flag", 5, U32, 1)],
        (WG, 1, 1),
        [Node.if_(Expr.lt(i, Expr.buf_len("delta")), [
            Node.let("bits", Expr.load("delta", i)),
            Node.let("a", i // width),
            Node.let("base", (i % width) << 5),
            Node.loop("k", Expr.u32(0), Expr.popcount(V("bits")), [
                Node.let("b", V("base") + Expr.ctz(V("bits"))),
                Node.assign("bits", V("bits") & (V("bits") - 1)),
                *_facts(mode, V("a"), V("b")),
            ]),
        ])],
        name=f"datalog_dense_join_{mode}",
    )


@cache
def advance_program() -> Program:
    """``full |= next``, ``delta = next``, ``next = 0``, one invocation per word."""
    i = Expr.invocation_id(0)
    return Program(
        [BufferDecl.read_write("full", 0, U32), BufferDecl.read_write("delta", 1, U32),
         BufferDecl.read_write("next", 2, U32)],
        (WG, 1, 1),
        [Node.if_(Expr.lt(i, Expr.buf_len("full")), [
            Node.let("fresh", Expr.load("next", i)),
            Node.store("delta", i, V("fresh")),
            Node.if_(Expr.ne(V("fresh"), Expr.u32(0)), [
                Node.store("full", i, Expr.load("full", i) | V("fresh")),
                Node.store("next", i, Expr.u32(0)),
            ]),
        ])],
        name="datalog_dense_advance",
    )


@cache
def row_counts_program() -> Program:
    """``counts[r]``: the facts of row ``r`` (popcount of its words)."""
    r = Expr.invocation_id(0)
    width = _width()
    return Program(
        [BufferDecl.read("indptr", 0, U32), BufferDecl.read("full", 1, U32), BufferDecl.read_write("counts", 2, U32)],
        (WG, 1, 1),
        [Node.if_(Expr.lt(r, Expr.buf_len("indptr") - 1), [
            Node.let("count", Expr.u32(0)),
            Node.loop("w", Expr.u32(0), width, [
                Node.assign("count", V("count") + Expr.popcount(Expr.load("full", r * width + V("w")))),
            ]),
            Node.store("counts", r, V("count")),
        ])],
        name="datalog_dense_row_counts",
    )


@cache
def write_pairs_program() -> Program:
    """Row ``r`` writes its facts ``(r, c)``, ascending ``c``, from ``ends[r] - counts[r]`` on."""
    r = Expr.invocation_id(0)
    width = _width()
    return Program(
        [BufferDecl.read("indptr", 0, U32), BufferDecl.read("full", 1, U32), BufferDecl.read("counts", 2, U32),
         BufferDecl.read("ends", 3, U32), BufferDecl.read_write("out_s", 4, U32),
         BufferDecl.read_write("out_d", 5, U32)],
        (WG, 1, 1),
        [Node.if_(Expr.lt(r, Expr.buf_len("indptr") - 1), [
            Node.let("at", Expr.load("ends", r) - Expr.load("counts", r)),
            Node.loop("w", Expr.u32(0), width, [
                Node.let("bits", Expr.load("full", r * width + V("w"))),
                Node.loop("k", Expr.u32(0), Expr.popcount(V("bits")), [
                    Node.store("out_s", V("at"), r),
                    Node.store("out_d", V("at"), (V("w") << 5) + Expr.ctz(V("bits"))),
                    Node.assign("bits", V("bits") & (V("bits") - 1)),
                    Node.assign("at", V("at") + 1),
                ]),
            ]),
        ])],
        name="datalog_dense_write_pairs",
    )


def fixpoint(edges: graphs.Graph, seed: str, rule: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Seed the facts (``edges`` or ``siblings`` of the CSR ``edges``), then run rounds of ``rule``
    (``compose`` or ``expand``) on the device until one finds nothing new.

    Returns the sorted, distinct pairs and the rounds run (the seed's round included).
    """
    from vyre import lib

    be, n = edges.backend, edges.n
    words = n * words_per_row(n)
    every_word, every_row = DispatchConfig(elements=max(words, 1)), DispatchConfig(elements=max(n, 1))
    with graphs.ResidentSet(be) as res:
        full, delta, nxt = (res.alloc(4 * max(words, 1)) for _ in range(3))
        flag = res.alloc(4)
        csr = [edges.indptr_handle, edges.indices_handle]
        advance = (advance_program(), [full, delta, nxt], every_word)
        clear = [(graphs.zero_program(), [matrix], every_word) for matrix in (full, delta, nxt)]  # not host zeros
        be.dispatch_sequence([*clear, (seed_program(seed), [*csr, full, nxt, flag], every_row), advance])
        rounds = 1 + be.dispatch_until([(join_program(rule), [*csr, delta, full, nxt, flag], every_word), advance],
                                       flag, n * n + 2)  # each round but the last adds a fact
        counts = res.alloc(4 * max(n, 1))
        be.dispatch_sequence([(row_counts_program(), [edges.indptr_handle, full, counts], every_row)])
        ends = lib.inclusive_scan(lib.ResidentArray(counts, np.uint32, n), backend=be)
        res.adopt(ends.handle)
        total = int(be.download_resident(ends.handle, 4 * (n - 1), 4).view(np.uint32)[0]) if n else 0
        out_s, out_d = res.alloc(4 * max(total, 1)), res.alloc(4 * max(total, 1))
        if total:
            be.dispatch_sequence([(write_pairs_program(), [edges.indptr_handle, full, counts, ends.handle, out_s,
                                                           out_d], every_row)])
        return graphs.read_u32(be, out_s, total), graphs.read_u32(be, out_d, total), rounds
