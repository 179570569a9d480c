"""``sort`` and ``argsort``: stable LSD radix sort of keys, keys with values, or indices.

Keys are u32, i32, f32, u64, i64 or f64; float keys follow a total order (-0.0 before +0.0, NaN
last, every NaN returned as 0x7FFFFFFF, or 0x7FFFFFFFFFFFFFFF for f64). Values are 4 or 8 bytes.
See docs/lib.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vyre.driver.errors import InvalidProgram
from vyre.lib._sort import topology as topo
from vyre.lib.io import Call, as_array, library_call, same_length, segment_offsets
from vyre.lib.keys import KEY_TYPES as NARROW_KEY_TYPES
from vyre.lib.keys import WIDE_KEY_TYPES
from vyre.lib.plan import capacity

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
        out_keys = call.result(plan, "sort.out_keys", k.n, k.np_dtype) if keys_wanted else None  # argsort: none
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


@library_call
def segmented_sort(keys: object, offsets: object, values: object = None, *, stream: object = None,
                   backend: Any = None, scratch: Any = None) -> Any:
    """Each segment ``keys[offsets[s]:offsets[s + 1]]`` in ascending order (stable), the segments where
    they are; with ``values`` (4-byte elements), ``(keys, values)`` with each value moved along with
    its key. Keys are u32, i32 or f32 (``sort``'s order: -0.0 before +0.0, NaN last as 0x7FFFFFFF).

    ``offsets`` are CSR offsets covering every key (``offsets[0] == 0``, non-decreasing,
    ``offsets[-1] == len(keys)``), checked when they are on the host; offsets on the device are not:
    a key before ``offsets[0]`` sorts into the first segment, one from ``offsets[-1]`` on into the last.
    """
    k = as_array(keys, "keys", NARROW_KEY_TYPES)
    v = as_array(values, "values", NARROW_KEY_TYPES) if values is not None else None
    if v is not None:
        same_length(k, v, "segmented_sort(keys, offsets, values)")
    o = segment_offsets(offsets, k.n, whole=True)
    call = Call(backend, scratch, k, o, v, stream=stream)
    segments = max(o.n - 1, 0)
    if k.n == 0:
        return call.empty(k.np_dtype) if v is None else (call.empty(k.np_dtype), call.empty(v.np_dtype))
    if segments == 0:
        raise InvalidProgram(f"{o.n} offsets name no segment of the {k.n} keys",
                             "pass CSR offsets: one more than the segments, from 0 to len(keys).")

    def build() -> Any:
        plan = call.plan()
        src_k, offs = call.upload(plan, "segsort.keys", k), call.upload(plan, "segsort.offsets", o)
        src_v = call.upload(plan, "segsort.values", v) if v is not None else None
        out_k = call.result(plan, "segsort.out_keys", k.n, k.np_dtype)
        out_v = call.result(plan, "segsort.out_values", k.n, v.np_dtype) if v is not None else None
        topo.sort_segments(plan, k.dtype, src_k, offs, src_v, k.n, segments, capacity(k.n), (out_k, out_v))
        call.run(plan)
        keys_out = call.output(out_k, k.np_dtype, k.n)
        return keys_out if out_v is None or v is None else (keys_out, call.output(out_v, v.np_dtype, k.n))

    return call.fast(("segmented_sort", v is not None), build, lambda outs: outs[0] if v is None else tuple(outs))
