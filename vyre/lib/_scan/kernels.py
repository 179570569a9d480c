"""The programs of the scans and reductions: tile and segment reductions, the segmented scan's
downsweep and the segmented reduction. The single-pass scan is in ``lookback``.

Each builder is cached, so the same variant is the same ``Program``. Word numbers are
compile-time constants chosen by the topology (``vyre.lib._scan.topology``).
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any

from vyre.frontend import lang as vk
from vyre.frontend.annotations import BufferSpec
from vyre.frontend.template import KernelTemplate
from vyre.ir import BufferDecl, Expr, Node, Program
from vyre.ir.program import Access
from vyre.lib.blocks import (
    PARAMS,
    U32,
    WARPS,
    WG,
    WG_SIZE,
    block_reduce_of,
    fold_warp_totals,
    identity,
    lane,
    load_param,
    params,
    typed_params,
    u,
    var,
    warp,
    warp_inclusive_scan,
    warp_reduce,
    warp_reducer,
    wid,
)
from vyre.lib.monoid import Monoid

SCAN_ITEMS = 8      # elements per invocation in the scans' downsweep (tile 2048)
REDUCE_ITEMS = 16   # elements per invocation in reductions and upsweeps (tile 4096)


def _exit_past(base: Expr, n: Expr) -> Node:
    """Workgroups whose tile starts at or past ``n`` have nothing to do (a uniform early return)."""
    return Node.if_(Expr.ge(base, n), Node.return_())


@vk.func
def tile_element(items: Annotated[int, vk.Const[int]], k: Annotated[int, vk.Const[int]]):
    """Element ``k*WG + t`` of this workgroup's tile of ``WG*items`` elements (coalesced)."""
    return vk.wid() * (items * WG) + (k * WG + vk.lid())


@cache
def _reduce_tiles(m: Monoid) -> KernelTemplate:
    """The tile reduction of ``m``; its Const parameters are the items per invocation and n's params word."""
    values, partials = BufferSpec(Access.READ, m.dtype), BufferSpec(Access.READ_WRITE, m.dtype)
    warp_total = warp_reducer(m)

    @vk.kernel(workgroup_size=WG, name=f"lib_reduce_{m.op}_{m.dtype.value}")
    def reduce_tiles(x: Annotated[vk.In[vk.u32], values], partial: Annotated[vk.InOut[vk.u32], partials],
                     params: Annotated[vk.Uniform[vk.u32], PARAMS], items: vk.Const[int], n_word: vk.Const[int]):
        sums = vk.shared(m.element, WARPS)
        if vk.wid() * (items * WG) >= params[n_word]:
            return  # no element in this tile
        acc = identity(m)
        for k in range(items):
            acc = m.apply(acc, vk.select(tile_element(items, k) < params[n_word], x[tile_element(items, k)],
                                         identity(m)))
        total = block_reduce_of(acc, sums, m, warp_total)
        if vk.lid() == 0:
            partial[vk.wid()] = total

    return reduce_tiles


@cache
def reduce_tiles(m: Monoid, items: int, n_word: int) -> Program:
    """``partial[w] = x[w*T] op ... op x[w*T + T - 1]`` for each tile of ``T = WG*items`` elements."""
    return _reduce_tiles(m).bind(items, n_word).program


def segment(n: Expr, span_word: int, tile: int) -> list[Node]:
    """Bind ``seg_base`` (workgroup ``w`` owns elements ``w*span ... w*span + span - 1``, params
    ``span_word``) and ``seg_tiles`` (its tiles of ``tile`` elements below ``n``); workgroups
    whose segment starts at or past ``n`` return."""
    span = load_param(span_word)
    size = Expr.min(span, Expr.sub(n, var("seg_base")))
    return [Node.let("seg_base", Expr.mul(wid(), span)), _exit_past(var("seg_base"), n),
            Node.let("seg_tiles", Expr.div(Expr.add(size, u(tile - 1)), u(tile)))]


@vk.func
def segment_tiles(seg_base: Any, params: Any, n_word: Annotated[int, vk.Const[int]],
                  span_word: Annotated[int, vk.Const[int]], tile: Annotated[int, vk.Const[int]]):
    """``segment``'s ``seg_tiles``: the tiles of ``tile`` elements below ``n`` in the segment at ``seg_base``."""
    return (min(params[span_word], params[n_word] - seg_base) + (tile - 1)) // tile


@vk.func
def segment_element(tb: Any, k: Annotated[int, vk.Const[int]]):
    """Element ``k*WG + t`` of the tile at ``tb`` (coalesced)."""
    return tb + (k * WG + vk.lid())


@vk.func
def fold_segment(x: Any, extra: Any, params: Any, m: Any, value: Any, arg: Any, items: Annotated[int, vk.Const[int]],
                 n_word: Annotated[int, vk.Const[int]], span_word: Annotated[int, vk.Const[int]], seg_base: Any):
    """This invocation's fold with ``m`` of ``value(x, extra, params, tb, k, n_word, arg)`` (element
    ``tb + k*WG + t``) over every tile of its workgroup's segment, in order; the caller reduces
    it over the workgroup (``partial_of_segment``)."""
    seg_tiles = segment_tiles(seg_base, params, n_word, span_word, items * WG)
    acc = identity(m)
    for t in range(seg_tiles):
        tb = seg_base + t * (items * WG)
        for k in range(items):
            acc = m.apply(acc, value(x, extra, params, tb, k, n_word, arg))
    return acc


@vk.func
def padded(x: Any, extra: Any, params: Any, tb: Any, k: Annotated[int, vk.Const[int]],
           n_word: Annotated[int, vk.Const[int]], m: Any):
    """``fold_segment``'s value of a reduction: the element, or ``m``'s pad past ``n``."""
    return vk.select(segment_element(tb, k) < params[n_word], x[segment_element(tb, k)], identity(m))


@vk.func
def partial_of_segment(acc: Any, partial: Any, sums: Any, m: Any, warp_total: Any):
    """``partial[w]`` = ``acc`` combined over the workgroup."""
    total = block_reduce_of(acc, sums, m, warp_total)
    if vk.lid() == 0:
        partial[vk.wid()] = total


@cache
def _reduce_segments(m: Monoid) -> KernelTemplate:
    """The segment reduction of ``m``; its Const parameters: items per invocation, n's and span's params words."""
    values, partials = BufferSpec(Access.READ, m.dtype), BufferSpec(Access.READ_WRITE, m.dtype)
    warp_total = warp_reducer(m)

    @vk.kernel(workgroup_size=WG, name=f"lib_reduce_segments_{m.op}_{m.dtype.value}")
    def reduce_segments(x: Annotated[vk.In[vk.u32], values], partial: Annotated[vk.InOut[vk.u32], partials],
                        params: Annotated[vk.Uniform[vk.u32], PARAMS], items: vk.Const[int], n_word: vk.Const[int],
                        span_word: vk.Const[int]):
        sums = vk.shared(m.element, WARPS)
        seg_base = vk.wid() * params[span_word]  # workgroup w owns elements w*span ... w*span + span - 1
        if seg_base >= params[n_word]:
            return
        acc = fold_segment(x, x, params, m, padded, m, items, n_word, span_word, seg_base)
        partial_of_segment(acc, partial, sums, m, warp_total)

    return reduce_segments


@cache
def reduce_segments(m: Monoid, items: int, n_word: int, span_word: int) -> Program:
    """``partial[w]`` = the combination of workgroup ``w``'s segment (the scans' upsweep)."""
    return _reduce_segments(m).bind(items, n_word, span_word).program


def warp_striped(base: Expr, k: int, items: int) -> Expr:
    """Element ``k`` of this invocation in a tile at ``base``: warp ``v`` owns the ``32*items``
    consecutive elements from ``v*32*items``, round ``k`` its 32 elements from ``k*32``."""
    return Expr.add(base, Expr.add(Expr.mul(warp(), u(32 * items)), Expr.add(u(k * 32), lane())))


def warp_rounds(m: Monoid, items: int, inclusive: bool, values: list[Expr]) -> tuple[list[Node], list[Expr], Expr]:
    """Scan a warp's ``32*items`` consecutive elements (``values[k]``: lane ``l``'s element
    ``k*32 + l``) round by round: a shuffle scan each, with the warp's running total.

    Returns the nodes, each element's result inside the warp (inclusive, or exclusive: the
    inclusive one of the previous lane, so no op needs an inverse) and the warp's total.
    """
    nodes: list[Node] = []
    before = m.pad()  # the warp's rounds before round k
    outs: list[Expr] = []
    for k, value in enumerate(values):
        scan_nodes, scanned = warp_inclusive_scan(m, value, f"s{k}_")
        nodes += scan_nodes
        nodes.append(Node.let(f"r{k}", m.combine(before, scanned) if k else scanned))
        if not inclusive:
            earlier = Expr.subgroup_shuffle(var(f"r{k}"), Expr.sub(lane(), u(1)))
            nodes.append(Node.let(f"e{k}", Expr.select(Expr.eq(lane(), u(0)), before, earlier)))
        nodes.append(Node.let(f"h{k}", Expr.subgroup_shuffle(var(f"r{k}"), u(31))))
        before = var(f"h{k}")
        outs.append(var(f"r{k}") if inclusive else var(f"e{k}"))
    return nodes, outs, before


def scan_start(m: Monoid, init_word: int | None, carry: Expr) -> Expr:
    """``init op carry`` (``init``: word ``init_word`` of the ``init`` uniform buffer), or ``carry``."""
    return carry if init_word is None else m.combine(Expr.load("init", u(init_word)), carry)


def scan_tail_buffers(m: Monoid, buffers: list[BufferDecl], init_word: int | None) -> list[BufferDecl]:
    buffers.append(params(len(buffers)))
    if init_word is not None:
        buffers.append(typed_params("init", len(buffers), m.dtype))
    return buffers


@cache
def scan_segments(m: Monoid, items: int, inclusive: bool, has_carry: bool, n_word: int, span_word: int,
                  init_word: int | None) -> Program:
    """Scan workgroup ``w``'s segment of ``x`` into ``out``, starting from ``init op carry[w]`` (the downsweep).

    The workgroup walks its tiles in order with a running carry. Each warp owns a contiguous
    stretch of the tile and scans it round by round (``warp_rounds``); one barrier passes the
    warp totals through workgroup memory (two halves by tile parity, so the next tile needs no
    second barrier). The next tile's loads are issued before the current tile is scanned, so
    they are in flight while it is scanned and written.
    """
    n, tile = load_param(n_word), WG * items

    def loaded(base: Expr, k: int) -> Expr:
        index = warp_striped(base, k, items)
        return Expr.select(Expr.lt(index, n), Expr.load("x", index), m.pad())

    carry = scan_start(m, init_word, Expr.load("carry", wid()) if has_carry else m.pad())
    body = segment(n, span_word, tile) + [Node.let("carry_in", carry)]
    body += [Node.let(f"next{k}", loaded(var("seg_base"), k)) for k in range(items)]
    step: list[Node] = [Node.let("tb", Expr.add(var("seg_base"), Expr.mul(var("t"), u(tile)))),
                        Node.let("par", Expr.mul(Expr.bitand(var("t"), u(1)), u(WARPS)))]
    step += [Node.let(f"v{k}", var(f"next{k}")) for k in range(items)]
    step += [Node.assign(f"next{k}", loaded(Expr.add(var("tb"), u(tile)), k)) for k in range(items)]
    nodes, outs, total = warp_rounds(m, items, inclusive, [var(f"v{k}") for k in range(items)])
    step += nodes
    step.append(Node.if_(Expr.eq(lane(), u(0)), Node.store("sums", Expr.add(var("par"), warp()), total)))
    step.append(Node.barrier())
    step += fold_warp_totals(m, "sums", warp(), "wp", "wt", var("par"))
    step.append(Node.let("wbase", m.combine(var("carry_in"), var("wp"))))
    for k, value in enumerate(outs):
        index = warp_striped(var("tb"), k, items)
        step.append(Node.if_(Expr.lt(index, n), Node.store("out", index, m.combine(var("wbase"), value))))
    step.append(Node.assign("carry_in", m.combine(var("carry_in"), var("wt"))))
    body.append(Node.loop("t", u(0), var("seg_tiles"), step))
    buffers = [BufferDecl.read("x", 0, m.dtype), BufferDecl.read_write("out", 1, m.dtype)]
    if has_carry:
        buffers.append(BufferDecl.read("carry", len(buffers), m.dtype))
    buffers = scan_tail_buffers(m, buffers, init_word)
    buffers.append(BufferDecl.workgroup("sums", 2 * WARPS, m.dtype))
    kind = "inclusive" if inclusive else "exclusive"
    return Program(buffers, WG_SIZE, body, name=f"lib_scan_{kind}_{m.op}_{m.dtype.value}")


@cache
def segmented_reduce_kernel(m: Monoid, n_word: int, segments_word: int) -> Program:
    """One subgroup per segment ``s``: ``out[s] = x[offsets[s]] op ... op x[offsets[s+1] - 1]``.

    Offsets are clamped to ``[0, n]`` and an end below its start makes the segment empty, which
    gives the op's empty value. Lanes fold strided elements in order, then a butterfly combines
    the 32 lanes: a fixed order, so F32 results are the same on every backend.
    """
    n, segments = load_param(n_word), load_param(segments_word)
    s = Expr.add(Expr.mul(wid(), u(WARPS)), warp())
    ok = Expr.lt(var("s"), segments)
    begin = Expr.select(ok, Expr.min(Expr.load("offsets", var("s")), n), u(0))
    end = Expr.select(ok, Expr.min(Expr.max(Expr.load("offsets", Expr.add(var("s"), u(1))), var("begin")), n), u(0))
    steps = Expr.div(Expr.add(Expr.sub(var("end"), var("begin")), u(31)), u(32))
    index = Expr.add(Expr.add(var("begin"), Expr.mul(var("j"), u(32))), lane())
    body: list[Node] = [
        Node.let("s", s), Node.let("begin", begin), Node.let("end", end), Node.let("acc", m.pad()),
        Node.loop("j", u(0), steps, [Node.let("i", index), Node.if_(
            Expr.lt(var("i"), var("end")), Node.assign("acc", m.combine(var("acc"), Expr.load("x", var("i")))))]),
    ]
    nodes, total = warp_reduce(m, var("acc"), "w")
    body += nodes
    result = Expr.select(Expr.lt(var("begin"), var("end")), total, m.literal(m.empty_value()))
    body.append(Node.if_(Expr.and_(ok, Expr.eq(lane(), u(0))), Node.store("out", var("s"), result)))
    buffers = [BufferDecl.read("x", 0, m.dtype), BufferDecl.read("offsets", 1, U32),
               BufferDecl.read_write("out", 2, m.dtype), params(3)]
    return Program(buffers, WG_SIZE, body, name=f"lib_segmented_reduce_{m.op}_{m.dtype.value}")
