"""The topology of run-length encoding: run starts by compaction, then their lengths."""

from __future__ import annotations

from vyre.driver.backend import Resident
from vyre.ir import DataType
from vyre.lib._runs import kernels as K
from vyre.lib._select.kernels import Predicate
from vyre.lib._select.topology import compact
from vyre.lib.blocks import WG
from vyre.lib.plan import Plan, ceil_div


def run_length(plan: Plan, dtype: DataType, src: Resident, values: Resident, lengths: Resident, n: int,
               cap: int, count: Resident | None = None) -> Resident:
    """Run starts by compaction (first value of each run into ``values``), then ``lengths`` from
    consecutive starts; returns the buffer whose first word is the number of runs (``count`` when given)."""
    starts = plan.buffer("rle.starts", cap)
    count = plan.buffer("rle.count", 1) if count is None else count
    compact(plan, Predicate("run_start", dtype), [src], values, starts, count, n, cap)
    plan.step(K.run_lengths(plan.word("rle.n", n)), [starts, count, lengths, plan.params], ceil_div(cap, WG))
    return count
