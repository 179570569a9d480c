"""The topologies of the scans and reductions: the segments of a size, scan, reduce.

Grids and buffer sizes come from the capacity class, the exact size from the parameter words
(``vyre.lib.plan``). ``segments`` is shared by compaction and the segmented radix sort.
"""

from __future__ import annotations

from vyre.driver.backend import Resident
from vyre.ir import DataType
from vyre.lib._scan import kernels as K
from vyre.lib._scan import lookback
from vyre.lib.blocks import WG
from vyre.lib.monoid import Monoid
from vyre.lib.plan import Plan, capacity, ceil_div
from vyre.lib.transform import Transform, fused

SPAN_UNIT = WG * K.REDUCE_ITEMS  # segments are whole upsweep tiles (and so whole downsweep tiles)
SCAN_GROUPS = 4096  # at most this many workgroups (segments): several waves, so the last one is a small share
SCAN_SINGLE = 4096  # capacity classes up to this scan in one launch of one workgroup


def lookback_items(cap: int) -> int:
    """Elements per invocation of the single-pass scan of capacity class ``cap``."""
    small = lookback.SCAN_SMALL_FROM <= cap <= lookback.SCAN_SMALL_UP_TO
    return lookback.SCAN_SMALL_ITEMS if small else lookback.SCAN_LOOKBACK_ITEMS


def segments(plan: Plan, role: str, n: int, cap: int, unit: int = SPAN_UNIT, most: int = SCAN_GROUPS
             ) -> tuple[int, int, int]:
    """Split ``n`` elements into at most ``most`` contiguous segments of whole ``unit``-element
    tiles, one per workgroup.

    The grid comes from the capacity class, the span (a params word) from ``n``. Returns the
    grid, the params word of the span and the number of segments that hold elements.
    """
    groups = min(ceil_div(cap, unit), most)
    span = ceil_div(ceil_div(n, groups), unit) * unit
    return groups, plan.word(f"{role}.span", span), ceil_div(n, span)


def scan(plan: Plan, m: Monoid, src: Resident, dst: Resident, n: int, cap: int, inclusive: bool,
         init_word: int | None = None, role: str = "scan", transform: Transform | None = None,
         init_buffer: Resident | None = None) -> None:
    """Scan ``n`` elements of ``src`` into ``dst``.

    Classes up to ``SCAN_SINGLE`` elements: one launch of the down kernel on one workgroup.
    U32 and I32: one single-pass kernel with decoupled look-back (``lookback.scan_lookback``;
    reads and writes each element once; its tile states stay zero between calls), ``lookback_items``
    elements per invocation. F32 (whose rounding depends on the order the tile totals meet) and
    the 64-bit types (a look-back word holds 16 bits of a total and its flag): reduce-then-scan over at most
    ``SCAN_GROUPS`` contiguous segments, three launches: **up** reduces each workgroup's segment
    into ``partial[w]``, **spine** scans the partials exclusively, **down** scans each segment
    tile by tile from its carry. ``transform``: applied to each element of ``src`` where a kernel
    loads it (``transform_*_scan``; ``m`` is over its result type). The scan starts from ``init``:
    params word ``init_word`` (a host value), or element 0 of ``init_buffer`` (a bound 1-element
    buffer: a caller's device array; the kernels' variants that read it), or nothing.
    """
    bound = init_buffer is not None
    if bound:
        assert init_word is None, "init comes from init_word or init_buffer, not both"
        init_word = 0
    n_word = plan.word(f"{role}.n", n)
    handles_tail = [plan.params] + ([] if init_word is None else [init_buffer if bound else plan.params])
    if cap <= SCAN_SINGLE:
        span_word = plan.word(f"{role}.span", cap)
        plan.step(fused(K.scan_segments(m, K.SCAN_ITEMS, inclusive, False, n_word, span_word, init_word, bound),
                        transform), [src, dst, *handles_tail], 1)
        return
    if m.dtype in (DataType.U32, DataType.I32):
        items = lookback_items(cap)
        tiles = ceil_div(cap, WG * items)  # a power of two: the tickets' tile and call
        state = plan.zeroed_buffer(f"{role}.state", lookback.SCAN_STATE_HEAD + 4 * tiles)  # two sets of tile words
        program = lookback.scan_lookback(m, items, inclusive, n_word, init_word,
                                         tiles_word=plan.word(f"{role}.tiles", tiles), init_bound=bound,
                                         wide=lookback.WIDE_FROM <= tiles <= WG)
        plan.step(fused(program, transform), [src, dst, state, *handles_tail], tiles)
        return
    groups, span_word, used = segments(plan, role, n, cap)
    partial = plan.buffer(f"{role}.partial", groups, m.dtype.size)
    carry = plan.buffer(f"{role}.carry", groups, m.dtype.size)
    plan.step(fused(K.reduce_segments(m, K.REDUCE_ITEMS, n_word, span_word), transform),
              [src, partial, plan.params], groups)
    scan(plan, m, partial, carry, used, capacity(groups), False, None, f"{role}.spine")
    plan.step(fused(K.scan_segments(m, K.SCAN_ITEMS, inclusive, True, n_word, span_word, init_word, bound),
                    transform), [src, dst, carry, *handles_tail], groups)


REDUCE_TILE = WG * K.REDUCE_ITEMS


def reduce(plan: Plan, m: Monoid, src: Resident, n: int, cap: int, dst: Resident | None = None,
           transform: Transform | None = None) -> Resident:
    """Levels of 4096-element tile reductions until one value remains; returns its buffer
    (``dst`` when given: the last level writes there). ``transform``: applied to each element
    of ``src`` as the first level loads it (``transform_reduce``)."""
    level = 0
    while True:
        tiles_cap = ceil_div(cap, REDUCE_TILE)
        last = dst if tiles_cap == 1 else None  # the last level writes into dst when given
        out = last if last is not None else plan.buffer(f"reduce.partial{level}", tiles_cap, m.dtype.size)
        n_word = plan.word(f"reduce.n{level}", n)
        plan.step(fused(K.reduce_tiles(m, K.REDUCE_ITEMS, n_word), transform), [src, out, plan.params], tiles_cap)
        if tiles_cap == 1:
            return out
        src, n, cap, level, transform = out, ceil_div(n, REDUCE_TILE), tiles_cap, level + 1, None

