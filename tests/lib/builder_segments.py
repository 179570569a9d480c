"""The builder-written segment reductions as they were before the library wrote them as
``@vk.kernel`` functions: the scans' upsweep (``vyre.lib._scan.kernels.reduce_segments``) and
compaction's (``vyre.lib._select.kernels.count_segments``); kept only as the oracles of
``test_kernels_front.py``, which checks that both emit byte-identical PTX."""

from __future__ import annotations

from collections.abc import Callable

from tests.lib.builder_compact import extra_uniforms, flag, pred_buffers
from tests.lib.builder_reduce import block_reduce
from tests.lib.builder_scan import segment
from vyre.ir import BufferDecl, Expr, Node, Program
from vyre.lib._select.kernels import Predicate
from vyre.lib.blocks import U32, WARPS, WG, WG_SIZE, lid, load_param, params, u, var, wid
from vyre.lib.monoid import COUNT, Monoid


def fold_segment(m: Monoid, items: int, n: Expr, span_word: int, value: Callable[[Expr], Expr]) -> list[Node]:
    """Bind ``acc``: this invocation's fold of ``value(i)`` over element ``k*WG + t`` of every tile of
    its workgroup's segment (coalesced), in order; the caller reduces ``acc`` over the workgroup."""
    tile = WG * items
    body = segment(n, span_word, tile) + [Node.let("acc", m.pad())]
    step: list[Node] = [Node.let("tb", Expr.add(var("seg_base"), Expr.mul(var("t"), u(tile))))]
    for k in range(items):
        step.append(Node.assign("acc", m.combine(var("acc"), value(Expr.add(var("tb"), Expr.add(u(k * WG), lid()))))))
    body.append(Node.loop("t", u(0), var("seg_tiles"), step))
    return body


def partial_of_segment(m: Monoid, body: list[Node]) -> list[Node]:
    nodes, total = block_reduce(m, var("acc"), "sums", "b")
    return body + nodes + [Node.if_(Expr.eq(lid(), u(0)), Node.store("partial", wid(), total))]


def reduce_segments(m: Monoid, items: int, n_word: int, span_word: int) -> Program:
    """The builder's program of ``vyre.lib._scan.kernels.reduce_segments`` (same arguments)."""
    n = load_param(n_word)

    def value(index: Expr) -> Expr:
        return Expr.select(Expr.lt(index, n), Expr.load("x", index), m.pad())

    body = partial_of_segment(m, fold_segment(m, items, n, span_word, value))
    buffers = [BufferDecl.read("x", 0, m.dtype), BufferDecl.read_write("partial", 1, m.dtype), params(2),
               BufferDecl.workgroup("sums", WARPS, m.dtype)]
    return Program(buffers, WG_SIZE, body, name=f"lib_reduce_segments_{m.op}_{m.dtype.value}")


def count_segments(pred: Predicate, items: int, n_word: int, span_word: int) -> Program:
    """The builder's program of ``vyre.lib._select.kernels.count_segments`` (same arguments)."""
    n = load_param(n_word)

    body = partial_of_segment(COUNT, fold_segment(COUNT, items, n, span_word, lambda i: flag(pred, i, n)))
    buffers = pred_buffers(pred, 0)
    buffers += [BufferDecl.read_write("partial", len(buffers), U32), params(len(buffers) + 1)]
    buffers += extra_uniforms(pred, len(buffers))
    buffers.append(BufferDecl.workgroup("sums", WARPS, U32))
    return Program(buffers, WG_SIZE, body, name=f"lib_count_{pred.name()}")
