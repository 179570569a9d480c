"""The topology of stable compaction: counts per segment, their scan, the compaction of each segment."""

from __future__ import annotations

from vyre.driver.backend import Resident
from vyre.lib._scan.kernels import REDUCE_ITEMS
from vyre.lib._scan.topology import SCAN_SINGLE, scan, segments
from vyre.lib._select import kernels as K
from vyre.lib.monoid import COUNT
from vyre.lib.plan import Plan, capacity


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
    plan.step(K.count_segments(pred, REDUCE_ITEMS, n_word, span_word), [*inputs, partial, plan.params, *extra],
              groups)
    scan(plan, COUNT, partial, carry, used, capacity(groups), False, role="compact.scan")
    plan.step(K.compact_segments(pred, K.COMPACT_ITEMS, True, with_index, n_word, span_word),
              [*inputs, *outs, carry, plan.params, *extra], groups)
