"""Arrays in and out of ``vyre.lib``: numpy, device arrays on ``cuda``, or resident buffers.

Host arrays are uploaded into scratch buffers and results come back as numpy. Arrays with
``__cuda_array_interface__`` (CuPy, torch, ...) are copied device to device into scratch and
results come back as CuPy arrays that own their memory, through ``backend.view``; a backend
without device-array support says so with ``UnsupportedFeature``. A ``ResidentArray`` (a
resident handle, an element type and a length) is read in place, and results come back as new
``ResidentArray``s the caller owns (free them with ``backend.free_resident``, or hand them back
with ``recycle`` so later calls reuse them). Compacted results cross only their counted prefix.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from vyre.driver.backend import Resident
from vyre.driver.errors import InvalidHandle, InvalidProgram, UnsupportedFeature
from vyre.ir import DataType
from vyre.lib.kernels import PARAM_WORDS
from vyre.lib.plan import Plan, capacity
from vyre.lib.scratch import ScratchCache, resolve_backend, scratch_for

MAX_ELEMENTS = 1 << 31
_NP_TO_TYPE = {np.dtype(np.uint32): DataType.U32, np.dtype(np.int32): DataType.I32,
               np.dtype(np.float32): DataType.F32, np.dtype(np.uint8): DataType.U8,
               np.dtype(np.int8): DataType.I8, np.dtype(np.uint16): DataType.U16,
               np.dtype(np.int16): DataType.I16, np.dtype(np.bool_): DataType.U8}


class ResidentArray:
    """``n`` elements of ``dtype`` at the start of a resident buffer (``n`` defaults to all that fit)."""

    __slots__ = ("handle", "dtype", "n")

    def __init__(self, handle: Resident, dtype: object, n: int | None = None) -> None:
        if not isinstance(handle, Resident):
            raise InvalidProgram(f"ResidentArray needs a Resident handle, not {type(handle).__name__}",
                                 "pass a handle from backend.allocate_resident().")
        self.handle, self.dtype = handle, np.dtype(dtype)
        self.n = handle.nbytes // self.dtype.itemsize if n is None else int(n)
        if not 0 <= self.n * self.dtype.itemsize <= handle.nbytes:
            raise InvalidProgram(f"{self.n} elements of {self.dtype} do not fit the {handle.nbytes}-byte handle",
                                 "pass n within the handle's size.")

    def __repr__(self) -> str:
        return f"ResidentArray({self.handle!r}, {self.dtype}, n={self.n})"


@dataclass
class Array:
    """One input: its data (numpy, a device array or a handle), element type, length and where it lives."""

    data: Any
    dtype: DataType
    np_dtype: np.dtype
    n: int
    on_device: bool
    resident: bool = False

    @property
    def nbytes(self) -> int:
        return self.n * self.np_dtype.itemsize


def as_array(x: object, name: str, allowed: tuple[DataType, ...]) -> Array:
    """Check ``x`` (1-D data of an ``allowed`` type) and describe it; errors name the argument."""
    resident = isinstance(x, ResidentArray)
    if resident:
        data, np_dtype, n, on_device = x.handle, x.dtype, x.n, False
    elif hasattr(x, "__cuda_array_interface__"):
        info = x.__cuda_array_interface__
        np_dtype = np.dtype(info["typestr"])
        shape = tuple(info["shape"])
        n = int(np.prod(shape, dtype=np.int64)) if shape else 1
        strides = info.get("strides")
        if strides is not None and n > 1 and tuple(strides) != _contiguous_strides(shape, np_dtype.itemsize):
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
    return Array(data, dtype, np_dtype, n, on_device, resident)


def _contiguous_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


def same_length(a: Array, b: Array, what: str) -> None:
    if a.n != b.n:
        raise InvalidProgram(f"{what}: lengths differ ({a.n} and {b.n})", "pass arrays of the same length.")


class Call:
    """One library call: the backend, its scratch cache (locked for the call) and output conversion.

    Results are numpy for host inputs, CuPy for device arrays, and new ``ResidentArray``s when any
    input is one.
    """

    def __init__(self, backend: Any, scratch: ScratchCache, *arrays: Array | None) -> None:
        given = [a for a in arrays if a is not None]
        self.backend, self.scratch = backend, scratch
        self.resident = any(a.resident for a in given)
        self.on_device = not self.resident and any(a.on_device for a in given)
        self._fresh: list[Resident] = []
        supports = getattr(backend, "supports_subgroup_ops", None)
        if supports is not None and not supports():
            raise UnsupportedFeature("subgroup operations (the vyre.lib kernels use them)", getattr(backend, "id", "?"))
        if self.on_device:
            self._check_view()

    def _check_view(self) -> None:
        """Device arrays come back through ``backend.view``; say so up front if the backend lacks it."""
        fix = "pass numpy arrays, or use a backend whose resident buffers have view() (cuda)."
        view = getattr(self.backend, "view", None)
        if view is None:
            raise UnsupportedFeature("device arrays in vyre.lib (backend.view)", getattr(self.backend, "id", "?"), fix)
        try:
            view(self.scratch.get("params", PARAM_WORDS * 4), np.dtype(np.uint32))
        except UnsupportedFeature as exc:
            raise UnsupportedFeature("device arrays in vyre.lib (backend.view)", exc.backend, fix) from None

    def plan(self) -> Plan:
        return Plan(self.backend, self.scratch)

    def upload(self, plan: Plan, role: str, array: Array) -> Resident:
        """``array`` into the scratch buffer ``role`` (sized by capacity class); a resident one stays put."""
        if array.resident:
            return array.data
        handle = plan.buffer(role, array.n, array.np_dtype.itemsize)
        if array.n:
            self.backend.upload_resident(handle, array.data)
        return handle

    def result(self, plan: Plan, role: str, elements: int, itemsize: int = 4) -> Resident:
        """Where a result goes: scratch ``role``, or a new handle for the caller in resident mode."""
        if not self.resident:
            return plan.buffer(role, elements, itemsize)
        handle = self.scratch.issue(role, capacity(elements) * itemsize)
        self._fresh.append(handle)
        return handle

    def run(self, plan: Plan, reads: list[tuple[Resident, int, int]] = ()) -> list[np.ndarray]:
        """Run the plan; on failure, free the result handles made for the caller."""
        try:
            return plan.run(reads)
        except BaseException:
            for handle in self._fresh:
                self.backend.free_resident(handle)
            self._fresh.clear()
            raise

    def output(self, handle: Resident, np_dtype: np.dtype, count: int) -> Any:
        """The first ``count`` elements of ``handle``: numpy, an owning CuPy array, or a ``ResidentArray``."""
        if self.resident:
            return ResidentArray(handle, np_dtype, count)
        if self.on_device:
            return self.backend.view(handle, np.dtype(np_dtype))[:count].copy()
        if count == 0:
            return np.zeros(0, dtype=np_dtype)
        return self.backend.download_resident(handle, 0, count * np.dtype(np_dtype).itemsize).view(np_dtype)

    def empty(self, np_dtype: np.dtype) -> Any:
        """A zero-length result (numpy, CuPy, or a ``ResidentArray`` of a new 4-byte handle)."""
        if self.resident:
            handle = self.backend.allocate_resident(4)
            return ResidentArray(handle, np_dtype, 0)
        return self.output(self.scratch.get("empty", 4), np_dtype, 0)


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


def library_call(fn: Callable[..., T]) -> Callable[..., T]:
    """Resolve ``backend=``, hold its scratch lock for the call, and retry once with fresh scratch
    if the backend no longer knows a cached handle (its buffers were freed by a shutdown, say)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, backend: Any = None, **kwargs: Any) -> T:
        backend = resolve_backend(backend)
        scratch = scratch_for(backend)
        with scratch.lock:
            try:
                return fn(*args, backend=backend, scratch=scratch, **kwargs)
            except InvalidHandle:
                if not scratch.nbytes:
                    raise
                scratch.release()  # stale scratch is skipped, live scratch freed; a bad caller handle fails again
                return fn(*args, backend=backend, scratch=scratch, **kwargs)

    return wrapper
