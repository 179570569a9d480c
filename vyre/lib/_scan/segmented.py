"""The segmented reduction: its programs (``@vk.kernel`` factories, cached per monoid) and steps.

One subgroup per segment folds a segment of up to ``LONG`` elements alone, in rounds of
``ROUND`` elements: each lane issues ``ITEMS`` loads (stride 32) before it combines them, as the
tile reduction does, so a 1,024-element segment is two rounds of loads in flight. A longer
segment is split: its whole ``TILE``-element tiles are reduced by subgroups spread over the
grid (``tiles``: one per tile, which finds the segment holding its tile by a search of the
offsets and counts it for that segment), and the segment's own subgroup then folds its head
(before the first whole tile), the tiles' partials and its tail: two launches.
Capacity classes up to ``LONG`` elements cannot hold a long segment and run the first program
alone. The order of every fold is fixed, so float results are the same on every backend.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any

from vyre.driver.backend import Resident
from vyre.frontend import lang as vk
from vyre.frontend.annotations import BufferSpec
from vyre.frontend.kernel import Kernel
from vyre.frontend.template import KernelTemplate
from vyre.ir import Program
from vyre.ir.program import Access
from vyre.lib._scan.kernels import REDUCE_ITEMS
from vyre.lib.blocks import PARAMS, U32, WARPS, WG, identity, warp_reducer
from vyre.lib.monoid import Monoid
from vyre.lib.plan import Plan, capacity, ceil_div

ITEMS = REDUCE_ITEMS  # loads in flight per lane in each round, as in the tile reduction
ROUND = 32 * ITEMS    # elements a subgroup folds per round
TILE = 4096           # elements of one partial of a long segment (8 rounds of one subgroup)
LONG = 32768          # segments longer than this are split into tiles (64 rounds for one subgroup)
NO_SEGMENT = 0xFFFFFFFF  # ``found``'s word of a tile whose holder ``tiles`` did not find


@vk.func
def seg_begin(offsets: Any, params: Any, s: Any, n_word: Annotated[int, vk.Const[int]]):
    """Segment ``s``'s first element, clamped to ``n``."""
    return min(offsets[s], params[n_word])


@vk.func
def seg_end(offsets: Any, params: Any, s: Any, begin: Any, n_word: Annotated[int, vk.Const[int]]):
    """Segment ``s``'s end, clamped to ``[begin, n]`` (an end below the start makes it empty)."""
    return min(max(offsets[s + 1], begin), params[n_word])


@vk.func
def first_tile(begin: Any):
    """The first whole tile at or after ``begin`` (``ceil(begin / TILE)`` without overflow)."""
    return begin // TILE + vk.select(begin % TILE != 0, vk.u32(1), vk.u32(0))


@vk.func
def fold_range(acc: Any, buf: Any, lo: Any, hi: Any, m: Any, items: Annotated[int, vk.Const[int]]):
    """``acc`` combined with this lane's elements of ``buf[lo:hi]``: element ``lo + j*32 + lane``
    for ``j = 0, 1, ...`` in order, in rounds of ``items`` loads issued before they are combined."""
    a = acc
    for r in range((hi - lo + (32 * items - 1)) // (32 * items)):
        for k in range(items):
            i = lo + (r * (32 * items) + (k * 32 + vk.subgroup_local_id()))
            a = m.apply(a, vk.select(i < hi, buf[i], identity(m)))
    return a


@vk.func
def is_long(begin: Any, end: Any):
    """Whether the segment ``[begin, end)`` is split into tiles."""
    return end - begin > LONG


@vk.func
def fold_missed(acc: Any, found: Any, x: Any, lo: Any, hi: Any, m: Any):
    """``acc`` combined with each tile ``t`` in ``[lo, hi)`` that ``tiles`` found no holder for
    (``found[t] == NO_SEGMENT``: offsets out of order; its partial is the identity), folded from
    ``x`` by one lane."""
    a = acc
    for r in range((hi - lo + 31) // 32):
        t = lo + (r * 32 + vk.subgroup_local_id())
        for j in range(vk.select(t < hi and found[t] == NO_SEGMENT, vk.u32(TILE), vk.u32(0))):
            a = m.apply(a, x[t * TILE + j])
    return a


@cache
def _segmented_reduce(m: Monoid, split: bool) -> Kernel | KernelTemplate:
    """The per-segment program of ``m``; Const parameters: ``split``, the params words of n and of
    the segment count."""
    values, results = BufferSpec(Access.READ, m.dtype), BufferSpec(Access.READ_WRITE, m.dtype)
    partials = BufferSpec(Access.READ, m.dtype) if split else None
    holders = BufferSpec(Access.READ, U32) if split else None
    tallies = BufferSpec(Access.READ_WRITE, U32) if split else None
    warp_total, empty = warp_reducer(m), m.empty_value()
    suffix = "_split" if split else ""

    @vk.kernel(workgroup_size=WG, name=f"lib_segmented_reduce_{m.op}_{m.dtype.value}{suffix}")
    def segmented_reduce(x: Annotated[vk.In[vk.u32], values], offsets: vk.In[vk.u32],
                         partial: Annotated[vk.In[vk.u32], partials], found: Annotated[vk.In[vk.u32], holders],
                         counts: Annotated[vk.InOut[vk.u32], tallies], out: Annotated[vk.InOut[vk.u32], results],
                         params: Annotated[vk.Uniform[vk.u32], PARAMS],
                         split: vk.Const[bool], n_word: vk.Const[int], segments_word: vk.Const[int]):
        s = vk.wid() * WARPS + (vk.lid() >> 5)  # one subgroup per segment
        ok = s < params[segments_word]
        begin = vk.select(ok, seg_begin(offsets, params, s, n_word), 0)
        end = vk.select(ok, seg_end(offsets, params, s, begin, n_word), 0)
        if split:  # a long segment: head, its tiles' partials, tail (a short one: all of it as head)
            long = is_long(begin, end)
            first = vk.select(long, first_tile(begin), 0)
            last = vk.select(long, end // TILE, 0)
            all_found = vk.select(long, counts[vk.select(long, s, 0)], 0) == last - first
            acc = fold_range(identity(m), x, begin, vk.select(long, first * TILE, end), m, ITEMS)
            acc = fold_range(acc, partial, first, last, m, ITEMS)
            acc = fold_missed(acc, found, x, vk.select(all_found, last, first), last, m)
            acc = fold_range(acc, x, vk.select(long, last * TILE, end), end, m, ITEMS)
        else:
            acc = fold_range(identity(m), x, begin, end, m, ITEMS)
        total = warp_total(acc, m)  # a subgroup exchange: every lane has read counts[s] before it is reset
        if ok and vk.subgroup_local_id() == 0:
            out[s] = vk.select(begin < end, total, m.element(empty))
            if split:
                if is_long(begin, end):
                    counts[s] = 0  # zero again for the next call

    return segmented_reduce


@cache
def segmented_reduce_kernel(m: Monoid, split: bool, n_word: int, segments_word: int) -> Program:
    """One subgroup per segment ``s``: ``out[s] = x[offsets[s]] op ... op x[offsets[s+1] - 1]``.

    Offsets are clamped to ``[0, n]`` and an end below its start makes the segment empty, which
    gives the op's empty value. Lanes fold strided elements in order, then the warp reduction
    combines the 32 lanes. With ``split``, a segment longer than ``LONG`` folds its head, the
    partials of its whole tiles (from ``tiles``) and its tail instead. Where ``counts[s]`` (the
    tiles ``tiles`` found ``s`` holds) is short of the segment's whole tiles, offsets are out of
    order: it reads ``found`` and folds each tile with no holder itself. It zeroes ``counts[s]``.
    """
    return _segmented_reduce(m, split).bind(split, n_word, segments_word).program


@vk.func
def holder_of(offsets: Any, params: Any, e: Any, n_word: Annotated[int, vk.Const[int]],
              segments_word: Annotated[int, vk.Const[int]]):
    """The last segment whose (clamped) start is at most element ``e``, found by the subgroup
    together: each round its 32 lanes probe 32 evenly spaced starts of the range left and keep
    the part after the last one at most ``e`` (offsets in order: the segment holding ``e``).
    Rounds: ``ceil(log32(segments))``, the same in every lane."""
    segments = params[segments_word]
    lo = vk.registers(vk.u32, 2)  # the range left: [lo[0], lo[1])
    lo[0] = 0
    lo[1] = segments
    for _ in range(((32 - vk.clz(segments - 1)) + 4) // 5):
        step = (lo[1] - lo[0] + 31) // 32
        probe = lo[0] + vk.subgroup_local_id() * step
        inside = probe < lo[1]
        at_most = vk.subgroup_ballot(inside and seg_begin(offsets, params, vk.select(inside, probe, 0), n_word) <= e)
        taken = lo[0] + (vk.popcount(at_most) - vk.select(at_most != 0, vk.u32(1), vk.u32(0))) * step
        lo[1] = min(taken + step, lo[1])
        lo[0] = taken
    return lo[0]


@cache
def _tiles(m: Monoid) -> Kernel | KernelTemplate:
    """The tile program of ``m``; Const parameters: the params words of n and of the segment count."""
    values, partials = BufferSpec(Access.READ, m.dtype), BufferSpec(Access.READ_WRITE, m.dtype)
    warp_total = warp_reducer(m)

    @vk.kernel(workgroup_size=WG, name=f"lib_segmented_reduce_tiles_{m.op}_{m.dtype.value}")
    def tiles(x: Annotated[vk.In[vk.u32], values], offsets: vk.In[vk.u32], found: vk.InOut[vk.u32],
              counts: vk.InOut[vk.u32], partial: Annotated[vk.InOut[vk.u32], partials],
              params: Annotated[vk.Uniform[vk.u32], PARAMS],
              n_word: vk.Const[int], segments_word: vk.Const[int]):
        t = vk.wid() * WARPS + (vk.lid() >> 5)  # one subgroup per tile
        s = holder_of(offsets, params, t * TILE, n_word, segments_word)
        begin = seg_begin(offsets, params, s, n_word)
        end = seg_end(offsets, params, s, begin, n_word)
        whole = is_long(begin, end) and t >= first_tile(begin) and t < end // TILE
        lo = vk.select(whole, t * TILE, 0)
        total = warp_total(fold_range(identity(m), x, lo, vk.select(whole, lo + TILE, 0), m, ITEMS), m)
        if vk.subgroup_local_id() == 0:
            found[t] = vk.select(whole, s, NO_SEGMENT)
            partial[t] = total  # the identity where the tile is not whole (an empty fold)
            if whole:
                vk.atomic_add_relaxed(counts, s, 1)

    return tiles


@cache
def tiles_kernel(m: Monoid, n_word: int, segments_word: int) -> Program:
    """For each tile ``t`` (one subgroup): the segment whose start is the last at most the
    tile's first element (``holder_of``); if that segment is longer than ``LONG`` and holds the
    whole tile, ``partial[t]`` = the tile folded as a short segment is and ``found[t]`` = the
    segment, and ``counts[segment]`` goes up by one; else ``partial[t]`` = the identity and
    ``found[t] = NO_SEGMENT``. Every word of ``found`` in the grid is written each
    call, so nothing from an earlier call is read: with offsets out of order a holder may go
    unfound, and the per-segment program folds that tile itself."""
    return _tiles(m).bind(n_word, segments_word).program


def tile_groups(cap: int) -> int:
    """The workgroups of ``tiles`` for a capacity class of ``cap`` elements."""
    return ceil_div(ceil_div(cap, TILE), WARPS)


def segmented_reduce(plan: Plan, m: Monoid, src: Resident, offsets: Resident, out: Resident, n: int,
                     segments: int) -> None:
    """The steps of ``out[s] = reduce(src[offsets[s]:offsets[s+1]])`` for ``segments`` segments."""
    n_word, s_word = plan.word("seg.n", n), plan.word("seg.segments", segments)
    segments_cap, cap = capacity(segments), capacity(n)
    groups = ceil_div(segments_cap, WARPS)
    if cap <= LONG:
        plan.step(segmented_reduce_kernel(m, False, n_word, s_word), [src, offsets, out, plan.params], groups)
        return
    groups_of_tiles = tile_groups(cap)
    found = plan.buffer("seg.found", groups_of_tiles * WARPS)
    counts = plan.zeroed_buffer("seg.counts", segments_cap)  # zero between calls: the last step resets it
    partial = plan.buffer("seg.partial", groups_of_tiles * WARPS, m.dtype.size)
    plan.step(tiles_kernel(m, n_word, s_word), [src, offsets, found, counts, partial, plan.params], groups_of_tiles)
    plan.step(segmented_reduce_kernel(m, True, n_word, s_word),
              [src, offsets, partial, found, counts, out, plan.params], groups)
