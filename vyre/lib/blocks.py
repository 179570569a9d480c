"""IR building blocks shared by the ``vyre.lib`` kernels: the parameter words, warp and workgroup
scans and reductions, bounded waits, and the zero fill; the same reductions as ``@vk.func``
helpers for the kernels written with the front end (``identity`` ... ``block_reduce``).

Every kernel runs workgroups of ``WG = 256`` invocations (8 subgroups of 32). A *tile* is the
``WG * items`` elements one workgroup handles at a time. Every helper takes a ``prefix`` for the
names it binds, so one kernel can use several without shadowing. Every kernel with run-time
sizes declares a ``params`` uniform buffer of ``PARAM_WORDS`` u32 words: they live there, so one
program and one captured graph serve every size of a capacity class. Word numbers are
compile-time constants chosen by the plan (``vyre.lib.plan.Plan.word``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Annotated, Any

from vyre.frontend import lang as vk
from vyre.frontend.annotations import BufferSpec
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.ir.program import Access
from vyre.lib.monoid import Monoid

WG = 256
WARPS = WG // 32
U32 = DataType.U32
WG_SIZE = (WG, 1, 1)
PARAM_WORDS = 32
#: the ``params`` buffer's annotation in kernels: ``params: Annotated[vk.Uniform[vk.u32], PARAMS]``
#: (a count is not a type, so type checkers read ``Uniform[u32]`` and the front end this)
PARAMS = BufferSpec(Access.UNIFORM, DataType.U32, PARAM_WORDS)


def u(v: int) -> Expr:
    return Expr.u32(v)


def lid() -> Expr:
    return Expr.local_id(0)


def lane() -> Expr:
    return Expr.subgroup_local_id()


def warp() -> Expr:
    return Expr.shr(Expr.local_id(0), u(5))


def wid() -> Expr:
    return Expr.workgroup_id(0)


def var(name: str) -> Expr:
    return Expr.var(name)


def params(binding: int) -> BufferDecl:
    """The ``params`` uniform buffer of ``PARAM_WORDS`` u32 words at ``binding``."""
    return BufferDecl.uniform("params", binding, U32, PARAM_WORDS)


def typed_params(name: str, binding: int, dtype: DataType) -> BufferDecl:
    """A typed view of the parameter words (``Plan.typed_word`` values): 8-byte types see half as many."""
    return BufferDecl.uniform(name, binding, dtype, PARAM_WORDS * 4 // dtype.size)


def load_param(word: int) -> Expr:
    """Word ``word`` of the ``params`` uniform buffer every kernel declares."""
    return Expr.load("params", u(word))


def warp_inclusive_scan(m: Monoid, value: Expr, prefix: str) -> tuple[list[Node], Expr]:
    """Hillis-Steele scan over the 32 lanes with shuffles: lane ``i`` gets lanes ``0..i`` combined."""
    nodes = [Node.let(f"{prefix}0", value)]
    current = var(f"{prefix}0")
    for step, d in enumerate((1, 2, 4, 8, 16), start=1):
        other = Expr.subgroup_shuffle(current, Expr.sub(lane(), u(d)))
        combined = Expr.select(Expr.ge(lane(), u(d)), m.combine(other, current), current)
        nodes.append(Node.let(f"{prefix}{step}", combined))
        current = var(f"{prefix}{step}")
    return nodes, current


def fold_warp_totals(m: Monoid, sums: str, upto: Expr | None, name: str, total: str | None = None,
                     offset: Expr | None = None) -> list[Node]:
    """Bind ``name = pad op sums[0] op ... op sums[upto - 1]`` (all eight when ``upto`` is None), in order.

    With ``total``, also bind ``total = pad op sums[0] op ... op sums[7]`` in the same pass; with
    ``offset``, read ``sums[offset + j]``. One statement per warp, so every value is computed
    once (a nested expression would repeat the running value in both arms of each select).
    """
    acc = var(name)
    nodes: list[Node] = [Node.let(name, m.pad())]
    if total is not None:
        nodes.append(Node.let(total, m.pad()))
    for j in range(WARPS):
        word = Expr.load(sums, u(j) if offset is None else Expr.add(offset, u(j)))
        if total is not None:
            nodes.append(Node.let(f"{total}{j}", word))
            word = var(f"{total}{j}")
        nxt = m.combine(acc, word)
        nodes.append(Node.assign(name, nxt if upto is None else Expr.select(Expr.lt(u(j), upto), nxt, acc)))
        if total is not None:
            nodes.append(Node.assign(total, m.combine(var(total), word)))
    return nodes


# ---- the same, as @vk.func helpers: ``m`` is the Monoid, passed as it is (``m.apply``, ``m.element``) ----
@vk.func
def identity(m: Any):
    """``m.pad()``: the literal a partial tile is padded with."""
    return m.element(m.pad_number)


@vk.func
def warp_sum(value: Any, m: Any):
    """the warp reduction of add: every lane gets the sum of the 32 (``subgroup_add``)."""
    total = vk.subgroup_add(value)
    return total


@vk.func
def _butterfly_step(v: Any, m: Any, d: Annotated[int, vk.Const[int]]):
    return m.apply(v, vk.subgroup_shuffle(v, vk.subgroup_local_id() ^ d))


@vk.func
def warp_butterfly(value: Any, m: Any):
    """The warp reduction of the other ops: every lane gets the combination of all 32 (a butterfly)."""
    v0 = value
    v1 = _butterfly_step(v0, m, 16)
    v2 = _butterfly_step(v1, m, 8)
    v3 = _butterfly_step(v2, m, 4)
    v4 = _butterfly_step(v3, m, 2)
    v5 = _butterfly_step(v4, m, 1)
    return v5


@vk.func
def _scan_step(v: Any, m: Any, d: Annotated[int, vk.Const[int]]):
    return vk.select(vk.subgroup_local_id() >= d, m.apply(vk.subgroup_shuffle(v, vk.subgroup_local_id() - d), v), v)


@vk.func
def warp_inclusive_scan_of(value: Any, m: Any):
    """``warp_inclusive_scan``: lane ``i`` gets lanes ``0..i`` combined (Hillis-Steele with shuffles)."""
    s0 = value
    s1 = _scan_step(s0, m, 1)
    s2 = _scan_step(s1, m, 2)
    s3 = _scan_step(s2, m, 4)
    s4 = _scan_step(s3, m, 8)
    s5 = _scan_step(s4, m, 16)
    return s5


def warp_reducer(m: Monoid) -> Callable[..., Any]:
    """The helper that reduces over a warp for ``m``: ``warp_sum`` for add, else ``warp_butterfly``."""
    return warp_sum if m.op == "add" else warp_butterfly


@vk.func
def fold_warps(sums: Any, m: Any, warps: Annotated[int, vk.Const[int]]):
    """``pad op sums[0] op ... op sums[warps - 1]``, in order (``fold_warp_totals`` without its options)."""
    t = identity(m)
    for j in range(warps):
        t = m.apply(t, sums[j])
    return t


@vk.func
def fold_warps_to(w: Any, sums: Any, m: Any, offset: Any, warps: Annotated[int, vk.Const[int]]):
    """``fold_warp_totals`` with ``upto`` the warp and a ``total``, into registers ``w``: ``w[0]`` =
    pad op ``sums[offset]`` op ... for the earlier warps, ``w[1]`` = all ``warps`` combined, in order."""
    w[0] = identity(m)
    w[1] = identity(m)
    for j in range(warps):
        word = sums[offset + j]
        w[0] = vk.select(j < (vk.lid() >> 5), m.apply(w[0], word), w[0])
        w[1] = m.apply(w[1], word)


@vk.func
def block_reduce(value: Any, sums: Any, m: Any, warp_total: Any):
    """``block_reduce``: ``value`` combined over the workgroup, the total in every invocation;
    ``sums`` holds ``WARPS`` values of ``m``'s type, ``warp_total`` is ``warp_reducer(m)``."""
    total = warp_total(value, m)
    if vk.subgroup_local_id() == 0:
        sums[vk.lid() >> 5] = total
    vk.barrier()
    return fold_warps(sums, m, WARPS)


@vk.func
def exclusive_block_scan(value: Any, sums: Any, w: Any, m: Any):
    """The workgroup's exclusive scan of one item per invocation, from the identity: ``value`` of the
    invocations before this one combined (``sums`` holds ``WARPS`` values of ``m``'s type, ``w``
    is two registers of it: ``fold_warps_to``'s; ``w[1]`` is then the workgroup's total)."""
    own = value  # the invocation's items folded: one item
    scanned = warp_inclusive_scan_of(own, m)
    earlier = vk.select(vk.subgroup_local_id() == 0, identity(m),
                        vk.subgroup_shuffle(scanned, vk.subgroup_local_id() - 1))
    if vk.subgroup_local_id() == 31:
        sums[vk.lid() >> 5] = scanned
    vk.barrier()
    fold_warps_to(w, sums, m, 0, WARPS)
    start = m.apply(m.apply(identity(m), w[0]), earlier)
    return start


@cache
def zero_fill(n_word: int, buffers: int = 1) -> Program:
    """``out[i] = 0`` for ``i < n`` (scratch that accumulates atomically starts from zero). More
    ``buffers`` (``out1``, ...) are zeroed in the same launch, each to ``n`` or its own end: a store
    past a buffer's end does nothing."""
    i = Expr.invocation_id(0)
    names = ["out", *(f"out{k}" for k in range(1, buffers))]
    body = [Node.if_(Expr.lt(i, load_param(n_word)), [Node.store(name, i, u(0)) for name in names])]
    return Program([*(BufferDecl.read_write(name, k, U32) for k, name in enumerate(names)), params(buffers)],
                   WG_SIZE, body, name="lib_zero_fill")
