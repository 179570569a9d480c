"""The topologies of the sorts: LSD radix sort in one pass per digit (single-pass, below
``ONESWEEP_LIMIT`` keys) or over segments, and sorts through indices (64-bit keys with values,
8-byte values)."""

from __future__ import annotations

import math
from collections.abc import Callable

from vyre import settings
from vyre.driver.backend import Resident
from vyre.driver.errors import DispatchFailed, VyreError
from vyre.ir import DataType
from vyre.lib._scan.topology import scan, segments
from vyre.lib._select.kernels import run_count_words
from vyre.lib._sort import kernels as K
from vyre.lib._sort import onesweep
from vyre.lib._sort.tiles import RADIX_BITS, radix_passes
from vyre.lib.blocks import WG, zero_fill
from vyre.lib.keys import raw_type
from vyre.lib.monoid import COUNT
from vyre.lib.plan import Plan, ceil_div

RADIX = 1 << RADIX_BITS
SORT_GROUPS = 4096  # at most this many segments in a pass of the segmented sort
ONESWEEP_LIMIT = 1 << 30  # below this many keys, the single-pass sort (its counts share a word with two flags);
# VYRE_ONESWEEP_LIMIT overrides it (vyre.settings)
HISTOGRAM_GROUPS = 1024  # at most this many workgroups count the digits of all passes
RunCounts = tuple[Resident, int, int, int]  # ``_select.topology.counted_runs``: counts, span/recount words, segments
RUN_KEYS = (DataType.U32, DataType.I32)  # key types whose sort counts run starts (equal keys: equal bits)


def radix_sort(plan: Plan, dtype: DataType, keys: Resident, values: Resident | None, values_mode: str,
               n: int, cap: int, final: tuple[Resident | None, Resident | None] | None = None,
               passes: int | None = None, runs: RunCounts | None = None) -> tuple[Resident | None, Resident | None]:
    """Stable LSD radix sort, four 8-bit passes: single-pass (``onesweep_sort``) below
    ``ONESWEEP_LIMIT`` keys, else over segments (``segmented_sort``).

    ``values_mode``: ``"none"``, ``"load"`` (carry ``values``) or ``"iota"`` (carry indices). The
    last pass writes into ``final`` (keys, values) when given, else into scratch. Returns the
    handles holding the sorted raw keys and values. ``passes``: only the low digits' passes, for
    unsigned keys known to be below ``2 ** (8 * passes)``. ``runs``: see ``counts_runs``.
    """
    if n < settings.onesweep_limit(ONESWEEP_LIMIT):
        return onesweep_sort(plan, dtype, keys, values, values_mode, n, cap, final, passes=passes, runs=runs)
    if runs is not None:
        raise ValueError("only the single-pass sort counts run starts")
    return segmented_sort(plan, dtype, keys, values, values_mode, n, cap, final, passes)




def counts_runs(dtype: DataType, n: int) -> bool:
    """Whether ``sort`` of ``n`` keys of ``dtype`` alone can count the run starts of its result in
    its last pass (``runs``): u32/i32 keys the single-pass sort takes (``onesweep.count_runs``)."""
    return dtype in RUN_KEYS and n < settings.onesweep_limit(ONESWEEP_LIMIT) and onesweep.ONESWEEP_KEYS_IN_REGISTERS


def _radix_passes(plan: Plan, dtype: DataType, keys: Resident, values: Resident | None, values_mode: str, cap: int,
                  final: tuple[Resident | None, Resident | None] | None, scatter: Callable[..., None],
                  value_size: int = 4, passes: int | None = None) -> tuple[Resident | None, Resident | None]:
    """The passes' buffers (four passes, eight for 64-bit keys): ``scatter(shift, key_in, key_out,
    mode, src_keys, moves, keys_written)`` adds a pass's steps, ``moves`` being the handles after
    the kernel's binding 1 (keys out, values). ``value_size``: bytes per loaded value (indices: 4).
    ``final`` keys None: the last pass need not write keys (returned as None)."""
    key_bufs = [plan.buffer("sort.keys_b", cap, dtype.size), plan.buffer("sort.keys_a", cap, dtype.size)]
    value_size = value_size if values_mode == "load" else 4
    val_bufs = ([plan.buffer("sort.vals_b", cap, value_size), plan.buffer("sort.vals_a", cap, value_size)]
                if values_mode != "none" else None)
    src_k, src_v = keys, values
    passes = passes or radix_passes(raw_type(dtype))
    for p in range(passes):
        key_in = dtype if p == 0 else None
        key_out = dtype if p == passes - 1 else None
        mode = values_mode if p == 0 else ("none" if values_mode == "none" else "load")
        last = p == passes - 1 and final is not None
        keys_written = not (last and final[0] is None and mode != "none")
        dst_k = final[0] if last and final[0] is not None else key_bufs[p % 2]
        dst_v = (final[1] if last else val_bufs[p % 2]) if val_bufs else None
        moves = [dst_k] + ([src_v] if mode == "load" else []) + ([dst_v] if mode != "none" else [])
        scatter(p * RADIX_BITS, key_in, key_out, mode, src_k, moves, keys_written)
        src_k, src_v = dst_k, dst_v
    return (src_k if final is None or final[0] is not None else None), src_v


def segmented_sort(plan: Plan, dtype: DataType, keys: Resident, values: Resident | None, values_mode: str,
                   n: int, cap: int, final: tuple[Resident | None, Resident | None] | None = None,
                   passes: int | None = None) -> tuple[Resident | None, Resident | None]:
    """Four passes over the scans' contiguous segments (any ``n``; the plan for ``n >= 2^30``).

    Each pass: digit counts per segment (upsweep), one exclusive scan of the ``256 * groups``
    counts, then each workgroup scatters its segment tile by tile with running per-digit
    positions (downsweep).
    """
    unit = WG * math.lcm(K.SORT_ITEMS, K.SORT_VALUE_ITEMS, K.COUNT_ITEMS)  # whole tiles of every kernel
    groups, span_word, _ = segments(plan, "sort", n, cap, unit, SORT_GROUPS)
    n_word, groups_word = plan.word("sort.n", n), plan.word("sort.groups", groups)
    hist = plan.buffer("sort.hist", RADIX * groups)
    offsets = plan.buffer("sort.offsets", RADIX * groups)
    words = (n_word, span_word, groups_word)
    items = K.SORT_ITEMS if values_mode == "none" else K.SORT_VALUE_ITEMS

    def scatter(shift: int, key_in: DataType | None, key_out: DataType | None, mode: str, src_k: Resident,
                moves: list[Resident], keys_written: bool) -> None:  # keys are written always here
        plan.step(K.radix_counts(shift, key_in, K.COUNT_ITEMS, *words), [src_k, hist, plan.params], groups)
        scan(plan, COUNT, hist, offsets, RADIX * groups, RADIX * groups, False, role="sort.scan")
        plan.step(K.radix_scatter(shift, key_in, key_out, mode, items, *words),
                  [src_k, offsets, *moves, plan.params], groups)

    return _radix_passes(plan, dtype, keys, values, values_mode, cap, final, scatter, passes=passes)


def _lookback_gave_up(count: int) -> VyreError:
    return DispatchFailed("lookback", f"in the single-pass radix sort, {count} digit look-backs gave up waiting "
                          f"for a lower tile to publish (after {onesweep.SPIN[1] ** onesweep.SPIN[0]} tries each), "
                          "so the result is incomplete",
                          "rerun the call; if it recurs, report it with the GPU model, and meanwhile set "
                          "VYRE_ONESWEEP_LIMIT=0 to sort over segments.")


def onesweep_sort(plan: Plan, dtype: DataType, keys: Resident, values: Resident | None, values_mode: str,
                  n: int, cap: int, final: tuple[Resident | None, Resident | None] | None = None,
                  value_type: DataType | None = None, passes: int | None = None, runs: RunCounts | None = None
                  ) -> tuple[Resident | None, Resident | None]:
    """Single-pass (Onesweep) passes, ``n < ONESWEEP_LIMIT``: four for 32-bit keys, eight for
    64-bit keys (read and written whole, 8 bytes each).

    One zero fill of the look-back state, one kernel counting the digits of all passes, one
    scan of each pass's 256 counts, then per pass one kernel: a workgroup per tile, digit
    offsets from decoupled look-back (``onesweep.radix_onesweep``). From capacity
    ``onesweep.COUNT_IN_PASSES_FROM`` the first kernel counts the first pass's digits only, and
    each pass but the last counts the next pass's, whose counts one workgroup then scans. The plan reads back the
    count of look-backs that gave up (``sort.status``, zeroed once per plan) and raises
    ``DispatchFailed`` if any did. ``value_type``: the element type of ``values`` (4 or 8
    bytes; ``values_mode`` "load"). ``runs`` (u32/i32 keys alone, ``counts_runs``): the last pass
    also counts the run starts of the sorted keys per segment of a later compaction
    (``_select.topology.counted_runs``), into its counts buffer, zeroed first.
    """
    raw = raw_type(dtype)
    value_raw = raw_type(value_type) if value_type is not None and values_mode == "load" else DataType.U32
    limit = int(plan.backend.device_profile().get("shared_mem_per_block_optin", 0)) if raw.size == 8 else 0
    counted, items = radix_passes(raw), onesweep.onesweep_items(raw, values_mode, cap, limit)  # digits counted
    tiles = ceil_div(cap, WG * items)
    region = ceil_div(tiles, 2) * RADIX  # u64 pair words: two tiles' words of each digit
    head = onesweep.lookback_head(counted)
    lookback = plan.buffer("sort.lookback", head)
    pairs = plan.buffer("sort.lookback_pairs", 2 * region, 8)
    n_word, region_word = plan.word("sort.n", n), plan.word("sort.region", region)
    zeroed = max(head, 2 * region)  # the head and the first pass's region (u32 words); each pass zeroes the next's
    plan.step(zero_fill(plan.word("sort.zeroed", zeroed), 2), [lookback, pairs, plan.params], ceil_div(zeroed, WG))
    blocks = min(ceil_div(cap, WG * onesweep.HISTOGRAM_ITEMS), HISTOGRAM_GROUPS)
    in_passes = cap >= onesweep.COUNT_IN_PASSES_FROM and onesweep.ONESWEEP_KEYS_IN_REGISTERS
    histogram_passes = 1 if in_passes else counted  # whose digits the histograms count; the passes count the rest
    plan.step(onesweep.radix_histograms(dtype, onesweep.HISTOGRAM_ITEMS, n_word, plan.word("sort.blocks", blocks),
                                        histogram_passes), [keys, lookback, plan.params], blocks)
    plan.step(onesweep.radix_digit_starts(counted, 0 if in_passes else None), [lookback], histogram_passes)
    status = plan.buffer("sort.status", 1)
    if not any(handle is status for handle, _, _ in plan.checks):  # once per plan: a later sort keeps the count
        plan.step(zero_fill(plan.word("sort.status_words", 1)), [status, plan.params], 1)
        plan.check(status, 0, _lookback_gave_up)

    if runs is not None:
        if dtype not in RUN_KEYS or values_mode != "none" or passes is not None:
            raise ValueError(f"a sort counts run starts of u32/i32 keys alone, not of {dtype.value} ({values_mode})")
        counts, _, _, segments_counted = runs  # the counts, the recount word, the copies the pass adds into
        zeroed = run_count_words(segments_counted)
        plan.step(zero_fill(plan.word("sort.run_count_words", zeroed)), [counts, plan.params], ceil_div(zeroed, WG))

    def scatter(shift: int, key_in: DataType | None, key_out: DataType | None, mode: str, src_k: Resident,
                moves: list[Resident], keys_written: bool) -> None:
        count_next = in_passes and key_out is None  # every pass but the last
        counting = runs is not None and key_out is not None
        plan.step(onesweep.radix_onesweep(shift, key_in, key_out, mode, items, n_word, region_word, raw=raw,
                                          value_raw=value_raw, registers=onesweep.ONESWEEP_KEYS_IN_REGISTERS,
                                          drop_keys=not keys_written, count_next=count_next,
                                          runs=runs[1:3] if counting and runs is not None else None),
                  [src_k, lookback, pairs, *moves, plan.params, status, *([runs[0]] if counting and runs else [])],
                  tiles)
        if count_next:
            plan.step(onesweep.radix_digit_starts(counted, shift // RADIX_BITS + 1), [lookback], 1)

    return _radix_passes(plan, dtype, keys, values, values_mode, cap, final, scatter, value_raw.size, passes)


def sort(plan: Plan, dtype: DataType, keys: Resident, values: Resident | None, value_type: DataType | None,
         values_mode: str, n: int, cap: int, final: tuple[Resident | None, Resident | None] | None = None,
         runs: RunCounts | None = None) -> tuple[Resident | None, Resident | None]:
    """Any supported sort: ``radix_sort`` for 32-bit keys with 4-byte values (or none); for 64-bit
    keys alone, ``onesweep_sort`` of the whole keys below ``ONESWEEP_LIMIT``; else
    ``permuted_sort``. ``value_type``: the element type of ``values`` (``values_mode`` "load").
    ``runs``: the last pass also counts the run starts of the result (``onesweep_sort``; u32/i32
    keys alone, where ``counts_runs``).

    64-bit keys with values or indices (key-value sorts, ``argsort``) take ``permuted_sort`` while
    the native passes that move values are under investigation: one GPU run of many test processes
    sharing a card returned an ``argsort``'s indices as a key-value sort's values (see docs/lib.md)."""
    if dtype.size == 4 and (value_type is None or value_type.size == 4):
        return radix_sort(plan, dtype, keys, values, values_mode, n, cap, final, runs=runs)
    if runs is not None:
        raise ValueError(f"a sort counts run starts of u32/i32 keys alone, not of {dtype.value}")
    if dtype.size == 8 and values_mode == "none" and n < settings.onesweep_limit(ONESWEEP_LIMIT):
        return onesweep_sort(plan, dtype, keys, values, values_mode, n, cap, final, value_type)
    return permuted_sort(plan, dtype, keys, values, value_type, values_mode, n, cap, final)


def permuted_sort(plan: Plan, dtype: DataType, keys: Resident, values: Resident | None,
                  value_type: DataType | None, values_mode: str, n: int, cap: int,
                  final: tuple[Resident | None, Resident | None] | None = None
                  ) -> tuple[Resident | None, Resident | None]:
    """64-bit keys from ``ONESWEEP_LIMIT`` keys on, or 32-bit keys with 8-byte values, through
    the 32-bit radix sort of indices.

    64-bit keys (``dtype`` U64, I64 or F64): their u64 sort keys are split into 32-bit halves
    (``kernels.split_keys``); a stable sort of the low halves carrying indices, a gather of the
    high halves in that order and a stable sort of those carrying the indices give the order of
    the whole keys (LSD: eight 8-bit digit passes in all), and the keys are gathered in it
    (``kernels.gather``; every F64 NaN comes out as 0x7FFFFFFFFFFFFFFF). 32-bit keys with 8-byte
    values: one sort carrying indices. Values are gathered in the order at the end. Returns the
    handles of the sorted keys (None for ``"iota"``: argsort keeps none) and of the values
    (the indices for ``"iota"``).
    """
    final_k, final_v = final if final is not None else (None, None)
    n_word, groups = plan.word("sort.gather_n", n), ceil_div(cap, WG)
    order = final_v if values_mode == "iota" and final_v is not None else plan.buffer("sort.order", cap)
    out_k = None
    if dtype.size == 8:
        lo, hi = plan.buffer("sort.wide_lo", cap), plan.buffer("sort.wide_hi", cap)
        plan.step(K.split_keys(dtype, n_word), [keys, lo, hi, plan.params], groups)
        radix_sort(plan, DataType.U32, lo, None, "iota", n, cap, (lo, order))
        plan.step(K.gather(DataType.U32, None, n_word), [hi, order, lo, plan.params], groups)  # lo := hi[order]
        radix_sort(plan, DataType.U32, lo, order, "load", n, cap, (hi, order))
        if values_mode != "iota":
            out_k = final_k if final_k is not None else plan.buffer("sort.wide_keys", cap, 8)
            plan.step(K.gather(DataType.U64, dtype, n_word), [keys, order, out_k, plan.params], groups)
    else:
        out_k = final_k if final_k is not None else plan.buffer("sort.keys_sorted", cap)
        radix_sort(plan, dtype, keys, None, "iota", n, cap, (out_k, order))
    if values_mode != "load":
        return out_k, order if values_mode == "iota" else None
    assert values is not None and value_type is not None
    out_v = final_v if final_v is not None else plan.buffer("sort.values_sorted", cap, value_type.size)
    plan.step(K.gather(raw_type(value_type), None, n_word), [values, order, out_v, plan.params], groups)
    return out_k, out_v


def sort_segments(plan: Plan, dtype: DataType, keys: Resident, offsets: Resident, values: Resident | None,
                  n: int, segments: int, cap: int, final: tuple[Resident, Resident | None]) -> None:
    """``segmented_sort`` of 4-byte keys (and 4-byte values) into ``final``: LSD order by (segment,
    key). A stable sort of the keys carrying indices, each index's segment (``kernels.segment_of``,
    a binary search of the offsets), a stable sort of those segment ids carrying the indices (only
    the passes of the digits the ids use); the keys (every F32 NaN as 0x7FFFFFFF, as ``sort``
    gives it) and values are gathered in that order. One segment is the plain ``radix_sort``."""
    final_k, final_v = final
    if segments == 1:  # one segment: the plain sort, no indices to gather through
        radix_sort(plan, dtype, keys, values, "none" if values is None else "load", n, cap, (final_k, final_v))
        return
    id_bits = (segments - 1).bit_length()  # the search's steps; the ids' higher digits are zero: no passes
    n_word, groups = plan.word("sort.gather_n", n), ceil_div(cap, WG)
    segments_word, steps_word = plan.word("sort.segments", segments), plan.word("sort.search_steps", id_bits)
    order, ids = plan.buffer("sort.order", cap), plan.buffer("sort.wide_hi", cap)
    radix_sort(plan, dtype, keys, None, "iota", n, cap, (None, order))
    plan.step(K.segment_of(n_word, segments_word, steps_word), [offsets, order, ids, plan.params], groups)
    by_segment = plan.buffer("sort.order_b", cap)  # not ``order``: a one-pass sort must not scatter in place
    radix_sort(plan, DataType.U32, ids, order, "load", n, cap, (None, by_segment),
               passes=ceil_div(id_bits, RADIX_BITS))
    order = by_segment
    nan = dtype if dtype == DataType.F32 else None
    plan.step(K.gather(DataType.U32, nan, n_word), [keys, order, final_k, plan.params], groups)
    if values is not None and final_v is not None:
        plan.step(K.gather(DataType.U32, None, n_word), [values, order, final_v, plan.params], groups)
