"""Arrays in and out of ``vyre.lib``: numpy on the host, or device arrays on ``cuda``.

Host arrays are uploaded into scratch buffers and results come back as numpy. Arrays with
``__cuda_array_interface__`` (CuPy, torch, ...) are copied device to device into scratch and
results come back as CuPy arrays that own their memory, through ``backend.view``; a backend
without device-array support says so with ``UnsupportedFeature``. Compacted results cross only
their counted prefix.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from vyre.driver.backend import Resident
from vyre.driver.errors import InvalidHandle, InvalidProgram, UnsupportedFeature
from vyre.ir import DataType
from vyre.lib.kernels import PARAM_WORDS
from vyre.lib.plan import Plan
from vyre.lib.scratch import ScratchCache, scratch_for

MAX_ELEMENTS = 1 << 31
_NP_TO_TYPE = {np.dtype(np.uint32): DataType.U32, np.dtype(np.int32): DataType.I32,
               np.dtype(np.float32): DataType.F32, np.dtype(np.uint8): DataType.U8,
               np.dtype(np.int8): DataType.I8, np.dtype(np.uint16): DataType.U16,
               np.dtype(np.int16): DataType.I16, np.dtype(np.bool_): DataType.U8}


@dataclass
class Array:
    """One input: its data (numpy or a device array), element type, length and where it lives."""

    data: Any
    dtype: DataType
    np_dtype: np.dtype
    n: int
    on_device: bool

    @property
    def nbytes(self) -> int:
        return self.n * self.np_dtype.itemsize


def as_array(x: object, name: str, allowed: tuple[DataType, ...]) -> Array:
    """Check ``x`` (1-D data of an ``allowed`` type) and describe it; errors name the argument."""
    if hasattr(x, "__cuda_array_interface__"):
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
    return Array(data, dtype, np_dtype, n, on_device)


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
    """One library call: the backend, its scratch cache (locked for the call) and output conversion."""

    def __init__(self, backend: Any, scratch: ScratchCache, on_device: bool) -> None:
        self.backend, self.scratch, self.on_device = backend, scratch, on_device
        if on_device:
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
        """``array`` into the scratch buffer ``role`` (sized by capacity class)."""
        handle = plan.buffer(role, array.n, array.np_dtype.itemsize)
        if array.n:
            self.backend.upload_resident(handle, array.data)
        return handle

    def output(self, handle: Resident, np_dtype: np.dtype, count: int) -> Any:
        """The first ``count`` elements of ``handle``: numpy, or an owning CuPy array on the device."""
        if self.on_device:
            return self.backend.view(handle, np.dtype(np_dtype))[:count].copy()
        if count == 0:
            return np.zeros(0, dtype=np_dtype)
        return self.backend.download_resident(handle, 0, count * np.dtype(np_dtype).itemsize).view(np_dtype)

    def empty(self, np_dtype: np.dtype) -> Any:
        """A zero-length result (numpy, or CuPy on the device)."""
        return self.output(self.scratch.get("empty", 4), np_dtype, 0)


_default: list[Any] = []
_default_lock = threading.Lock()


def default_backend() -> Any:
    """``vyre.acquire(allow_reference=True)``, acquired once and shared by later calls."""
    with _default_lock:
        if not _default:
            import vyre

            _default.append(vyre.acquire(allow_reference=True))
        return _default[0]


T = TypeVar("T")


def library_call(fn: Callable[..., T]) -> Callable[..., T]:
    """Resolve ``backend=``, hold its scratch lock for the call, and retry once with fresh scratch
    if the backend no longer knows a cached handle (it was shut down and restarted, for instance)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, backend: Any = None, **kwargs: Any) -> T:
        backend = default_backend() if backend is None else backend
        scratch = scratch_for(backend)
        with scratch.lock:
            try:
                return fn(*args, backend=backend, scratch=scratch, **kwargs)
            except InvalidHandle:
                if not scratch.nbytes:
                    raise
                scratch.forget()
                return fn(*args, backend=backend, scratch=scratch, **kwargs)

    return wrapper
