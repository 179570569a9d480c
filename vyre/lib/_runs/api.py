"""``run_length_encode`` and ``unique`` (a sort, then the runs of the sorted keys). See docs/lib.md."""

from __future__ import annotations

from typing import Any

import numpy as np

from vyre.lib._runs import topology as topo
from vyre.lib._sort import topology as sort_topo
from vyre.lib._sort.api import KEY_TYPES
from vyre.lib.io import U32, Call, as_array, check_count, library_call
from vyre.lib.plan import Plan, capacity


def _runs(call: Call, plan: Plan, dtype: Any, src: Any, n: int, np_dtype: np.dtype,
          on_device: bool) -> tuple[Any, ...]:
    """``(values, lengths)`` of the runs; with ``on_device`` (``count="device"``) full-length
    results and a 1-element u32 count of runs, with no wait."""
    values, lengths = call.result(plan, "rle.values", n, np_dtype), call.result(plan, "rle.lengths", n)
    count = call.result(plan, "rle.count_out", 1) if on_device else None
    count = topo.run_length(plan, dtype, src, values, lengths, n, capacity(n), count)
    if on_device:
        call.run(plan)
        return call.output(values, np_dtype, n), call.output(lengths, U32, n), call.output(count, U32, 1)
    (raw,) = call.run(plan, [(count, 0, 4)])
    runs = int(raw.view(np.uint32)[0])
    return call.output(values, np_dtype, runs), call.output(lengths, U32, runs)


def _no_runs(call: Call, np_dtype: np.dtype, on_device: bool) -> tuple[Any, ...]:
    empty = (call.empty(np_dtype), call.empty(U32))
    return (*empty, call.zero_count()) if on_device else empty


@library_call
def run_length_encode(x: object, *, count: str = "exact", stream: object = None, backend: Any = None,
                      scratch: Any = None) -> tuple[Any, ...]:
    """``(values, lengths)`` of the runs of equal consecutive elements (u32 lengths).

    Equality is bitwise, except that every float NaN equals every other (so -0.0 and +0.0 differ).
    ``count="device"``: ``(values, lengths, runs)``, full-length results whose first ``runs[0]``
    entries are the runs (no wait on device arrays).
    """
    on_device = check_count(count)
    a = as_array(x, "x", KEY_TYPES)
    call = Call(backend, scratch, a, stream=stream)
    if a.n == 0:
        return _no_runs(call, a.np_dtype, on_device)
    plan = call.plan()
    return _runs(call, plan, a.dtype, call.upload(plan, "x", a), a.n, a.np_dtype, on_device)


@library_call
def unique(x: object, *, count: str = "exact", stream: object = None, backend: Any = None,
           scratch: Any = None) -> tuple[Any, ...]:
    """``(values, counts)``: the distinct values in sort order and how often each occurs.

    Distinct by the sort's total order: -0.0 and +0.0 are two values, all NaNs are one.
    ``count="device"``: ``(values, counts, distinct)`` as ``run_length_encode`` gives them.
    """
    on_device = check_count(count)
    a = as_array(x, "x", KEY_TYPES)
    call = Call(backend, scratch, a, stream=stream)
    if a.n == 0:
        return _no_runs(call, a.np_dtype, on_device)
    plan = call.plan()
    keys, _ = sort_topo.sort(plan, a.dtype, call.upload(plan, "x", a), None, None, "none", a.n, capacity(a.n))
    return _runs(call, plan, a.dtype, keys, a.n, a.np_dtype, on_device)
