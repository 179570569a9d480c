"""The radix tile shared by both sort plans, as ``@vk.func`` helpers of their kernels: digits, keys
past ``n``, peer masks, and the loading, ranking (``rank_tile``), counting and slots
(``tile_count``, ``tile_slots``), placing (``place_tile``) and writing (``write_out``) of a tile.

``wide``: the sorted keys' bits are U64 (64-bit keys: eight passes), else U32.
"""

from __future__ import annotations

from typing import Annotated, Any

from vyre.frontend import lang as vk
from vyre.frontend.annotations import BY_EXPRESSION
from vyre.ir import DataType
from vyre.lib.blocks import U32, WARPS, WG, exclusive_block_scan
from vyre.lib.keys import key_of, raw_of
from vyre.lib.monoid import COUNT

SORT_ROUNDS = 4     # rounds per loop iteration of the radix scatter (written out)
RADIX_BITS = 8
RADIX_PASSES = 32 // RADIX_BITS
RADIX = 1 << RADIX_BITS
RADIX_MASK = RADIX - 1
KEYS_DROPPED = -1  # the key kind of a pass that writes values only (argsort's last pass)
COUNTERS = WARPS * RADIX  # one half of a tile's digit counters: every warp's, of every digit


@vk.func
def digit(key: Annotated[Any, BY_EXPRESSION], shift: Annotated[int, vk.Const[int]],
          wide: Annotated[bool, vk.Const[bool]]):
    """The 8-bit digit of ``key`` (64 bits when ``wide``) at ``shift``, as U32."""
    return (vk.u32(key >> shift) if wide else key >> shift) & RADIX_MASK


def past_bits(key_type: DataType | None, raw: DataType = U32) -> int:
    """The raw bits of an element at or past ``n`` (``bits_or_past``): their sort key is all ones
    (digit 255 in every pass)."""
    ones = (1 << 8 * raw.size) - 1
    return ones if key_type in (None, U32, DataType.U64) else ones >> 1  # signed max; a float NaN


@vk.func
def bits_or_past(keys: Any, i: Annotated[Any, BY_EXPRESSION], n: Annotated[Any, BY_EXPRESSION],
                 limit: Annotated[Any, BY_EXPRESSION], past: Any):
    """The raw bits of ``keys[i]``, or ``past`` at or past ``n`` (not read at or past ``limit``)."""
    return vk.select(i < n, keys[vk.select(i < limit, i, 0xFFFFFFFF)], past)


@vk.func
def peers_of(d: Any, bits: Annotated[int, vk.Const[int]], bound: Annotated[bool, vk.Const[bool]]):
    """The lanes of this subgroup whose digit ``d`` is the same: a u32 lane mask, from one ballot
    per digit bit (of ``bits``). ``bound``: each bit's test and ballot bound once (PTX of one
    ballot per bit, not three tests and two ballots, which ptxas merges: the same machine code)."""
    m = 0xFFFFFFFF
    for bit in range(bits):
        if bound:
            has = (d & (1 << bit)) != 0
            votes = vk.subgroup_ballot(has)
            m = m & vk.select(has, votes, ~votes)
        else:
            m = m & vk.select((d & (1 << bit)) != 0, vk.subgroup_ballot((d & (1 << bit)) != 0),
                              ~vk.subgroup_ballot((d & (1 << bit)) != 0))
    return m


@vk.func
def element_at(base: Annotated[Any, BY_EXPRESSION], j: Annotated[Any, BY_EXPRESSION],
               items: Annotated[int, vk.Const[int]]):
    """Round ``j`` of this invocation in the tile at ``base``: warp ``v`` owns the ``32 * items``
    elements from ``v * 32 * items`` and takes them 32 at a time, so element order is warp, round, lane."""
    return base + ((vk.lid() >> 5) * (32 * items) + (j * 32 + vk.subgroup_local_id()))


@vk.func
def round_slot(h: Any, r: Annotated[int, vk.Const[int]], rounds: Annotated[int, vk.Const[int]]):
    """The tile slot of round ``r`` of loop iteration ``h`` (``rounds`` per iteration) of this invocation."""
    return (h * rounds + r) * WG + vk.lid()


@vk.func
def rank_of(counts: Any, key: Annotated[Any, BY_EXPRESSION], shift: Annotated[int, vk.Const[int]],
            half: Annotated[Any, BY_EXPRESSION], wide: Annotated[bool, vk.Const[bool]],
            bound: Annotated[bool, vk.Const[bool]]):
    """Step 1 for one round: the warp's lanes holding the sort key ``key``'s digit find each other
    (8 ballots) and add their number to the warp's counter of that digit (in the ``counts`` half
    from ``half``; no leader, branch or atomic); the key's rank among the warp's equal digits."""
    d = digit(key, shift, wide)
    peers = peers_of(d, RADIX_BITS, bound)
    old = counts[half + ((vk.lid() >> 5) * RADIX + d)]
    counts[half + ((vk.lid() >> 5) * RADIX + d)] = old + vk.popcount(peers)
    return old + vk.popcount(peers & ((1 << vk.subgroup_local_id()) - 1))


@vk.func
def tile_count(counts: Any, half: Annotated[Any, BY_EXPRESSION], halves: Annotated[bool, vk.Const[bool]],
               warps: Annotated[int, vk.Const[int]]):
    """Step 2's count of digit ``t`` in the tile: the ``warps`` warps' counters in the current half
    of ``counts`` (from ``half``); with ``halves``, the other half's counters zeroed."""
    total = 0
    for v in range(warps):
        total = total + counts[half + (v * RADIX + vk.lid())]
        if halves:
            counts[COUNTERS - half + (v * RADIX + vk.lid())] = 0
    return total


@vk.func
def warp_slots(counts: Any, slot: Any, half: Annotated[Any, BY_EXPRESSION], warps: Annotated[int, vk.Const[int]]):
    """Each warp's counter of digit ``t`` becomes its first slot in the tile, from ``slot`` (where
    digit ``t`` starts in the tile); counters read again rather than held in registers across the scan."""
    for v in range(warps):
        c = counts[half + (v * RADIX + vk.lid())]
        counts[half + (v * RADIX + vk.lid())] = slot
        slot = slot + c


@vk.func
def tile_slots(counts: Any, shifts: Any, sums: Any, w: Any, run: Any, total: Any,
               half: Annotated[Any, BY_EXPRESSION], running: Annotated[bool, vk.Const[bool]],
               warps: Annotated[int, vk.Const[int]]):
    """The rest of step 2, after ``tile_count`` (and a look-back): a workgroup scan over digits gives where digit ``t``
    starts in the tile; ``shifts[t]`` moves a tile slot to its output position (from ``run[0]``,
    which goes on by ``total`` when ``running``); each warp's counter becomes its first slot."""
    start = exclusive_block_scan(total, sums, w, COUNT)
    shifts[vk.lid()] = run[0] - start
    if running:
        run[0] = run[0] + total
    warp_slots(counts, start, half, warps)
    vk.barrier()


@vk.func
def tile_starts(counts: Any, sums: Any, w: Any, total: Any, half: Annotated[Any, BY_EXPRESSION],
                warps: Annotated[int, vk.Const[int]]):
    """``tile_slots`` before the look-back: where digit ``t`` starts in the tile (returned; its
    ``shifts`` word is written once the look-back has found ``run``), each warp's counter its first slot."""
    start = exclusive_block_scan(total, sums, w, COUNT)
    warp_slots(counts, start, half, warps)
    vk.barrier()
    return start


@vk.func
def write_key(sorted_keys: Any, shifts: Any, keys_out: Any, o: Any, pos: Any, h: Any,
              r: Annotated[int, vk.Const[int]], rounds: Annotated[int, vk.Const[int]], valid: Any,
              checked: Annotated[bool, vk.Const[bool]], shift: Annotated[int, vk.Const[int]],
              wide: Annotated[bool, vk.Const[bool]], kind: Annotated[int, vk.Const[int]], b: Any,
              repeats: Any, runs: Annotated[bool, vk.Const[bool]]):
    """Step 4 for round ``r``: read slot ``round_slot(h, r)`` of the placed tile into ``o[r]`` and
    write it (its raw bits: ``kind``, ``b``) to ``slot + shifts[digit]``, ``pos[r]``; ``checked``:
    not at or past ``valid``. ``kind`` ``KEYS_DROPPED``: the position only (an argsort's last pass
    writes the indices, not the keys). ``runs``: a key equal to the one in the slot before it (so
    of the same digit) starts no run: counted in ``repeats[digit]``, from which
    ``onesweep.count_runs`` finds the run starts (on full-range keys such repeats are few, so few
    workgroup atomics)."""
    o[r] = sorted_keys[round_slot(h, r, rounds)]
    if checked:
        pos[r] = vk.select(round_slot(h, r, rounds) < valid,
                           round_slot(h, r, rounds) + shifts[digit(o[r], shift, wide)], 0xFFFFFFFF)
    else:
        pos[r] = round_slot(h, r, rounds) + shifts[digit(o[r], shift, wide)]
    if kind != KEYS_DROPPED:
        keys_out[pos[r]] = raw_of(o[r], kind, b)
    if runs and r != 0:  # a slot past the first round's: the one before it is in the tile
        if (not checked or round_slot(h, r, rounds) < valid) and sorted_keys[round_slot(h, r, rounds) - 1] == o[r]:
            vk.atomic_add_relaxed(repeats, digit(o[r], shift, wide), 1)
    elif runs:
        before = sorted_keys[vk.select(round_slot(h, r, rounds) == 0, 0, round_slot(h, r, rounds) - 1)]
        if (not checked or round_slot(h, r, rounds) < valid) and round_slot(h, r, rounds) != 0 and before == o[r]:
            vk.atomic_add_relaxed(repeats, digit(o[r], shift, wide), 1)


@vk.func
def load_group(keys: Any, dst: Any, seg_base: Any, q: Annotated[Any, BY_EXPRESSION], n: Any, limit: Any,
               whole: Annotated[Any, BY_EXPRESSION], past: Any, items: Annotated[int, vk.Const[int]],
               rounds: Annotated[int, vk.Const[int]], one_tile: Annotated[bool, vk.Const[bool]],
               declare: Annotated[bool, vk.Const[bool]]):
    """``dst[r]``: the raw bits of round ``r`` of loop iteration ``q`` (``bits_or_past``). Over a
    segment (``seg_base``, ``items // rounds`` iterations per tile), or with ``one_tile`` the tile
    at ``seg_base``, whose iterations past it (loaded ahead) are not read, and which a ``whole``
    tile reads without tests (then ``declare``: the registers are declared first)."""
    if one_tile:
        if declare:
            for r in range(rounds):
                dst[r] = past
        if whole and q < items // rounds:
            for r in range(rounds):
                dst[r] = keys[element_at(seg_base, q * rounds + r, items)]
        else:
            for r in range(rounds):
                dst[r] = bits_or_past(keys, element_at(seg_base, q * rounds + r, items), n,
                                      vk.select(q < items // rounds, limit, 0), past)
    else:
        for r in range(rounds):
            dst[r] = bits_or_past(keys, element_at(seg_base + q // (items // rounds) * (WG * items),
                                                   q % (items // rounds) * rounds + r, items), n, limit, past)


@vk.func
def rank_tile(keys: Any, counts: Any, ranks: Any, a: Any, b: Any, cur: Any, seg_base: Any, t: Any, n: Any,
              limit: Any, whole: Annotated[Any, BY_EXPRESSION], past: Any, half: Any,
              kind: Annotated[int, vk.Const[int]], bk: Any, shift: Annotated[int, vk.Const[int]],
              wide: Annotated[bool, vk.Const[bool]], items: Annotated[int, vk.Const[int]],
              rounds: Annotated[int, vk.Const[int]], one_tile: Annotated[bool, vk.Const[bool]]):
    """Step 1 of tile ``t``: rank its keys (sort keys of kind ``kind``, ``bk``), ``rounds`` per loop
    iteration, the ranks into ``ranks``; the raw bits of the next two iterations wait in ``a`` and
    ``b`` (``load_group``), so loads run two iterations ahead."""
    for g in range(vk.u32(items // rounds)):
        for r in range(rounds):
            cur[r] = a[r]
        for r in range(rounds):
            a[r] = b[r]
        load_group(keys, b, seg_base, t * (items // rounds) + g + 2, n, limit, whole, past, items, rounds, one_tile,
                   False)
        for r in range(rounds):
            ranks[round_slot(g, r, rounds)] = rank_of(counts, key_of(cur[r], kind, bk), shift, half, wide, False)
    vk.barrier()


@vk.func
def place_tile(keys: Any, vals: Any, counts: Any, ranks: Any, sorted_keys: Any, sorted_vals: Any, p: Any, pv: Any,
               tb: Any, n: Any, past: Any, half: Any, kind: Annotated[int, vk.Const[int]], bk: Any,
               shift: Annotated[int, vk.Const[int]], wide: Annotated[bool, vk.Const[bool]],
               items: Annotated[int, vk.Const[int]],
               rounds: Annotated[int, vk.Const[int]], loads: Annotated[bool, vk.Const[bool]],
               moves: Annotated[bool, vk.Const[bool]]):
    """Step 3 of the tile at ``tb``: its keys read again (just read, so from cache) and values
    (loaded, or the index) stored at their tile slots, ``rounds`` per loop iteration."""
    for h in range(vk.u32(items // rounds)):
        for r in range(rounds):  # a whole-tile branch here measured slower
            p[r] = bits_or_past(keys, element_at(tb, h * rounds + r, items), n, n, past)
        if loads:
            for r in range(rounds):
                pv[r] = vals[element_at(tb, h * rounds + r, items)]
        for r in range(rounds):
            k = key_of(p[r], kind, bk)
            s = counts[half + ((vk.lid() >> 5) * RADIX + digit(k, shift, wide))] + ranks[round_slot(h, r, rounds)]
            sorted_keys[s] = k
            if moves:
                sorted_vals[s] = pv[r] if loads else element_at(tb, h * rounds + r, items)
    vk.barrier()


@vk.func
def write_rounds(sorted_keys: Any, sorted_vals: Any, shifts: Any, keys_out: Any, vals_out: Any, o: Any, pos: Any,
                 h: Any, valid: Any, checked: Annotated[bool, vk.Const[bool]], shift: Annotated[int, vk.Const[int]],
                 wide: Annotated[bool, vk.Const[bool]], kind: Annotated[int, vk.Const[int]], b: Any,
                 rounds: Annotated[int, vk.Const[int]], moves: Annotated[bool, vk.Const[bool]], repeats: Any,
                 runs: Annotated[bool, vk.Const[bool]]):
    """Step 4 for loop iteration ``h``: ``write_key`` of each round, and its value."""
    for r in range(rounds):
        write_key(sorted_keys, shifts, keys_out, o, pos, h, r, rounds, valid, checked, shift, wide, kind, b, repeats,
                  runs)
        if moves:
            vals_out[pos[r]] = sorted_vals[round_slot(h, r, rounds)]


@vk.func
def write_out(sorted_keys: Any, sorted_vals: Any, shifts: Any, keys_out: Any, vals_out: Any, o: Any, pos: Any,
              valid: Any, whole: Annotated[Any, BY_EXPRESSION], one_tile: Annotated[bool, vk.Const[bool]],
              shift: Annotated[int, vk.Const[int]], wide: Annotated[bool, vk.Const[bool]],
              kind: Annotated[int, vk.Const[int]], b: Any, items: Annotated[int, vk.Const[int]],
              rounds: Annotated[int, vk.Const[int]], moves: Annotated[bool, vk.Const[bool]], repeats: Any,
              runs: Annotated[bool, vk.Const[bool]]):
    """Step 4: invocation ``t`` writes slots ``j*WG + t`` of the placed tile to ``slot + shifts[digit]``
    (values too), none at or past ``valid``; with ``one_tile``, a ``whole`` tile without that test.
    ``runs``: the repeated keys of each digit counted in ``repeats`` (``write_key``)."""
    for h in range(vk.u32(items // rounds)):
        for r in range(rounds):
            o[r] = 0
            pos[r] = 0
        if one_tile:
            if whole:
                write_rounds(sorted_keys, sorted_vals, shifts, keys_out, vals_out, o, pos, h, valid, False, shift,
                             wide, kind, b, rounds, moves, repeats, runs)
            else:
                write_rounds(sorted_keys, sorted_vals, shifts, keys_out, vals_out, o, pos, h, valid, True, shift,
                             wide, kind, b, rounds, moves, repeats, runs)
        else:
            write_rounds(sorted_keys, sorted_vals, shifts, keys_out, vals_out, o, pos, h, valid, True, shift, wide,
                         kind, b, rounds, moves, repeats, runs)


def radix_passes(raw: DataType) -> int:
    """The 8-bit digit passes of keys whose bits are ``raw`` (4 for U32, 8 for U64)."""
    return 8 * raw.size // RADIX_BITS


def check_rounds(items: int) -> None:
    """Refuse ``items`` keys per invocation that ``SORT_ROUNDS`` (the rounds written out per loop
    iteration of the place and write steps) does not divide."""
    if items % SORT_ROUNDS:
        raise ValueError(f"a radix tile's items ({items}) must be a multiple of SORT_ROUNDS ({SORT_ROUNDS})")
