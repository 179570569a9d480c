"""``select`` and ``select_if``: stable compaction by flags or by a value range. See docs/lib.md."""

from __future__ import annotations

from typing import Any

import numpy as np

from vyre.lib._select import kernels as K
from vyre.lib._select import topology as topo
from vyre.lib.io import U32, Array, Call, as_array, as_scalar, check_count, library_call, same_length
from vyre.lib.monoid import ELEMENT_TYPES, SCAN_TYPES
from vyre.lib.plan import Plan, capacity

VALUE_TYPES = SCAN_TYPES
FLAG_TYPES = ELEMENT_TYPES


def _compact(call: Call, plan: Plan, pred: K.Predicate, arrays: list[Array], on_device: bool) -> Any:
    """The compaction's result: exact-size, or with ``on_device`` (``count="device"``) the
    full-length result and a 1-element u32 count, with no wait."""
    a = arrays[0]
    inputs = [call.upload(plan, f"select.in{i}", arr) for i, arr in enumerate(arrays)]
    out = call.result(plan, "select.out", a.n, a.np_dtype)
    count = call.result(plan, "select.count", 1) if on_device else plan.buffer("select.count", 1)
    topo.compact(plan, pred, inputs, out, None, count, a.n, capacity(a.n))
    if on_device:
        call.run(plan)
        return call.output(out, a.np_dtype, a.n), call.output(count, U32, 1)
    (raw,) = call.run(plan, [(count, 0, 4)])
    return call.output(out, a.np_dtype, int(raw.view(np.uint32)[0]))


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
    def build() -> Any:
        return _compact(call, call.plan(), K.Predicate("flags", a.dtype, f.dtype), [a, f], on_device)

    return call.fast(("select",), build, tuple) if on_device else build()


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

    def build() -> Any:
        plan = call.plan()
        lo_word = plan.typed_word("select.lo", lo_value, a.dtype)
        if plan.typed_word("select.hi", hi_value, a.dtype) != lo_word + 1:
            raise AssertionError("select_if needs lo and hi in consecutive parameter words")
        return _compact(call, plan, K.Predicate("range", a.dtype, lo_word=lo_word), [a], on_device)

    key = ("select_if", lo_value.tobytes(), hi_value.tobytes())
    return call.fast(key, build, tuple) if on_device else build()
