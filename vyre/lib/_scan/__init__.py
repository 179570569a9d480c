"""Scans and reductions: ``reduce``, ``inclusive_scan``, ``exclusive_scan``, ``segmented_reduce``,
and the fused ``transform_reduce``, ``transform_inclusive_scan``, ``transform_exclusive_scan``.

``kernels`` (tile and segment reductions, the segmented scan) and ``lookback`` (the single-pass
scan) build the programs, ``topology`` the steps of a size class (also used by compaction, sorts
and the workloads), ``segmented`` the segmented reduction's programs and steps, ``api`` the
public calls.
"""

from vyre.lib._scan.api import (
    exclusive_scan,
    inclusive_scan,
    reduce,
    segmented_reduce,
    transform_exclusive_scan,
    transform_inclusive_scan,
    transform_reduce,
)

__all__ = ["exclusive_scan", "inclusive_scan", "reduce", "segmented_reduce", "transform_exclusive_scan",
           "transform_inclusive_scan", "transform_reduce"]


