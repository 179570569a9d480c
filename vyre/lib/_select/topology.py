"""The topology of stable compaction: counts per segment, their scan (or, up to ``OWN_CARRY_GROUPS``
segments, none: each workgroup of the compaction sums the counts below its segment), the
compaction of each segment; run lengths past one workgroup's class in one pass instead
(``runs_lookback``)."""

from __future__ import annotations

from vyre.driver.backend import Resident
from vyre.ir import Program
from vyre.lib._scan.kernels import REDUCE_ITEMS
from vyre.lib._scan.topology import SCAN_GROUPS, SCAN_SINGLE, scan, segments
from vyre.lib._select import kernels as K
from vyre.lib._select import runs_lookback as L
from vyre.lib.blocks import WG
from vyre.lib.monoid import COUNT
from vyre.lib.plan import Plan, capacity, ceil_div

#: up to this many segments, the downsweep sums the counts below its own (no scan of them)
OWN_CARRY_GROUPS = K.OWN_CARRY_READS * WG
#: classes up to this split into segments of one downsweep tile (2048 elements, counted 8 per
#: invocation), not of one upsweep tile (4096, 16 per invocation): twice the workgroups at 2^20
SMALL_SPANS_UP_TO = 1 << 20
#: run lengths of classes past ``SCAN_SINGLE`` in one pass with decoupled look-back
#: (``L.runs_lookback``); False takes the segments' counts, their scan and the compaction
RUNS_LOOKBACK = True


def counted_runs(plan: Plan, n: int, cap: int) -> tuple[Resident, int, int, int] | None:
    """Where a compaction of ``n`` run starts scans its segments' counts (``counts_scanned``), an
    earlier step may count them (a sort's last pass, ``onesweep.count_runs``), and ``compact(...,
    counted=True)`` then takes them. Returns ``(partial, span_word, recount_word, segments)``: the
    counts' buffer (``K.run_count_words``: one word per segment, the recount word, which an earlier
    step that cannot count exactly sets, then the copies that step adds into), the params words of
    the segments' span and of the recount word's index, and the number of segments (that index).
    None for classes whose compaction counts its segments itself."""
    if not counts_scanned(cap):
        return None
    groups, span_word, _ = segments(plan, "compact", n, cap, WG * _count_items(cap))
    counts = plan.buffer("compact.partial", K.run_count_words(groups))
    return counts, span_word, plan.word("compact.recount", groups), groups


def counts_scanned(cap: int) -> bool:
    """Whether a compaction of run starts of capacity class ``cap`` scans its segments' counts
    (more than ``OWN_CARRY_GROUPS`` segments), so an earlier step may count them (``counted_runs``).
    Never with ``RUNS_LOOKBACK``: those classes count their runs in the one pass."""
    groups = min(ceil_div(cap, WG * _count_items(cap)), SCAN_GROUPS)
    return not RUNS_LOOKBACK and cap > SCAN_SINGLE and groups > OWN_CARRY_GROUPS


def _count_items(cap: int) -> int:
    """Elements per invocation of a compaction's count kernel, by capacity class."""
    return K.COMPACT_ITEMS if cap <= SMALL_SPANS_UP_TO else REDUCE_ITEMS


def compact(plan: Plan, pred: K.Predicate, inputs: list[Resident], out: Resident, out_index: Resident | None,
            count: Resident, n: int, cap: int, lengths: Resident | None = None, counted: bool = False) -> None:
    """Stable compaction (``n >= 1``) in the scans' segments: count kept per segment, scan the
    counts, then each workgroup compacts its segment tile by tile with a running count.
    ``lengths`` (run starts, no ``out_index``): each run's length into ``lengths[rank]``; past
    ``SCAN_SINGLE`` with ``RUNS_LOOKBACK`` in one pass (``L.runs_lookback``), else by
    ``K.compact_run_lengths``, then the lengths of the runs that cross segments (``K.run_tail_lengths``).
    ``counted``: an earlier step counted the run starts per segment (``counted_runs``); they are
    counted again only where it set the recount word."""
    n_word = plan.word("compact.n", n)
    extra = [plan.params] if pred.kind == "range" else []
    with_index = out_index is not None
    if counted and not counts_scanned(cap):
        raise ValueError(f"a compaction of {n} elements counts its segments itself: nothing counts them before it")
    if cap <= SCAN_SINGLE:
        span_word = plan.word("compact.span", cap)
        plan.step(_downsweep(pred, False, with_index, lengths is not None, n_word, span_word),
                  [*inputs, *_outputs(out, out_index, lengths, None), count, plan.params, *extra], 1)
        return
    if lengths is not None and RUNS_LOOKBACK:
        tiles = ceil_div(cap, WG * L.items_of(pred))  # a power of two: the tickets' tile and call
        state = plan.zeroed_buffer("compact.runs_state", L.state_words(tiles))
        plan.step(L.runs_lookback(pred, n_word, plan.word("compact.tiles", tiles)),
                  [*inputs, out, lengths, count, state, plan.params], tiles)
        return
    items = _count_items(cap)  # the count's per invocation
    groups, span_word, used = segments(plan, "compact", n, cap, WG * items)
    partial = plan.buffer("compact.partial", K.run_count_words(groups) if counted else groups)
    with_lengths = lengths is not None
    if groups <= OWN_CARRY_GROUPS:  # each workgroup of the downsweep sums the counts below it: no scan of them
        firsts = [plan.buffer("compact.firsts", groups)] if with_lengths else []  # where each segment's runs start
        count_step = K.count_run_starts(pred, items, n_word, span_word) if with_lengths else \
            K.count_segments(pred, items, n_word, span_word)
        plan.step(count_step, [*inputs, partial, *firsts, plan.params, *extra], groups)
        plan.step(_downsweep(pred, True, with_index, with_lengths, n_word, span_word, True),
                  [*inputs, *_outputs(out, out_index, lengths, tuple(firsts)), count, partial, plan.params, *extra],
                  groups)
        return
    carry = plan.buffer("compact.carry", groups)
    recount = plan.word("compact.recount", groups) if counted else -1
    plan.step(K.count_segments(pred, items, n_word, span_word, recount), [*inputs, partial, plan.params, *extra],
              groups)
    scan(plan, COUNT, partial, carry, used, capacity(groups), False, role="compact.scan")
    ends = (plan.buffer("compact.firsts", groups), plan.buffer("compact.lasts", groups)) if with_lengths else None
    plan.step(_downsweep(pred, True, with_index, with_lengths, n_word, span_word),
              [*inputs, *_outputs(out, out_index, lengths, ends), count, carry, plan.params, *extra], groups)
    if lengths is not None and ends is not None:
        plan.step(K.run_tail_lengths(SCAN_GROUPS, n_word, span_word), [partial, carry, *ends, lengths, plan.params],
                  ceil_div(groups, WG))


def _downsweep(pred: K.Predicate, has_carry: bool, with_index: bool, with_lengths: bool, n_word: int,
               span_word: int, own_carry: bool = False) -> Program:
    if with_lengths:
        return K.compact_run_lengths(pred, K.COMPACT_ITEMS, has_carry, n_word, span_word, own_carry)
    return K.compact_segments(pred, K.COMPACT_ITEMS, has_carry, with_index, n_word, span_word, own_carry)


def _outputs(out: Resident, out_index: Resident | None, lengths: Resident | None,
             ends: tuple[Resident, ...] | None) -> list[Resident]:
    """The downsweep's output buffers before ``count``, in its parameter order."""
    return [out, *([out_index] if out_index is not None else []), *([lengths] if lengths is not None else []),
            *(ends or ())]
