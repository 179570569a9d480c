"""The single-pass scan (decoupled look-back): U32 and I32 scans of more than one workgroup's tile,
written as a ``@vk.kernel`` (a cached factory per monoid, inclusive or exclusive, with or without
an init value, whose ``Const`` parameters are the items per invocation, the params words, the
wait's spin and the look-back's width)."""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any

from vyre.frontend import lang as vk
from vyre.frontend.annotations import BY_EXPRESSION, BufferSpec
from vyre.frontend.kernel import Kernel
from vyre.frontend.template import KernelTemplate
from vyre.ir import DataType, Program
from vyre.ir.program import Access
from vyre.lib._scan.kernels import init_spec, striped, striped_value
from vyre.lib.blocks import (
    PARAMS,
    WARPS,
    WG,
    block_reduce,
    fold_warps_to,
    identity,
    warp_butterfly,
    warp_inclusive_scan_of,
    warp_reducer,
)
from vyre.lib.monoid import Monoid, monoid

# The ``state`` buffer of ``scan_lookback`` (zero when allocated, never zero-filled again): word 0
# hands out tickets, never reset: ticket ``k`` is tile ``k % T`` of call ``k // T`` (``T``, the grid,
# a power of two). Calls alternate between two sets of tile words by the parity of ``k // T``:
# tile ``t``'s 32-bit total lives in words ``2 + 2s`` (low half) and ``3 + 2s`` (high half) of slot
# ``s = parity * T + t``, each ``flag << 16 | half``, so each word carries its own flag and relaxed
# atomics suffice; each tile zeroes its slot of the other set, which the next call uses. Word 1
# counts waits that ran out.
SCAN_STATE_HEAD = 2
SCAN_AGGREGATE, SCAN_PREFIX = 1, 2  # the flag of a tile's own total / of the total of it and every lower tile
SCAN_SPIN = (6, 16)  # the look-back's wait: at most 16**6 trips, then it folds the input below instead
SCAN_LOOKBACK_ITEMS = 32  # elements per invocation of the single-pass scan (tile 8192; 8 and 16 measured slower)
#: capacity classes from SCAN_SMALL_FROM to SCAN_SMALL_UP_TO take SCAN_SMALL_ITEMS (tile 2048): four times the
#: workgroups, where 32 leaves most SMs idle (H200, device span: 2^16 5.4 -> 3.5 us, 2^18 5.6 -> 4.1; 2^20 stays
#: at 32: 6.3 against 9.7 at 8 and 7.2 at 16; below 2^16 not measured)
SCAN_SMALL_ITEMS, SCAN_SMALL_FROM, SCAN_SMALL_UP_TO = 8, 1 << 16, 1 << 18
SCAN_LOOKBACK_WIDTH = 4  # tiles whose totals one look-back trip reads together
MAX_U32 = monoid("max", DataType.U32)  # the wide look-back's search for the nearest inclusive prefix
#: grids from this many tiles up to WG read every lower tile's total at once (``wide``); below it the
#: walk is a trip or two and the wide form's two workgroup reductions cost more (H200: 2^16, 8 tiles,
#: 5.1 -> 5.4 us; 2^17, 16 tiles, 5.8 -> 5.6; 2^20 8.1 -> 6.5)
WIDE_FROM = 16


@vk.func
def state_word(slot: Any, half: Annotated[int, vk.Const[int]]):
    """The ``state`` word of slot ``slot``'s total holding its low (``half`` 0) or high 16 bits."""
    return (SCAN_STATE_HEAD + half) + slot * 2


@vk.func
def state_word_below(base: Any, below: Any, k: Annotated[int, vk.Const[int]], half: Annotated[int, vk.Const[int]]):
    """``state_word`` of tile ``below - k`` in the set at slot ``base`` (tile 0 past the bottom:
    read, never taken)."""
    return (SCAN_STATE_HEAD + half) + (base + vk.select(below >= k, below - k, 0)) * 2


@vk.func
def published(lo: Any, hi: Any):
    """Whether a total read as words ``lo``, ``hi`` was published whole: both halves carry the
    same non-zero flag (a pair torn by a later publish, or not yet written, is not)."""
    return (lo >> 16) != 0 and (lo >> 16) == (hi >> 16)


@vk.func
def total_of(lo: Any, hi: Any, m: Any):
    """The total a published pair of words holds, as ``m``'s element."""
    return m.element((lo & 0xFFFF) | (hi << 16))


@vk.func
def publish(state: Any, slot: Annotated[Any, BY_EXPRESSION], flag_bits: Annotated[Any, BY_EXPRESSION],
            total: Annotated[Any, BY_EXPRESSION]):
    """Publish ``total`` in slot ``slot`` with its flag (``flag_bits``: the flag already shifted to
    bit 16): two relaxed exchanges, ``flag << 16 | half``, low half first."""
    vk.atomic_exchange_relaxed(state, state_word(slot, 0), flag_bits | (vk.u32(total) & 0xFFFF))
    vk.atomic_exchange_relaxed(state, state_word(slot, 1), flag_bits | (vk.u32(total) >> 16))


@vk.func
def look_back_trip(state: Any, base: Any, done: Any, below: Any, prefix: Any, m: Any,
                   width: Annotated[int, vk.Const[int]]):
    """One trip of the look-back: read the totals of tile ``below[0]`` and the ``width - 1`` tiles
    under it at once (one memory latency), then take them nearest first, up to the first one not
    published yet (read again next trip: a word of the other half or flag, torn by a later
    publish, counts as not published) or holding an inclusive prefix (then ``done[0]``)."""
    go = True
    lo = vk.registers(vk.u32, width)
    hi = vk.registers(vk.u32, width)
    for k in range(width):
        lo[k] = vk.atomic_or_relaxed(state, state_word_below(base, below[0], k, 0), 0)
        hi[k] = vk.atomic_or_relaxed(state, state_word_below(base, below[0], k, 1), 0)
    for k in range(width):
        took = go and published(lo[k], hi[k])
        last = (lo[k] >> 16) == SCAN_PREFIX
        if took:
            prefix[0] = m.apply(total_of(lo[k], hi[k], m), prefix[0])
            below[0] = below[0] - 1
            done[0] = last
        go = took and not last


@vk.func
def spin_wait(state: Any, base: Any, done: Any, below: Any, prefix: Any, m: Any,
              levels: Annotated[int, vk.Const[int]], trips: Annotated[int, vk.Const[int]],
              width: Annotated[int, vk.Const[int]]):
    """``look_back_trip`` until ``done[0]``, at most ``trips ** levels`` times: ``levels`` nested
    loops of ``trips`` (loops have no ``break``), each trip guarded by ``if not done[0]``, so a
    backend may leave the loops once it holds: ``cuda`` stops a loop whose one statement is such a
    guard at the first trip that finds it false."""
    for _ in range(vk.u32(trips)):
        if not done[0]:
            if levels == 1:
                look_back_trip(state, base, done, below, prefix, m, width)
            else:
                spin_wait(state, base, done, below, prefix, m, levels - 1, trips, width)


@vk.func
def read_total(state: Any, slot: Any, got: Any, total: Any, flag: Any, m: Any):
    """One read of slot ``slot``'s total: when both halves carry the same non-zero flag, ``got[0]``,
    the total in ``total[0]`` and its flag in ``flag[0]`` (a torn or unpublished word: read again)."""
    lo = vk.atomic_or_relaxed(state, state_word(slot, 0), 0)
    hi = vk.atomic_or_relaxed(state, state_word(slot, 1), 0)
    if published(lo, hi):
        got[0] = True
        total[0] = total_of(lo, hi, m)
        flag[0] = lo >> 16


@vk.func
def spin_read(state: Any, slot: Any, got: Any, total: Any, flag: Any, m: Any,
              levels: Annotated[int, vk.Const[int]], trips: Annotated[int, vk.Const[int]]):
    """``read_total`` until ``got[0]``, at most ``trips ** levels`` times (as ``spin_wait``)."""
    for _ in range(vk.u32(trips)):
        if not got[0]:
            if levels == 1:
                read_total(state, slot, got, total, flag, m)
            else:
                spin_read(state, slot, got, total, flag, m, levels - 1, trips)


@cache
def _scan_lookback(m: Monoid, inclusive: bool, has_init: bool, init_bound: bool = False) -> Kernel | KernelTemplate:
    """The single-pass scan of ``m``; its Const parameters: ``inclusive``, ``has_init``, items per
    invocation, the params word of n, the ``init`` word, the wait's levels and trips, the width,
    ``wide`` (the look-back of grids of at most ``WG`` tiles: ``scan_lookback``).
    ``init`` (``init_spec``): the parameter words, or with ``init_bound`` a bound buffer."""
    values, outs = BufferSpec(Access.READ, m.dtype), BufferSpec(Access.READ_WRITE, m.dtype)
    inits = init_spec(m, has_init, init_bound)
    kind = "inclusive" if inclusive else "exclusive"
    suffix = "_init_buffer" if init_bound else ""
    reducer = warp_reducer(m)

    @vk.kernel(workgroup_size=WG, name=f"lib_scan_lookback_{kind}_{m.op}_{m.dtype.value}{suffix}")
    def scan(x: Annotated[vk.In[vk.u32], values], out: Annotated[vk.InOut[vk.u32], outs], state: vk.InOut[vk.u32],
             params: Annotated[vk.Uniform[vk.u32], PARAMS], init: Annotated[vk.Uniform[vk.u32], inits],
             inclusive: vk.Const[bool], has_init: vk.Const[bool], items: vk.Const[int], n_word: vk.Const[int],
             init_word: vk.Const[int], tiles_word: vk.Const[int], levels: vk.Const[int], trips: vk.Const[int],
             width: vk.Const[int], wide: vk.Const[bool]):
        sums = vk.shared(m.element, WARPS)
        tile_id = vk.shared(vk.u32, 2)  # the tile, and the first slot of this call's set
        v = vk.registers(m.element, items)
        r = vk.registers(m.element, items)  # round k's inclusive result in the warp, the warp's total after it
        h = vk.registers(m.element, items)
        w = vk.registers(m.element, 2)  # the earlier warps' total, the tile's
        if vk.lid() == 0:  # tiles are numbered in the order they start: every lower tile has started
            ticket = vk.atomic_add_relaxed(state, 0, 1)
            tile_id[0] = ticket % params[tiles_word]
            tile_id[1] = ((ticket // params[tiles_word]) & 1) * params[tiles_word]
            # this tile's slot of the other set: no tile of this call reads it; the next call's starts at zero
            state[state_word((params[tiles_word] - tile_id[1]) + tile_id[0], 0)] = 0
            state[state_word((params[tiles_word] - tile_id[1]) + tile_id[0], 1)] = 0
        vk.barrier()
        tile = tile_id[0]
        base = tile_id[1]
        tb = tile * (items * WG)
        for k in range(items):
            v[k] = striped_value(x, params, n_word, m, tb, 0, k, items)
        for k in range(items):  # each warp scans its 32*items elements round by round
            scanned = warp_inclusive_scan_of(v[k], m)
            r[k] = m.apply(h[k - 1], scanned) if k != 0 else scanned
            h[k] = vk.subgroup_shuffle(r[k], 31)
        if vk.subgroup_local_id() == 0:
            sums[vk.lid() >> 5] = h[items - 1]
        vk.barrier()
        fold_warps_to(w, sums, m, 0, WARPS)
        if vk.lid() == 0:
            # the tile's own total (tile 0: an inclusive prefix), two relaxed exchanges, low half first
            publish(state, base + tile, vk.select(tile == 0, SCAN_PREFIX, SCAN_AGGREGATE) << 16, w[1])
        if wide:  # at most WG tiles: invocation j reads the total of tile ``tile - 1 - j``, all at once
            keys = vk.shared(vk.u32, WARPS)
            parts = vk.shared(m.element, WARPS)
            got = vk.registers(vk.boolean, 1)  # this invocation's read of one lower tile's total
            total = vk.registers(m.element, 1)
            flag = vk.registers(vk.u32, 1)
            mine = vk.lid() < tile and tb < params[n_word]  # tiles past n need no prefix
            lower = vk.select(mine, tile - 1 - vk.lid(), 0)
            got[0] = not mine
            total[0] = identity(m)
            flag[0] = 0
            spin_read(state, base + lower, got, total, flag, m, levels, trips)
            # the nearest tile holding an inclusive prefix, plus one (tile 0 always does), and bit 31 if a wait ran out
            key = block_reduce(vk.select(mine and not got[0], 0x80000000,
                                         vk.select(mine and flag[0] == SCAN_PREFIX, lower + 1, 0)), keys, MAX_U32,
                               warp_butterfly)
            part = vk.select(mine and lower + 1 >= key, total[0], identity(m))  # that prefix and the totals above it
            if key >= 0x80000000:  # a wait ran out: the workgroup folds the input of the tiles below instead
                part = identity(m)
                for j in range(tile * items):
                    part = m.apply(x[j * WG + vk.lid()], part)
            below_total = block_reduce(part, parts, m, reducer)
            if vk.lid() == 0:
                if key >= 0x80000000:
                    vk.atomic_add_relaxed(state, 1, 1)
                if not tile == 0:  # the tile's inclusive prefix
                    publish(state, base + tile, SCAN_PREFIX << 16, m.apply(below_total, w[1]))
            tile_start = m.apply(init[init_word], below_total) if has_init else below_total
        else:  # invocation 0 walks back over the lower tiles, ``width`` a trip
            tile_prefix = vk.shared(m.element, 1)
            done = vk.registers(vk.boolean, 1)  # the walk's state
            below = vk.registers(vk.u32, 1)
            prefix = vk.registers(m.element, 1)
            if vk.lid() == 0:
                done[0] = tile == 0 or tb >= params[n_word]  # tiles past n need no prefix
                prefix[0] = identity(m)
                below[0] = tile - 1  # the nearest tile not yet taken
                spin_wait(state, base, done, below, prefix, m, levels, trips, width)
                if not done[0]:  # the wait ran out: fold the input of tiles 0 .. below (and count it)
                    for j in range((below[0] + 1) * (items * WG)):
                        prefix[0] = m.apply(x[j], prefix[0])
                    vk.atomic_add_relaxed(state, 1, 1)
                if not tile == 0:  # the tile's inclusive prefix
                    publish(state, base + tile, SCAN_PREFIX << 16, m.apply(prefix[0], w[1]))
                tile_prefix[0] = prefix[0]
            vk.barrier()
            tile_start = m.apply(init[init_word], tile_prefix[0]) if has_init else tile_prefix[0]
        wbase = m.apply(tile_start, w[0])
        # exclusive: element i gets element i-1's inclusive result, so each one is stored one place on
        # (no shuffle to the next lane) and the tile's first element gets the tile's start
        for k in range(items):
            if inclusive:
                if striped(tb, 0, k, items) < params[n_word]:
                    out[striped(tb, 0, k, items)] = m.apply(wbase, r[k])
            else:
                if striped(tb, 0, k, items) + 1 < min(params[n_word], tb + items * WG):
                    out[striped(tb, 0, k, items) + 1] = m.apply(wbase, r[k])
        if not inclusive:
            if vk.lid() == 0 and tb < params[n_word]:
                out[tb] = tile_start

    return scan


@cache
def scan_lookback(m: Monoid, items: int, inclusive: bool, n_word: int, init_word: int | None, *, tiles_word: int,
                  spin: tuple[int, int] = SCAN_SPIN, width: int = SCAN_LOOKBACK_WIDTH,
                  init_bound: bool = False, wide: bool = False) -> Program:
    """Single-pass scan of ``x`` into ``out`` with decoupled look-back, one tile per workgroup
    (commutative ops of integer types: the order in which tile totals meet may vary).

    Invocation 0 takes a ticket from ``state[0]`` (tile ``ticket % T``, ``T`` the grid in params
    word ``tiles_word``, a power of two), so every lower tile has started, and zeroes its slot of
    the other set of tile words (the next call's). The
    warps scan their stretches of the tile round by round and meet in workgroup memory;
    invocation 0 publishes the tile's total (tile 0: as an inclusive prefix), looks back for
    the combination of every lower tile (``spin_wait`` of ``look_back_trip``; if the wait runs
    out it folds the input below itself, and counts that in ``state[1]``, so the result never
    depends on another workgroup) and publishes the tile's inclusive prefix; after a barrier
    every element gets ``init op prefix op`` its place in the tile (exclusive: each inclusive
    result is stored one place on, and the tile's first element gets ``init op prefix``).

    ``wide`` (a grid of at most ``WG`` tiles): instead of invocation 0's walk, which waits on
    each trip for a lower tile's inclusive prefix, invocation ``j`` reads tile ``tile - 1 - j``'s
    total (``spin_read``), all in one memory latency; a workgroup maximum finds the nearest tile
    that holds an inclusive prefix, and a workgroup reduction combines it with the totals above
    it. A wait that runs out makes the whole workgroup fold the input below the tile instead.
    ``state`` (``2 + 4 * T`` words) is zero when allocated, never zero-filled again.
    ``init``: element ``init_word`` of the parameter words (a host
    value), or with ``init_bound`` element 0 of a bound buffer (a caller's device array).
    """
    kernel = _scan_lookback(m, inclusive, init_word is not None, init_bound)
    return kernel.bind(inclusive, init_word is not None, items, n_word, init_word or 0, tiles_word, *spin,
                       width, wide).program
