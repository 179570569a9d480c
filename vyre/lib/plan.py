"""A run of ``vyre.lib``: a fixed topology of steps per capacity class, executed as one sequence.

``Plan`` collects ``(program, handles, config)`` steps, the u32 parameter words they read and
the scratch buffers they use; ``run`` uploads the parameter words and calls
``backend.dispatch_sequence`` once (one synchronisation; on ``cuda`` one captured graph per
capacity class, replayed). Grids and buffer sizes come from the capacity class (the next power
of two of the size), never from the exact size, which the kernels read from the parameters.
The topologies below (scan, reduction, compaction, radix sorts) are shared by the primitives.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from vyre import settings
from vyre.driver.backend import Resident
from vyre.driver.config import DispatchConfig
from vyre.driver.errors import DispatchFailed, InvalidProgram, VyreError
from vyre.ir import DataType, Program
from vyre.lib import kernels as K
from vyre.lib.blocks import WARPS, WG
from vyre.lib.keys import raw_type
from vyre.lib.monoid import Monoid
from vyre.lib.scratch import ScratchCache
from vyre.lib.transform import Transform, fused

COUNT = Monoid("add", DataType.U32)


@functools.cache
def grid_config(groups: int) -> DispatchConfig:
    """One shared config per grid: a backend that caches step bindings by config object reuses them."""
    return DispatchConfig(grid=(groups, 1, 1))


def capacity(n: int) -> int:
    """The capacity class of ``n`` elements: the next power of two (at least 1)."""
    return 1 << max(int(n) - 1, 0).bit_length()


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class Plan:
    """Steps, parameter words and scratch buffers of one library call on one backend."""

    def __init__(self, backend: Any, scratch: ScratchCache, params: str = "params") -> None:
        self.backend, self.scratch = backend, scratch
        self.params = scratch.get(params, K.PARAM_WORDS * 4)
        self._words = np.zeros(K.PARAM_WORDS, dtype=np.uint32)
        self._names: dict[str, int] = {}
        self.steps: list[tuple[Program, list[Resident], DispatchConfig]] = []
        self.checks: list[tuple[Resident, int, Callable[[int], VyreError]]] = []

    def word(self, name: str, value: int) -> int:
        """The parameter word called ``name``, set to ``value`` (u32 bits); returns its index."""
        index = self._names.setdefault(name, len(self._names))
        if index >= K.PARAM_WORDS:
            raise InvalidProgram("a vyre.lib plan needs more parameter words than it has",
                                 "report this as a vyre.lib bug (the plan is too deep).")
        self._words[index] = np.uint32(int(value) & 0xFFFFFFFF)
        return index

    def typed_word(self, name: str, value: object, dtype: DataType) -> int:
        """``value`` as ``dtype`` bits, read through a typed uniform view of the parameters; returns
        its element index in that view. An 8-byte value takes two words at an even index (a pad
        word first if needed), so its index is the first word's half."""
        bits = np.array([value], dtype=dtype.np_dtype).view(np.uint32)
        if bits.size == 1:
            return self.word(name, int(bits[0]))
        if f"{name}.lo" not in self._names and len(self._names) % 2:
            self.word(f"{name}.pad", 0)
        low = self.word(f"{name}.lo", int(bits[0]))
        self.word(f"{name}.hi", int(bits[1]))
        return low // 2

    def buffer(self, role: str, elements: int, itemsize: int = 4) -> Resident:
        """Scratch for ``elements`` of ``itemsize`` bytes, sized by capacity class."""
        return self.scratch.get(role, capacity(elements) * itemsize)

    def step(self, program: Program, handles: list[Resident], groups: int) -> None:
        self.steps.append((program, handles, grid_config(max(groups, 1))))

    def check(self, handle: Resident, word: int, fail: Callable[[int], VyreError]) -> None:
        """After the run, read word ``word`` of ``handle``; if it is not 0, raise ``fail(value)``."""
        self.checks.append((handle, word, fail))

    def run(self, reads: Sequence[tuple[Resident, int, int]] = (), stream: Any = None) -> list[np.ndarray]:
        """Run the steps; returns the ``(handle, byte offset, bytes)`` reads, after the checks pass.

        With ``stream`` (a device-array call): the parameter words and steps are enqueued on it
        (``backend.enqueue_sequence``), the checks are watched without waiting, and only ``reads``
        make the call wait."""
        if stream is not None:
            watch = [(handle, 4 * word, fail) for handle, word, fail in self.checks]
            return self.backend.enqueue_sequence(self.steps, stream=stream, writes=[(self.params, self._words)],
                                                 reads=list(reads), watch=watch)
        self.backend.upload_resident(self.params, self._words)
        checks = [(handle, 4 * word, 4) for handle, word, _ in self.checks]
        out = self.backend.dispatch_sequence(self.steps, list(reads) + checks)
        for (_, _, fail), raw in zip(self.checks, out[len(reads):]):
            value = int(np.asarray(raw).view(np.uint32)[0])
            if value:
                raise fail(value)
        return out[:len(reads)]


# ---- topologies -------------------------------------------------------------------------------------
SPAN_UNIT = WG * K.REDUCE_ITEMS  # segments are whole upsweep tiles (and so whole downsweep tiles)
SCAN_GROUPS = 4096  # at most this many workgroups (segments): several waves, so the last one is a small share
SCAN_SINGLE = 4096  # capacity classes up to this scan in one launch of one workgroup
LOOKBACK_TILE = WG * K.SCAN_LOOKBACK_ITEMS  # elements per workgroup of the single-pass scan


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
         init_word: int | None = None, role: str = "scan", transform: Transform | None = None) -> None:
    """Scan ``n`` elements of ``src`` into ``dst``.

    Classes up to ``SCAN_SINGLE`` elements: one launch of the down kernel on one workgroup.
    U32 and I32: one zero fill of the tile states, then one single-pass kernel with decoupled
    look-back (``kernels.scan_lookback``; reads and writes each element once). F32 (whose
    rounding depends on the order the tile totals meet) and the 64-bit types (a look-back
    word holds 16 bits of a total and its flag): reduce-then-scan over at most
    ``SCAN_GROUPS`` contiguous segments, three launches: **up** reduces each workgroup's segment
    into ``partial[w]``, **spine** scans the partials exclusively, **down** scans each segment
    tile by tile from its carry. ``transform``: applied to each element of ``src`` where a kernel
    loads it (``transform_*_scan``; ``m`` is over its result type).
    """
    n_word = plan.word(f"{role}.n", n)
    handles_tail = [plan.params] + ([plan.params] if init_word is not None else [])
    if cap <= SCAN_SINGLE:
        span_word = plan.word(f"{role}.span", cap)
        plan.step(fused(K.scan_segments(m, K.SCAN_ITEMS, inclusive, False, n_word, span_word, init_word), transform),
                  [src, dst, *handles_tail], 1)
        return
    if m.dtype in (DataType.U32, DataType.I32):
        tiles = ceil_div(cap, LOOKBACK_TILE)
        state = plan.buffer(f"{role}.state", K.SCAN_STATE_HEAD + 2 * tiles)
        used = plan.word(f"{role}.state_words", K.SCAN_STATE_HEAD + 2 * ceil_div(n, LOOKBACK_TILE))
        plan.step(K.zero_fill(used), [state, plan.params], ceil_div(K.SCAN_STATE_HEAD + 2 * tiles, WG))
        plan.step(fused(K.scan_lookback(m, K.SCAN_LOOKBACK_ITEMS, inclusive, n_word, init_word), transform),
                  [src, dst, state, *handles_tail], tiles)
        return
    groups, span_word, used = segments(plan, role, n, cap)
    partial = plan.buffer(f"{role}.partial", groups, m.dtype.size)
    carry = plan.buffer(f"{role}.carry", groups, m.dtype.size)
    plan.step(fused(K.reduce_segments(m, K.REDUCE_ITEMS, n_word, span_word), transform),
              [src, partial, plan.params], groups)
    scan(plan, m, partial, carry, used, capacity(groups), False, None, f"{role}.spine")
    plan.step(fused(K.scan_segments(m, K.SCAN_ITEMS, inclusive, True, n_word, span_word, init_word), transform),
              [src, dst, carry, *handles_tail], groups)


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


def compact(plan: Plan, pred: K.Predicate, inputs: list[Resident], out: Resident, out_index: Resident | None,
            count: Resident, n: int, cap: int) -> None:
    """Stable compaction (``n >= 1``) in the scans' segments: count kept per segment, scan the
    counts, then each workgroup compacts its segment tile by tile with a running count."""
    n_word = plan.word("compact.n", n)
    extra = [plan.params] if pred.kind == "range" else []
    outs = [out] + ([out_index] if out_index is not None else []) + [count]
    with_index = out_index is not None
    if cap <= SCAN_SINGLE:
        span_word = plan.word("compact.span", cap)
        plan.step(K.compact_segments(pred, K.COMPACT_ITEMS, False, with_index, n_word, span_word),
                  [*inputs, *outs, plan.params, *extra], 1)
        return
    groups, span_word, used = segments(plan, "compact", n, cap)
    partial = plan.buffer("compact.partial", groups)
    carry = plan.buffer("compact.carry", groups)
    plan.step(K.count_segments(pred, K.REDUCE_ITEMS, n_word, span_word), [*inputs, partial, plan.params, *extra],
              groups)
    scan(plan, COUNT, partial, carry, used, capacity(groups), False, role="compact.scan")
    plan.step(K.compact_segments(pred, K.COMPACT_ITEMS, True, with_index, n_word, span_word),
              [*inputs, *outs, carry, plan.params, *extra], groups)


RADIX = 1 << K.RADIX_BITS
SORT_GROUPS = 4096  # at most this many segments in a pass of the segmented sort
ONESWEEP_LIMIT = 1 << 30  # below this many keys, the single-pass sort (its counts share a word with two flags);
# VYRE_ONESWEEP_LIMIT overrides it (vyre.settings)
HISTOGRAM_GROUPS = 1024  # at most this many workgroups count the digits of all passes


def radix_sort(plan: Plan, dtype: DataType, keys: Resident, values: Resident | None, values_mode: str,
               n: int, cap: int, final: tuple[Resident, Resident | None] | None = None
               ) -> tuple[Resident, Resident | None]:
    """Stable LSD radix sort, four 8-bit passes: single-pass (``onesweep_sort``) below
    ``ONESWEEP_LIMIT`` keys, else over segments (``segmented_sort``).

    ``values_mode``: ``"none"``, ``"load"`` (carry ``values``) or ``"iota"`` (carry indices). The
    last pass writes into ``final`` (keys, values) when given, else into scratch. Returns the
    handles holding the sorted raw keys and values.
    """
    sort = onesweep_sort if n < settings.onesweep_limit(ONESWEEP_LIMIT) else segmented_sort
    return sort(plan, dtype, keys, values, values_mode, n, cap, final)


def _radix_passes(plan: Plan, dtype: DataType, keys: Resident, values: Resident | None, values_mode: str, cap: int,
                  final: tuple[Resident, Resident | None] | None, scatter: Callable[..., None], value_size: int = 4
                  ) -> tuple[Resident, Resident | None]:
    """The passes' buffers (four passes, eight for 64-bit keys): ``scatter(shift, key_in, key_out,
    mode, src_keys, moves)`` adds a pass's steps, ``moves`` being the handles after the kernel's
    binding 1 (keys out, values). ``value_size``: bytes per loaded value (indices: 4)."""
    key_bufs = [plan.buffer("sort.keys_b", cap, dtype.size), plan.buffer("sort.keys_a", cap, dtype.size)]
    value_size = value_size if values_mode == "load" else 4
    val_bufs = ([plan.buffer("sort.vals_b", cap, value_size), plan.buffer("sort.vals_a", cap, value_size)]
                if values_mode != "none" else None)
    src_k, src_v = keys, values
    passes = K.radix_passes(raw_type(dtype))
    for p in range(passes):
        key_in = dtype if p == 0 else None
        key_out = dtype if p == passes - 1 else None
        mode = values_mode if p == 0 else ("none" if values_mode == "none" else "load")
        last = p == passes - 1 and final is not None
        dst_k = final[0] if last else key_bufs[p % 2]
        dst_v = (final[1] if last else val_bufs[p % 2]) if val_bufs else None
        moves = [dst_k] + ([src_v] if mode == "load" else []) + ([dst_v] if mode != "none" else [])
        scatter(p * K.RADIX_BITS, key_in, key_out, mode, src_k, moves)
        src_k, src_v = dst_k, dst_v
    return src_k, src_v


def segmented_sort(plan: Plan, dtype: DataType, keys: Resident, values: Resident | None, values_mode: str,
                   n: int, cap: int, final: tuple[Resident, Resident | None] | None = None
                   ) -> tuple[Resident, Resident | None]:
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
                moves: list[Resident]) -> None:
        plan.step(K.radix_counts(shift, key_in, K.COUNT_ITEMS, *words), [src_k, hist, plan.params], groups)
        scan(plan, COUNT, hist, offsets, RADIX * groups, RADIX * groups, False, role="sort.scan")
        plan.step(K.radix_scatter(shift, key_in, key_out, mode, items, *words),
                  [src_k, offsets, *moves, plan.params], groups)

    return _radix_passes(plan, dtype, keys, values, values_mode, cap, final, scatter)


def _lookback_gave_up(count: int) -> VyreError:
    return DispatchFailed("lookback", f"in the single-pass radix sort, {count} digit look-backs gave up waiting "
                          f"for a lower tile to publish (after {K.SPIN[1] ** K.SPIN[0]} tries each), "
                          "so the result is incomplete",
                          "rerun the call; if it recurs, report it with the GPU model, and meanwhile set "
                          "VYRE_ONESWEEP_LIMIT=0 to sort over segments.")


def onesweep_sort(plan: Plan, dtype: DataType, keys: Resident, values: Resident | None, values_mode: str,
                  n: int, cap: int, final: tuple[Resident, Resident | None] | None = None,
                  value_type: DataType | None = None) -> tuple[Resident, Resident | None]:
    """Single-pass (Onesweep) passes, ``n < ONESWEEP_LIMIT``: four for 32-bit keys, eight for
    64-bit keys (read and written whole, 8 bytes each).

    One zero fill of the look-back state, one kernel counting the digits of all passes, one
    scan of each pass's 256 counts, then per pass one kernel: a workgroup per tile, digit
    offsets from decoupled look-back (``kernels.radix_onesweep``). The plan reads back the
    count of look-backs that gave up (``sort.status``, zeroed once per plan) and raises
    ``DispatchFailed`` if any did. ``value_type``: the element type of ``values`` (4 or 8
    bytes; ``values_mode`` "load").
    """
    raw = raw_type(dtype)
    value_raw = raw_type(value_type) if value_type is not None and values_mode == "load" else DataType.U32
    passes, items = K.radix_passes(raw), K.onesweep_items(raw, values_mode)
    tiles = ceil_div(cap, WG * items)
    region = tiles * RADIX
    head = K.lookback_head(passes)
    lookback = plan.buffer("sort.lookback", head + 2 * region)
    n_word, region_word = plan.word("sort.n", n), plan.word("sort.region", region)
    zeroed = head + region  # the head and the first pass's region; each pass zeroes the next one's
    plan.step(K.zero_fill(plan.word("sort.zeroed", zeroed)), [lookback, plan.params], ceil_div(zeroed, WG))
    blocks = min(ceil_div(cap, WG * K.HISTOGRAM_ITEMS), HISTOGRAM_GROUPS)
    plan.step(K.radix_histograms(dtype, K.HISTOGRAM_ITEMS, n_word, plan.word("sort.blocks", blocks)),
              [keys, lookback, plan.params], blocks)
    plan.step(K.radix_digit_starts(passes), [lookback], passes)
    status = plan.buffer("sort.status", 1)
    if not any(handle is status for handle, _, _ in plan.checks):  # once per plan: a later sort keeps the count
        plan.step(K.zero_fill(plan.word("sort.status_words", 1)), [status, plan.params], 1)
        plan.check(status, 0, _lookback_gave_up)

    def scatter(shift: int, key_in: DataType | None, key_out: DataType | None, mode: str, src_k: Resident,
                moves: list[Resident]) -> None:
        plan.step(K.radix_onesweep(shift, key_in, key_out, mode, items, n_word, region_word, raw=raw,
                                   value_raw=value_raw),
                  [src_k, lookback, *moves, plan.params, status], tiles)

    return _radix_passes(plan, dtype, keys, values, values_mode, cap, final, scatter, value_raw.size)


def sort(plan: Plan, dtype: DataType, keys: Resident, values: Resident | None, value_type: DataType | None,
         values_mode: str, n: int, cap: int, final: tuple[Resident, Resident | None] | None = None
         ) -> tuple[Resident | None, Resident | None]:
    """Any supported sort: ``radix_sort`` for 32-bit keys with 4-byte values (or none); for 64-bit
    keys alone, ``onesweep_sort`` of the whole keys below ``ONESWEEP_LIMIT``; else
    ``permuted_sort``. ``value_type``: the element type of ``values`` (``values_mode`` "load").

    64-bit keys with values or indices (key-value sorts, ``argsort``) take ``permuted_sort`` while
    the native passes that move values are under investigation: one GPU run of many test processes
    sharing a card returned an ``argsort``'s indices as a key-value sort's values (see docs/lib.md)."""
    if dtype.size == 4 and (value_type is None or value_type.size == 4):
        return radix_sort(plan, dtype, keys, values, values_mode, n, cap, final)
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


def run_length(plan: Plan, dtype: DataType, src: Resident, values: Resident, lengths: Resident, n: int,
               cap: int, count: Resident | None = None) -> Resident:
    """Run starts by compaction (first value of each run into ``values``), then ``lengths`` from
    consecutive starts; returns the buffer whose first word is the number of runs (``count`` when given)."""
    starts = plan.buffer("rle.starts", cap)
    count = plan.buffer("rle.count", 1) if count is None else count
    compact(plan, K.Predicate("run_start", dtype), [src], values, starts, count, n, cap)
    plan.step(K.run_lengths(plan.word("rle.n", n)), [starts, count, lengths, plan.params], ceil_div(cap, WG))
    return count


def segments_groups(segments_cap: int) -> int:
    return ceil_div(segments_cap, WARPS)
