"""The topologies of runs: run-length encoding (run starts by compaction, then their lengths) and
the sort-free ``unique`` of keys in a known range (a histogram, then its non-zero bins)."""

from __future__ import annotations

from vyre.driver.backend import Resident
from vyre.ir import DataType, Expr
from vyre.lib._histogram.topology import histogram
from vyre.lib._runs import kernels as K
from vyre.lib._scan.topology import reduce
from vyre.lib._select.kernels import Predicate
from vyre.lib._select.topology import compact
from vyre.lib.blocks import U32, WG, load_param
from vyre.lib.monoid import COUNT
from vyre.lib.plan import Plan, capacity, ceil_div
from vyre.lib.transform import element

#: run lengths written by the compaction itself (``_select.kernels.compact_run_lengths``); False
#: takes the two-pass form (run starts into scratch, then ``K.run_lengths``), kept to compare against
FUSED = True

RUNS_ROLE = "rle.count"  # the scratch word ``run_length`` counts the runs into (no ``count`` given)
DISTINCT_ROLE, TOTAL_ROLE = "urange.distinct", "urange.total"  # ``unique_in_range``'s two counts


def run_length(plan: Plan, dtype: DataType, src: Resident, values: Resident, lengths: Resident, n: int,
               cap: int, count: Resident | None = None, counted: bool = False) -> Resident:
    """Run starts by compaction (first value of each run into ``values``, its length into
    ``lengths``); returns the buffer whose first word is the number of runs (``count`` when given).
    ``counted``: the step that wrote ``src`` counted its run starts (``compact``'s ``counted``)."""
    count = plan.buffer(RUNS_ROLE, 1) if count is None else count
    if FUSED:
        compact(plan, Predicate("run_start", dtype), [src], values, None, count, n, cap, lengths, counted)
        return count
    if counted:
        raise ValueError("the two-pass run lengths count their run starts themselves")
    starts = plan.buffer("rle.starts", cap)
    compact(plan, Predicate("run_start", dtype), [src], values, starts, count, n, cap)
    plan.step(K.run_lengths(plan.word("rle.n", n)), [starts, count, lengths, plan.params], ceil_div(cap, WG))
    return count


def unique_in_range(plan: Plan, dtype: DataType, src: Resident, n: int, lo: int, bins: int, values: Resident,
                    counts: Resident) -> tuple[Resident, Resident]:
    """The distinct keys of ``src`` (``dtype``: U32 or I32), all in ``[lo, lo + bins)``, in
    ascending order into ``values`` and how often each occurs into ``counts``, reading each key
    once: a histogram of ``x - lo``, a stable compaction of its non-zero bins with their indices,
    then ``lo + index``. Returns the buffers whose first word is the number of distinct keys and
    the sum of the counts (short of ``n`` when some key was outside the range)."""
    cap = capacity(bins)
    lo_word, bins_word = plan.word("urange.lo", lo), plan.word("urange.bins", bins)
    shift = element("minus_lo", dtype, U32, lambda v: Expr.sub(Expr.cast(U32, v), load_param(lo_word)))
    hist = plan.buffer("urange.counts", bins)
    histogram(plan, U32, src, hist, n, bins, U32, shift)
    index, distinct = plan.buffer("urange.index", bins), plan.buffer(DISTINCT_ROLE, 1)
    compact(plan, Predicate("flags", U32, U32), [hist, hist], counts, index, distinct, bins, cap)
    plan.step(K.offset_values(bins_word, lo_word), [index, values, plan.params], ceil_div(cap, WG))
    return distinct, reduce(plan, COUNT, hist, bins, cap, plan.buffer(TOTAL_ROLE, 1))
