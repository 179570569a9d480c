"""The builder-written segment scan as it was before the library wrote it as a ``@vk.kernel``
(``vyre.lib._scan.kernels.scan_segments``, the scans' downsweep), with the builder pieces it was
made of: kept only as the oracle of ``test_kernels_front.py``, which checks that both emit
byte-identical PTX."""

from __future__ import annotations

from vyre.ir import BufferDecl, Expr, Node, Program
from vyre.lib.blocks import (
    WARPS,
    WG,
    WG_SIZE,
    fold_warp_totals,
    lane,
    load_param,
    params,
    typed_params,
    u,
    var,
    warp,
    warp_inclusive_scan,
    wid,
)
from vyre.lib.monoid import Monoid


def segment(n: Expr, span_word: int, tile: int) -> list[Node]:
    """The builder's segment head: bind ``seg_base`` (workgroup ``w`` owns elements ``w*span ...
    w*span + span - 1``, params ``span_word``) and ``seg_tiles`` (its tiles of ``tile`` elements
    below ``n``); workgroups whose segment starts at or past ``n`` return."""
    span = load_param(span_word)
    size = Expr.min(span, Expr.sub(n, var("seg_base")))
    return [Node.let("seg_base", Expr.mul(wid(), span)), Node.if_(Expr.ge(var("seg_base"), n), Node.return_()),
            Node.let("seg_tiles", Expr.div(Expr.add(size, u(tile - 1)), u(tile)))]


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


def scan_segments(m: Monoid, items: int, inclusive: bool, has_carry: bool, n_word: int, span_word: int,
                  init_word: int | None) -> Program:
    """The builder's program of ``vyre.lib._scan.kernels.scan_segments`` (same arguments).

    Scan workgroup ``w``'s segment of ``x`` into ``out``, starting from ``init op carry[w]`` (the downsweep).

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
