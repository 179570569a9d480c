"""The topology of ``histogram``: a zero fill of the counts, then one counting kernel over a fixed grid."""

from __future__ import annotations

from vyre.driver.backend import Resident
from vyre.ir import DataType
from vyre.lib._histogram import kernels as K
from vyre.lib.blocks import WG, zero_fill
from vyre.lib.plan import Plan, capacity, ceil_div
from vyre.lib.transform import Transform, fused

HISTOGRAM_SHARED_MAX = 8192  # up to this many bins, each workgroup counts in workgroup memory first
HISTOGRAM_BLOCKS_MAX = 1024  # at most this many workgroups
HISTOGRAM_ITEMS = 16  # elements per invocation, at the most workgroups


def histogram(plan: Plan, dtype: DataType, src: Resident, counts: Resident, n: int, bins: int,
              count_type: DataType, transform: Transform | None = None) -> None:
    """Count the ``n`` values of ``src`` (``dtype``) in ``[0, bins)`` into ``counts`` (``count_type``).
    ``transform``: applied to each element of ``src`` where the kernel loads it (``dtype`` is
    then its result type; ``unique(key_range=...)`` counts ``x - lo``)."""
    blocks = min(ceil_div(capacity(n), WG * HISTOGRAM_ITEMS), HISTOGRAM_BLOCKS_MAX)
    words = (plan.word("hist.n", n), plan.word("hist.bins", bins), plan.word("hist.blocks", blocks))
    shared = capacity(max(bins, WG)) if bins <= HISTOGRAM_SHARED_MAX else 0
    zeroed = words[1] if count_type is DataType.U32 else plan.word("hist.count_words", 2 * bins)
    plan.step(zero_fill(zeroed), [counts, plan.params], ceil_div(capacity(bins) * count_type.size // 4, WG))
    plan.step(fused(K.histogram_kernel(dtype, shared, *words, count_type), transform), [src, counts, plan.params],
              blocks)
