"""``reduce``, the scans (and their ``transform_`` forms), ``select``, ``select_if``, ``histogram``
and ``segmented_reduce``.

Each function checks its arguments, builds the fixed topology of its size class
(``vyre.lib.plan``) and runs it as one sequence on the backend. See docs/lib.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vyre.driver.errors import InvalidProgram
from vyre.ir import DataType
from vyre.lib import kernels as K
from vyre.lib import plan as topo
from vyre.lib.io import (
    U32,
    Array,
    Call,
    ResidentArray,
    as_array,
    check_count,
    device_array_info,
    library_call,
    same_length,
)
from vyre.lib.monoid import SCAN_TYPES, monoid
from vyre.lib.plan import Plan, capacity, ceil_div
from vyre.lib.transform import Transform, element_transform

VALUE_TYPES = SCAN_TYPES
FLAG_TYPES = (DataType.U8, DataType.I8, DataType.U16, DataType.I16, DataType.U32, DataType.I32, DataType.F32,
              DataType.U64, DataType.I64, DataType.F64)
INT_TYPES = (DataType.U8, DataType.I8, DataType.U16, DataType.I16, DataType.U32, DataType.I32, DataType.U64,
             DataType.I64)
TRANSFORM_INPUT_TYPES = FLAG_TYPES  # what a transform may read: every integer type and the floats
COUNT_TYPES = {np.dtype(np.uint32): DataType.U32, np.dtype(np.uint64): DataType.U64}
HISTOGRAM_SHARED_MAX = 8192
HISTOGRAM_BLOCKS_MAX = 1024
HISTOGRAM_ITEMS = 16


@library_call
def reduce(x: object, op: str = "add", *, stream: object = None, backend: Any = None, scratch: Any = None) -> Any:
    """Combine all elements with ``op`` (add, min, max, and, or, xor); an empty input gives the
    op's identity (0; all ones for and; the type's max for min and min for max, +-inf on floats).

    Float min/max skip NaNs (NaN only when every element is NaN); float sums are added in a
    fixed tree order, so every backend gives the same bits. Returns a numpy scalar, or for device
    input a 0-d array of the caller's kind, computed on ``stream`` with no wait.
    """
    return _reduce(as_array(x, "x", VALUE_TYPES), op, None, stream, backend, scratch)


@library_call
def transform_reduce(x: object, fn: object, op: str = "add", *, stream: object = None, backend: Any = None,
                     scratch: Any = None) -> Any:
    """``reduce`` of ``fn(x[i])`` in one pass: ``fn``, a ``@vyre.func`` of one argument, is applied
    to each element as the reduction loads it (no temporary array). Its result type is the type
    accumulated and returned (u32, i32, f32, u64, i64 or f64); ``x`` may also hold 8- and 16-bit
    integers. Order, identities and results as ``reduce`` gives for ``fn(x)``."""
    a = as_array(x, "x", TRANSFORM_INPUT_TYPES)
    return _reduce(a, op, element_transform(fn, a.dtype), stream, backend, scratch)


def _reduce(a: Array, op: str, t: Transform | None, stream: object, backend: Any, scratch: Any) -> Any:
    out_type = a.dtype if t is None else t.out_type
    m = monoid(op, out_type)
    np_out = out_type.np_dtype
    call = Call(backend, scratch, a, stream=stream)
    if call.on_device:
        def build() -> Any:
            plan = call.plan()
            out = call.result(plan, "reduce.out", 1, np_out)
            if a.n == 0:
                call.fill(out, np.array([m.numpy_empty()], np_out))
            else:
                topo.reduce(plan, m, call.upload(plan, "x", a), a.n, capacity(a.n), out, t)
                call.run(plan)
            return call.output(out, np_out, 1).reshape(())

        key = ("reduce", op) if t is None else ("reduce", op, t)
        return call.fast(key, build, lambda outs: outs[0].reshape(()))
    if a.n == 0:
        return m.numpy_empty()
    plan = call.plan()
    src = call.upload(plan, "x", a)
    result = topo.reduce(plan, m, src, a.n, capacity(a.n), transform=t)
    (word,) = call.run(plan, [(result, 0, out_type.size)])
    return word.view(np_out)[0]


def _scan(a: Array, op: str, inclusive: bool, init: object, t: Transform | None, stream: object, backend: Any,
          scratch: Any) -> Any:
    out_type = a.dtype if t is None else t.out_type
    m = monoid(op, out_type)
    np_out = out_type.np_dtype
    call = Call(backend, scratch, a, stream=stream)
    if a.n == 0:
        return call.empty(np_out)
    if init is None:
        start = None if inclusive else _typed_scalar(m.empty_value(), out_type, "init")
    else:
        start = _typed_scalar(init, out_type, "init")

    def build() -> Any:
        plan = call.plan()
        src = call.upload(plan, "x", a)
        out = call.result(plan, "scan.out", a.n, np_out)
        init_word = None if start is None else plan.typed_word("scan.init", start, out_type)
        topo.scan(plan, m, src, out, a.n, capacity(a.n), inclusive, init_word, transform=t)
        call.run(plan)
        return call.output(out, np_out, a.n)

    key = ("scan", op, inclusive, None if start is None else start.tobytes()) + (() if t is None else (t,))
    return call.fast(key, build, lambda outs: outs[0])


def _scalar(value: object, a: Array, name: str) -> Any:
    """``value`` as an ``a``-typed numpy scalar, or ``InvalidProgram`` if it does not fit."""
    return _typed_scalar(value, a.dtype, name)


def _typed_scalar(value: object, dtype: DataType, name: str) -> Any:
    """``value`` as a ``dtype`` numpy scalar, or ``InvalidProgram`` if it does not fit."""
    np_dtype = dtype.np_dtype
    converted: Any = None
    try:
        with np.errstate(over="raise", invalid="raise"):
            converted = np.array([value]).astype(np_dtype, casting="unsafe")[0]
        exact = dtype in (DataType.F32, DataType.F64) or int(converted) == value
    except (TypeError, ValueError, OverflowError, FloatingPointError):
        exact = False
    if not exact:
        raise InvalidProgram(f"{name}={value!r} is not a {np_dtype} value",
                             f"pass a number representable as {np_dtype}.")
    return converted


@library_call
def inclusive_scan(x: object, op: str = "add", *, init: object = None, stream: object = None, backend: Any = None,
                   scratch: Any = None) -> Any:
    """``out[i] = x[0] op x[1] op ... op x[i]`` (integers wrap); with ``init``,
    ``out[i] = init op x[0] op ... op x[i]`` (a carry from earlier data, in the same pass)."""
    return _scan(as_array(x, "x", VALUE_TYPES), op, True, init, None, stream, backend, scratch)


@library_call
def exclusive_scan(x: object, op: str = "add", init: object = None, *, stream: object = None, backend: Any = None,
                   scratch: Any = None) -> Any:
    """``out[0] = init``, ``out[i] = init op x[0] op ... op x[i-1]``; ``init`` defaults to the op's
    identity (0 for add, or, xor)."""
    return _scan(as_array(x, "x", VALUE_TYPES), op, False, init, None, stream, backend, scratch)


@library_call
def transform_inclusive_scan(x: object, fn: object, op: str = "add", *, init: object = None, stream: object = None,
                             backend: Any = None, scratch: Any = None) -> Any:
    """``inclusive_scan`` of ``fn(x[i])`` in one pass (``fn`` as for ``transform_reduce``, applied
    as the scan loads each element); the result and ``init`` have ``fn``'s result type."""
    a = as_array(x, "x", TRANSFORM_INPUT_TYPES)
    return _scan(a, op, True, init, element_transform(fn, a.dtype), stream, backend, scratch)


@library_call
def transform_exclusive_scan(x: object, fn: object, op: str = "add", init: object = None, *, stream: object = None,
                             backend: Any = None, scratch: Any = None) -> Any:
    """``exclusive_scan`` of ``fn(x[i])`` in one pass (``fn`` as for ``transform_reduce``)."""
    a = as_array(x, "x", TRANSFORM_INPUT_TYPES)
    return _scan(a, op, False, init, element_transform(fn, a.dtype), stream, backend, scratch)


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
    lo_value, hi_value = _scalar(lo, a, "lo"), _scalar(hi, a, "hi")
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


@library_call
def histogram(x: object, bins: int, *, counts_dtype: object = np.uint32, stream: object = None,
              backend: Any = None, scratch: Any = None) -> Any:
    """``counts[v]`` = how many elements equal ``v``, for ``v`` in ``[0, bins)`` (``counts_dtype``:
    uint32, the default, or uint64).

    Values outside the range (negative ones included) are ignored.
    """
    a = as_array(x, "x", INT_TYPES)
    count_type = _count_type(counts_dtype)
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or not 0 <= int(bins) <= 2**31:
        raise InvalidProgram(f"bins={bins!r} is not a count in [0, 2**31]",
                             "pass a non-negative int bins of at most 2**31 (the counts buffer's capacity class "
                             "must fit u32 element counts).")
    bins = int(bins)
    limit = backend.max_buffer_bytes() if hasattr(backend, "max_buffer_bytes") else 2**31
    if capacity(bins) * count_type.size > limit:
        raise InvalidProgram(f"bins={bins} needs {capacity(bins) * count_type.size} bytes of counts, over the "
                             f"backend's {limit}-byte buffer limit", "use fewer bins, or bucket the values first.")
    call = Call(backend, scratch, a, stream=stream)
    counts_np = count_type.np_dtype
    if bins == 0:
        return call.empty(counts_np)

    def build() -> Any:
        plan = call.plan()
        cap = capacity(a.n)
        blocks = min(ceil_div(cap, K.WG * HISTOGRAM_ITEMS), HISTOGRAM_BLOCKS_MAX)
        words = (plan.word("hist.n", a.n), plan.word("hist.bins", bins), plan.word("hist.blocks", blocks))
        src = call.upload(plan, "x", a)
        counts = call.result(plan, "hist.counts", bins, counts_np)
        shared = capacity(max(bins, K.WG)) if bins <= HISTOGRAM_SHARED_MAX else 0
        zeroed = words[1] if count_type is DataType.U32 else plan.word("hist.count_words", 2 * bins)
        plan.step(K.zero_fill(zeroed), [counts, plan.params], ceil_div(capacity(bins) * count_type.size // 4, K.WG))
        plan.step(K.histogram_kernel(a.dtype, shared, *words, count_type), [src, counts, plan.params], blocks)
        call.run(plan)
        return call.output(counts, counts_np, bins)

    return call.fast(("histogram", bins, count_type), build, lambda outs: outs[0])


def _count_type(counts_dtype: object) -> DataType:
    """The counts' type of ``histogram``: U32 or U64, else ``InvalidProgram``."""
    try:
        np_dtype = np.dtype(counts_dtype)  # type: ignore[call-overload]
    except TypeError:
        np_dtype = None
    if np_dtype not in COUNT_TYPES:
        raise InvalidProgram(f"counts_dtype={counts_dtype!r} is not a histogram count type",
                             "pass counts_dtype=numpy.uint32 (the default) or numpy.uint64.")
    return COUNT_TYPES[np_dtype]


@library_call
def segmented_reduce(x: object, offsets: object, op: str = "add", *, stream: object = None, backend: Any = None,
                     scratch: Any = None) -> Any:
    """``out[s] = reduce(x[offsets[s]:offsets[s+1]], op)`` for each of the ``len(offsets) - 1``
    segments (CSR offsets); an empty segment gives the op's identity, as ``reduce`` does."""
    a = as_array(x, "x", VALUE_TYPES)
    on_host = device_array_info(offsets) is None and not isinstance(offsets, ResidentArray)
    # host offsets of any integer type are checked and converted; offsets on the device are clamped there
    o = _checked_offsets(offsets, a.n) if on_host else as_array(offsets, "offsets", (DataType.U32, DataType.I32))
    m = monoid(op, a.dtype)
    call = Call(backend, scratch, a, o, stream=stream)
    segments = max(o.n - 1, 0)
    if segments == 0:
        return call.empty(a.np_dtype)
    plan = call.plan()
    n_word, s_word = plan.word("seg.n", a.n), plan.word("seg.segments", segments)
    src, offs = call.upload(plan, "x", a), call.upload(plan, "seg.offsets", o)
    out = call.result(plan, "seg.out", segments, a.np_dtype)
    plan.step(K.segmented_reduce_kernel(m, n_word, s_word), [src, offs, out, plan.params],
              topo.segments_groups(capacity(segments)))
    call.run(plan)
    return call.output(out, a.np_dtype, segments)


def _checked_offsets(offsets: object, n: int) -> Array:
    """Host offsets as u32 after checking they start >= 0, never decrease and end <= ``n``."""
    values = np.asarray(offsets).reshape(-1)
    if values.size and (values.dtype.kind not in "iu"):
        raise InvalidProgram(f"offsets have dtype {values.dtype}", "pass integer offsets.")
    if values.size and (values.min() < 0 or values.max() > n or np.any(np.diff(values.astype(np.int64)) < 0)):
        raise InvalidProgram(f"offsets must be non-decreasing within [0, {n}] (len(x))",
                             "pass CSR offsets: offsets[0] >= 0, offsets[s] <= offsets[s+1] <= len(x).")
    return as_array(values.astype(np.uint32), "offsets", (DataType.U32,))
