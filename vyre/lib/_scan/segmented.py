"""The segmented reduction: its programs (``@vk.kernel`` factories, cached per monoid) and steps.

One subgroup per segment folds a segment of up to ``LONG`` elements alone, in rounds of
``ROUND`` elements: each lane issues ``ITEMS`` loads (stride 32) before it combines them, as the
tile reduction does, so a 1,024-element segment is two rounds of loads in flight. A longer
segment is split: its whole ``TILE``-element tiles are reduced by subgroups spread over the
grid (``tiles``), after ``mark`` has named each such tile's segment, and the segment's own
subgroup then folds its head (before the first whole tile), the tiles' partials and its tail.
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
from vyre.lib.blocks import PARAMS, WARPS, WG, identity, warp_reducer
from vyre.lib.monoid import Monoid
from vyre.lib.plan import Plan, capacity, ceil_div

ITEMS = REDUCE_ITEMS  # loads in flight per lane in each round, as in the tile reduction
ROUND = 32 * ITEMS    # elements a subgroup folds per round
TILE = 4096           # elements of one partial of a long segment (8 rounds of one subgroup)
LONG = 32768          # segments longer than this are split into tiles (64 rounds for one subgroup)
TILES_PER_WARP = 1    # tiles one subgroup of ``tiles`` checks (lanes below this) and reduces in turn


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


@cache
def _segmented_reduce(m: Monoid, split: bool) -> Kernel | KernelTemplate:
    """The per-segment program of ``m``; Const parameters: ``split``, the params words of n and of
    the segment count."""
    values, results = BufferSpec(Access.READ, m.dtype), BufferSpec(Access.READ_WRITE, m.dtype)
    partials = BufferSpec(Access.READ, m.dtype) if split else None
    warp_total, empty = warp_reducer(m), m.empty_value()
    suffix = "_split" if split else ""

    @vk.kernel(workgroup_size=WG, name=f"lib_segmented_reduce_{m.op}_{m.dtype.value}{suffix}")
    def segmented_reduce(x: Annotated[vk.In[vk.u32], values], offsets: vk.In[vk.u32],
                         partial: Annotated[vk.In[vk.u32], partials], out: Annotated[vk.InOut[vk.u32], results],
                         params: Annotated[vk.Uniform[vk.u32], PARAMS], split: vk.Const[bool], n_word: vk.Const[int],
                         segments_word: vk.Const[int]):
        s = vk.wid() * WARPS + (vk.lid() >> 5)  # one subgroup per segment
        ok = s < params[segments_word]
        begin = vk.select(ok, seg_begin(offsets, params, s, n_word), 0)
        end = vk.select(ok, seg_end(offsets, params, s, begin, n_word), 0)
        if split:  # a long segment: head, its tiles' partials, tail (a short one: all of it as head)
            long = is_long(begin, end)
            first = vk.select(long, first_tile(begin), 0)
            last = vk.select(long, end // TILE, 0)
            acc = fold_range(identity(m), x, begin, vk.select(long, first * TILE, end), m, ITEMS)
            acc = fold_range(acc, partial, first, last, m, ITEMS)
            acc = fold_range(acc, x, vk.select(long, last * TILE, end), end, m, ITEMS)
        else:
            acc = fold_range(identity(m), x, begin, end, m, ITEMS)
        total = warp_total(acc, m)
        if ok and vk.subgroup_local_id() == 0:
            out[s] = vk.select(begin < end, total, m.element(empty))

    return segmented_reduce


@cache
def segmented_reduce_kernel(m: Monoid, split: bool, n_word: int, segments_word: int) -> Program:
    """One subgroup per segment ``s``: ``out[s] = x[offsets[s]] op ... op x[offsets[s+1] - 1]``.

    Offsets are clamped to ``[0, n]`` and an end below its start makes the segment empty, which
    gives the op's empty value. Lanes fold strided elements in order, then the warp reduction
    combines the 32 lanes. With ``split``, a segment longer than ``LONG`` folds its head, the
    partials of its whole tiles (from ``tiles``) and its tail instead.
    """
    return _segmented_reduce(m, split).bind(split, n_word, segments_word).program


@cache
def _mark() -> Kernel | KernelTemplate:
    @vk.kernel(workgroup_size=WG, name="lib_segmented_reduce_mark")
    def mark(offsets: vk.In[vk.u32], owner: vk.InOut[vk.u32], params: Annotated[vk.Uniform[vk.u32], PARAMS],
             n_word: vk.Const[int], segments_word: vk.Const[int]):
        firsts = vk.shared(vk.u32, WG)
        lasts = vk.shared(vk.u32, WG)
        s = vk.wid() * WG + vk.lid()  # one invocation per segment
        ok = s < params[segments_word]
        begin = vk.select(ok, seg_begin(offsets, params, s, n_word), 0)
        end = vk.select(ok, seg_end(offsets, params, s, begin, n_word), 0)
        long = is_long(begin, end)
        firsts[vk.lid()] = vk.select(long, first_tile(begin), 0)
        lasts[vk.lid()] = vk.select(long, end // TILE, 0)
        longs = vk.subgroup_ballot(long)
        vk.barrier()
        warp = vk.lid() - vk.subgroup_local_id()  # the subgroup's first invocation
        for j in range(vk.u32(32)):  # the subgroup writes each of its long segments' tiles together
            if ((longs >> j) & 1) != 0:  # the same in every lane: short segments cost no memory access
                lo = firsts[warp + j]
                hi = lasts[warp + j]
                for r in range((hi - lo + 31) // 32):
                    t = lo + (r * 32 + vk.subgroup_local_id())
                    if t < hi:
                        owner[t] = vk.wid() * WG + (warp + j)

    return mark


@cache
def mark_kernel(n_word: int, segments_word: int) -> Program:
    """``owner[t] = s`` for every whole tile ``t`` of every segment ``s`` longer than ``LONG``.

    Other words of ``owner`` keep what they held (``tiles`` checks each word against the offsets).
    """
    return _mark().bind(n_word, segments_word).program


@cache
def _tiles(m: Monoid) -> Kernel | KernelTemplate:
    """The tile program of ``m``; Const parameters: the params words of n and of the segment count."""
    values, partials = BufferSpec(Access.READ, m.dtype), BufferSpec(Access.READ_WRITE, m.dtype)
    warp_total = warp_reducer(m)

    @vk.kernel(workgroup_size=WG, name=f"lib_segmented_reduce_tiles_{m.op}_{m.dtype.value}")
    def tiles(x: Annotated[vk.In[vk.u32], values], offsets: vk.In[vk.u32], owner: vk.In[vk.u32],
              partial: Annotated[vk.InOut[vk.u32], partials], params: Annotated[vk.Uniform[vk.u32], PARAMS],
              n_word: vk.Const[int], segments_word: vk.Const[int]):
        base = (vk.wid() * WARPS + (vk.lid() >> 5)) * TILES_PER_WARP  # this subgroup's tiles
        t = base + vk.subgroup_local_id()  # lane l checks tile base + l
        o = owner[t]
        ok = o < params[segments_word]
        oc = vk.select(ok, o, 0)
        begin = seg_begin(offsets, params, oc, n_word)
        end = seg_end(offsets, params, oc, begin, n_word)
        whole = ok and vk.subgroup_local_id() < TILES_PER_WARP and is_long(begin, end)
        mine = vk.subgroup_ballot(whole and t >= first_tile(begin) and t < end // TILE)
        for j in range(TILES_PER_WARP):
            tile_ok = ((mine >> j) & 1) != 0
            lo = vk.select(tile_ok, (base + j) * TILE, 0)
            acc = fold_range(identity(m), x, lo, vk.select(tile_ok, lo + TILE, 0), m, ITEMS)
            total = warp_total(acc, m)
            if tile_ok and vk.subgroup_local_id() == 0:
                partial[base + j] = total

    return tiles


@cache
def tiles_kernel(m: Monoid, n_word: int, segments_word: int) -> Program:
    """``partial[t]`` = tile ``t`` of ``x`` folded as a short segment is, for each tile whose
    ``owner`` word names a segment longer than ``LONG`` that holds the whole tile.

    A word left from earlier use is harmless: it is used only when the segment it names holds the
    tile, and then the partial is the tile's all the same.
    """
    return _tiles(m).bind(n_word, segments_word).program


def tile_groups(cap: int) -> int:
    """The workgroups of ``tiles`` for a capacity class of ``cap`` elements."""
    return ceil_div(ceil_div(cap, TILE), WARPS * TILES_PER_WARP)


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
    owner = plan.buffer("seg.owner", groups_of_tiles * WARPS * TILES_PER_WARP)
    partial = plan.buffer("seg.partial", ceil_div(cap, TILE), m.dtype.size)
    plan.step(mark_kernel(n_word, s_word), [offsets, owner, plan.params], ceil_div(segments_cap, WG))
    plan.step(tiles_kernel(m, n_word, s_word), [src, offsets, owner, partial, plan.params], groups_of_tiles)
    plan.step(segmented_reduce_kernel(m, True, n_word, s_word), [src, offsets, partial, out, plan.params], groups)
