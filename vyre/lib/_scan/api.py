"""``reduce``, ``inclusive_scan``, ``exclusive_scan`` (and their ``transform_`` forms) and
``segmented_reduce``: check the arguments, build the topology of the size class (``topology``) and
run it as one sequence. See docs/lib.md.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from vyre.driver.errors import InvalidProgram
from vyre.ir import DataType
from vyre.lib._scan import segmented as seg
from vyre.lib._scan import topology as topo
from vyre.lib.io import (
    Array,
    Call,
    ResidentArray,
    as_array,
    as_scalar,
    device_array_info,
    library_call,
    segment_offsets,
)
from vyre.lib.monoid import ELEMENT_TYPES, SCAN_TYPES, monoid
from vyre.lib.plan import capacity
from vyre.lib.transform import Transform, element_transform

VALUE_TYPES = SCAN_TYPES
TRANSFORM_INPUT_TYPES = ELEMENT_TYPES  # what a transform may read: every integer type and the floats
VALUE_ROLE = "reduce.value"  # the scratch a ``ResidentArray`` call's reduction lands in, read back with its steps


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
    key = ("reduce", op) if t is None else ("reduce", op, t)
    if call.compiles_resident:  # a numpy scalar: read back with the steps (the one wait), no result handle
        value = [(scratch.get(VALUE_ROLE, out_type.size), 0, out_type.size)]

        def build_value() -> Any:
            plan = call.plan()
            topo.reduce(plan, m, call.upload(plan, "x", a), a.n, capacity(a.n), value[0][0], t)
            call.run(plan)
            return _scalar([], call.read(value), np_out)

        return call.fast(key, build_value, functools.partial(_scalar, np_dtype=np_out), reads=value)
    if call.on_device:
        def build() -> Any:
            plan = call.plan()
            out = call.result(plan, "reduce.out", 1, np_out)
            if a.n == 0:
                call.fill(out, np.array([m.numpy_empty()], np_out))
            else:
                topo.reduce(plan, m, call.upload(plan, "x", a), a.n, capacity(a.n), out, t)
                call.run(plan)
            return _zero_d([call.output(out, np_out, 1)])

        return call.fast(key, build, _zero_d)
    if a.n == 0:
        return m.numpy_empty()
    plan = call.plan()
    src = call.upload(plan, "x", a)
    result = topo.reduce(plan, m, src, a.n, capacity(a.n), transform=t)
    (word,) = call.run(plan, [(result, 0, out_type.size)])
    return word.view(np_out)[0]


def _zero_d(outs: list[Any]) -> Any:
    """A device call's reduction: its 1-element result as a 0-d array of the caller's kind."""
    return outs[0].reshape(())


def _scalar(outs: list[Any], raws: list[np.ndarray], np_dtype: np.dtype) -> Any:
    """A ``ResidentArray`` call's reduction: the value read back, as a numpy scalar."""
    return raws[0].view(np_dtype)[0]


def _scan(a: Array, op: str, inclusive: bool, init: object, t: Transform | None, stream: object, backend: Any,
          scratch: Any) -> Any:
    out_type = a.dtype if t is None else t.out_type
    m = monoid(op, out_type)
    np_out = out_type.np_dtype
    bound = _init_array(init, out_type)
    call = Call(backend, scratch, a, bound, stream=stream)
    if a.n == 0:
        return call.empty(np_out)
    if bound is not None:
        start = None
    elif init is None:
        start = None if inclusive else as_scalar(m.empty_value(), out_type, "init")
    else:
        start = as_scalar(init, out_type, "init")

    def build() -> Any:
        plan = call.plan()
        src = call.upload(plan, "x", a)
        out = call.result(plan, "scan.out", a.n, np_out)
        init_word = None if start is None else plan.typed_word("scan.init", start, out_type)
        init_buffer = None if bound is None else call.upload(plan, "scan.init", bound)
        topo.scan(plan, m, src, out, a.n, capacity(a.n), inclusive, init_word, transform=t, init_buffer=init_buffer)
        call.run(plan)
        return call.output(out, np_out, a.n)

    start_key = "array" if bound is not None else None if start is None else start.tobytes()
    key = ("scan", op, inclusive, start_key) + (() if t is None else (t,))
    return call.fast(key, build, lambda outs: outs[0])


def _init_array(init: object, out_type: DataType) -> Array | None:
    """A scan's ``init`` given as a 1-element device array or ``ResidentArray`` of the result type
    (read where it lives, in the scan's stream order), or None for a host value."""
    if device_array_info(init) is None and not isinstance(init, ResidentArray):
        return None
    array = as_array(init, "init", (out_type,))
    if array.n != 1:
        raise InvalidProgram(f"init is an array of {array.n} elements, not one value",
                             f"pass one {out_type.np_dtype} value: a host scalar or a 1-element device array.")
    return array


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


@library_call
def segmented_reduce(x: object, offsets: object, op: str = "add", *, stream: object = None, backend: Any = None,
                     scratch: Any = None) -> Any:
    """``out[s] = reduce(x[offsets[s]:offsets[s+1]], op)`` for each of the ``len(offsets) - 1``
    segments (CSR offsets); an empty segment gives the op's identity, as ``reduce`` does."""
    a = as_array(x, "x", VALUE_TYPES)
    o = segment_offsets(offsets, a.n)  # host offsets checked; offsets on the device are clamped there
    m = monoid(op, a.dtype)
    call = Call(backend, scratch, a, o, stream=stream)
    segments = max(o.n - 1, 0)
    if segments == 0:
        return call.empty(a.np_dtype)

    def build() -> Any:
        plan = call.plan()
        src, offs = call.upload(plan, "x", a), call.upload(plan, "seg.offsets", o)
        out = call.result(plan, "seg.out", segments, a.np_dtype)
        seg.segmented_reduce(plan, m, src, offs, out, a.n, segments)
        call.run(plan)
        return call.output(out, a.np_dtype, segments)

    return call.fast(("segmented_reduce", op), build, lambda outs: outs[0])
