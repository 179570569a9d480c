"""The builder-written tile reductions (and their warp and workgroup steps) as they
were before the library wrote them as ``@vk.kernel`` functions (``vyre.lib._scan.kernels``): kept
only as the oracle of ``test_kernels_front.py``, which checks that both emit byte-identical PTX."""

from __future__ import annotations

from vyre.ir import BufferDecl, Expr, Node, Program
from vyre.lib.blocks import (
    WARPS,
    WG,
    WG_SIZE,
    fold_warp_totals,
    lane,
    lid,
    load_param,
    params,
    u,
    var,
    warp,
    wid,
)
from vyre.lib.monoid import Monoid


def warp_reduce(m: Monoid, value: Expr, prefix: str) -> tuple[list[Node], Expr]:
    """Every lane gets the combination of all 32 (a butterfly; ``subgroup_add`` for add)."""
    if m.op == "add":
        return [Node.let(prefix, Expr.subgroup_add(value))], var(prefix)
    nodes = [Node.let(f"{prefix}0", value)]
    current = var(f"{prefix}0")
    for step, d in enumerate((16, 8, 4, 2, 1), start=1):
        other = Expr.subgroup_shuffle(current, Expr.bitxor(lane(), u(d)))
        nodes.append(Node.let(f"{prefix}{step}", m.combine(current, other)))
        current = var(f"{prefix}{step}")
    return nodes, current


def block_reduce(m: Monoid, value: Expr, sums: str, prefix: str) -> tuple[list[Node], Expr]:
    """Combine one value per invocation over the workgroup; every invocation gets the total.

    ``sums`` is a workgroup buffer of ``WARPS`` elements of the monoid's type.
    """
    nodes, total = warp_reduce(m, value, f"{prefix}w")
    nodes.append(Node.if_(Expr.eq(lane(), u(0)), Node.store(sums, warp(), total)))
    nodes.append(Node.barrier())
    nodes += fold_warp_totals(m, sums, None, f"{prefix}t")
    return nodes, var(f"{prefix}t")


def reduce_tiles(m: Monoid, items: int, n_word: int) -> Program:
    """The builder's program of ``vyre.lib._scan.kernels.reduce_tiles`` (same arguments)."""
    n, base = load_param(n_word), Expr.mul(wid(), u(WG * items))
    body: list[Node] = [Node.if_(Expr.ge(base, n), Node.return_()), Node.let("acc", m.pad())]
    for k in range(items):
        index = Expr.add(base, Expr.add(u(k * WG), lid()))
        value = Expr.select(Expr.lt(index, n), Expr.load("x", index), m.pad())
        body.append(Node.assign("acc", m.combine(var("acc"), value)))
    nodes, total = block_reduce(m, var("acc"), "sums", "b")
    body += nodes
    body.append(Node.if_(Expr.eq(lid(), u(0)), Node.store("partial", wid(), total)))
    buffers = [BufferDecl.read("x", 0, m.dtype), BufferDecl.read_write("partial", 1, m.dtype), params(2),
               BufferDecl.workgroup("sums", WARPS, m.dtype)]
    return Program(buffers, WG_SIZE, body, name=f"lib_reduce_{m.op}_{m.dtype.value}")
