"""Arrays in and out of ``vyre.lib``: numpy, device arrays on ``cuda``, or resident buffers.

Host arrays are uploaded into scratch buffers and results come back as numpy. Device arrays with
``__cuda_array_interface__`` (CuPy, torch, ...) are bound in place, with no copy
(``backend.borrow``): results are new arrays of the caller's kind (torch when an input is a torch
tensor, else CuPy), and the call is enqueued on the caller's stream (``stream=``, else the
current stream of the inputs' library) with no host wait, unless its result's size depends on
the data (the compactions' exact sizes; ``count="device"`` avoids that wait too). A backend
without these methods says so with ``UnsupportedFeature``. A ``ResidentArray`` (a resident
handle, an element type and a length) is read in place, and results come back as new
``ResidentArray``s the caller owns (free them with ``backend.free_resident``, or hand them back
with ``recycle`` so later calls reuse them); on a backend that enqueues (``cuda``) the call runs
on the backend's stream with no host wait unless it reads something back, and repeats of it run
compiled over aliases of the handles (``FastCall``). Compacted results cross only their counted
prefix.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

import numpy as np

from vyre.driver.backend import Resident
from vyre.driver.errors import InvalidHandle, InvalidProgram, UnsupportedFeature
from vyre.ir import DataType
from vyre.lib.plan import Plan, capacity
from vyre.lib.repeat import MISSED, Ran, Source, describe, record, resident_type
from vyre.lib.scratch import ScratchCache, resolve_backend, scratch_for

MAX_ELEMENTS = 1 << 31
U32 = np.dtype(np.uint32)
_NP_TO_TYPE = {np.dtype(np.uint32): DataType.U32, np.dtype(np.int32): DataType.I32,
               np.dtype(np.float32): DataType.F32, np.dtype(np.uint8): DataType.U8,
               np.dtype(np.int8): DataType.I8, np.dtype(np.uint16): DataType.U16,
               np.dtype(np.int16): DataType.I16, np.dtype(np.bool_): DataType.U8,
               np.dtype(np.uint64): DataType.U64, np.dtype(np.int64): DataType.I64,
               np.dtype(np.float64): DataType.F64}


class ResidentArray:
    """``n`` elements of ``dtype`` at the start of a resident buffer (``n`` defaults to all that fit).

    On a backend with device memory (``cuda``) it is also a device array other libraries take
    without a copy: ``cupy.asarray(r)`` through ``__cuda_array_interface__`` (v3, whose ``stream``
    is the backend's, so CuPy waits for the work that wrote it) and ``torch.from_dlpack(r)``
    through ``__dlpack__``. Such views share the handle's memory: they are valid until the handle
    is freed. ``backend`` is the handle's backend (None: the process's default backend).
    """

    __slots__ = ("handle", "dtype", "n", "backend")

    def __init__(self, handle: Resident, dtype: Any, n: int | None = None, backend: Any = None) -> None:
        if not isinstance(handle, Resident):
            raise InvalidProgram(f"ResidentArray needs a Resident handle, not {type(handle).__name__}",
                                 "pass a handle from backend.allocate_resident().")
        self.handle, self.dtype, self.backend = handle, np.dtype(dtype), backend
        self.n = handle.nbytes // self.dtype.itemsize if n is None else int(n)
        if not 0 <= self.n * self.dtype.itemsize <= handle.nbytes:
            raise InvalidProgram(f"{self.n} elements of {self.dtype} do not fit the {handle.nbytes}-byte handle",
                                 "pass n within the handle's size.")

    def __repr__(self) -> str:
        return f"ResidentArray({self.handle!r}, {self.dtype}, n={self.n})"

    def _device_view(self) -> tuple[Any, tuple[int, int, int]]:
        """The backend and ``(pointer, device ordinal, stream handle)`` of the handle's memory;
        ``AttributeError`` (so ``hasattr`` is False) on a backend without device memory."""
        backend = resolve_backend(self.backend)
        view = getattr(backend, "device_view", None)
        if view is None:
            raise AttributeError(f"{self!r} lives on backend {getattr(backend, 'id', '?')!r}, which has no "
                                 "device memory to share. Fix: use a backend with device memory (cuda), or "
                                 "read the values with backend.download_resident.")
        return backend, view(self.handle)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        _, (ptr, _, stream) = self._device_view()
        return {"shape": (self.n,), "typestr": self.dtype.str, "data": (ptr if self.n else 0, False),
                "version": 3, "strides": None, "stream": stream}

    def __dlpack_device__(self) -> tuple[int, int]:
        _, (_, device, _) = self._device_view()
        return (2, device)  # kDLCUDA

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        """A DLPack capsule over the handle's memory, ``stream`` (the consumer's) ordered after the
        backend's work on it (``backend.dlpack``)."""
        backend, _ = self._device_view()
        given = {"max_version": max_version, "dl_device": dl_device, "copy": copy}
        options = {k: v for k, v in given.items() if v is not None}
        return backend.dlpack(self.handle, self.dtype, self.n, stream, **options)


resident_type(ResidentArray)


@dataclass
class Array:
    """One input: its data (numpy, a device array or a handle), element type, length and where it lives."""

    data: Any
    dtype: DataType
    np_dtype: np.dtype
    n: int
    on_device: bool
    resident: bool = False
    source: Any = None  # the ``ResidentArray`` given (resident inputs)

    @property
    def nbytes(self) -> int:
        return self.n * self.np_dtype.itemsize


def as_array(x: object, name: str, allowed: tuple[DataType, ...]) -> Array:
    """Check ``x`` (1-D data of an ``allowed`` type) and describe it; errors name the argument."""
    resident = isinstance(x, ResidentArray)
    described = None if resident else device_array_info(x)
    if resident:
        data, np_dtype, n, on_device = x.handle, x.dtype, x.n, False
    elif described is not None:
        np_dtype, n, contiguous = described
        if not contiguous:
            raise InvalidProgram(f"device array {name!r} is not contiguous",
                                 "pass a contiguous array (for example x.copy() or torch's .contiguous()).")
        data, on_device = x, True
    else:
        try:
            data = np.ascontiguousarray(x).reshape(-1)
        except (TypeError, ValueError) as exc:
            raise InvalidProgram(f"{name!r} is not an array ({type(x).__name__}): {exc}",
                                 "pass a numpy array or a device array (CuPy, torch).") from None
        np_dtype, n, on_device = data.dtype, data.size, False
        if np_dtype == np.bool_:
            data = data.view(np.uint8)
    dtype = _NP_TO_TYPE.get(np_dtype)
    if dtype not in allowed:
        names = ", ".join(t.np_dtype.name for t in allowed)
        raise InvalidProgram(f"{name!r} has dtype {np_dtype}, which this vyre.lib function does not take",
                             f"convert it with .astype() to one of: {names}.")
    if n >= MAX_ELEMENTS:
        raise InvalidProgram(f"{name!r} has {n} elements; vyre.lib takes fewer than 2**31",
                             "split the data into chunks and combine the results.")
    return Array(data, dtype, np_dtype, n, on_device, resident, x if resident else None)


def as_scalar(value: object, dtype: DataType, name: str) -> Any:
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


def device_array_info(x: object) -> tuple[np.dtype, int, bool] | None:
    """``(dtype, elements, C-contiguous)`` of a device array (CuPy and torch read directly, others
    through ``__cuda_array_interface__``); None for anything else, ``ResidentArray`` included (its
    interface would ask the default backend, not the one the call runs on)."""
    if isinstance(x, ResidentArray):
        return None
    module = type(x).__module__.partition(".")[0]
    if module == "cupy" and hasattr(x, "flags"):
        return x.dtype, x.size, x.flags.c_contiguous  # type: ignore[attr-defined]
    if module == "torch" and getattr(x, "is_cuda", False):
        name = str(x.dtype).removeprefix("torch.")  # type: ignore[attr-defined]
        try:
            np_dtype = np.dtype(name)
        except TypeError:  # bfloat16, complex32, ...: no numpy dtype, so no vyre.lib type either
            raise InvalidProgram(f"a torch tensor of dtype {name} has no numpy dtype vyre.lib takes",
                                 "convert it first, e.g. tensor.float() or tensor.int().") from None
        return np_dtype, x.numel(), x.is_contiguous()  # type: ignore[attr-defined]
    if not hasattr(x, "__cuda_array_interface__"):
        return None
    info = x.__cuda_array_interface__  # type: ignore[attr-defined]
    np_dtype = np.dtype(info["typestr"])
    shape = tuple(info["shape"])
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    strides = info.get("strides")
    return np_dtype, n, strides is None or n <= 1 or tuple(strides) == _contiguous_strides(shape, np_dtype.itemsize)


def _contiguous_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


def same_length(a: Array, b: Array, what: str) -> None:
    if a.n != b.n:
        raise InvalidProgram(f"{what}: lengths differ ({a.n} and {b.n})", "pass arrays of the same length.")


COUNTS = ("exact", "device")


def check_count(count: object) -> bool:
    """``count=`` of a compaction: True for ``"device"`` (full-length result plus a device count)."""
    if count not in COUNTS:
        raise InvalidProgram(f"count={count!r} is not one of {COUNTS}",
                             'pass count="exact" (results of the exact size; waits for the count) or '
                             'count="device" (full-length results and a 1-element count, no wait).')
    return count == "device"


def segment_offsets(offsets: object, n: int, whole: bool = False) -> Array:
    """CSR ``offsets`` of segments of ``n`` elements as an ``Array``. Host offsets (any integer type)
    are checked (non-decreasing within ``[0, n]``; ``whole``: also from 0 to ``n`` exactly, so the
    segments cover every element) and converted to u32; offsets on the device or resident must be
    U32 or I32 and are not checked (their kernels clamp them)."""
    if device_array_info(offsets) is not None or isinstance(offsets, ResidentArray):
        return as_array(offsets, "offsets", (DataType.U32, DataType.I32))
    values = np.asarray(offsets).reshape(-1)
    if values.size and (values.dtype.kind not in "iu"):
        raise InvalidProgram(f"offsets have dtype {values.dtype}", "pass integer offsets.")
    if values.size and (values.min() < 0 or values.max() > n or np.any(np.diff(values.astype(np.int64)) < 0)):
        raise InvalidProgram(f"offsets must be non-decreasing within [0, {n}] (len(x))",
                             "pass CSR offsets: offsets[0] >= 0, offsets[s] <= offsets[s+1] <= len(x).")
    if whole and n and (values.size < 2 or values[0] != 0 or values[-1] != n):
        raise InvalidProgram(f"offsets must run from 0 to {n} (len(keys)), one more than the segments",
                             "pass CSR offsets that cover every element: offsets[0] == 0, offsets[-1] == len(keys).")
    return as_array(values.astype(np.uint32), "offsets", (DataType.U32,))


class Call:
    """One library call: the backend, its scratch cache (locked for the call) and output conversion.

    Results are numpy for host inputs, arrays of the caller's kind for device arrays (bound in
    place, run on ``stream``), and new ``ResidentArray``s when any input is one.
    """

    def __init__(self, backend: Any, scratch: ScratchCache, *arrays: Array | None, stream: object = None) -> None:
        given = [a for a in arrays if a is not None]
        self.backend, self.scratch, self.given = backend, scratch, given
        self.recording: Recording | None = None  # set while ``fast`` compiles a device call
        self.resident = any(a.resident for a in given)
        self.on_device = not self.resident and any(a.on_device for a in given)
        # ResidentArrays alone (none empty), on a backend that compiles them: the plan enqueues on
        # the backend's stream, and ``fast`` compiles the call with the arrays aliased (``scratch.alias``)
        self.enqueues = self.resident and scratch.compiles_resident()
        self.compiles_resident = self.enqueues and all(a.resident and a.n for a in given)
        # whether ``fast`` runs this call compiled: resident as above, or device arrays on a backend
        # that compiles calls over them
        self.compiles = self.compiles_resident or (self.on_device and hasattr(backend, "compile_caller_sequence"))
        self._fresh: list[Resident] = []
        self._issued: dict[int, Resident] = {}  # id(alias) -> the issued result handle behind it
        self._arrays: dict[int, Any] = {}  # id(handle) -> the caller-kind array behind a result
        self._keep: list[Any] = []  # host inputs of a device call, copied to the device for it
        subgroups, binds = scratch.abilities()
        if not subgroups:
            raise UnsupportedFeature("subgroup operations (the vyre.lib kernels use them)", getattr(backend, "id", "?"))
        self.stream: Any = None
        self.alloc_stream: Any = None  # results are allocated in this stream's order (None: the current stream)
        if self.on_device:
            if not binds:
                raise UnsupportedFeature("device arrays in vyre.lib", getattr(backend, "id", "?"),
                                         "pass numpy arrays, or use a backend that binds device arrays (cuda).")
            self.like = tuple(a.data for a in given if a.on_device)
            self.stream = scratch.raw.stream_for(stream, self.like)
            self.alloc_stream = None if stream is None else self.stream  # no stream=: the call's is the current one

    def plan(self) -> Plan:
        """A plan whose parameter words go through ``enqueue_sequence`` (device calls, and resident
        calls on a backend that enqueues) or ``upload_resident``: one writer per parameter buffer."""
        if self.on_device or self.enqueues:
            return Plan(self.backend, self.scratch, "params.device", enqueue=self.enqueues)
        return Plan(self.backend, self.scratch)

    def upload(self, plan: Plan, role: str, array: Array) -> Resident:
        """Where ``array`` is read: a resident one stays put, a device array is bound in place (no
        copy), host data goes into the scratch buffer ``role`` (sized by capacity class)."""
        if array.resident:
            if self.recording is None:
                return array.data
            handle = self.scratch.alias(role, array.data, array.nbytes)
            self.recording.inputs.append((role, self._index(array), handle))
            return handle
        if self.on_device:
            handle = self.scratch.borrow(role, self.device_data(array))
            if self.recording is not None:
                self.recording.inputs.append((role, self._index(array), handle))
            return handle
        handle = plan.buffer(role, array.n, array.np_dtype.itemsize)
        if array.n:
            self.backend.upload_resident(handle, array.data)
        return handle

    def result(self, plan: Plan, role: str, elements: int, np_dtype: np.dtype = U32) -> Resident:
        """Where a result goes: a new array of the caller's kind (device calls), a new handle for the
        caller (resident calls), else scratch ``role``."""
        np_dtype = np.dtype(np_dtype)
        if self.on_device:
            array = self.scratch.raw.new_array(self.like, _NP_TO_TYPE[np_dtype], elements, self.alloc_stream)
            handle = self.scratch.borrow(role, array)
            self._arrays[id(handle)] = array
            if self.recording is not None:
                self.recording.results.append((role, _NP_TO_TYPE[np_dtype], elements, handle))
                self.recording.arrays.append(array)
            return handle
        if not self.resident:
            return plan.buffer(role, elements, np_dtype.itemsize)
        nbytes = capacity(elements) * np_dtype.itemsize
        handle = self.scratch.issue(role, nbytes)
        self._fresh.append(handle)
        if self.recording is None:
            return handle
        alias = self.scratch.alias(role, handle, nbytes)
        self._issued[id(alias)] = handle
        self.recording.results.append((role, np_dtype, elements, alias))
        return alias

    def _index(self, array: Array) -> int:
        return next(i for i, a in enumerate(self.given) if a is array)

    def run(self, plan: Plan, reads: Sequence[tuple[Resident, int, int]] = ()) -> list[np.ndarray]:
        """Run the plan (on the caller's stream for device calls: no wait unless ``reads``); on
        failure, free the result handles made for the caller."""
        if self.recording is not None:
            self.recording.plan, self.recording.reads = plan, bool(reads)
        try:
            return plan.run(reads, self.stream)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        """Free the result handles this call made for the caller (a failed call returns none)."""
        for handle in self._fresh:
            self.backend.free_resident(handle)
        self._fresh.clear()

    def output(self, handle: Resident, np_dtype: np.dtype, count: int) -> Any:
        """The first ``count`` elements of ``handle``: numpy, the caller-kind array, or a ``ResidentArray``."""
        if self.resident:
            return ResidentArray(self._issued.get(id(handle), handle), np_dtype, count, self.backend)
        if self.on_device:
            array = self._arrays[id(handle)]
            return array if len(array) == count else array[:count]
        if count == 0:
            return np.zeros(0, dtype=np_dtype)
        return self.backend.download_resident(handle, 0, count * np.dtype(np_dtype).itemsize).view(np_dtype)

    def empty(self, np_dtype: np.dtype) -> Any:
        """A zero-length result (numpy, the caller's kind, or a ``ResidentArray`` of a new 4-byte handle)."""
        if self.resident:
            handle = self.backend.allocate_resident(4)
            return ResidentArray(handle, np_dtype, 0, self.backend)
        if self.on_device:
            return self.scratch.raw.new_array(self.like, _NP_TO_TYPE[np.dtype(np_dtype)], 0, self.alloc_stream)
        return np.zeros(0, dtype=np_dtype)

    def input_data(self, index: int) -> Any:
        """The device memory of the call's ``index``-th array (``device_data``)."""
        return self.device_data(self.given[index])

    def resident_input(self, index: int) -> tuple[Resident, int]:
        """The handle and byte length of the call's ``index``-th array (a ``ResidentArray``)."""
        array = self.given[index]
        return array.data, array.nbytes

    def device_data(self, array: Array) -> Any:
        """``array``'s device memory for a device call: the caller's array, or a host one copied over."""
        if array.on_device:
            return array.data
        data = self.backend.to_device(array.data, self.stream)
        self._keep.append(data)  # until the call returns: CuPy's pool reuses it in stream order
        return data

    def fast(self, key: tuple, build: Callable[[], Any], shape: Callable[..., Any],
             repeat: bool = True, reads: Sequence[tuple[Resident, int, int]] = ()) -> Any:
        """A device or ``ResidentArray`` call through its compiled form (``FastCall``), made by
        recording ``build()`` the first time ``key`` (the call's static arguments) meets these
        input types and sizes (and, for device arrays, result kind and stream; resident calls run
        on the backend's stream); ``shape`` makes the return value from the result arrays (or
        ``ResidentArray``s). ``build()`` returns what ``shape`` would. Other calls run ``build()``.
        ``repeat=False``: a loop may not run this call again without the function (its result is
        one step of several, chosen by data read back). ``reads``: scratch ranges the steps write
        and the call reads back (counts, a value; ``(handle, offset, nbytes)``): the compiled form
        reads them in the same backend call as its steps (the one wait) and passes them to
        ``shape`` after the arrays; ``build()`` reads them itself (``read``)."""
        if self.compiles_resident:
            full: tuple = ("resident", key, tuple((a.np_dtype, a.n) for a in self.given))
        elif self.compiles:
            full = (key, self.stream.ptr, tuple(map(type, self.like)),
                    tuple((a.np_dtype, a.n, a.on_device) for a in self.given))
        else:
            return build()
        entry = self.scratch.fast.get(full)
        if entry is not None:
            out = entry.run(self, shape)
            if out is not None:
                if repeat and out is not MISSED and (
                        self.compiles_resident or all(a.on_device for a in self.given)):  # a repeat runs it
                    data = tuple(a.source if a.resident else a.data for a in self.given)
                    self.scratch.ran = Ran(entry, shape, out, data)
                return out
            self.scratch.drop_fast(full)
        self.recording = rec = Recording(resident=self.compiles_resident)
        try:
            result = build()
        finally:
            self.recording = None
        if rec.plan is not None and not rec.reads:
            compiled = self.backend.compile_caller_sequence(rec.plan.steps, reads)  # reads: the same every call
            self.scratch.add_fast(full, FastCall(rec, compiled, reads))
        return result

    def exact(self, key: tuple, build: Callable[[], tuple[Plan, list[tuple[Resident, np.dtype, int]]]],
              counts: tuple[str, ...], finish: Callable[[Callable[[int, int], Any], list[int]], Any],
              repeat: bool = True) -> Any:
        """A call whose result sizes are counted on the device (exact-size compactions, ``unique``).

        ``build()`` makes the plan and its full-length results ``(handle, dtype, elements)``;
        ``counts`` names the 1-word scratch buffers (``plan.buffer(role, 1)``) the plan writes the
        counts to; ``finish(take, words)`` makes the return value from the counts read back,
        ``take(i, k)`` giving the first ``k`` elements of result ``i``. A compiled call (``fast``)
        runs the steps into the full-length results, then reads the words (the one wait, on the
        call's stream) and cuts the results to size without a copy (``cut``); ``finish`` must not
        keep the call's arrays (a loop's repeat runs it again). Other calls read the words with the
        plan's run. If ``finish`` raises or returns ``MISSED``, the results go back (resident ones
        to the pool)."""
        if not self.compiles:
            plan, results = build()
            raws = self.run(plan, [(self.scratch.get(role, 4), 0, 4) for role in counts])
            words = [int(np.asarray(raw).view(np.uint32)[0]) for raw in raws]
            try:
                out = finish(lambda i, k: self.output(results[i][0], results[i][1], k), words)
            except BaseException:
                self.discard()
                raise
            if out is MISSED:
                self.discard()
            return out
        scratch = self.scratch
        reads = [(scratch.get(role, 4), 0, 4) for role in counts]

        def give_back(outs: list[Any]) -> None:
            for out in outs:
                if isinstance(out, ResidentArray):
                    scratch.recycle(out.handle)

        def shape(outs: list[Any], raws: list[np.ndarray]) -> Any:
            try:
                out = finish(lambda i, k: cut(outs[i], k), [int(raw.view(np.uint32)[0]) for raw in raws])
            except BaseException:
                give_back(outs)
                raise
            if out is MISSED:
                give_back(outs)
            return out

        def run_full() -> Any:
            plan, results = build()
            self.run(plan)
            return shape([self.output(handle, np_dtype, n) for handle, np_dtype, n in results], self.read(reads))

        return self.fast(("exact", *key), run_full, shape, repeat, reads)

    def counted(self, key: tuple, steps: Callable[[bool], tuple[Plan, list[tuple[Resident, np.dtype, int]], Any]],
                counts: tuple[str, ...], finish: Callable[[Callable[[int, int], Any], list[int]], Any],
                on_device: bool, repeat: bool = True) -> Any:
        """Results whose sizes the device counts (compactions, run-length encoding), compiled on
        device arrays and ``ResidentArray``s. ``steps(device_count)`` makes the plan, its full-length
        results ``(handle, dtype, elements)`` and, with ``device_count``, a 1-element u32 count
        result. ``on_device`` (``count="device"``): the full-length results and the count, with no
        wait; else ``exact`` (``counts``, ``finish`` as there: the counted prefixes, one wait)."""
        if on_device:
            def build() -> tuple[Any, ...]:
                plan, results, count = steps(True)
                self.run(plan)
                return (*(self.output(h, np_dtype, n) for h, np_dtype, n in results), self.output(count, U32, 1))

            return self.fast((*key, "device"), build, tuple, repeat)

        def build_exact() -> tuple[Plan, list[tuple[Resident, np.dtype, int]]]:
            plan, results, _ = steps(False)
            return plan, results

        return self.exact(key, build_exact, counts, finish, repeat)

    def zero_count(self) -> Any:
        """A 1-element u32 count of 0 of the call's kind (``count="device"`` of an empty input)."""
        zero = np.zeros(1, U32)
        if not (self.on_device or self.resident):
            return zero
        handle = self.result(self.plan(), "count.zero", 1)
        if self.on_device:
            self.fill(handle, zero)
        else:
            self.backend.upload_resident(handle, zero)
        return self.output(handle, U32, 1)

    def fill(self, handle: Resident, value: np.ndarray) -> None:
        """Write host ``value`` into a device call's result ``handle`` in stream order."""
        self.backend.enqueue_sequence([], stream=self.stream, writes=[(handle, value)])

    def read(self, reads: Sequence[tuple[Resident, int, int]]) -> list[np.ndarray]:
        """``(handle, offset, nbytes)`` ranges read after the work enqueued on the call's stream
        (None: the backend's): one wait."""
        return [np.asarray(raw) for raw in self.backend.enqueue_sequence([], stream=self.stream, reads=reads)]


def cut(result: Any, count: int) -> Any:
    """The first ``count`` elements of a full-length result, no copy: a ``ResidentArray`` of
    ``count`` over the same handle, or a slice (a view) of a device array."""
    if isinstance(result, ResidentArray):
        return ResidentArray(result.handle, result.dtype, count, result.backend)
    return result if len(result) == count else result[:count]


@dataclass
class Recording:
    """What a device call did the first time: its input and result roles and its plan."""

    inputs: list = field(default_factory=list)  # (role, index into Call.given, handle)
    results: list = field(default_factory=list)  # (role, DataType (resident: numpy dtype), elements, handle)
    arrays: list = field(default_factory=list)  # the result arrays made while recording
    plan: Plan | None = None
    reads: bool = False  # the plan's run read something back: not compiled (``exact`` reads after the run)
    resident: bool = False  # the call's arrays are ``ResidentArray``s (aliased, results issued)


class FastCall:
    """A device or ``ResidentArray`` call compiled once: rebind the roles to this call's arrays,
    allocate the results (resident: issue result handles, recycled ones first), enqueue the
    compiled steps (``backend.compile_caller_sequence``) with the same parameter words; the
    compiled steps read back ``reads`` (scratch the steps write) themselves, every call."""

    def __init__(self, rec: Recording, compiled: Any, reads: Sequence[tuple[Resident, int, int]] = ()) -> None:
        plan = rec.plan
        assert plan is not None
        self.inputs, self.results, self.compiled = tuple(rec.inputs), tuple(rec.results), compiled
        self.reads = tuple(reads)
        self.writes = [(plan.params, plan._words.copy())]
        self.watch = [(handle, 4 * word, fail) for handle, word, fail in plan.checks]
        # the replay lane: a call whose stream and array addresses equal the last call's replays that
        # call's graph (``compiled.replay``, watched words copied after it) without re-pointing anything
        self.lane = hasattr(compiled, "replay")
        self.packed = compiled.pack(self.writes) if self.lane else ()
        self.last: tuple | None = None
        self.resident = rec.resident

    def run(self, call: Call | Source, shape: Callable[..., Any]) -> Any:
        """The call's result, or None when a role's handle changed (scratch released) or the
        compiled steps refuse (a freed handle): compile again. ``call`` is the ``Call``, or the
        ``Source`` of a repeated call (``vyre.lib.repeat``)."""
        if self.resident:
            return self._run_resident(call, shape)
        stream = call.stream
        inputs = [call.input_data(index) for _, index, _ in self.inputs]
        new_array, like, alloc = call.scratch.raw.new_array, call.like, call.alloc_stream
        arrays = [new_array(like, dtype, elements, alloc) for _, dtype, elements, _ in self.results]
        where = None
        if self.lane:
            pointer = self.compiled.pointer
            where = (stream.ptr, *map(pointer, inputs), *map(pointer, arrays))
            if where == self.last:
                raws = self.compiled.replay(stream, self.packed, self.watch)
                if raws is not None:
                    return self.shaped(shape, arrays, raws)
        borrow = call.scratch.borrow
        for (role, _, handle), data in zip(self.inputs, inputs, strict=True):
            if borrow(role, data) is not handle:
                return None
        for (role, _, _, handle), array in zip(self.results, arrays, strict=True):
            if borrow(role, array) is not handle:
                return None
        raws = self.compiled.enqueue(stream, self.writes, self.watch)
        if raws is None:
            return None
        self.last = where
        return self.shaped(shape, arrays, raws)

    def shaped(self, shape: Callable[..., Any], outs: list[Any], raws: list[np.ndarray]) -> Any:
        """``shape`` of the result arrays, and of what was read back when the call reads."""
        return shape(outs, raws) if self.reads else shape(outs)

    def _run_resident(self, call: Call | Source, shape: Callable[..., Any]) -> Any:
        """``run`` over ``ResidentArray``s on the backend's stream. The lane here compares the
        handles themselves (kept, so none is mistaken for a new one): a handle cannot move, and a
        free anywhere makes ``replay`` refuse. Otherwise each role is aliased to this call's
        handle, which checks that it is live and long enough (``InvalidHandle`` if not, as the
        full path raises). Result handles a refused call took are handed back (freed on an error,
        as a failed full call frees its results)."""
        scratch = call.scratch
        sources = [call.resident_input(index) for _, index, _ in self.inputs]
        issued = [scratch.issue(role, capacity(elements) * dtype.itemsize) for role, dtype, elements, _ in self.results]
        try:
            raws = self._enqueue_resident(scratch, sources, issued)
        except BaseException:
            for handle in issued:
                scratch.backend.free_resident(handle)
            raise
        if raws is None:
            for handle in issued:
                scratch.recycle(handle)
            return None
        backend = scratch.backend
        return self.shaped(shape, [ResidentArray(handle, dtype, elements, backend)
                                  for handle, (_, dtype, elements, _) in zip(issued, self.results, strict=True)], raws)

    def _enqueue_resident(self, scratch: ScratchCache, sources: list[tuple[Resident, int]],
                          issued: list[Resident]) -> list[np.ndarray] | None:
        where = (*(handle for handle, _ in sources), *issued) if self.lane else None
        if where is not None and where == self.last:
            raws = self.compiled.replay(None, self.packed, self.watch)
            if raws is not None:
                return raws
        alias = scratch.alias
        for (role, _, handle), (source, nbytes) in zip(self.inputs, sources, strict=True):
            if alias(role, source, nbytes) is not handle:
                return None
        for (role, dtype, elements, handle), result in zip(self.results, issued, strict=True):
            if alias(role, result, capacity(elements) * dtype.itemsize) is not handle:
                return None
        raws = self.compiled.enqueue(None, self.writes, self.watch)
        if raws is not None:
            self.last = where
        return raws

    def close(self) -> None:
        self.compiled.close()


def recycle(*results: object, backend: Any = None) -> None:
    """Hand ``ResidentArray`` results of ``vyre.lib`` calls back for reuse instead of freeing them.

    Later calls of the same function and capacity class on ``backend`` write into these handles
    again, so on ``cuda`` their captured graph is replayed rather than captured anew. Tuples of
    results are accepted; the caller must not use the handles afterwards.
    """
    backend = resolve_backend(backend)
    scratch = scratch_for(backend)
    flat = [r for item in results for r in (item if isinstance(item, tuple) else (item,))]
    with scratch.lock:
        for r in flat:
            if not isinstance(r, ResidentArray) or not scratch.recycle(r.handle):
                raise InvalidProgram(f"{r!r} is not a vyre.lib result held by the caller on this backend",
                                     "recycle only ResidentArray results of vyre.lib calls on the same backend, "
                                     "once each; free other handles with backend.free_resident.")


def default_backend() -> Any:
    """``vyre.default_backend()``: the process's one default backend, shared with kernels and the workloads."""
    from vyre.driver.registry import default_backend as shared_backend

    return shared_backend()


T = TypeVar("T")
P = ParamSpec("P")


def _call(impl: Callable[..., T], backend: Any, scratch: ScratchCache, args: tuple, kwargs: dict[str, Any]) -> T:
    """One library call under ``scratch``'s lock: the call a loop made last time runs its compiled
    form directly (``vyre.lib.repeat``); any other runs ``impl``, and is kept for next time when it
    ended in a compiled call on the caller's device arrays (``scratch.ran``, which ``Call.fast``
    sets and the wrapper clears after every call)."""
    binds, compiles = scratch.abilities()[1], scratch.compiles_resident()
    described = describe(args, kwargs) if binds or compiles else None
    key = None
    if described is not None and described[1] and (compiles if described[2] else binds):
        parts, arrays, resident = described
        stream = None if resident else scratch.raw.stream_for(kwargs.get("stream"), arrays)
        key = (impl, parts, None if stream is None else stream.ptr)
        repeat = scratch.repeats.get(key)
        if repeat is not None:
            out = repeat.run(scratch, stream, args, kwargs)
            if out is not None:
                return out
            scratch.repeats.pop(key, None)
    result = impl(*args, backend=backend, scratch=scratch, **kwargs)
    if key is not None:
        scratch.keep_repeat(key, record(scratch.ran, result, args, kwargs))
    return result


def library_call(fn: Callable[P, T]) -> Callable[P, T]:
    """Resolve ``backend=``, hold its scratch lock for the call, and retry once with fresh scratch
    if the backend no longer knows a cached handle (its buffers were freed by a shutdown, say).
    The call shows ``fn``'s signature without ``scratch=`` (the backend's own) and refuses one."""

    impl: Callable[..., T] = fn  # called with backend= resolved and the backend's scratch=

    @functools.wraps(fn)
    def wrapper(*args: Any, backend: Any = None, **kwargs: Any) -> T:
        if "scratch" in kwargs:  # the backend's own: not the caller's to pass
            raise TypeError(f"{fn.__name__}() got an unexpected keyword argument 'scratch'")
        backend = resolve_backend(backend)
        scratch = scratch_for(backend)
        with scratch.lock:
            try:
                return _call(impl, backend, scratch, args, kwargs)
            except InvalidHandle:
                if not scratch.nbytes:
                    raise
                scratch.release()  # stale scratch is skipped, live scratch freed; a bad caller handle fails again
                return impl(*args, backend=backend, scratch=scratch, **kwargs)
            finally:
                scratch.ran = None

    signature = inspect.signature(fn)  # what help() and IDEs show: no scratch=, the library's own
    wrapper.__dict__["__signature__"] = signature.replace(
        parameters=[p for name, p in signature.parameters.items() if name != "scratch"])
    return wrapper
