"""The programs of stable compaction: which elements are kept (``Predicate``), the count per
segment (the upsweep) and the compaction of each segment (the downsweep), written as
``@vk.kernel`` functions (a cached factory per predicate, whose ``Const`` parameters are the
items per invocation and the params words)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any

from vyre.frontend import lang as vk
from vyre.frontend.annotations import TYPE_NAMES, BufferSpec
from vyre.frontend.kernel import Kernel
from vyre.frontend.template import KernelTemplate
from vyre.ir import DataType, Program
from vyre.ir.program import Access
from vyre.lib._scan.kernels import fold_segment, fold_tiles, partial_of_segment, segment_element, segment_tiles
from vyre.lib.blocks import (
    PARAM_WORDS,
    PARAMS,
    U32,
    WARPS,
    WG,
    block_reduce,
    fold_warps,
    warp_inclusive_scan_of,
    warp_reducer,
    warp_sum,
)
from vyre.lib.keys import KeyBits, key_bits, raw_type
from vyre.lib.monoid import COUNT, FLOAT_TYPES, Monoid

COMPACT_ITEMS = 8   # elements per invocation in compaction's downsweep (tile 2048)
PENDING, FIRST_RUN = 0, 1  # the run-lengths downsweep's two held words (``compact_run_lengths``)
OWN_CARRY_READS = 2  # counts each invocation of an ``own_carry`` downsweep adds: at most 2 * WG segments
FIRST = Monoid("min", U32)  # the first run start of a segment: the least index
#: copies of the segments' run-start counts a sort's last pass adds into, by tile
#: (``onesweep.count_runs``): the tiles in flight add to the same few segments, so with one word
#: each they would take turns; ``count_segments`` with a recount word sums the copies
RUN_COUNT_COPIES = 8
NO_START = 0xFFFFFFFF  # ``FIRST``'s identity: a segment with no run start


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


def _predicate_buffers(pred: Predicate) -> tuple[BufferSpec | None, BufferSpec | None]:
    """The ``flags`` parameter (``"flags"``) and the ``bounds`` one (``"range"``: the params words
    seen as values of the element type); None where the predicate has none."""
    flags = BufferSpec(Access.READ, pred.flag_type) if pred.kind == "flags" else None
    words = PARAM_WORDS * 4 // pred.dtype.size
    return flags, BufferSpec(Access.UNIFORM, pred.dtype, words) if pred.kind == "range" else None


_KEPT = {"flags": kept_flag, "range": kept_in_range, "run_start": kept_run_start}


@cache
def _count_segments(pred: Predicate) -> Kernel | KernelTemplate:
    """The upsweep of ``pred``; its Const parameters: whether it reads bounds (``"range"``), items
    per invocation, n's and span's params words, the recount word's (-1: always counts) and the
    copies of the counts an earlier step added into (``RUN_COUNT_COPIES``)."""
    xs, counts = BufferSpec(Access.READ, pred.value_type()), BufferSpec(Access.READ_WRITE, U32)
    flag_values, limits = _predicate_buffers(pred)
    kept = kept_float_run_start if pred.kind == "run_start" and pred.dtype in FLOAT_TYPES else _KEPT[pred.kind]

    @vk.kernel(workgroup_size=WG, name=f"lib_count_{pred.name()}")
    def count(x: Annotated[vk.In[vk.u32], xs], flags: Annotated[vk.In[vk.u32], flag_values],
              partial: Annotated[vk.InOut[vk.u32], counts], params: Annotated[vk.Uniform[vk.u32], PARAMS],
              bounds: Annotated[vk.Uniform[vk.u32], limits], has_bounds: vk.Const[bool], items: vk.Const[int],
              n_word: vk.Const[int], span_word: vk.Const[int], recount_word: vk.Const[int], copies: vk.Const[int]):
        sums = vk.shared(vk.u32, WARPS)
        seg_base = vk.wid() * params[span_word]
        if seg_base >= params[n_word]:
            return
        # kept() reads bounds or flags besides x (run starts: neither; flags is None then)
        if recount_word >= 0:  # counted already, in copies after the recount word (``run_count_words``):
            groups = params[recount_word]  # summed, or counted again if the recount word says so
            again = partial[groups] != 0
            acc = fold_tiles(x, bounds if has_bounds else flags, params, COUNT, kept, pred, items, n_word, seg_base,
                             vk.select(again, segment_tiles(seg_base, params, n_word, span_word, items * WG), 0))
            if not again and vk.lid() < copies:
                acc = acc + partial[(groups + 1) + (vk.lid() * groups + vk.wid())]
            total = block_reduce(acc, sums, COUNT, warp_sum)
            if vk.lid() == 0:
                partial[vk.wid()] = total
        else:
            acc = fold_segment(x, bounds if has_bounds else flags, params, COUNT, kept, pred, items, n_word,
                               span_word, seg_base)
            partial_of_segment(acc, partial, sums, COUNT, warp_sum)

    return count


@cache
def count_segments(pred: Predicate, items: int, n_word: int, span_word: int, recount_word: int = -1) -> Program:
    """``partial[w]`` = how many elements of workgroup ``w``'s segment the predicate keeps (the
    upsweep). ``recount_word`` (a params word, the index of a word of ``partial`` past the counts):
    an earlier step counted them already, into ``RUN_COUNT_COPIES`` copies after that word
    (``run_count_words``), which are summed; or counted again if that word is not 0."""
    return _count_segments(pred).bind(pred.kind == "range", items, n_word, span_word, recount_word,
                                      RUN_COUNT_COPIES).program


def run_count_words(groups: int) -> int:
    """The words of a compaction's counts buffer of ``groups`` segments when an earlier step counts
    them: the counts, the recount word (index ``groups``), then ``RUN_COUNT_COPIES`` copies of the
    counts (copy ``c`` of segment ``w`` at ``groups + 1 + c * groups + w``) that step adds into."""
    return groups + 1 + RUN_COUNT_COPIES * groups


@cache
def _count_run_starts(pred: Predicate) -> Kernel | KernelTemplate:
    """``count_segments`` of run starts that also finds each segment's first run start; its Const
    parameters: items per invocation, n's and span's params words."""
    xs, words = BufferSpec(Access.READ, pred.value_type()), BufferSpec(Access.READ_WRITE, U32)
    kept = kept_float_run_start if pred.dtype in FLOAT_TYPES else kept_run_start
    warp_first = warp_reducer(FIRST)

    @vk.kernel(workgroup_size=WG, name=f"lib_count_{pred.name()}_firsts")
    def count(x: Annotated[vk.In[vk.u32], xs], partial: Annotated[vk.InOut[vk.u32], words],
              firsts: Annotated[vk.InOut[vk.u32], words], params: Annotated[vk.Uniform[vk.u32], PARAMS],
              items: vk.Const[int], n_word: vk.Const[int], span_word: vk.Const[int]):
        sums = vk.shared(vk.u32, WARPS)
        seg_base = vk.wid() * params[span_word]
        if seg_base >= params[n_word]:
            return
        acc = vk.registers(vk.u32, 2)  # [0]: run starts seen, [1]: the least index of one (NO_START: none)
        acc[0] = 0
        acc[1] = NO_START
        for t in range(segment_tiles(seg_base, params, n_word, span_word, items * WG)):
            tb = seg_base + t * (items * WG)
            for k in range(items):
                starts_here = kept(x, x, params, tb, k, n_word, pred)  # 1 for a run start below n
                acc[0] = acc[0] + starts_here
                acc[1] = FIRST.apply(acc[1], vk.select(starts_here != 0, segment_element(tb, k), NO_START))
        partial_of_segment(acc[0], partial, sums, COUNT, warp_sum)
        vk.barrier()  # sums again
        partial_of_segment(acc[1], firsts, sums, FIRST, warp_first)

    return count


@cache
def count_run_starts(pred: Predicate, items: int, n_word: int, span_word: int) -> Program:
    """``partial[w]`` = the run starts in workgroup ``w``'s segment (``count_segments``'s count) and
    ``firsts[w]`` = the index of its first one (``NO_START`` if none): what an ``own_carry``
    run-lengths downsweep needs to end its segment's last run itself."""
    if pred.kind != "run_start":
        raise ValueError(f"count_run_starts takes run starts, not {pred.kind}")
    return _count_run_starts(pred).bind(items, n_word, span_word).program


@vk.func
def keep_flag(x: Any, flags: Any, bounds: Any, i: Any, xv: Any, pred: Any):
    """Is element ``i`` (of value ``xv``) kept, for ``"flags"`` (the caller checks ``i < n``)."""
    return flags[i] != 0


@vk.func
def keep_in_range(x: Any, flags: Any, bounds: Any, i: Any, xv: Any, pred: Any):
    return bounds[pred.lo_word] <= xv and xv < bounds[pred.hi_word]


@vk.func
def keep_run_start(x: Any, flags: Any, bounds: Any, i: Any, xv: Any, pred: Any):
    return i == 0 or xv != x[i - 1]


@vk.func
def keep_float_run_start(x: Any, flags: Any, bounds: Any, i: Any, xv: Any, pred: Any):
    """``keep_run_start`` on equality keys: every NaN is equal to every other."""
    return i == 0 or float_key_of(xv, pred.key_bits) != vk.select(
        (x[i - 1] & pred.key_bits.magnitude) > pred.key_bits.inf, pred.key_bits.ones, x[i - 1])


@vk.func
def float_key_of(bits: Any, b: Any):
    """``keys.equality_key`` of the variable ``bits`` (``b``: its KeyBits)."""
    return vk.select((bits & b.magnitude) > b.inf, b.ones, bits)


_KEEP = {"flags": keep_flag, "range": keep_in_range, "run_start": keep_run_start}


@vk.func
def tile_prefix(pe: Any, k: Annotated[int, vk.Const[int]]):
    """The exclusive prefix of entry ``k*WARPS + warp`` of the tile's counts: held by lane
    ``entry // 2`` as its ``pe[entry % 2]`` (two entries per lane)."""
    return vk.select((k * WARPS + (vk.lid() >> 5)) % 2 == 1,
                     vk.subgroup_shuffle(pe[1], (k * WARPS + (vk.lid() >> 5)) // 2),
                     vk.subgroup_shuffle(pe[0], (k * WARPS + (vk.lid() >> 5)) // 2))


@cache
def _compact_segments(pred: Predicate, has_carry: bool, with_index: bool, with_lengths: bool = False,
                      own_carry: bool = False) -> Kernel | KernelTemplate:
    """The downsweep of ``pred``, with ``carry`` and ``out_index`` or without; its Const
    parameters: ``has_carry``, ``with_index``, ``with_lengths``, ``own_carry``, items per
    invocation, n's and span's params words. ``with_lengths`` (run starts only, see
    ``compact_run_lengths``): the buffers ``lengths`` and, with ``has_carry``, ``firsts`` and
    ``lasts`` instead of ``out_index``. ``own_carry`` (with ``has_carry``, at most
    ``OWN_CARRY_READS * WG`` segments): each workgroup sums the counts of the segments below it
    from ``partials`` itself (no scan of them first); with ``with_lengths`` it also reads the first
    run start of every segment (``firsts``, from ``count_run_starts``) and ends its own last run at
    the next one (or ``n``), so no tail step runs."""
    value: Any = TYPE_NAMES[pred.value_type()]  # a vk type to the front end (type checkers see a ScalarType)
    xs, outs = BufferSpec(Access.READ, pred.value_type()), BufferSpec(Access.READ_WRITE, pred.value_type())
    flag_values, limits = _predicate_buffers(pred)
    indices = BufferSpec(Access.READ_WRITE, U32) if with_index else None
    runs = BufferSpec(Access.READ_WRITE, U32) if with_lengths else None
    # the tail step's ends (firsts written, lasts), or with own_carry the firsts count_run_starts wrote
    tail = with_lengths and has_carry and not own_carry
    ends = BufferSpec(Access.READ_WRITE, U32) if tail else None
    first_starts = BufferSpec(Access.READ, U32) if with_lengths and own_carry else ends
    total = BufferSpec(Access.READ_WRITE, U32)
    carries = BufferSpec(Access.READ, U32) if has_carry and not own_carry else None  # own_carry: its own
    counted = BufferSpec(Access.READ, U32) if own_carry else None
    keep = keep_float_run_start if pred.kind == "run_start" and pred.dtype in FLOAT_TYPES else _KEEP[pred.kind]
    warp_first = warp_reducer(FIRST)
    name = "lib_rle_compact" + ("_64" if pred.dtype.size == 8 else "") if with_lengths else f"lib_compact_{pred.name()}"

    @vk.kernel(workgroup_size=WG, name=name)
    def compact(x: Annotated[vk.In[vk.u32], xs], flags: Annotated[vk.In[vk.u32], flag_values],
                out: Annotated[vk.InOut[vk.u32], outs], out_index: Annotated[vk.InOut[vk.u32], indices],
                lengths: Annotated[vk.InOut[vk.u32], runs], firsts: Annotated[vk.InOut[vk.u32], first_starts],
                lasts: Annotated[vk.InOut[vk.u32], ends],
                count: Annotated[vk.InOut[vk.u32], total], carry: Annotated[vk.InOut[vk.u32], carries],
                partials: Annotated[vk.In[vk.u32], counted],
                params: Annotated[vk.Uniform[vk.u32], PARAMS], bounds: Annotated[vk.Uniform[vk.u32], limits],
                has_carry: vk.Const[bool], with_index: vk.Const[bool], with_lengths: vk.Const[bool],
                own_carry: vk.Const[bool], items: vk.Const[int], n_word: vk.Const[int], span_word: vk.Const[int]):
        counts = vk.shared(vk.u32, items * WARPS)  # kept elements per (round, warp) of a tile
        seg_base = vk.wid() * params[span_word]
        if seg_base >= params[n_word]:
            return
        seg_tiles = segment_tiles(seg_base, params, n_word, span_word, items * WG)
        if own_carry:
            below = vk.registers(vk.u32, 1)  # the counts of segments lid() and lid() + WG below this one
            below[0] = 0
            for j in range(OWN_CARRY_READS):
                if vk.lid() + j * WG < vk.wid():
                    below[0] = below[0] + partials[vk.lid() + j * WG]
            if with_lengths:  # where the segment's last run ends: the first run start of a later segment, or n
                later = vk.registers(vk.u32, 1)
                later[0] = NO_START
                used = (params[n_word] + (params[span_word] - 1)) // params[span_word]
                for j in range(OWN_CARRY_READS):  # loaded with the counts: nothing waits between them
                    if vk.lid() + j * WG > vk.wid() and vk.lid() + j * WG < used:
                        later[0] = FIRST.apply(later[0], firsts[vk.lid() + j * WG])
                # both totals through workgroup memory at once: one barrier for the two
                below[0] = warp_sum(below[0], COUNT)
                later[0] = warp_first(later[0], FIRST)
                if vk.subgroup_local_id() == 0:
                    counts[vk.lid() >> 5] = below[0]
                    counts[WARPS + (vk.lid() >> 5)] = later[0]
                vk.barrier()
                carry_in = fold_warps(counts, COUNT, WARPS)
                next_start = params[n_word]
                for j in range(WARPS):
                    next_start = FIRST.apply(next_start, counts[WARPS + j])
            else:
                carry_in = block_reduce(below[0], counts, COUNT, warp_sum)
                next_start = None
            vk.barrier()  # counts is the tiles' buffer too
        else:
            carry_in = carry[vk.wid()] if has_carry else 0
            next_start = None
        i = vk.registers(vk.u32, items)  # element k*WG + t of the tile: its index, value, kept, its warp's ballot
        xv = vk.registers(value, items)
        f = vk.registers(vk.boolean, items)
        v = vk.registers(vk.u32, items)
        pc = vk.registers(vk.u32, 2)  # the tile's counts this lane holds, and their exclusive prefixes
        pe = vk.registers(vk.u32, 2)
        if with_lengths:
            starts = vk.shared(vk.u32, items * WG)  # the tile's run starts by rank in the tile
            # [PENDING]: the start of the segment's latest run, whose end is not known yet;
            # [FIRST_RUN]: the rank of the segment's first run
            held = vk.registers(vk.u32, 2)
            held[PENDING] = 0
            held[FIRST_RUN] = carry_in
        else:  # names the front end binds to nothing
            starts = None
            held = None
        for t in range(seg_tiles):
            tb = seg_base + t * (items * WG)
            for k in range(items):
                i[k] = tb + (k * WG + vk.lid())
                xv[k] = x[i[k]]
                f[k] = vk.u32(i[k] < params[n_word] and keep(x, flags, bounds, i[k], xv[k], pred)) != 0
                v[k] = vk.subgroup_ballot(f[k])
                if vk.subgroup_local_id() == 0:
                    counts[k * WARPS + (vk.lid() >> 5)] = vk.popcount(v[k])
            vk.barrier()
            # every warp scans all the counts (lane l holds entries 2l and 2l + 1): no second barrier
            for j in range(items * WARPS // 32):
                pc[j] = counts[vk.subgroup_local_id() * 2 + j]
            psum = pc[0] + pc[1]
            scanned = warp_inclusive_scan_of(psum, COUNT)
            pex = scanned - psum
            pe[0] = pex
            pe[1] = pe[0] + pc[0]
            ptotal = vk.subgroup_shuffle(scanned, 31)
            for k in range(items):
                r = (carry_in + tile_prefix(pe, k)) + vk.popcount(v[k] & ((1 << vk.subgroup_local_id()) - 1))
                if f[k]:
                    out[r] = xv[k]
                    if with_index:
                        out_index[r] = i[k]
                    if with_lengths:
                        starts[r - carry_in] = i[k]
            if with_lengths:
                vk.barrier()
                for k in range(items):  # run k*WG + t of the tile, when its successor starts in the tile
                    if (k * WG + vk.lid()) + 1 < ptotal:
                        lengths[carry_in + (k * WG + vk.lid())] = starts[(k * WG + vk.lid()) + 1] - starts[
                            k * WG + vk.lid()]
                if ptotal != 0:
                    if vk.lid() == 0:
                        if carry_in != held[FIRST_RUN]:
                            lengths[carry_in - 1] = starts[0] - held[PENDING]  # the latest run ends here
                        if has_carry and not own_carry:
                            if carry_in == held[FIRST_RUN]:
                                firsts[vk.wid()] = starts[0]  # the segment's first run start
                    held[PENDING] = starts[ptotal - 1]
            carry_in += ptotal
            vk.barrier()
        if seg_base + params[span_word] >= params[n_word] and vk.lid() == 0:
            count[0] = carry_in  # the workgroup holding the last element writes the total
            if with_lengths and not own_carry:
                if carry_in != held[FIRST_RUN]:
                    lengths[carry_in - 1] = params[n_word] - held[PENDING]  # the last run ends at n
        if with_lengths and own_carry:
            if vk.lid() == 0 and carry_in != held[FIRST_RUN]:
                lengths[carry_in - 1] = next_start - held[PENDING]  # n for the last segment
        if with_lengths and has_carry and not own_carry:
            if seg_base + params[span_word] < params[n_word] and vk.lid() == 0 and carry_in != held[FIRST_RUN]:
                lasts[vk.wid()] = held[PENDING]  # run_tail_lengths ends this run

    return compact


@cache
def compact_segments(pred: Predicate, items: int, has_carry: bool, with_index: bool, n_word: int, span_word: int,
                     own_carry: bool = False) -> Program:
    """Stable compaction of workgroup ``w``'s segment: kept ``x[i]`` (and ``i``) go to ``out[carry[w] + rank]``
    (``own_carry``: the carry summed from the segments' counts ``partials`` by the workgroup itself).

    The workgroup walks its tiles in order with a running count. In a tile, element ``k*WG + t``
    (coalesced) is ranked by a ballot of its warp (kept lanes below it) plus the kept elements of
    earlier (round, warp) pairs; the workgroup holding the last element writes the total into
    ``count[0]``. Written for ``items * WARPS == 64`` counts per tile (two per lane).
    """
    if items * WARPS != 64:
        raise ValueError(f"compact_segments is written for {64 // WARPS} items per invocation, not {items}")
    return _compact_segments(pred, has_carry, with_index, False, own_carry).bind(
        has_carry, with_index, False, own_carry, items, n_word, span_word).program


@cache
def compact_run_lengths(pred: Predicate, items: int, has_carry: bool, n_word: int, span_word: int,
                        own_carry: bool = False) -> Program:
    """``compact_segments`` of run starts writing each run's length (to ``lengths[rank]``) instead
    of its start.

    A tile's run starts go to workgroup memory by rank in the tile, so each knows where the next
    one starts: the tile writes the length of every run but its last, whose start the workgroup
    keeps and ends at the next tile's first start. The segment's last run ends at ``n`` in the
    segment holding the last element; in the others (``has_carry``) the segment writes its first
    and its last run start into ``firsts[w]`` and ``lasts[w]`` (when it has a run start) and
    ``run_tail_lengths`` ends that run (``own_carry``: as in ``compact_segments``, the carry also
    written to ``carry[w]`` for it). Reads ``x`` once and writes 8 bytes per run (4 B keys) in
    place of the 8 per run of starts plus a second pass over them.
    """
    if pred.kind != "run_start" or items * WARPS != 64:
        raise ValueError(f"compact_run_lengths takes run starts and {64 // WARPS} items per invocation")
    return _compact_segments(pred, has_carry, False, True, own_carry).bind(
        has_carry, False, True, own_carry, items, n_word, span_word).program


@vk.kernel(workgroup_size=WG, name="lib_run_tail_lengths")
def _run_tail_lengths(partial: vk.In[vk.u32], carry: vk.In[vk.u32], firsts: vk.In[vk.u32], lasts: vk.In[vk.u32],
                      lengths: vk.InOut[vk.u32], params: Annotated[vk.Uniform[vk.u32], PARAMS],
                      n_word: vk.Const[int], span_word: vk.Const[int], steps: vk.Const[int]):
    w = vk.gid()
    used = (params[n_word] + (params[span_word] - 1)) // params[span_word]
    if w + 1 < used and partial[w] != 0:
        after = carry[w] + partial[w]  # the rank of the next run
        p = w  # the last segment whose carry is at most `after`: the one where that run starts
        for s in range(steps):
            if p + (1 << (steps - 1 - s)) < used:
                if carry[p + (1 << (steps - 1 - s))] <= after:
                    p += 1 << (steps - 1 - s)
        nxt = params[n_word]  # p > w (carry[w + 1] == after); no run there: none after this one
        if partial[p] != 0:
            nxt = firsts[p]
        lengths[after - 1] = nxt - lasts[w]


@cache
def run_tail_lengths(most: int, n_word: int, span_word: int) -> Program:
    """The length of each segment's last run but the last segment's (``compact_run_lengths``):
    from its start ``lasts[w]`` to the first start of the next segment holding one, found by a
    binary search of the exclusive run counts ``carry`` over at most ``most`` segments (or to
    ``n``). One invocation per segment."""
    return _run_tail_lengths.bind(n_word, span_word, (most - 1).bit_length()).program
