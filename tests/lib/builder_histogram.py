"""The builder-written ``histogram`` kernel as it was before the library wrote it as a
``@vk.kernel`` (``vyre.lib._histogram.kernels``): kept only as the oracle of
``test_kernels_front.py``, which checks that both emit byte-identical PTX."""

from __future__ import annotations

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.lib.blocks import U32, WG, WG_SIZE, lid, load_param, params, u, var, wid


def merge_bins(target: str, offset: int, rounds: Expr, count_type: DataType = U32) -> list[Node]:
    """The builder's ``merge_bins``: add the workgroup's bins ``local[q*WG + t]`` (``q < rounds``)
    into ``target[offset + bin]``, one global atomic per non-zero bin (of ``count_type``)."""
    index = var("b") if offset == 0 else Expr.add(u(offset), var("b"))
    count = var("c") if count_type is U32 else Expr.cast(count_type, var("c"))
    merge = Node.if_(Expr.ne(var("c"), u(0)), Node.let("old2", Expr.atomic(AtomicOp.ADD, target, index, count,
                                                                                          relaxed=True)))
    return [Node.loop("q", u(0), rounds, [Node.let("b", Expr.add(Expr.mul(var("q"), u(WG)), lid())),
                                          Node.let("c", Expr.load("local", var("b"))), merge])]


def histogram_kernel(dtype: DataType, shared_bins: int, n_word: int, bins_word: int, blocks_word: int,
                     count_type: DataType = U32) -> Program:
    """The builder's program of ``vyre.lib._histogram.kernels.histogram_kernel`` (same arguments)."""
    n, bins, blocks = load_param(n_word), load_param(bins_word), load_param(blocks_word)
    rounds = Expr.div(Expr.add(n, Expr.sub(Expr.mul(blocks, u(WG)), u(1))), Expr.mul(blocks, u(WG)))
    target = "local" if shared_bins else "counts"
    index = Expr.add(Expr.mul(Expr.add(Expr.mul(var("r"), blocks), wid()), u(WG)), lid())
    one = u(1) if shared_bins or count_type is U32 else Expr.u64(1)
    if dtype.size == 8:
        wide = Expr.cast(DataType.U64, Expr.load("x", var("i")))
        load = [Node.let("i", index), Node.let("w", wide), Node.let("v", Expr.cast(U32, var("w")))]
        inside = Expr.lt(var("w"), Expr.cast(DataType.U64, bins))
    else:
        load = [Node.let("i", index), Node.let("v", Expr.cast(U32, Expr.load("x", var("i"))))]
        inside = Expr.lt(var("v"), bins)
    count_one = Node.if_(Expr.and_(Expr.lt(var("i"), n), inside),
                         Node.let("old", Expr.atomic(AtomicOp.ADD, target, var("v"), one, relaxed=True)))
    body: list[Node] = [Node.loop("r", u(0), rounds, [*load, count_one])]
    if shared_bins:
        body += [Node.barrier(), *merge_bins("counts", 0, Expr.div(Expr.add(bins, u(WG - 1)), u(WG)), count_type)]
    buffers = [BufferDecl.read("x", 0, dtype), BufferDecl.read_write("counts", 1, count_type), params(2)]
    if shared_bins:
        buffers.append(BufferDecl.workgroup("local", shared_bins, U32))
    suffix = "" if count_type is U32 else "_counts64"
    return Program(buffers, WG_SIZE, body, name=f"lib_histogram_{dtype.value}{suffix}")
