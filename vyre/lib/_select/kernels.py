"""The programs of stable compaction: which elements are kept (``Predicate``), the count per
segment (the upsweep) and the compaction of each segment (the downsweep)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any

from vyre.frontend import lang as vk
from vyre.frontend.annotations import BufferSpec
from vyre.frontend.template import KernelTemplate
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.ir.program import Access
from vyre.lib._scan.kernels import fold_segment, partial_of_segment, segment, segment_element
from vyre.lib.blocks import (
    PARAM_WORDS,
    PARAMS,
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
    warp_sum,
    wid,
)
from vyre.lib.keys import KeyBits, equality_key, key_bits, raw_type
from vyre.lib.monoid import COUNT, FLOAT_TYPES

COMPACT_ITEMS = 8   # elements per invocation in compaction's downsweep (tile 2048)


_ZERO = {DataType.F32: Expr.f32(0.0), DataType.I32: Expr.i32(0), U32: u(0), DataType.F64: Expr.f64(0.0),
         DataType.I64: Expr.i64(0), DataType.U64: Expr.u64(0)}


@dataclass(frozen=True)
class Predicate:
    """Which elements a compaction keeps.

    ``kind``: ``"flags"`` (``flags[i] != 0``, flags of ``flag_type``), ``"range"`` (``lo <= x < hi``
    with ``lo``/``hi`` in params words ``lo_word``/``lo_word + 1``) or ``"run_start"`` (``i == 0`` or
    ``x[i]`` differs from ``x[i-1]``; F32 NaNs count as equal). ``dtype`` is the element type.
    """

    kind: str
    dtype: DataType
    flag_type: DataType = U32
    lo_word: int = 0

    @property
    def hi_word(self) -> int:
        """The params word of ``hi`` (``"range"``)."""
        return self.lo_word + 1

    @property
    def key_bits(self) -> KeyBits:
        """The constants of the element type's equality key (``"run_start"`` of floats)."""
        return key_bits(self.dtype)

    def value_type(self) -> DataType:
        """Range tests compare typed values; the other kinds move raw 32- or 64-bit words."""
        return self.dtype if self.kind == "range" else raw_type(self.dtype)

    def name(self) -> str:
        """The kind, with ``_64`` for 8-byte elements (their programs differ)."""
        return self.kind + ("_64" if self.dtype.size == 8 else "")

    def buffers(self, first: int) -> list[BufferDecl]:
        decls = [BufferDecl.read("x", first, self.value_type())]
        if self.kind == "flags":
            decls.append(BufferDecl.read("flags", first + 1, self.flag_type))
        return decls

    def extra_uniforms(self, first: int) -> list[BufferDecl]:
        return [typed_params("bounds", first, self.dtype)] if self.kind == "range" else []

    def keep(self, index: Expr, x: Expr | None = None) -> Expr:
        """BOOL: is element ``index`` kept (callers also check ``index < n``); ``x``: its value if loaded."""
        if self.kind == "flags":
            return Expr.ne(Expr.load("flags", index), _ZERO[self.flag_type.arith])
        x = Expr.load("x", index) if x is None else x
        if self.kind == "range":
            lo, hi = Expr.load("bounds", u(self.lo_word)), Expr.load("bounds", u(self.lo_word + 1))
            return Expr.and_(Expr.le(lo, x), Expr.lt(x, hi))
        previous = Expr.load("x", Expr.sub(index, u(1)))
        differs = Expr.ne(equality_key(self.dtype, x), equality_key(self.dtype, previous))
        return Expr.or_(Expr.eq(index, u(0)), differs)


def _flag(pred: Predicate, index: Expr, n: Expr, x: Expr | None = None) -> Expr:
    return Expr.cast(U32, Expr.and_(Expr.lt(index, n), pred.keep(index, x)))


@vk.func
def element_back(x: Any, tb: Any, k: Annotated[int, vk.Const[int]], back: Annotated[int, vk.Const[int]]):
    """``x[i - back]`` of element ``i = tb + k*WG + t``."""
    return x[segment_element(tb, k) - back] if back != 0 else x[segment_element(tb, k)]


@vk.func
def float_key(x: Any, tb: Any, k: Annotated[int, vk.Const[int]], back: Annotated[int, vk.Const[int]], b: Any):
    """``keys.equality_key`` of ``element_back(...)``: the raw bits, every NaN made all ones (``b``: KeyBits)."""
    return vk.select((element_back(x, tb, k, back) & b.magnitude) > b.inf, b.ones, element_back(x, tb, k, back))


@vk.func
def kept_flag(x: Any, flags: Any, params: Any, tb: Any, k: Annotated[int, vk.Const[int]],
              n_word: Annotated[int, vk.Const[int]], pred: Any):
    """``fold_segment``'s value of ``"flags"``: 1 when element ``i < n`` has a non-zero flag."""
    return vk.u32(segment_element(tb, k) < params[n_word] and flags[segment_element(tb, k)] != 0)


@vk.func
def in_range(x: Any, bounds: Any, tb: Any, k: Annotated[int, vk.Const[int]], pred: Any):
    return bounds[pred.lo_word] <= x[segment_element(tb, k)] and x[segment_element(tb, k)] < bounds[pred.hi_word]


@vk.func
def kept_in_range(x: Any, bounds: Any, params: Any, tb: Any, k: Annotated[int, vk.Const[int]],
                  n_word: Annotated[int, vk.Const[int]], pred: Any):
    """``fold_segment``'s value of ``"range"``: 1 when element ``i < n`` has ``lo <= x[i] < hi``."""
    return vk.u32(segment_element(tb, k) < params[n_word] and in_range(x, bounds, tb, k, pred))


@vk.func
def run_starts(x: Any, tb: Any, k: Annotated[int, vk.Const[int]]):
    return segment_element(tb, k) == 0 or element_back(x, tb, k, 0) != element_back(x, tb, k, 1)


@vk.func
def kept_run_start(x: Any, unused: Any, params: Any, tb: Any, k: Annotated[int, vk.Const[int]],
                   n_word: Annotated[int, vk.Const[int]], pred: Any):
    """``fold_segment``'s value of ``"run_start"``: 1 when ``i < n`` and ``i == 0`` or ``x[i] != x[i - 1]``."""
    return vk.u32(segment_element(tb, k) < params[n_word] and run_starts(x, tb, k))


@vk.func
def float_run_starts(x: Any, tb: Any, k: Annotated[int, vk.Const[int]], b: Any):
    return segment_element(tb, k) == 0 or float_key(x, tb, k, 0, b) != float_key(x, tb, k, 1, b)


@vk.func
def kept_float_run_start(x: Any, unused: Any, params: Any, tb: Any, k: Annotated[int, vk.Const[int]],
                         n_word: Annotated[int, vk.Const[int]], pred: Any):
    """``kept_run_start`` of floats: every NaN equal to every other."""
    return vk.u32(segment_element(tb, k) < params[n_word] and float_run_starts(x, tb, k, pred.key_bits))


@cache
def _count_segments(pred: Predicate) -> KernelTemplate:
    """The upsweep of ``pred``; its Const parameters: items per invocation, n's and span's params words."""
    xs, counts = BufferSpec(Access.READ, pred.value_type()), BufferSpec(Access.READ_WRITE, U32)
    name = f"lib_count_{pred.name()}"
    if pred.kind == "flags":
        flag_values = BufferSpec(Access.READ, pred.flag_type)

        @vk.kernel(workgroup_size=WG, name=name)
        def count_flags(x: Annotated[vk.In[vk.u32], xs], flags: Annotated[vk.In[vk.u32], flag_values],
                        partial: Annotated[vk.InOut[vk.u32], counts], params: Annotated[vk.Uniform[vk.u32], PARAMS],
                        items: vk.Const[int], n_word: vk.Const[int], span_word: vk.Const[int]):
            sums = vk.shared(vk.u32, WARPS)
            seg_base = vk.wid() * params[span_word]
            if seg_base >= params[n_word]:
                return
            acc = fold_segment(x, flags, params, COUNT, kept_flag, pred, items, n_word, span_word, seg_base)
            partial_of_segment(acc, partial, sums, COUNT, warp_sum)

        return count_flags
    if pred.kind == "range":
        limits = BufferSpec(Access.UNIFORM, pred.dtype, PARAM_WORDS * 4 // pred.dtype.size)

        @vk.kernel(workgroup_size=WG, name=name)
        def count_in_range(x: Annotated[vk.In[vk.u32], xs], partial: Annotated[vk.InOut[vk.u32], counts],
                           params: Annotated[vk.Uniform[vk.u32], PARAMS], bounds: Annotated[vk.Uniform[vk.u32], limits],
                           items: vk.Const[int], n_word: vk.Const[int], span_word: vk.Const[int]):
            sums = vk.shared(vk.u32, WARPS)
            seg_base = vk.wid() * params[span_word]
            if seg_base >= params[n_word]:
                return
            acc = fold_segment(x, bounds, params, COUNT, kept_in_range, pred, items, n_word, span_word, seg_base)
            partial_of_segment(acc, partial, sums, COUNT, warp_sum)

        return count_in_range
    kept = kept_float_run_start if pred.dtype in FLOAT_TYPES else kept_run_start

    @vk.kernel(workgroup_size=WG, name=name)
    def count_run_starts(x: Annotated[vk.In[vk.u32], xs], partial: Annotated[vk.InOut[vk.u32], counts],
                         params: Annotated[vk.Uniform[vk.u32], PARAMS], items: vk.Const[int], n_word: vk.Const[int],
                         span_word: vk.Const[int]):
        sums = vk.shared(vk.u32, WARPS)
        seg_base = vk.wid() * params[span_word]
        if seg_base >= params[n_word]:
            return
        acc = fold_segment(x, x, params, COUNT, kept, pred, items, n_word, span_word, seg_base)
        partial_of_segment(acc, partial, sums, COUNT, warp_sum)

    return count_run_starts


@cache
def count_segments(pred: Predicate, items: int, n_word: int, span_word: int) -> Program:
    """``partial[w]`` = how many elements of workgroup ``w``'s segment the predicate keeps (the upsweep)."""
    return _count_segments(pred).bind(items, n_word, span_word).program


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


@cache
def compact_segments(pred: Predicate, items: int, has_carry: bool, with_index: bool, n_word: int, span_word: int
                     ) -> Program:
    """Stable compaction of workgroup ``w``'s segment: kept ``x[i]`` (and ``i``) go to ``out[carry[w] + rank]``.

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
                 Node.let(f"f{k}", Expr.ne(_flag(pred, var(f"i{k}"), n, var(f"x{k}")), u(0))),
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
    buffers = pred.buffers(0)
    buffers.append(BufferDecl.read_write("out", len(buffers), pred.value_type()))
    if with_index:
        buffers.append(BufferDecl.read_write("out_index", len(buffers), U32))
    buffers.append(BufferDecl.read_write("count", len(buffers), U32))
    if has_carry:
        buffers.append(BufferDecl.read("carry", len(buffers), U32))
    buffers.append(params(len(buffers)))
    buffers += pred.extra_uniforms(len(buffers))
    buffers.append(BufferDecl.workgroup("counts", entries, U32))
    return Program(buffers, WG_SIZE, body, name=f"lib_compact_{pred.name()}")
