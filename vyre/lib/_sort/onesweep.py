"""The programs of the single-pass radix sort (Onesweep): digit histograms of all passes, digit
starts, and one pass per kernel with decoupled look-back over tiles."""

from __future__ import annotations

import math
from functools import cache
from typing import Annotated, Any

from vyre.frontend import lang as vk
from vyre.frontend.annotations import TYPE_NAMES, BufferSpec
from vyre.frontend.kernel import Kernel
from vyre.frontend.template import KernelTemplate
from vyre.ir import DataType, Program
from vyre.ir.layout import PORTABLE_WORKGROUP_BYTES, workgroup_layout
from vyre.ir.program import Access
from vyre.lib._histogram.kernels import merge_bins
from vyre.lib._select.kernels import RUN_COUNT_COPIES
from vyre.lib._sort.kernels import SORT_ITEMS
from vyre.lib._sort.registers import check_register_rounds, load_keys, place_keys, rank_keys, rotate
from vyre.lib._sort.tiles import (
    COUNTERS,
    KEYS_DROPPED,
    RADIX,
    RADIX_BITS,
    RADIX_MASK,
    RADIX_PASSES,
    SORT_ROUNDS,
    bits_or_past,
    check_rounds,
    digit,
    element_at,
    load_group,
    past_bits,
    place_tile,
    radix_passes,
    rank_tile,
    tile_count,
    tile_slots,
    tile_starts,
    write_out,
)
from vyre.lib.blocks import PARAMS, U32, WARPS, WG, exclusive_block_scan
from vyre.lib.keys import key_bits, key_kind, key_of, raw_type, transformed
from vyre.lib.monoid import COUNT

# The ``lookback`` buffer: words 0-3 count the tiles taken in each pass, and words LOOKBACK_STARTS +
# 256*p + d hold the digit counts of pass p (then, scanned, digit d's first output slot). The
# ``pairs`` buffer (u64) holds two regions of pair words (``params`` word ``region_word``: a region's
# size), used by the passes alternately: tiles 2q and 2q + 1 publish their words of digit d in the
# low and the high half of pair word 256*q + d, so one look-back load reads two tiles' words.
# ``status[0]`` counts the digits whose look-back gave up. 64-bit keys take eight passes: the same
# layout with eight counters and eight passes' starts (``lookback_starts``, ``lookback_head``).
LOOKBACK_STARTS = RADIX_PASSES
LOOKBACK_HEAD = LOOKBACK_STARTS + RADIX_PASSES * (1 << RADIX_BITS)
FLAG_A = 1 << 30    # a tile's own count of the digit (an aggregate)
FLAG_P = 1 << 31    # the count of the digit in this and every lower tile (an inclusive prefix)
SPIN = (6, 16)      # the look-back's wait: 6 nested loops of 16 trips, at most 16**6 trips
LOOKBACK_WIDTH = 1  # pair words (two tiles each) one look-back trip reads together (2 and 3 measured slower)
SKIP_EMPTY = True  # no look-back for a digit no key of the pass has (False: every digit, to compare against)
ONESWEEP_ITEMS = SORT_ITEMS
ONESWEEP_VALUE_ITEMS = 16  # with values (tile 4096; 47 KB of workgroup memory, 4 workgroups per SM on an H100)
ONESWEEP_WIDE_ITEMS = 16  # 64-bit keys alone (tile 4096; 46 KB of workgroup memory)
ONESWEEP_WIDE_LARGE_ITEMS = 24  # 64-bit keys alone from WIDE_LARGE_FROM keys, where the device allows the
# tile's 67,620 bytes of workgroup memory (tile 6144; at 2^27 keys on an H100: 8.6-9.0 ms against 9.7-10.0 at 16)
WIDE_LARGE_FROM = 1 << 22  # below, 16 keys per invocation measured as fast or faster (2^20: 0.33 against 0.39 ms)
ONESWEEP_WIDE_VALUE_ITEMS = 8  # 64-bit keys with values or indices (tile 2048; 34 KB, 42 KB with 8-byte values)
# Small sorts of 32-bit keys take tiles of 2048 (8 keys per invocation): more workgroups to spread over the SMs
# where a class fills a few waves at most. Keys alone up to SMALL_KEYS_UP_TO (H200, sort at 2^16 / 2^20: 49 / 99
# against 59 / 119 us at 24; 2^22: 207 against 155), with values or indices up to SMALL_VALUES_UP_TO (argsort and
# key-value sort at 2^16: 49 / 60 against 60 / 70 us; at 2^18 the key-value sort was slower: 85 against 79)
SMALL_ITEMS, SMALL_KEYS_UP_TO, SMALL_VALUES_UP_TO = 8, 1 << 20, 1 << 17
HISTOGRAM_ITEMS = 8  # keys per invocation and round of the digit histograms (all loaded first)
ONESWEEP_KEYS_IN_REGISTERS = True  # a pass reads each key once, into registers (``registers``), not three times
ONESWEEP_REGISTER_ROUNDS = 4  # keys in registers: keys ranked (and placed) per loop iteration (its gcd with the
# items; 0: all, written out: 16 keys of 64 bits take 64-72 registers, 24 of 32 bits pass 4096 PTX instructions)
COUNT_IN_PASSES_FROM = 1 << 26  # from this capacity the histogram counts the first pass's digits only and each
# pass but the last counts the next one's instead of its own (``count_next``; its own count comes from the ranking
# and is published after it). H200, u32 sort: 2^28 5.14 against 5.28 ms, 2^26 1.34 against 1.36; 2^24 0.40
# against 0.38 (the later publish and three more launches cost more there than the histogram saves)
ONESWEEP_RANKS_IN_REGISTERS = False  # keys in registers: the ranks too, not in the ``ranks`` workgroup buffer
# (measured with ptxas: 56-96 registers at 16 keys per invocation, so 3 or fewer workgroups per SM)


def lookback_starts(passes: int) -> int:
    """The first word of the digit counts (then starts) in the ``lookback`` buffer of ``passes`` passes."""
    return passes


def lookback_head(passes: int) -> int:
    """The words of the ``lookback`` buffer of ``passes`` passes (its tile counters and digit counts)."""
    return lookback_starts(passes) + passes * (1 << RADIX_BITS)


def onesweep_items(raw: DataType, values: str, keys: int = 0, workgroup_bytes: int = PORTABLE_WORKGROUP_BYTES) -> int:
    """Keys per invocation of a single-pass radix tile, by key bits and ``values`` mode; 32-bit keys
    take ``SMALL_ITEMS`` in small classes of ``keys``; 64-bit keys alone take
    ``ONESWEEP_WIDE_LARGE_ITEMS`` from ``WIDE_LARGE_FROM`` ``keys`` on a device whose workgroups
    may hold that tile's memory (``workgroup_bytes``: the most one may opt in to)."""
    if raw is U32:
        if keys and keys <= (SMALL_KEYS_UP_TO if values == "none" else SMALL_VALUES_UP_TO):
            return SMALL_ITEMS
        return ONESWEEP_ITEMS if values == "none" else ONESWEEP_VALUE_ITEMS
    if values != "none":
        return ONESWEEP_WIDE_VALUE_ITEMS
    if keys >= WIDE_LARGE_FROM and _wide_tile_bytes(ONESWEEP_WIDE_LARGE_ITEMS) <= workgroup_bytes:
        return ONESWEEP_WIDE_LARGE_ITEMS
    return ONESWEEP_WIDE_ITEMS


@cache
def _wide_tile_bytes(items: int) -> int:
    """Workgroup memory of a 64-bit keys-only pass at ``items`` keys per invocation."""
    return workgroup_layout(radix_onesweep(8, None, None, "none", items, 0, 1, raw=DataType.U64)).total


@vk.func
def count_digits(local: Any, key: Any, passes: Annotated[int, vk.Const[int]], wide: Annotated[bool, vk.Const[bool]]):
    """Count the digit of ``key`` of each of ``passes`` passes in ``local[256*p + digit]`` (a workgroup atomic each)."""
    for p in range(passes):
        vk.atomic_add_relaxed(local, p * RADIX + digit(key, p * RADIX_BITS, wide), 1)


@cache
def _radix_histograms(key_type: DataType, counted: int) -> Kernel | KernelTemplate:
    """``radix_histograms`` of ``key_type`` counting the first ``counted`` passes' digits; its Const
    parameters: items per invocation, the params words of n and of the workgroup count."""
    raw = raw_type(key_type)
    keys_spec, wide = BufferSpec(Access.READ, raw), raw is not U32
    bits: Any = TYPE_NAMES[raw]  # an element type (typed Any for type checkers, as Monoid.element is)
    passes, kind, b = radix_passes(raw), key_kind(key_type), key_bits(key_type)
    starts = lookback_starts(passes)
    suffix = "" if counted == passes else f"_first{counted}"

    @vk.kernel(workgroup_size=WG, name=f"lib_radix_histograms_{key_type.value}{suffix}")
    def histograms(keys: Annotated[vk.In[vk.u32], keys_spec], lookback: vk.InOut[vk.u32],
                   params: Annotated[vk.Uniform[vk.u32], PARAMS], items: vk.Const[int], n_word: vk.Const[int],
                   blocks_word: vk.Const[int]):
        local = vk.shared(vk.u32, counted * RADIX)
        i = vk.registers(vk.u32, items)
        key = vk.registers(bits, items)
        for r in range((params[n_word] + (params[blocks_word] * (WG * items) - 1))
                       // (params[blocks_word] * (WG * items))):
            tb = (r * params[blocks_word] + vk.wid()) * (WG * items)
            for k in range(items):  # all loaded before any is counted
                i[k] = tb + (k * WG + vk.lid())
                key[k] = key_of(keys[i[k]], kind, b)
            if tb < params[n_word] - min(params[n_word], WG * items - 1):  # tb + tile <= n, without overflow
                for k in range(items):
                    count_digits(local, key[k], counted, wide)
            else:
                for k in range(items):
                    if i[k] < params[n_word]:
                        count_digits(local, key[k], counted, wide)
        vk.barrier()
        merge_bins(lookback, local, params, starts, counted * RADIX, 0, vk.u32)

    return histograms


@cache
def radix_histograms(key_type: DataType, items: int, n_word: int, blocks_word: int, counted: int = 0) -> Program:
    """The digit counts of the first ``counted`` passes (0: all) at once, into ``lookback[starts +
    256*p + d]`` (zeroed; ``starts`` is ``lookback_starts`` of the passes of ``key_type``: four, or
    eight for 64-bit keys). With ``counted`` 1 the passes count the next pass's digits
    (``radix_onesweep``'s ``count_next``).

    Workgroup ``w`` of ``B`` (params ``blocks_word``) takes tiles ``w, w + B, ...`` of ``WG * items``
    keys (coalesced, all loaded before they are counted) and counts each key's digits in workgroup
    memory with workgroup atomics, then merges with one global atomic per non-zero bin. A tile
    wholly below ``n`` counts its keys without a test per key.
    """
    return _radix_histograms(key_type, counted or radix_passes(raw_type(key_type))).bind(items, n_word,
                                                                                         blocks_word).program


@cache
def _radix_digit_starts(passes: int, first: int | None) -> Kernel:
    """``radix_digit_starts`` of ``passes`` passes: all of them, or pass ``first`` alone."""
    suffix = ("" if passes == RADIX_PASSES else f"_{passes}") + ("" if first is None else f"_pass{first}")
    starts = lookback_starts(passes) + (first or 0) * RADIX

    @vk.kernel(workgroup_size=WG, name=f"lib_radix_digit_starts{suffix}")
    def digit_starts(lookback: vk.InOut[vk.u32]):
        sums = vk.shared(vk.u32, WARPS)
        w = vk.registers(vk.u32, 2)
        at = starts + (vk.wid() * RADIX + vk.lid())
        count = lookback[at]
        lookback[at] = exclusive_block_scan(count, sums, w, COUNT)

    return digit_starts


@cache
def radix_digit_starts(passes: int = RADIX_PASSES, first: int | None = None) -> Program:
    """Workgroup ``p`` scans pass ``p``'s digit counts in place (exclusive): each digit's first
    output slot (one workgroup per pass, of ``passes``). ``first``: pass ``first``'s counts alone
    (one workgroup), as counted by the histograms or the pass before it."""
    return _radix_digit_starts(passes, first).program


EARLY_BATCH = 4  # keys loaded together by the early digit counts
FLAGS = FLAG_A | FLAG_P
COUNT_BITS = FLAG_A - 1  # a published word's count
NOWHERE = 1 << 31  # the output position of a digit whose look-back gave up: past every buffer


@vk.func
def early_counts(keys: Any, hist: Any, e: Any, seg_base: Any, limit: Any, whole: Any, past: Any,
                 kind: Annotated[int, vk.Const[int]], b: Any, shift: Annotated[int, vk.Const[int]],
                 wide: Annotated[bool, vk.Const[bool]], items: Annotated[int, vk.Const[int]],
                 batch: Annotated[int, vk.Const[int]]):
    """The tile's count of each digit before it is ranked, into ``hist``: its keys below ``limit``
    are read (coalesced, ``batch`` in flight) and counted with relaxed workgroup atomics (without a
    test per key in a whole tile). Publishing these counts first, not after the long ranking step,
    is what keeps later tiles' look-backs from waiting."""
    for eb in range(vk.u32(items // batch)):
        for k in range(batch):
            e[k] = past
        if whole:
            for k in range(batch):
                e[k] = keys[seg_base + ((eb * batch + k) * WG + vk.lid())]
        else:
            for k in range(batch):  # n = limit: none past it counts
                e[k] = bits_or_past(keys, seg_base + ((eb * batch + k) * WG + vk.lid()), limit, limit, past)
        if whole:
            for k in range(batch):
                vk.atomic_add_relaxed(hist, digit(key_of(e[k], kind, b), shift, wide), 1)
        else:
            for k in range(batch):
                if seg_base + ((eb * batch + k) * WG + vk.lid()) < limit:
                    vk.atomic_add_relaxed(hist, digit(key_of(e[k], kind, b), shift, wide), 1)
    vk.barrier()


@vk.func
def pair_word(region: Any, tile: Any):
    """The index of tile ``tile``'s pair word of digit ``t`` in the ``pairs`` buffer: tiles ``2q``
    and ``2q + 1`` share the u64 word ``region + 256*q + t`` (the low and the high half)."""
    return region + ((tile >> 1) * RADIX + vk.lid())


@vk.func
def take_pair(done: Any, prefix: Any, word: Any, hi: Any, lo: Any, go: Any):
    """Take one pair word's halves ``hi`` (the nearer tile) and ``lo`` if the walk still goes on
    (``go``): the high half alone when it holds an inclusive prefix (``done[0]``), else both when
    both are published (moving ``word[0]`` to the pair below); returns whether the walk goes on
    past this pair (both taken and neither an inclusive prefix)."""
    hi_last = (hi & FLAG_P) != 0
    both = go and (hi & FLAGS) != 0 and not hi_last and (lo & FLAGS) != 0
    lo_last = (lo & FLAG_P) != 0
    prefix[0] = prefix[0] + vk.select(both or (go and hi_last), hi & COUNT_BITS, 0) + vk.select(
        both, lo & COUNT_BITS, 0)
    word[0] = vk.select(both, word[0] - RADIX, word[0])
    done[0] = done[0] or (go and hi_last) or (both and lo_last)
    return both and not lo_last


@vk.func
def look_back_trip(pairs: Any, done: Any, prefix: Any, word: Any, width: Annotated[int, vk.Const[int]]):
    """One trip of the look-back: read digit ``t``'s pair word ``word[0]`` and the ``width - 1``
    pairs below at once (one load each, one memory latency), then take them nearest first
    (``take_pair``); a pair with an unpublished half is read again next trip. Near tile 0 a trip
    also reads pairs below tile 0's: never taken, since tile 0 holds ``FLAG_P``. With one pair a
    trip, the common trip (two aggregates: walking on) takes a short branch: their sum, less the
    ``FLAG_P`` that their two ``FLAG_A`` add up to."""
    at = word[0]
    seen = vk.registers(vk.u64, width)
    for k in range(width):
        seen[k] = vk.atomic_or_relaxed(pairs, at - k * RADIX, vk.u64(0))  # an atomic read of two words
    ahead = True  # every half an aggregate (no inclusive prefix): the common trip, walking on
    total = vk.u32(0)
    for k in range(width):
        ahead = ahead and ((vk.u32(seen[k] >> 32) | vk.u32(seen[k])) & FLAG_P) == 0 and (
            (vk.u32(seen[k] >> 32) & vk.u32(seen[k])) & FLAG_A) != 0
        total = total + ((vk.u32(seen[k] >> 32) + vk.u32(seen[k])) & COUNT_BITS)
    if ahead:
        prefix[0] = prefix[0] + total
        word[0] = word[0] - width * RADIX
    else:
        go = True
        for k in range(width):
            go = take_pair(done, prefix, word, vk.u32(seen[k] >> 32), vk.u32(seen[k]), go)


@vk.func
def wait_for_prefix(pairs: Any, done: Any, prefix: Any, word: Any, levels: Annotated[int, vk.Const[int]],
                    trips: Annotated[int, vk.Const[int]], width: Annotated[int, vk.Const[int]]):
    """``look_back_trip`` until ``done[0]``, at most ``trips ** levels`` times: ``levels`` nested
    loops of ``trips``, each trip guarded by ``if not done[0]`` (``lookback.spin_wait``'s shape)."""
    for _ in range(vk.u32(trips)):
        if not done[0]:
            if levels == 1:
                look_back_trip(pairs, done, prefix, word, width)
            else:
                wait_for_prefix(pairs, done, prefix, word, levels - 1, trips, width)


@vk.func
def publish(pairs: Any, region: Any, tile: Any, own: Any):
    """Invocation ``t`` publishes the tile's count of digit ``t`` (``own``): ``own | FLAG_A``, or
    ``own | FLAG_P`` for tile 0, whose count is already an inclusive prefix, added into its half of
    the zeroed pair word."""
    word = own | vk.select(tile == 0, FLAG_P, FLAG_A)
    vk.atomic_add_relaxed(pairs, pair_word(region, tile), vk.u64(word) << (32 * (tile & 1)))


@vk.func
def look_back(pairs: Any, lookback: Any, status: Any, region: Any, tile: Any, own: Any, run: Any, done: Any,
              prefix: Any, word: Any, absent: Any, start: Annotated[int, vk.Const[int]],
              levels: Annotated[int, vk.Const[int]], trips: Annotated[int, vk.Const[int]],
              width: Annotated[int, vk.Const[int]]):
    """Invocation ``t``'s look-back for digit ``t`` after the tile published its count ``own``:
    the counts of lower tiles, last first, until one holds an inclusive prefix; then the tile
    publishes its own inclusive prefix and ``run[0]`` is where its keys of digit ``t`` start
    (``lookback[start + t]`` plus the prefix). If the wait runs out, ``status[0]`` counts the digit
    and ``run[0]`` is ``NOWHERE``. An odd tile's walk starts at its own pair, whose high half is
    its own aggregate: the prefix starts at minus its count. ``absent``: no key of the pass has
    digit ``t``, so no tile has keys of it to place: no tile walks for it, and its aggregate (0)
    stays as it is."""
    skip = tile != 0 and absent
    done[0] = tile == 0 or skip
    prefix[0] = vk.select((tile & 1) != 0, 0 - own, 0)
    word[0] = pair_word(region, tile - 1)  # the pair of the nearest tile below (an odd tile: its own)
    wait_for_prefix(pairs, done, prefix, word, levels, trips, width)
    if done[0]:
        if not (tile == 0 or skip):  # A to P: its half grows by the prefix and FLAG_P - FLAG_A (= FLAG_A)
            vk.atomic_add_relaxed(pairs, pair_word(region, tile), vk.u64(prefix[0] + FLAG_A) << (32 * (tile & 1)))
    else:
        vk.atomic_add_relaxed(status, 0, 1)
    run[0] = vk.select(done[0], lookback[start + vk.lid()] + prefix[0], NOWHERE)


EDGE_WORDS = 2 * RADIX + 2  # ``edge_digits``: digits before the tile's start, digits after it, and two flags
OPEN_BEFORE, OPEN_AFTER = 2 * RADIX, 2 * RADIX + 1


@vk.func
def edge_digits(keys: Any, edge: Any, seg_base: Any, n: Any, shift: Annotated[int, vk.Const[int]]):
    """The last pass's keys are in order of their lower bits (below ``shift``), so equal keys are
    neighbours among the keys of their digit, and one run can cross into a tile only inside the
    block of keys whose lower bits equal those of the tile's first key, when the key before the
    tile is in that block too. Marks the digits of that block in the ``RADIX`` keys before the
    tile (``edge[d]``) and in its first ``RADIX`` keys (``edge[RADIX + d]``); ``edge[OPEN_BEFORE]``
    and ``edge[OPEN_AFTER]``: the block goes on past either window, so a digit marked on one side
    only may still be on the other (``count_runs`` then asks for a recount). Nothing is marked
    for tile 0 or where the key before the tile is in another block. ``edge`` starts zero (as all
    workgroup memory does) and is read after a later barrier: no barrier here, so the pass calls
    this right after loading its keys, the windows' loads in flight with theirs."""
    if seg_base != 0 and seg_base < n:  # workgroup-uniform: every branch below reads uniform words
        lower = keys[seg_base] & ((1 << shift) - 1)
        if (keys[seg_base - 1] & ((1 << shift) - 1)) == lower:
            w = keys[seg_base - RADIX + vk.lid()]
            if (w & ((1 << shift) - 1)) == lower:
                edge[w >> shift] = 1
            if seg_base + vk.lid() < n:
                w = keys[seg_base + vk.lid()]
                if (w & ((1 << shift) - 1)) == lower:
                    edge[RADIX + (w >> shift)] = 1
            if vk.lid() == 0:
                edge[OPEN_BEFORE] = vk.u32((keys[seg_base - RADIX] & ((1 << shift) - 1)) == lower)
                edge[OPEN_AFTER] = vk.u32(seg_base + (RADIX - 1) < n and (
                    keys[seg_base + (RADIX - 1)] & ((1 << shift) - 1)) == lower)


@vk.func
def count_runs(partial: Any, params: Any, edge: Any, repeats: Any, sorted_keys: Any, run: Any, own: Any, slot: Any,
               tile: Any, span_word: Annotated[int, vk.Const[int]], recount_word: Annotated[int, vk.Const[int]],
               copies: Annotated[int, vk.Const[int]]):
    """Invocation ``t`` adds the run starts among the tile's ``own`` keys of digit ``t`` (at output
    positions ``run[0]`` on, tile slots ``slot`` on) to segment ``position // span``'s word in copy
    ``tile % copies`` (``RUN_COUNT_COPIES``) of the counts in ``partial`` (``run_count_words``): the keys
    after the first that do not repeat the key before them (``own - 1 - repeats[t]``, counted by
    ``write_key``) and the first, unless the key before it in the output equals it
    (``edge_digits``: the digit is in the block before and after the tile's start). Where the
    windows cannot tell, it sets ``partial[recount_word]`` (the compaction then counts again).
    Keys across a segment boundary are counted slot by slot."""
    before = edge[vk.lid()] != 0
    after = edge[RADIX + vk.lid()] != 0
    if (edge[OPEN_BEFORE] != 0 and after and not before) or (edge[OPEN_AFTER] != 0 and before and not after):
        vk.atomic_or_relaxed(partial, params[recount_word], 1)
    first = vk.select(before and after, 0, 1)
    if own != 0 and run[0] != NOWHERE:
        span = params[span_word]
        segment = run[0] // span
        groups = params[recount_word]  # the tile's copy of the counts (``run_count_words``)
        copy = (groups + 1) + (tile % copies) * groups
        if segment == (run[0] + (own - 1)) // span:
            vk.atomic_add_relaxed(partial, copy + segment, (own - 1 - repeats[vk.lid()]) + first)
        else:  # rare: the digit's keys cross into the next segment
            c = vk.registers(vk.u32, 1)
            c[0] = first
            for i in range(vk.u32(1), own):
                if (run[0] + i) % span == 0:
                    vk.atomic_add_relaxed(partial, copy + ((run[0] + i) // span - 1), c[0])
                    c[0] = 0
                c[0] = c[0] + vk.u32(sorted_keys[slot + i] != sorted_keys[slot + (i - 1)])
            vk.atomic_add_relaxed(partial, copy + (run[0] + (own - 1)) // span, c[0])


@cache
def _radix_onesweep(shift: int, key_in: DataType | None, key_out: DataType | None, values: str, raw: DataType,
                    value_raw: DataType, drop_keys: bool = False, count_next: bool = False,
                    runs: bool = False) -> Kernel | KernelTemplate:
    """``radix_onesweep`` at ``shift``; its Const parameters: items per invocation, rounds per loop
    iteration (``SORT_ROUNDS``) and of the register tile, whether values are loaded and moved,
    keys in registers and ranks too, the early counts' batch, the params words of n and region,
    the wait's levels and trips, the look-back's width and whether it counts the next pass's digits
    (``count_next``, which also names it: a Const, so the other branch is not emitted), whether it
    counts run starts (``runs``), the params words of their segments' span and recount word,
    whether absent digits skip the look-back (``SKIP_EMPTY``) and the copies of the run counts
    (``RUN_COUNT_COPIES``). Knobs are Const values, so the specialisation cache keys on them."""
    pass_, passes = shift // RADIX_BITS, radix_passes(raw)
    start = lookback_starts(passes) + pass_ * RADIX
    next_start = start + RADIX  # the next pass's digit counts (``count_next``)
    parity, other = pass_ % 2, (pass_ + 1) % 2
    bits: Any = TYPE_NAMES[raw]  # element types (typed Any for type checkers, as Monoid.element is)
    value_bits: Any = TYPE_NAMES[value_raw]
    wide, first = raw is not U32, key_in is not None
    keys_in, keys_out_spec = BufferSpec(Access.READ, raw), BufferSpec(Access.READ_WRITE, raw)
    vals_in = BufferSpec(Access.READ, value_raw) if values == "load" else None
    vals_out_spec = BufferSpec(Access.READ_WRITE, value_raw) if values != "none" else None
    kin, bin_, past = key_kind(key_in), key_bits(key_in or raw), past_bits(key_in, raw)
    kout, bout = (KEYS_DROPPED, key_bits(raw)) if drop_keys else (key_kind(key_out), key_bits(key_out or raw))
    suffix = ("" if raw is U32 else f"{8 * raw.size}") + ("_indices" if drop_keys else "") + (
        "_next" if count_next else "") + ("_runs" if runs else "")
    partial_spec = BufferSpec(Access.READ_WRITE, U32) if runs else None

    @vk.kernel(workgroup_size=WG, name=f"lib_radix_onesweep{suffix}_{shift}", names={"shifts": "shift"})
    def onesweep(keys: Annotated[vk.In[vk.u32], keys_in], lookback: vk.InOut[vk.u32], pairs: vk.InOut[vk.u64],
                 keys_out: Annotated[vk.InOut[vk.u32], keys_out_spec], vals: Annotated[vk.In[vk.u32], vals_in],
                 vals_out: Annotated[vk.InOut[vk.u32], vals_out_spec], params: Annotated[vk.Uniform[vk.u32], PARAMS],
                 status: vk.InOut[vk.u32], items: vk.Const[int], rounds: vk.Const[int], key_rounds: vk.Const[int],
                 loads: Annotated[bool, vk.Const[bool]], moves: Annotated[bool, vk.Const[bool]],
                 in_registers: Annotated[bool, vk.Const[bool]], ranks_in_registers: Annotated[bool, vk.Const[bool]],
                 batch: vk.Const[int], n_word: vk.Const[int], region_word: vk.Const[int], levels: vk.Const[int],
                 trips: vk.Const[int], width: vk.Const[int], next_counts: Annotated[bool, vk.Const[bool]],
                 partial: Annotated[vk.InOut[vk.u32], partial_spec], runs: Annotated[bool, vk.Const[bool]],
                 span_word: vk.Const[int], recount_word: vk.Const[int],
                 skip_empty: Annotated[bool, vk.Const[bool]], copies: vk.Const[int]):
        counts = vk.shared(vk.u16, COUNTERS)  # one tile: one half of counters
        shifts = vk.shared(vk.u32, RADIX)
        sums = vk.shared(vk.u32, WARPS)
        if ranks_in_registers:
            ranks = None
        else:
            ranks = vk.shared(vk.u16, WG * items)
        sorted_keys = vk.shared(bits, WG * items)
        if moves:
            sorted_vals = vk.shared(value_bits, WG * items)
        else:
            sorted_vals = None
        tile_id = vk.shared(vk.u32, 1)
        hist = vk.shared(vk.u32, RADIX)  # the tile's count of each digit of this pass (or of the next: ``next_counts``)
        if runs:  # the digits at the tile's start edge (``edge_digits``)
            edge = vk.shared(vk.u32, EDGE_WORDS)
        else:
            edge = None
        o = vk.registers(bits, rounds)
        pos = vk.registers(vk.u32, rounds)
        run = vk.registers(vk.u32, 1)
        w = vk.registers(vk.u32, 2)
        done = vk.registers(vk.boolean, 1)  # the look-back's state
        prefix = vk.registers(vk.u32, 1)
        word = vk.registers(vk.u32, 1)
        n = params[n_word]
        if vk.lid() == 0:  # tiles are numbered in the order they start: every lower tile has started
            tile_id[0] = vk.atomic_add_relaxed(lookback, pass_, 1)
        vk.barrier()
        tile = tile_id[0]
        # digit t absent from the pass (its count, the step between two digit starts, is 0): read
        # here, so the look-back does not wait for the read (``SKIP_EMPTY``; not in the first pass,
        # where holding it cost 7 registers)
        absent = skip_empty and shift != 0 and vk.lid() != RADIX_MASK and lookback[start + vk.lid()] == lookback[
            start + min(vk.lid() + 1, RADIX_MASK)]
        seg_base = tile * (WG * items)
        limit = min(n, seg_base + WG * items)
        whole = limit == seg_base + WG * items  # all but the last tile
        if (tile & 1) == 0:  # the next pass's pair words of this tile and the one above
            pairs[pair_word(other * params[region_word], tile)] = vk.u64(0)
        if in_registers:  # each key read once, into registers
            k = vk.registers(bits, items)
            rk = vk.registers(vk.u32, items)
            saved = vk.registers(bits, key_rounds)
            saved_ranks = vk.registers(vk.u32, key_rounds)
            pv = vk.registers(value_bits, key_rounds)
            kbase = element_at(seg_base, vk.u32(0), items)
            valid = min(n, seg_base + WG * items) - min(n, seg_base)
            load_keys(keys, k, kbase, n, limit, whole, past, kin, bin_, items, first)
            if runs:
                edge_digits(keys, edge, seg_base, n, shift)
            own = 0
            if next_counts:  # the next pass's digits, counted while the keys are here (published after ranking)
                for j in range(items):
                    vk.atomic_add_relaxed(hist, digit(k[j], shift + RADIX_BITS, wide), 1)
            else:  # this pass's digits, published before ranking
                for j in range(items):
                    vk.atomic_add_relaxed(hist, digit(k[j], shift, wide), 1)
                vk.barrier()
                # keys past n (the all-ones key) counted as digit 255, taken off
                own = hist[vk.lid()] - vk.select(vk.lid() == RADIX_MASK, WG * items - valid, 0)
            region = parity * params[region_word]
            if not next_counts:
                publish(pairs, region, tile, own)
            half = 0
            if ranks_in_registers:
                for j in range(items):
                    rk[j] = 0
            if key_rounds == items:
                rank_keys(counts, ranks, k, rk, vk.u32(0), shift, wide, key_rounds, ranks_in_registers)
            else:
                for g in range(vk.u32(items // key_rounds)):
                    rank_keys(counts, ranks, k, rk, g * key_rounds, shift, wide, key_rounds, ranks_in_registers)
                    rotate(k, saved, items, key_rounds)
                    if ranks_in_registers:
                        rotate(rk, saved_ranks, items, key_rounds)
            vk.barrier()
            total = tile_count(counts, half, False, WARPS)
            if next_counts:  # the tile's count from the ranking's counters, published only now; the next
                # pass's counts added to its words (one global atomic per digit in the tile; keys past n
                # count as digit 255, whose count no digit's start includes)
                own = total - vk.select(vk.lid() == RADIX_MASK, WG * items - valid, 0)
                publish(pairs, region, tile, own)
                more = hist[vk.lid()]
                if more != 0:
                    vk.atomic_add_relaxed(lookback, next_start + vk.lid(), more)
            slot = tile_starts(counts, sums, w, total, half, WARPS)
            if key_rounds == items:
                place_keys(vals, counts, ranks, sorted_keys, sorted_vals, k, rk, pv, kbase, vk.u32(0), shift, wide,
                           key_rounds, rounds, loads, moves, ranks_in_registers)
            else:
                for h in range(vk.u32(items // key_rounds)):
                    place_keys(vals, counts, ranks, sorted_keys, sorted_vals, k, rk, pv, kbase, h * key_rounds, shift,
                               wide, key_rounds, rounds, loads, moves, ranks_in_registers)
                    rotate(k, saved, items, key_rounds)
                    if ranks_in_registers:
                        rotate(rk, saved_ranks, items, key_rounds)
            look_back(pairs, lookback, status, region, tile, own, run, done, prefix, word, absent, start, levels,
                      trips, width)
            shifts[vk.lid()] = run[0] - slot
            if runs:
                hist[vk.lid()] = 0  # the repeated keys of each digit (``write_key``)
            vk.barrier()
            write_out(sorted_keys, sorted_vals, shifts, keys_out, vals_out, o, pos, valid, whole, True, shift, wide,
                      kout, bout, items, rounds, moves, hist, runs)
            if runs:
                vk.barrier()  # the repeats counted in hist
                count_runs(partial, params, edge, hist, sorted_keys, run, own, slot, tile, span_word, recount_word,
                           copies)
        else:  # the tile read three times: counted, ranked, placed
            e = vk.registers(bits, batch)
            a = vk.registers(bits, rounds)  # the keys of the next loop iteration, and of the one after
            b = vk.registers(bits, rounds)
            cur = vk.registers(bits, rounds)
            p = vk.registers(bits, rounds)
            pv = vk.registers(value_bits, rounds)
            early_counts(keys, hist, e, seg_base, limit, whole, past, kin, bin_, shift, wide, items, batch)
            own = hist[vk.lid()]
            region = parity * params[region_word]
            publish(pairs, region, tile, own)
            load_group(keys, a, seg_base, vk.u32(0), n, limit, whole, past, items, rounds, True, True)
            load_group(keys, b, seg_base, vk.u32(1), n, limit, whole, past, items, rounds, True, True)
            for t in range(vk.u32(1)):
                tb = seg_base + t * (WG * items)
                valid = min(n, tb + WG * items) - min(n, tb)
                half = (t & 1) * 0
                rank_tile(keys, counts, ranks, a, b, cur, seg_base, t, n, limit, whole, past, half, kin, bin_, shift,
                          wide, items, rounds, True)
                total = tile_count(counts, half, False, WARPS)
                look_back(pairs, lookback, status, region, tile, own, run, done, prefix, word, absent, start,
                          levels, trips, width)
                tile_slots(counts, shifts, sums, w, run, total, half, False, WARPS)
                place_tile(keys, vals, counts, ranks, sorted_keys, sorted_vals, p, pv, tb, n, past, half, kin, bin_,
                           shift, wide, items, rounds, loads, moves)
                write_out(sorted_keys, sorted_vals, shifts, keys_out, vals_out, o, pos, valid, whole, True, shift,
                          wide, kout, bout, items, rounds, moves, shifts, False)

    return onesweep


@cache
def radix_onesweep(shift: int, key_in: DataType | None, key_out: DataType | None, values: str, items: int,
                   n_word: int, region_word: int, spin: tuple[int, int] = SPIN,
                   width: int = LOOKBACK_WIDTH, raw: DataType = U32, value_raw: DataType = U32,
                   registers: bool = ONESWEEP_KEYS_IN_REGISTERS, drop_keys: bool = False,
                   count_next: bool = False, runs: tuple[int, int] | None = None) -> Program:
    """One stable pass of LSD radix sort, one tile per workgroup, with decoupled look-back (Onesweep).

    Invocation 0 takes the tile id from pass ``p``'s counter ``lookback[p]``, so every lower tile
    has started. First the tile's digits are counted (``early_counts``) and invocation ``t``
    publishes the tile's count of digit ``t`` as ``count | FLAG_A`` (tile 0: ``count | FLAG_P``)
    in its half of a u64 pair word (``publish``). The tile is then ranked, placed and written as in ``radix_scatter``;
    before writing (keys in registers: after placing, when they no longer hold registers; else
    between ranking and placing), invocation ``t`` looks back over lower tiles, last first, adding
    their counts until one holds an inclusive prefix (``FLAG_P``); a word still 0 (not published
    yet) is read again. It then publishes ``(prefix + count) | FLAG_P`` and the
    tile's keys of digit ``t`` go to ``starts[t] + prefix + rank in tile``. A digit that no key of
    the pass has (``SKIP_EMPTY``; every pass but the first) is not looked back for. The wait is
    ``spin = (levels, trips)`` nested loops, at most ``trips**levels`` trips; if it runs out the
    digit's keys are not written (their positions are past 2^31) and ``status[0]`` counts the
    digit. Counts carry two flag bits, so ``n < 2^30``. Each even tile's workgroup zeroes its
    pair's words of the other region, which the next pass uses. A whole tile (``whole``: every
    tile but the last) reads and writes its keys without per-key tests, except in the place step.

    ``raw``: the keys' bits, U32 or U64 (64-bit keys: eight passes, shifts 0 to 56, and the
    ``lookback`` head of eight passes); ``value_raw``: the bits of loaded values (U32 or U64).
    ``registers``: read each key once, into registers, for the counts, ranking and place step
    (``vyre.lib._sort.registers``); else read the tile three times (the counts, the ranking and
    the place step each load it). ``drop_keys``: write the values only (the keys' binding stays,
    unwritten): an argsort's last pass, which needs the indices and not the keys.
    ``count_next``: count the tile's digits of the next pass instead of its own (keys in registers
    only) and add them to that pass's counts (``lookback[starts + 256*(p+1) + d]``, which
    ``radix_digit_starts`` then scans), so the histogram kernel need count only the first pass's
    digits; the tile's own counts are then the ranking's (``tile_count``), published after it.
    ``runs`` (the last pass of u32/i32 keys alone, keys in registers): ``(span_word,
    recount_word)``, the params words of a run-start compaction's segment span and recount
    word; the pass also adds the run starts of the sorted keys to that compaction's
    per-segment counts (the buffer ``partial``, zeroed; ``count_runs``), so the compaction need
    not read the keys to count them.
    """
    key_rounds = math.gcd(ONESWEEP_REGISTER_ROUNDS, items)
    if runs is not None and (not registers or raw is not U32 or values != "none" or drop_keys or count_next
                             or shift + RADIX_BITS != 32):
        raise ValueError("a single-pass radix pass counts run starts only as the last pass of 32-bit keys alone, "
                         "with its keys in registers")
    if count_next and (not registers or shift + RADIX_BITS >= 8 * raw.size):
        raise ValueError(f"a single-pass radix pass at shift {shift} counts the next pass's digits only with "
                         f"its keys in registers and below the last pass ({8 * raw.size} bits)")
    if registers:
        check_register_rounds(items, key_rounds)
    else:
        check_rounds(items)
        if items % EARLY_BATCH:
            raise ValueError(f"a single-pass radix tile's items ({items}) must be a multiple of EARLY_BATCH "
                             f"({EARLY_BATCH}), or its early counts would count keys of the next tile")
    # one template per kernel: the value bits only matter where values are loaded ("iota": u32 indices),
    # the last pass's key type where it transforms keys (the first pass's always reads raw bits)
    # keys dropped: one kernel for every key type (its IR would differ only in unused constants)
    kernel = _radix_onesweep(shift, key_in, None if drop_keys else transformed(key_out), values, raw,
                             value_raw if values == "load" else U32, drop_keys, count_next, runs is not None)
    return kernel.bind(items, SORT_ROUNDS, key_rounds, values == "load", values != "none", registers,
                       registers and ONESWEEP_RANKS_IN_REGISTERS, EARLY_BATCH, n_word, region_word, *spin,
                       width, count_next, runs is not None, *(runs or (0, 0)), SKIP_EMPTY, RUN_COUNT_COPIES).program
