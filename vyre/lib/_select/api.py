"""``select`` and ``select_if``: stable compaction by flags or by a value range. See docs/lib.md."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from vyre.driver.backend import Resident
from vyre.lib._select import kernels as K
from vyre.lib._select import topology as topo
from vyre.lib.io import Array, Call, as_array, as_scalar, check_count, library_call, same_length
from vyre.lib.monoid import ELEMENT_TYPES, SCAN_TYPES
from vyre.lib.plan import Plan, capacity

VALUE_TYPES = SCAN_TYPES
FLAG_TYPES = ELEMENT_TYPES
Prepare = Callable[[], tuple[Plan, K.Predicate]]  # a new plan (its predicate's words set) and the predicate


def _compact(call: Call, key: tuple, prepare: Prepare, arrays: list[Array], on_device: bool) -> Any:
    """The compaction's result: exact-size (``Call.exact``: the count read back, the one wait), or
    with ``on_device`` (``count="device"``) the full-length result and a 1-element u32 count, with
    no wait. Both run compiled on device arrays and ``ResidentArray``s."""
    a = arrays[0]

    def steps(device_count: bool) -> tuple[Plan, list[tuple[Resident, np.dtype, int]], Any]:
        plan, pred = prepare()
        inputs = [call.upload(plan, f"select.in{i}", arr) for i, arr in enumerate(arrays)]
        out = call.result(plan, "select.out", a.n, a.np_dtype)
        count = call.result(plan, "select.count", 1) if device_count else plan.buffer("select.count", 1)
        topo.compact(plan, pred, inputs, out, None, count, a.n, capacity(a.n))
        return plan, [(out, a.np_dtype, a.n)], count

    return call.counted(key, steps, ("select.count",), lambda take, words: take(0, words[0]), on_device)


def _empty_compaction(call: Call, np_dtype: np.dtype, on_device: bool) -> Any:
    """The result of compacting nothing (with ``count="device"``: and a count of 0)."""
    return (call.empty(np_dtype), call.zero_count()) if on_device else call.empty(np_dtype)


@library_call
def select(x: object, flags: object, *, count: str = "exact", stream: object = None, backend: Any = None,
           scratch: Any = None) -> Any:
    """The elements of ``x`` whose flag is non-zero, in their original order (stable compaction).

    ``count="device"``: ``(out, n)``, ``out`` as long as ``x`` with the kept elements first and
    ``n`` a 1-element u32 array holding how many (no wait on device arrays)."""
    on_device = check_count(count)
    a = as_array(x, "x", VALUE_TYPES)
    f = as_array(flags, "flags", FLAG_TYPES)
    same_length(a, f, "select(x, flags)")
    call = Call(backend, scratch, a, f, stream=stream)
    if a.n == 0:
        return _empty_compaction(call, a.np_dtype, on_device)

    def prepare() -> tuple[Plan, K.Predicate]:
        return call.plan(), K.Predicate("flags", a.dtype, f.dtype)

    return _compact(call, ("select",), prepare, [a, f], on_device)


@library_call
def select_if(x: object, lo: object, hi: object, *, count: str = "exact", stream: object = None,
              backend: Any = None, scratch: Any = None) -> Any:
    """The elements with ``lo <= x < hi``, in their original order (NaN is never kept);
    ``count`` as for ``select``."""
    on_device = check_count(count)
    a = as_array(x, "x", VALUE_TYPES)
    call = Call(backend, scratch, a, stream=stream)
    lo_value, hi_value = as_scalar(lo, a.dtype, "lo"), as_scalar(hi, a.dtype, "hi")
    if a.n == 0:
        return _empty_compaction(call, a.np_dtype, on_device)

    def prepare() -> tuple[Plan, K.Predicate]:
        plan = call.plan()
        lo_word = plan.typed_word("select.lo", lo_value, a.dtype)
        if plan.typed_word("select.hi", hi_value, a.dtype) != lo_word + 1:
            raise AssertionError("select_if needs lo and hi in consecutive parameter words")
        return plan, K.Predicate("range", a.dtype, lo_word=lo_word)

    return _compact(call, ("select_if", lo_value.tobytes(), hi_value.tobytes()), prepare, [a], on_device)
