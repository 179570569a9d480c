"""The programs of the segmented radix sort (digit counts per segment, the scatter of each
segment) and of sorts through indices (64-bit keys split in halves, gathers).

Each builder is cached, so the same variant is the same ``Program``. The single-pass (Onesweep)
programs are in ``onesweep``.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any

from vyre.frontend import lang as vk
from vyre.frontend.annotations import BY_EXPRESSION, BufferSpec
from vyre.frontend.kernel import Kernel
from vyre.frontend.template import KernelTemplate
from vyre.ir import DataType, Program
from vyre.ir.program import Access
from vyre.lib._sort.tiles import (
    COUNTERS,
    RADIX,
    RADIX_BITS,
    RADIX_MASK,
    SORT_ROUNDS,
    bits_or_past,
    check_rounds,
    digit,
    load_group,
    past_bits,
    peers_of,
    place_tile,
    rank_tile,
    tile_count,
    tile_slots,
    write_out,
)
from vyre.lib.blocks import PARAMS, U32, WARPS, WG
from vyre.lib.keys import key_bits, key_kind, key_of, raw_of, transformed

SORT_ITEMS = 24     # elements per invocation in the radix scatter of keys alone (tile 6144; 46 KB workgroup memory)
SORT_VALUE_ITEMS = 12  # the same when values move (tile 3072; 40 KB)
COUNT_ITEMS = 8     # elements per invocation in the radix digit counts (tile 2048, all loaded first)


@vk.func
def with_warp_counts(total: Annotated[Any, BY_EXPRESSION], local: Any, warps: Annotated[int, vk.Const[int]]):
    """``total`` plus the ``warps`` warps' counters of digit ``t`` (``local[v*256 + t]``)."""
    count = total
    for v in range(warps):
        count = count + local[v * RADIX + vk.lid()]
    return count


@cache
def _radix_counts(shift: int, key_type: DataType | None) -> Kernel | KernelTemplate:
    """``radix_counts`` at ``shift`` of ``key_type`` keys; its Const parameters: items per
    invocation, the params words of n, span and groups."""
    kind, b, past = key_kind(key_type), key_bits(key_type or U32), past_bits(key_type)

    @vk.kernel(workgroup_size=WG, name=f"lib_radix_counts_{shift}")
    def counts(keys: vk.In[vk.u32], hist: vk.InOut[vk.u32], params: Annotated[vk.Uniform[vk.u32], PARAMS],
               items: vk.Const[int], n_word: vk.Const[int], span_word: vk.Const[int], groups_word: vk.Const[int]):
        local = vk.shared(vk.u32, WARPS * RADIX)
        bits = vk.registers(vk.u32, items)
        n = params[n_word]
        size = vk.select(vk.wid() * params[span_word] < n, min(params[span_word], n - vk.wid() * params[span_word]), 0)
        tiles = (size + (WG * items - 1)) // (WG * items)
        for t in range(tiles):
            tb = vk.wid() * params[span_word] + t * (WG * items)
            for k in range(items):  # all loaded first
                bits[k] = bits_or_past(keys, tb + (k * WG + vk.lid()), n, n, past)
            for k in range(items):
                d = digit(key_of(bits[k], kind, b), shift, False)
                peers = peers_of(d, RADIX_BITS, False)
                old = local[(vk.lid() >> 5) * RADIX + d]
                local[(vk.lid() >> 5) * RADIX + d] = old + vk.popcount(peers)
        vk.barrier()
        # keys past n counted as digit 255, taken off
        hist[vk.lid() * params[groups_word] + vk.wid()] = with_warp_counts(
            vk.select(vk.lid() == RADIX_MASK, 0 - (tiles * (WG * items) - size), 0), local, WARPS)

    return counts


@cache
def radix_counts(shift: int, key_type: DataType | None, items: int, n_word: int, span_word: int, groups_word: int
                 ) -> Program:
    """Digit counts of workgroup ``w``'s segment, digit-major: ``hist[d * groups + w]`` (the upsweep).

    A tile's ``items`` keys per invocation are all loaded (in flight together), then each warp
    counts their digits in its own counters in workgroup memory with ballots, like the
    scatter's ranking (no atomics). Keys past ``n`` count as digit 255 and are taken off at the
    end. A workgroup whose segment is empty writes zeros, so one scan of ``hist`` gives every offset.
    """
    return _radix_counts(shift, transformed(key_type)).bind(items, n_word, span_word, groups_word).program


@cache
def _radix_scatter(shift: int, key_in: DataType | None, key_out: DataType | None, values: str
                   ) -> Kernel | KernelTemplate:
    """``radix_scatter`` at ``shift``; its Const parameters: items per invocation, rounds per loop
    iteration, whether values are loaded and moved, the params words of n, span and groups."""
    vals = BufferSpec(Access.READ, U32) if values == "load" else None
    vals_out = BufferSpec(Access.READ_WRITE, U32) if values != "none" else None
    kin, bin_, past = key_kind(key_in), key_bits(key_in or U32), past_bits(key_in)
    kout, bout = key_kind(key_out), key_bits(key_out or U32)

    @vk.kernel(workgroup_size=WG, name=f"lib_radix_scatter_{shift}", names={"shifts": "shift"})
    def scatter(keys: vk.In[vk.u32], offsets: vk.In[vk.u32], keys_out: vk.InOut[vk.u32],
                vals: Annotated[vk.In[vk.u32], vals], vals_out: Annotated[vk.InOut[vk.u32], vals_out],
                params: Annotated[vk.Uniform[vk.u32], PARAMS], items: vk.Const[int], rounds: vk.Const[int],
                loads: Annotated[bool, vk.Const[bool]], moves: Annotated[bool, vk.Const[bool]],
                n_word: vk.Const[int], span_word: vk.Const[int], groups_word: vk.Const[int]):
        counts = vk.shared(vk.u16, 2 * COUNTERS)  # two halves, by tile parity
        shifts = vk.shared(vk.u32, RADIX)
        sums = vk.shared(vk.u32, WARPS)
        ranks = vk.shared(vk.u16, WG * items)
        sorted_keys = vk.shared(vk.u32, WG * items)
        if moves:
            sorted_vals = vk.shared(vk.u32, WG * items)
        else:
            sorted_vals = None
        a = vk.registers(vk.u32, rounds)  # the keys of the next loop iteration, and of the one after
        b = vk.registers(vk.u32, rounds)
        cur = vk.registers(vk.u32, rounds)
        p = vk.registers(vk.u32, rounds)
        pv = vk.registers(vk.u32, rounds)
        o = vk.registers(vk.u32, rounds)
        pos = vk.registers(vk.u32, rounds)
        run = vk.registers(vk.u32, 1)
        w = vk.registers(vk.u32, 2)
        n = params[n_word]
        seg_base = vk.wid() * params[span_word]
        if seg_base >= n:
            return
        seg_tiles = (min(params[span_word], n - seg_base) + (WG * items - 1)) // (WG * items)
        run[0] = offsets[vk.lid() * params[groups_word] + vk.wid()]
        limit = min(n, seg_base + params[span_word])
        load_group(keys, a, seg_base, vk.u32(0), n, limit, False, past, items, rounds, False, True)
        load_group(keys, b, seg_base, vk.u32(1), n, limit, False, past, items, rounds, False, True)
        for t in range(seg_tiles):
            tb = seg_base + t * (WG * items)
            valid = min(n, tb + WG * items) - min(n, tb)
            half = (t & 1) * COUNTERS
            rank_tile(keys, counts, ranks, a, b, cur, seg_base, t, n, limit, False, past, half, kin, bin_, shift, False,
                      items, rounds, False)
            total = tile_count(counts, half, True, WARPS)  # step 2
            tile_slots(counts, shifts, sums, w, run, total, half, True, WARPS)
            place_tile(keys, vals, counts, ranks, sorted_keys, sorted_vals, p, pv, tb, n,
                       past, half, kin, bin_, shift, False, items, rounds, loads, moves)
            write_out(sorted_keys, sorted_vals, shifts, keys_out, vals_out, o, pos, valid,
                      False, False, shift, False, kout, bout, items, rounds, moves, shifts, False)

    return scatter


@cache
def radix_scatter(shift: int, key_in: DataType | None, key_out: DataType | None, values: str, items: int,
                  n_word: int, span_word: int, groups_word: int) -> Program:
    """One stable pass of LSD radix sort over workgroup ``w``'s segment (the downsweep).

    Invocation ``t`` owns digit ``t`` and keeps its running output position, starting at
    ``offsets[t * groups + w]`` (the scanned digit counts). The workgroup walks its tiles of
    ``WG * items`` elements in order; warp ``v`` owns the tile's ``32 * items`` elements from
    ``v * 32 * items`` and takes them 32 at a time (round ``j``: ``j*32 + lane``), so element
    order is warp, round, lane. ``items`` is a multiple of ``SORT_ROUNDS``: the rounds are
    loops of ``SORT_ROUNDS`` written out. Per tile:

    1. rank: each round, a warp finds the lanes with equal digits (8 ballots) and counts them
       in its counter of that digit (workgroup memory, u16); every lane of a peer group reads
       the same counter and stores the same new value (no leader, branch or atomic). Each
       key's rank among the warp's equal digits goes to workgroup memory (u16). Keys are
       loaded two loop iterations ahead, across tiles, so loads are in flight meanwhile;
    2. invocation ``t`` turns the warps' counters of digit ``t`` into tile slots (a workgroup
       scan over digits gives where digit ``t`` starts in the tile-sorted order);
    3. place: keys are read again (from cache: just read), values (if any) read, and both
       stored to their slots in workgroup memory, so the tile is sorted by digit and stable;
    4. invocation ``t`` reads slots ``j*WG + t`` and writes each to ``slot + shift[digit]``:
       consecutive invocations write consecutive addresses within each digit's run.

    Elements past ``n`` get key ``0xFFFFFFFF``: they rank last in the last tile, past its valid
    slots, and are not written. Counters alternate between two halves by tile parity, so the
    next tile needs no extra barrier. ``values``: ``"none"``, ``"load"`` (move ``vals``) or
    ``"iota"`` (the value is the index: argsort); ``key_in``/``key_out`` transform raw keys on
    the first pass and back on the last.
    """
    check_rounds(items)
    kernel = _radix_scatter(shift, transformed(key_in), transformed(key_out), values)  # one template per kernel
    return kernel.bind(items, SORT_ROUNDS, values == "load", values != "none", n_word, span_word, groups_word).program


@cache
def _split_keys(key_type: DataType) -> Kernel | KernelTemplate:
    """``split_keys`` of ``key_type``; its Const parameter is the params word of n."""
    kind, b = key_kind(key_type), key_bits(key_type)

    @vk.kernel(workgroup_size=WG, name=f"lib_split_keys_{key_type.value}")
    def split(keys: vk.In[vk.u64], lo: vk.InOut[vk.u32], hi: vk.InOut[vk.u32],
              params: Annotated[vk.Uniform[vk.u32], PARAMS], n_word: vk.Const[int]):
        i = vk.gid()
        if i < params[n_word]:
            key = key_of(keys[i], kind, b)
            lo[i] = vk.u32(key)
            hi[i] = vk.u32(key >> 32)

    return split


@cache
def split_keys(key_type: DataType, n_word: int) -> Program:
    """``lo[i]``, ``hi[i]``: the low and high 32 bits of the u64 sort key of ``keys[i]`` (``i < n``)."""
    return _split_keys(key_type).bind(n_word).program


@cache
def _gather(element_type: DataType, key_type: DataType | None) -> Kernel | KernelTemplate:
    """``gather`` of ``element_type`` through ``key_type``'s keys; its Const parameter is the params word of n."""
    src, out = BufferSpec(Access.READ, element_type), BufferSpec(Access.READ_WRITE, element_type)
    kind, b = key_kind(key_type), key_bits(key_type or element_type)
    suffix = "" if key_type is None else f"_{key_type.value}"

    @vk.kernel(workgroup_size=WG, name=f"lib_gather_{element_type.value}{suffix}")
    def gather(x: Annotated[vk.In[vk.u32], src], perm: vk.In[vk.u32], y: Annotated[vk.InOut[vk.u32], out],
               params: Annotated[vk.Uniform[vk.u32], PARAMS], n_word: vk.Const[int]):
        i = vk.gid()
        if i < params[n_word]:
            y[i] = raw_of(key_of(x[perm[i]], kind, b), kind, b)

    return gather


@cache
def gather(element_type: DataType, key_type: DataType | None, n_word: int) -> Program:
    """``out[i] = src[perm[i]]`` for ``i < n`` (``element_type``: U32 or U64 raw bits); with ``key_type``
    (a 64-bit key type) the value goes through its sort key and back, so every NaN comes out as
    the one NaN the sort returns."""
    return _gather(element_type, key_type).bind(n_word).program


@cache
def _segment_of() -> Kernel | KernelTemplate:
    """``segment_of``; its Const parameters are the params words of n, of the segment count and of the
    search's steps."""

    @vk.kernel(workgroup_size=WG, name="lib_segment_of")
    def segment_of(offsets: vk.In[vk.u32], perm: vk.In[vk.u32], ids: vk.InOut[vk.u32],
                   params: Annotated[vk.Uniform[vk.u32], PARAMS], n_word: vk.Const[int],
                   segments_word: vk.Const[int], steps_word: vk.Const[int]):
        i = vk.gid()
        if i < params[n_word]:
            x = perm[i]
            lo = vk.u32(0)
            hi = params[segments_word] - 1
            for _ in range(params[steps_word]):  # binary search: the last s with offsets[s] <= x
                if lo < hi:
                    mid = (lo + hi + 1) >> 1
                    if offsets[mid] <= x:
                        lo = mid
                    else:
                        hi = mid - 1
            ids[i] = lo

    return segment_of


@cache
def segment_of(n_word: int, segments_word: int, steps_word: int) -> Program:
    """``ids[i]``: the segment of element ``perm[i]`` (``i < n``), the last ``s < segments`` with
    ``offsets[s] <= perm[i]`` (0 when there is none), by a binary search of ``steps`` steps."""
    return _segment_of().bind(n_word, segments_word, steps_word).program
