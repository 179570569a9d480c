"""``sort``, ``argsort``, ``unique`` and ``run_length_encode``: LSD radix sort and run detection.

Keys are u32, i32, f32, u64, i64 or f64; float keys follow a total order (-0.0 before +0.0, NaN
last, every NaN returned as 0x7FFFFFFF, or 0x7FFFFFFFFFFFFFFF for f64). Values are 4 or 8 bytes.
See docs/lib.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vyre.driver.errors import InvalidProgram
from vyre.lib import plan as topo
from vyre.lib.io import Call, as_array, check_count, library_call, same_length
from vyre.lib.keys import KEY_TYPES as NARROW_KEY_TYPES
from vyre.lib.keys import WIDE_KEY_TYPES
from vyre.lib.plan import capacity
from vyre.lib.unique_range import checked_range, unique_in_range

KEY_TYPES = NARROW_KEY_TYPES + WIDE_KEY_TYPES
VALUE_TYPES = KEY_TYPES
U32 = np.dtype(np.uint32)


def _sorted(keys: object, values: object, mode: str, stream: object, backend: Any, scratch: Any) -> tuple[Any, Any]:
    """Sorted keys and values (``mode`` "none", "load" or "iota"); with "iota" (argsort) the sorted
    keys stay in scratch and only the indices are returned (``None`` in place of the keys)."""
    k = as_array(keys, "keys", KEY_TYPES)
    v = as_array(values, "values", VALUE_TYPES) if mode == "load" else None
    if v is not None:
        same_length(k, v, "sort(keys, values)")
    call = Call(backend, scratch, k, v, stream=stream)
    value_dtype = v.np_dtype if v is not None else U32
    keys_wanted = mode != "iota"
    if k.n == 0:
        return (call.empty(k.np_dtype) if keys_wanted else None), (call.empty(value_dtype) if mode != "none" else None)

    def build() -> tuple[Any, Any]:
        plan = call.plan()
        src_k = call.upload(plan, "sort.keys", k)
        src_v = call.upload(plan, "sort.values", v) if v is not None else None
        out_keys = (call.result(plan, "sort.out_keys", k.n, k.np_dtype) if keys_wanted
                    else plan.buffer("sort.out_keys", k.n, k.dtype.size))
        final = (out_keys, call.result(plan, "sort.out_values", k.n, value_dtype) if mode != "none" else None)
        out_k, out_v = topo.sort(plan, k.dtype, src_k, src_v, v.dtype if v is not None else None, mode, k.n,
                                 capacity(k.n), final)
        call.run(plan)
        keys_out = call.output(out_k, k.np_dtype, k.n) if keys_wanted and out_k is not None else None
        return keys_out, (call.output(out_v, value_dtype, k.n) if out_v is not None else None)

    def shape(outs: list[Any]) -> tuple[Any, Any]:
        if not keys_wanted:
            return None, outs[0]
        return outs[0], (outs[1] if mode != "none" else None)

    return call.fast(("sort", mode), build, shape)


@library_call
def sort(keys: object, values: object = None, *, stream: object = None, backend: Any = None,
         scratch: Any = None) -> Any:
    """Keys in ascending order (stable); with ``values`` (4- or 8-byte elements), ``(keys, values)``
    with each value moved along with its key."""
    out_k, out_v = _sorted(keys, values, "none" if values is None else "load", stream, backend, scratch)
    return out_k if values is None else (out_k, out_v)


@library_call
def argsort(keys: object, *, stream: object = None, backend: Any = None, scratch: Any = None) -> Any:
    """The u32 indices that sort ``keys`` stably (``keys[argsort(keys)] == sort(keys)``)."""
    return _sorted(keys, None, "iota", stream, backend, scratch)[1]


def _runs(call: Call, plan: topo.Plan, dtype: Any, src: Any, n: int, np_dtype: np.dtype,
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
def unique(x: object, *, count: str = "exact", key_range: tuple[int, int] | None = None, stream: object = None,
           backend: Any = None, scratch: Any = None) -> tuple[Any, ...]:
    """``(values, counts)``: the distinct values in sort order and how often each occurs.

    Distinct by the sort's total order: -0.0 and +0.0 are two values, all NaNs are one.
    ``count="device"``: ``(values, counts, distinct)`` as ``run_length_encode`` gives them.
    ``key_range=(lo, hi)`` (u32/i32 keys, every key in ``[lo, hi)``, ``hi - lo <= 2**24``): the
    same result without sorting, from a histogram of ``x - lo`` (``vyre.lib.unique_range``);
    a key outside the range raises ``InvalidProgram``. Takes ``count="exact"`` only.
    """
    on_device = check_count(count)
    a = as_array(x, "x", KEY_TYPES)
    call = Call(backend, scratch, a, stream=stream)
    if key_range is not None:
        lo, bins = checked_range(key_range, a)
        if on_device:
            raise InvalidProgram("unique(key_range=...) reads back its count to check the range",
                                 "call it with count='exact' (the default), or without key_range.")
        return (call.empty(a.np_dtype), call.empty(U32)) if a.n == 0 else unique_in_range(call, a, lo, bins)
    if a.n == 0:
        return _no_runs(call, a.np_dtype, on_device)
    plan = call.plan()
    keys, _ = topo.sort(plan, a.dtype, call.upload(plan, "x", a), None, None, "none", a.n, capacity(a.n))
    return _runs(call, plan, a.dtype, keys, a.n, a.np_dtype, on_device)
