"""The builder-written compaction as it was before the library wrote it as ``@vk.kernel``
functions (``vyre.lib._select.kernels``): the predicate's buffers and test, and the downsweep
``compact_segments``; kept only as the oracle of ``test_kernels_front.py``, which checks that
both emit byte-identical PTX."""

from __future__ import annotations

from collections.abc import Callable

from tests.lib.builder_scan import segment
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.lib._select.kernels import Predicate
from vyre.lib.blocks import (
    U32,
    WARPS,
    WG,
    WG_SIZE,
    lane,
    lid,
    load_param,
    params,
    typed_params,
    u,
    var,
    warp,
    warp_inclusive_scan,
    wid,
)
from vyre.lib.keys import equality_key
from vyre.lib.monoid import COUNT

_ZERO = {DataType.F32: Expr.f32(0.0), DataType.I32: Expr.i32(0), U32: u(0), DataType.F64: Expr.f64(0.0),
         DataType.I64: Expr.i64(0), DataType.U64: Expr.u64(0)}


def pred_buffers(pred: Predicate, first: int) -> list[BufferDecl]:
    decls = [BufferDecl.read("x", first, pred.value_type())]
    if pred.kind == "flags":
        decls.append(BufferDecl.read("flags", first + 1, pred.flag_type))
    return decls


def extra_uniforms(pred: Predicate, first: int) -> list[BufferDecl]:
    return [typed_params("bounds", first, pred.dtype)] if pred.kind == "range" else []


def keep(pred: Predicate, index: Expr, x: Expr | None = None) -> Expr:
    """BOOL: is element ``index`` kept (callers also check ``index < n``); ``x``: its value if loaded."""
    if pred.kind == "flags":
        return Expr.ne(Expr.load("flags", index), _ZERO[pred.flag_type.arith])
    x = Expr.load("x", index) if x is None else x
    if pred.kind == "range":
        lo, hi = Expr.load("bounds", u(pred.lo_word)), Expr.load("bounds", u(pred.lo_word + 1))
        return Expr.and_(Expr.le(lo, x), Expr.lt(x, hi))
    previous = Expr.load("x", Expr.sub(index, u(1)))
    differs = Expr.ne(equality_key(pred.dtype, x), equality_key(pred.dtype, previous))
    return Expr.or_(Expr.eq(index, u(0)), differs)


def flag(pred: Predicate, index: Expr, n: Expr, x: Expr | None = None) -> Expr:
    return Expr.cast(U32, Expr.and_(Expr.lt(index, n), keep(pred, index, x)))


def _pick(values: list[Expr], which: Expr) -> Expr:
    """``values[which]`` for a small list (a chain of selects)."""
    out = values[0]
    for j in range(1, len(values)):
        out = Expr.select(Expr.eq(which, u(j)), values[j], out)
    return out


def _tile_prefixes(counts: str, entries: int, prefix: str) -> tuple[list[Node], Expr, Callable[[int], Expr]]:
    """Exclusive prefixes of the ``entries`` per-(round, warp) counts in workgroup buffer ``counts``.

    Every warp scans all of them (lane ``l`` holds entries ``l*c ... l*c + c - 1``, ``c = entries/32``)
    and fetches the prefix of entry ``k*WARPS + warp`` with shuffles, so no second barrier is needed.
    Returns the nodes, the tile's total and ``prefix_of(k)``.
    """
    c = entries // 32
    nodes: list[Node] = []
    own = []
    for j in range(c):
        nodes.append(Node.let(f"{prefix}c{j}", Expr.load(counts, Expr.add(Expr.mul(lane(), u(c)), u(j)))))
        own.append(var(f"{prefix}c{j}"))
    total = own[0]
    for value in own[1:]:
        total = Expr.add(total, value)
    nodes.append(Node.let(f"{prefix}sum", total))
    scan_nodes, inclusive = warp_inclusive_scan(COUNT, var(f"{prefix}sum"), f"{prefix}s")
    nodes += scan_nodes
    nodes.append(Node.let(f"{prefix}ex", Expr.sub(inclusive, var(f"{prefix}sum"))))
    running = var(f"{prefix}ex")
    excl = []
    for j in range(c):
        nodes.append(Node.let(f"{prefix}e{j}", running))
        excl.append(var(f"{prefix}e{j}"))
        running = Expr.add(var(f"{prefix}e{j}"), own[j])
    nodes.append(Node.let(f"{prefix}total", Expr.subgroup_shuffle(inclusive, u(31))))

    def prefix_of(k: int) -> Expr:
        entry = Expr.add(u(k * WARPS), warp())
        source = Expr.div(entry, u(c))
        fetched = [Expr.subgroup_shuffle(e, source) for e in excl]
        return _pick(fetched, Expr.rem(entry, u(c))) if c > 1 else fetched[0]

    return nodes, var(f"{prefix}total"), prefix_of


def compact_segments(pred: Predicate, items: int, has_carry: bool, with_index: bool, n_word: int, span_word: int
                     ) -> Program:
    """The builder's program of ``vyre.lib._select.kernels.compact_segments`` (same arguments).

    Stable compaction of workgroup ``w``'s segment: kept ``x[i]`` (and ``i``) go to ``out[carry[w] + rank]``.

    The workgroup walks its tiles in order with a running count. In a tile, element ``k*WG + t``
    (coalesced) is ranked by a ballot of its warp (kept lanes below it) plus the kept elements of
    earlier (round, warp) pairs; the workgroup holding the last element writes the total into ``count[0]``.
    """
    n, tile = load_param(n_word), WG * items
    entries = items * WARPS
    lower_lanes = Expr.sub(Expr.shl(u(1), lane()), u(1))
    body = segment(n, span_word, tile)
    body.append(Node.let("carry_in", Expr.load("carry", wid()) if has_carry else u(0)))
    step: list[Node] = [Node.let("tb", Expr.add(var("seg_base"), Expr.mul(var("t"), u(tile))))]
    for k in range(items):
        index = Expr.add(var("tb"), Expr.add(u(k * WG), lid()))
        step += [Node.let(f"i{k}", index), Node.let(f"x{k}", Expr.load("x", var(f"i{k}"))),
                 Node.let(f"f{k}", Expr.ne(flag(pred, var(f"i{k}"), n, var(f"x{k}")), u(0))),
                 Node.let(f"v{k}", Expr.subgroup_ballot(var(f"f{k}")))]
        step.append(Node.if_(Expr.eq(lane(), u(0)),
                             Node.store("counts", u(k * WARPS) + warp(), Expr.popcount(var(f"v{k}")))))
    step.append(Node.barrier())
    nodes, total, prefix_of = _tile_prefixes("counts", entries, "p")
    step += nodes
    for k in range(items):
        rank = Expr.add(Expr.add(var("carry_in"), prefix_of(k)),
                        Expr.popcount(Expr.bitand(var(f"v{k}"), lower_lanes)))
        moves = [Node.store("out", var(f"r{k}"), var(f"x{k}"))]
        if with_index:
            moves.append(Node.store("out_index", var(f"r{k}"), var(f"i{k}")))
        step += [Node.let(f"r{k}", rank), Node.if_(var(f"f{k}"), moves)]
    step += [Node.assign("carry_in", Expr.add(var("carry_in"), total)), Node.barrier()]
    body.append(Node.loop("t", u(0), var("seg_tiles"), step))
    holds_last = Expr.ge(Expr.add(var("seg_base"), load_param(span_word)), n)
    body.append(Node.if_(Expr.and_(holds_last, Expr.eq(lid(), u(0))), Node.store("count", u(0), var("carry_in"))))
    buffers = pred_buffers(pred, 0)
    buffers.append(BufferDecl.read_write("out", len(buffers), pred.value_type()))
    if with_index:
        buffers.append(BufferDecl.read_write("out_index", len(buffers), U32))
    buffers.append(BufferDecl.read_write("count", len(buffers), U32))
    if has_carry:
        buffers.append(BufferDecl.read("carry", len(buffers), U32))
    buffers.append(params(len(buffers)))
    buffers += extra_uniforms(pred, len(buffers))
    buffers.append(BufferDecl.workgroup("counts", entries, U32))
    return Program(buffers, WG_SIZE, body, name=f"lib_compact_{pred.name()}")
