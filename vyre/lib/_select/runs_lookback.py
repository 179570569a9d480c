"""The single-pass run-length encoding (decoupled look-back): each workgroup takes one tile of the
input, finds its run starts, and learns from the tiles below it how many runs they hold and where
the last of them starts, so each run's value and length go out in one read of the input.

Written as a ``@vk.kernel`` (a cached factory per run-start predicate, whose ``Const``
parameters are the items per invocation, the params words, the wait's spin and the look-back's
window), on the look-back words of the single-pass scan (``vyre.lib._scan.lookback``).
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any

from vyre.frontend import lang as vk
from vyre.frontend.annotations import TYPE_NAMES, BufferSpec
from vyre.frontend.kernel import Kernel
from vyre.frontend.template import KernelTemplate
from vyre.ir import Program
from vyre.ir.program import Access
from vyre.lib._scan.lookback import (
    MAX_U32,
    SCAN_AGGREGATE,
    SCAN_LOOKBACK_WIDTH,
    SCAN_PREFIX,
    SCAN_SPIN,
    SCAN_STATE_HEAD,
    publish,
    spin_read,
    spin_wait,
    state_word,
)
from vyre.lib._select.kernels import Predicate, keep_float_run_start, keep_run_start
from vyre.lib.blocks import PARAMS, WARPS, WG, block_reduce, warp_butterfly, warp_inclusive_scan_of, warp_sum
from vyre.lib.monoid import COUNT, FLOAT_TYPES

#: elements per invocation: 32-bit keys 16 (tile 4096; H200, 2^28 u32: 8 took 1.45 ms a call, 16
#: 1.23 ms); 64-bit keys 8 (their values in workgroup memory take twice the bytes; not timed)
RUNS_LOOKBACK_ITEMS, RUNS_LOOKBACK_ITEMS_64 = 16, 8
#: lower tiles whose words the workgroup reads at once, one per invocation (H200, `unique` of 2^28
#: u32: 8 6.40 ms, 16 6.23, 32 6.12, 64 6.14-6.16, 128 6.18, 256 6.37)
RUNS_LOOKBACK_WINDOW = 32
#: the look-back words' regions: tile totals of run starts, then the tiles' last run start + 1
#: (0: none; a maximum, since run starts grow with the tile), each ``2 * T`` slots (two sets)
LAST_REGION = 2


def state_words(tiles: int) -> int:
    """Words of the ``state`` buffer of a grid of ``tiles`` tiles: the head, two regions of two sets."""
    return SCAN_STATE_HEAD + 2 * 2 * 2 * tiles


def items_of(pred: Predicate) -> int:
    """Elements per invocation of ``runs_lookback`` for ``pred``'s key width."""
    return RUNS_LOOKBACK_ITEMS_64 if pred.dtype.size == 8 else RUNS_LOOKBACK_ITEMS


@cache
def _runs_lookback(pred: Predicate) -> Kernel | KernelTemplate:
    """The single-pass run-length encoding of ``pred`` (run starts); its Const parameters: items
    per invocation and the counts each lane holds (``items * WARPS // 32``), the params words of n
    and of the grid, the wait's levels and trips, the window."""
    if pred.kind != "run_start":
        raise ValueError(f"runs_lookback takes run starts, not {pred.kind}")
    value: Any = TYPE_NAMES[pred.value_type()]  # a vk type to the front end
    xs, outs = BufferSpec(Access.READ, pred.value_type()), BufferSpec(Access.READ_WRITE, pred.value_type())
    keep = keep_float_run_start if pred.dtype in FLOAT_TYPES else keep_run_start
    name = "lib_rle_lookback" + ("_64" if pred.dtype.size == 8 else "")

    @vk.kernel(workgroup_size=WG, name=name)
    def runs(x: Annotated[vk.In[vk.u32], xs], out: Annotated[vk.InOut[vk.u32], outs], lengths: vk.InOut[vk.u32],
             count: vk.InOut[vk.u32], state: vk.InOut[vk.u32], params: Annotated[vk.Uniform[vk.u32], PARAMS],
             items: vk.Const[int], per_lane: vk.Const[int], n_word: vk.Const[int], tiles_word: vk.Const[int],
             levels: vk.Const[int], trips: vk.Const[int], window: vk.Const[int]):
        counts = vk.shared(vk.u32, items * WARPS)  # run starts per (warp, round) of the tile
        # the tile, its set's first slot; then the runs below the tile, and their last start + 1
        tile_id = vk.shared(vk.u32, 4)
        starts = vk.shared(vk.u32, items * WG)  # the tile's run starts and their values, by rank in the tile
        values = vk.shared(value, items * WG)
        keys = vk.shared(vk.u32, WARPS)  # the look-back's four workgroup reductions
        sums = vk.shared(vk.u32, WARPS)
        last_keys = vk.shared(vk.u32, WARPS)
        lasts = vk.shared(vk.u32, WARPS)
        if vk.lid() == 0:  # tiles are numbered in the order they start: every lower tile has started
            ticket = vk.atomic_add_relaxed(state, 0, 1)
            tile_id[0] = ticket % params[tiles_word]
            tile_id[1] = ((ticket // params[tiles_word]) & 1) * params[tiles_word]
            # this tile's slots of the other set, in both regions: the next call's start at zero
            other = (params[tiles_word] - tile_id[1]) + tile_id[0]
            state[state_word(other, 0)] = 0
            state[state_word(other, 1)] = 0
            state[state_word(other + LAST_REGION * params[tiles_word], 0)] = 0
            state[state_word(other + LAST_REGION * params[tiles_word], 1)] = 0
        vk.barrier()
        tile = tile_id[0]
        base = tile_id[1]
        tb = tile * (items * WG)
        past_n = tb >= params[n_word]  # no runs, nothing to write, no tile reads its words
        last_base = base + LAST_REGION * params[tiles_word]
        # warp w's 32 * items elements are contiguous, round k's 32 of them coalesced: its counts are
        # entries w * items + k, whose order is the elements'; lane l holds per_lane of them, from l * per_lane
        xv = vk.registers(value, items)  # element k of the invocation: its value, and its warp's ballot of run starts
        v = vk.registers(vk.u32, items)
        pc = vk.registers(vk.u32, per_lane)  # the tile's counts this lane holds, and their exclusive prefixes
        pe = vk.registers(vk.u32, per_lane)
        first_i = tb + (vk.lid() >> 5) * (32 * items) + vk.subgroup_local_id()  # element 0's index; k's is 32k on
        for k in range(items):
            xv[k] = x[first_i + k * 32]
            v[k] = vk.subgroup_ballot(first_i + k * 32 < params[n_word] and keep(x, x, x, first_i + k * 32, xv[k],
                                                                                 pred))
            if vk.subgroup_local_id() == 0:
                counts[(vk.lid() >> 5) * items + k] = vk.popcount(v[k])
        vk.barrier()
        # every warp scans all the counts: no second barrier
        for j in range(per_lane):
            pc[j] = counts[vk.subgroup_local_id() * per_lane + j]
        psum = pc[0]
        for j in range(1, per_lane):
            psum = psum + pc[j]
        scanned = warp_inclusive_scan_of(psum, COUNT)
        pe[0] = scanned - psum
        for j in range(1, per_lane):
            pe[j] = pe[j - 1] + pc[j - 1]
        ptotal = vk.subgroup_shuffle(scanned, 31)
        if vk.lid() == 0:  # the tile's run starts (tile 0: an inclusive prefix), before anything else
            publish(state, base + tile, vk.select(tile == 0, SCAN_PREFIX, SCAN_AGGREGATE) << 16, ptotal)
        if vk.lid() == 32 and ptotal == 0:  # no run starts here: the last start below comes from lower tiles
            publish(state, last_base + tile, SCAN_AGGREGATE << 16, 0)
        for k in range(items):
            # entry w * items + k: lane (w * items + k) // per_lane, its pe[k % per_lane] (items = 4 * per_lane)
            r = vk.subgroup_shuffle(pe[k % per_lane], (vk.lid() >> 5) * 4 + k // per_lane) + vk.popcount(
                v[k] & ((1 << vk.subgroup_local_id()) - 1))
            if (v[k] >> vk.subgroup_local_id()) & 1 != 0:
                starts[r] = first_i + k * 32
                values[r] = xv[k]
                if r + 1 == ptotal:  # the tile's last run start is the last of every tile up to it
                    publish(state, last_base + tile, SCAN_PREFIX << 16, (first_i + k * 32) + 1)
        last_tile = not past_n and tb + items * WG >= params[n_word]  # holds element n - 1
        # invocation j reads the words of tile ``tile - 1 - j`` in both regions, all at once: the
        # nearest inclusive prefix and the totals above it give the runs below and their last start
        mine = vk.lid() < window and vk.lid() < tile and not past_n
        lower = vk.select(mine, tile - 1 - vk.lid(), 0)
        got = vk.registers(vk.boolean, 1)  # the runs' word
        total = vk.registers(vk.u32, 1)
        flag = vk.registers(vk.u32, 1)
        got_last = vk.registers(vk.boolean, 1)  # the last start's word
        total_last = vk.registers(vk.u32, 1)
        flag_last = vk.registers(vk.u32, 1)
        got[0] = not mine
        got_last[0] = not mine or (ptotal == 0 and not last_tile)  # no run ends in this tile: no last start needed
        total[0] = 0
        total_last[0] = 0
        flag[0] = 0
        flag_last[0] = 0
        spin_read(state, base + lower, got, total, flag, COUNT, levels, trips)
        spin_read(state, last_base + lower, got_last, total_last, flag_last, MAX_U32, levels, trips)
        # the nearest tile holding an inclusive prefix, plus one (0: none in the window), bit 31 if a wait ran out
        near = block_reduce(vk.select(mine and not got[0], 0x80000000,
                                      vk.select(mine and flag[0] == SCAN_PREFIX, lower + 1, 0)), keys, MAX_U32,
                            warp_butterfly)
        runs_below = block_reduce(vk.select(mine and lower + 1 >= near, total[0], 0), sums, COUNT, warp_sum)
        near_last = block_reduce(vk.select(not got_last[0], 0x80000000,
                                           vk.select(flag_last[0] == SCAN_PREFIX, lower + 1, 0)),
                                 last_keys, MAX_U32, warp_butterfly)
        last_below = block_reduce(total_last[0], lasts, MAX_U32, warp_butterfly)  # last starts grow with the tile
        if vk.lid() == 0:  # the runs below: past the window, invocation 0 walks on (a wait that runs out: it counts)
            done = vk.registers(vk.boolean, 1)
            below = vk.registers(vk.u32, 1)
            prefix = vk.registers(vk.u32, 1)
            done[0] = tile == 0 or past_n or near != 0
            below[0] = (tile - 1) - window  # the nearest tile not yet taken
            prefix[0] = runs_below
            spin_wait(state, base, done, below, prefix, COUNT, levels, trips, SCAN_LOOKBACK_WIDTH)
            if near >= 0x80000000 or not done[0]:  # count the run starts of the tiles below (and count that)
                prefix[0] = 0
                for j in range(tb):
                    if keep(x, x, x, j, x[j], pred):
                        prefix[0] = prefix[0] + 1
                vk.atomic_add_relaxed(state, 1, 1)
            if not tile == 0 and not past_n:
                publish(state, base + tile, SCAN_PREFIX << 16, prefix[0] + ptotal)
            tile_id[2] = prefix[0]
        if vk.lid() == 32:  # the same for the last run start below (a maximum)
            found = vk.registers(vk.boolean, 1)
            lowest = vk.registers(vk.u32, 1)
            last = vk.registers(vk.u32, 1)
            found[0] = tile == 0 or past_n or near_last != 0 or (ptotal == 0 and not last_tile)
            lowest[0] = (tile - 1) - window
            last[0] = last_below
            spin_wait(state, last_base, found, lowest, last, MAX_U32, levels, trips, SCAN_LOOKBACK_WIDTH)
            if near_last >= 0x80000000 or not found[0]:
                for j in range(tb):
                    if keep(x, x, x, j, x[j], pred):
                        last[0] = j + 1
                vk.atomic_add_relaxed(state, 1, 1)
            tile_id[3] = last[0]
        vk.barrier()
        first = tile_id[2]
        for k in range(items):  # run k*WG + t of the tile: its value, and its length when the next starts here
            if k * WG + vk.lid() < ptotal:
                out[first + (k * WG + vk.lid())] = values[k * WG + vk.lid()]
                if (k * WG + vk.lid()) + 1 < ptotal:
                    lengths[first + (k * WG + vk.lid())] = starts[(k * WG + vk.lid()) + 1] - starts[k * WG + vk.lid()]
        if vk.lid() == 0:
            if ptotal != 0 and not tile == 0:  # the run before the tile's first ends there
                lengths[first - 1] = starts[0] - (tile_id[3] - 1)
            if last_tile:  # the last run ends at n; the tile holding n - 1 writes the total
                count[0] = first + ptotal
                lengths[(first + ptotal) - 1] = params[n_word] - vk.select(ptotal != 0, starts[ptotal - 1],
                                                                            tile_id[3] - 1)

    return runs


@cache
def runs_lookback(pred: Predicate, n_word: int, tiles_word: int, items: int | None = None,
                  spin: tuple[int, int] = SCAN_SPIN, window: int = RUNS_LOOKBACK_WINDOW) -> Program:
    """Run-length encoding of ``x[0:n]`` in one pass: the first value of each run into
    ``out[rank]``, its length into ``lengths[rank]``, the number of runs into ``count[0]``.

    One tile per workgroup, taken by ticket as in ``scan_lookback`` (``T``, the grid in params word
    ``tiles_word``, a power of two; ``state``: ``state_words(T)`` words, zero when allocated, never
    zero-filled again). Warp ``w`` loads its ``32 * items`` contiguous elements of the tile, 32 a
    round; an element is a run start unless it equals the one before it. A ballot per round and
    the (warp, round) counts rank each start in the tile; the tile publishes its number of starts
    and, when it has one, its last start + 1 as an inclusive prefix of the second region (a
    maximum: later tiles' starts are larger), and its starts and their values go to workgroup
    memory by rank. Invocation ``j < window`` reads both words of tile ``tile - 1 - j`` (waiting
    only until each is published); workgroup reductions find the nearest inclusive prefix of each
    region and combine it with the totals above it. Past the window, invocations 0 and 32 walk on
    as the scan does. The tile publishes its inclusive count, then writes each run's value and,
    when the next run starts in the tile, its length; its first start ends the run before it, and
    the tile holding element ``n - 1`` ends the last run at ``n`` and writes the count. A wait that
    runs out counts the run starts below the tile itself (and adds 1 to ``state[1]``), so the
    result never depends on another workgroup. ``items``: ``items_of(pred)`` unless given.
    """
    items = items_of(pred) if items is None else items
    return _runs_lookback(pred).bind(items, items * WARPS // 32, n_word, tiles_word, *spin, window).program
