"""Device-wide building blocks written in the vyre IR, so every backend runs them and the oracle checks them.

``reduce``, ``inclusive_scan``, ``exclusive_scan``, ``select``, ``select_if``, ``histogram``,
``sort``, ``argsort``, ``unique``, ``segmented_reduce``, ``run_length_encode``. Each takes numpy
arrays (returns numpy), device arrays on ``cuda`` (returns CuPy) or ``ResidentArray``s (returns new
ones the caller owns; ``recycle`` hands them back for reuse), and ``backend=`` (default:
``vyre.acquire(allow_reference=True)``, acquired once). Scratch buffers are kept per backend and
reused; ``release_scratch(backend)`` frees them. See docs/lib.md.
"""

from vyre.lib.io import ResidentArray, recycle
from vyre.lib.primitives import (
    exclusive_scan,
    histogram,
    inclusive_scan,
    reduce,
    segmented_reduce,
    select,
    select_if,
)
from vyre.lib.scratch import release_scratch
from vyre.lib.sorting import argsort, run_length_encode, sort, unique

__all__ = [
    "ResidentArray",
    "argsort", "exclusive_scan", "histogram", "inclusive_scan", "recycle", "reduce", "release_scratch",
    "run_length_encode", "segmented_reduce", "select", "select_if", "sort", "unique",
]
