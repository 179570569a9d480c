"""Device-wide building blocks written in the vyre IR, so every backend runs them and the oracle checks them.

``reduce``, ``inclusive_scan``, ``exclusive_scan``, ``select``, ``select_if``, ``histogram``,
``sort``, ``argsort``, ``segmented_sort``, ``unique``, ``segmented_reduce``, ``run_length_encode``, and the fused
``transform_reduce``, ``transform_inclusive_scan``, ``transform_exclusive_scan`` (a ``@vyre.func``
applied to each element as it is loaded). Each takes numpy arrays (returns numpy), device arrays
on ``cuda`` (returns CuPy) or ``ResidentArray``s (returns new ones the caller owns; ``recycle``
hands them back for reuse), and ``backend=`` (default: ``vyre.acquire(allow_reference=True)``,
acquired once). Scratch buffers are kept per backend and reused; ``release_scratch(backend)``
frees them. See docs/lib.md.

Each algorithm family is one private package holding its kernels, its topology (the steps of a
size class) and its calls: ``_scan`` (scans, reductions, segmented reduction), ``_select``
(compaction), ``_histogram``, ``_sort`` (radix sorts) and ``_runs`` (run-length encoding,
``unique``). ``plan``, ``blocks``, ``monoid``, ``keys``, ``io``, ``scratch`` and ``transform``
(a ``@vyre.func`` applied where a kernel loads its input) are shared.

The workload modules ``graph``, ``datalog``, ``egraph``, ``text`` and ``multi`` are attributes too,
imported on first use (docs/workloads.md, docs/scale.md).
"""

from vyre.lib._histogram import histogram
from vyre.lib._runs import run_length_encode, unique
from vyre.lib._scan import (
    exclusive_scan,
    inclusive_scan,
    reduce,
    segmented_reduce,
    transform_exclusive_scan,
    transform_inclusive_scan,
    transform_reduce,
)
from vyre.lib._select import select, select_if
from vyre.lib._sort import argsort, segmented_sort, sort
from vyre.lib.io import ResidentArray, recycle
from vyre.lib.scratch import release_scratch

_WORKLOADS = ("datalog", "egraph", "graph", "multi", "text")


def __getattr__(name: str) -> object:
    """``vyre.lib.graph`` etc. without importing every workload up front (PEP 562)."""
    if name in _WORKLOADS:
        import importlib

        return importlib.import_module(f"vyre.lib.{name}")
    raise AttributeError(f"module 'vyre.lib' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_WORKLOADS})


__all__ = [
    "ResidentArray",
    "argsort", "exclusive_scan", "histogram", "inclusive_scan", "recycle", "reduce", "release_scratch",
    "run_length_encode", "segmented_reduce", "segmented_sort", "select", "select_if", "sort",
    "transform_exclusive_scan", "transform_inclusive_scan", "transform_reduce", "unique",
]
