"""Dispatch inputs that already live on a CUDA device (docs/semantics.md, inputs).

``device_array(data, what, device_id)`` wraps objects exposing ``__cuda_array_interface__``
(CuPy, PyTorch, Numba) or a CUDA ``__dlpack__`` (JAX, PyTorch) as a CuPy array without a host
round trip, checking device and contiguity; host objects give None and take the host path.
``device_input(decl, data, device_id)`` does the same for a dispatch input and first checks that
a typed array holds the buffer's element type (``vyre.driver.inputs.check_input_dtype``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vyre.driver.errors import DeviceLost, InvalidProgram
from vyre.driver.inputs import bfloat16_bits, check_input_dtype, is_bfloat16
from vyre.ir.program import BufferDecl
from vyre.ir.types import DataType
from vyre_cuda._runtime.errors import cuda_errors

_HOST_TYPES = (bytes, bytearray, memoryview, np.ndarray)
_DL_CUDA = (2, 13)  # kDLCUDA, kDLCUDAManaged


def is_device_array(data: object) -> bool:
    """True for CUDA device arrays (CUDA array interface, or DLPack on a CUDA device)."""
    if isinstance(data, _HOST_TYPES):
        return False
    if _has_cuda_interface(data):
        return True
    dev = getattr(data, "__dlpack_device__", None)
    if dev is None:
        return False
    try:
        return int(dev()[0]) in _DL_CUDA
    except Exception:  # noqa: BLE001 - a broken protocol means "not a device array"
        return False


def _has_cuda_interface(data: object) -> bool:
    """``__cuda_array_interface__`` is there and usable (torch raises KeyError for bfloat16 tensors)."""
    try:
        return hasattr(data, "__cuda_array_interface__")
    except Exception:  # noqa: BLE001 - a dtype the interface cannot describe: use DLPack instead
        return False


def device_input(decl: BufferDecl, data: object, device_id: int) -> Any | None:
    """``device_array`` for a dispatch input of ``decl``: a typed array must hold the buffer's type."""
    if not is_device_array(data):
        return None
    check_input_dtype(decl, data)
    return device_array(data, f"input for buffer {decl.name!r}", device_id)


def device_array(data: object, what: str, device_id: int) -> Any | None:
    """A C-contiguous CuPy view of a device array on ``device_id``; None for host data.

    A bfloat16 array (torch, JAX) is viewed as its 16-bit patterns, which CuPy can hold.
    """
    if not is_device_array(data):
        return None
    import cupy

    _check_device(_device_of(data), what, device_id)  # before CuPy sees it: cupy.asarray copies across devices
    try:
        with cuda_errors(f"importing the device array for {what}"):
            if is_bfloat16(data):
                data = bfloat16_bits(data)
            arr = cupy.asarray(data) if _has_cuda_interface(data) else cupy.from_dlpack(data)
    except DeviceLost:
        raise
    except Exception as exc:  # noqa: BLE001 - a bad pointer or protocol is the caller's input error
        reason = getattr(exc, "message", exc)
        raise InvalidProgram(f"{what} is a device array whose memory CUDA does not recognise ({reason})",
                             "pass an array allocated by CUDA on this device (CuPy, PyTorch, JAX).") from exc
    _check_device(arr.device.id, what, device_id)
    if not arr.flags.c_contiguous:
        raise InvalidProgram(f"{what} is a non-contiguous device array",
                             "pass a contiguous array (cupy.ascontiguousarray(x) or tensor.contiguous()).")
    return arr


def _device_of(data: Any) -> int | None:
    """The CUDA device ordinal of a CuPy array or torch tensor, read without importing it (None for
    other kinds: CuPy wraps their memory where it is, so its view tells)."""
    kind = device_kind(data)
    if kind == "cupy":
        return int(data.device.id)
    if kind == "torch":
        return int(data.device.index)
    return None


def _check_device(device: int | None, what: str, device_id: int) -> None:
    if device is not None and device != device_id:
        raise InvalidProgram(f"{what} is on CUDA device {device}, the backend runs on device {device_id}",
                             f"move the array to device {device_id} (or acquire 'cuda:{device}').")


def order_after_producers(stream: Any) -> None:
    """Make ``stream`` wait for work queued on CuPy's current stream and the legacy default stream.

    Producers (CuPy, PyTorch by default) queue on one of those; ``stream`` is non-blocking, so it
    would not otherwise wait for them.
    """
    import cupy

    seen = {stream.ptr}
    for producer in (cupy.cuda.get_current_stream(), cupy.cuda.Stream.null):
        if producer.ptr not in seen:
            seen.add(producer.ptr)
            stream.wait_event(producer.record())


# ---- the caller's arrays and streams (in-place dispatch) ------------------------------------------------
_KINDS: dict[type, str | None] = {}  # array type -> its kind (``device_kind``), learnt on first sight
_ASK = "ask"  # a type whose objects must each be asked (``is_device_array``)


def device_kind(data: Any) -> str | None:
    """``"cupy"`` (a CuPy array), ``"torch"`` (a CUDA torch tensor), ``"device"`` (another CUDA array:
    CUDA array interface or DLPack) or None (host data). Cheap for CuPy, torch and numpy."""
    t = type(data)
    kind = _KINDS[t] if t in _KINDS else _learn(t, data)
    if kind == "torch":
        return "torch" if data.is_cuda else None
    if kind == _ASK:
        return "device" if is_device_array(data) else None
    return kind


def _learn(t: type, data: object) -> str | None:
    root = t.__module__.partition(".")[0]
    if issubclass(t, _HOST_TYPES):
        kind: str | None = None
    elif root == "cupy" and hasattr(data, "data") and hasattr(data, "flags"):
        kind = "cupy"
    elif root == "torch" and hasattr(data, "is_cuda") and hasattr(data, "data_ptr"):
        kind = "torch"
    else:
        kind = _ASK
    _KINDS[t] = kind
    return kind


def device_pointer(decl: BufferDecl, data: object, device_id: int) -> tuple[int, int]:
    """``(pointer, nbytes)`` of a device array bound in place for ``decl``: the buffer's element type,
    C-contiguous, on ``device_id`` (CuPy arrays and torch tensors read directly, others via CuPy)."""
    if device_kind(data) in ("cupy", "torch"):
        check_input_dtype(decl, data)
        return array_span(data, device_id, f"input for buffer {decl.name!r}")
    arr = device_input(decl, data, device_id)
    return arr.data.ptr, arr.nbytes


def array_pointer(data: Any) -> int:
    """The device address of a CuPy array, torch tensor or ``__cuda_array_interface__`` array,
    unchecked: for comparing where arrays already checked once are (``array_span`` checks)."""
    kind = device_kind(data)
    if kind == "cupy":
        return data.data.ptr
    if kind == "torch":
        return data.data_ptr()
    return int(data.__cuda_array_interface__["data"][0])


def array_span(data: Any, device_id: int, what: str) -> tuple[int, int]:
    """``(pointer, nbytes)`` of a C-contiguous device array on ``device_id`` (``InvalidProgram`` with a
    Fix otherwise; ``what`` names it). CuPy arrays and torch tensors are read directly."""
    kind = device_kind(data)
    if kind == "cupy":
        if data.device.id != device_id or not data.flags.c_contiguous:
            device_array(data, what, device_id)  # raises the precise error
        return data.data.ptr, data.nbytes
    if kind == "torch":
        if data.device.index != device_id or not data.is_contiguous():
            device_array(data, what, device_id)
        return data.data_ptr(), data.numel() * data.element_size()
    arr = device_array(data, what, device_id)
    if arr is None:
        raise InvalidProgram(f"{what} is not a device array", "pass a CuPy array or a CUDA torch tensor.")
    return arr.data.ptr, arr.nbytes


_TORCH_NAMES = {"uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "int8": "int8", "int16": "int16",
                "int32": "int32", "float16": "float16", "float32": "float32", "uint64": "uint64", "int64": "int64",
                "float64": "float64"}


def new_device_array(kind: str, dtype: DataType, count: int, device_id: int) -> tuple[Any, int]:
    """A new array of ``count`` elements of ``dtype`` from the caller's library (its allocator and
    pool own the memory), and its device pointer. BF16 is a ``torch.bfloat16`` tensor for torch."""
    if kind == "torch":
        import torch

        name = "bfloat16" if dtype.name == "BF16" else _TORCH_NAMES[dtype.np_dtype.name]
        out = torch.empty(count, dtype=getattr(torch, name), device=f"cuda:{device_id}")
        return out, out.data_ptr()
    import cupy

    if cupy.cuda.runtime.getDevice() == device_id:  # the common case: no device switch to pay for
        out = cupy.empty(count, dtype.np_dtype)
    else:
        with cupy.cuda.Device(device_id):
            out = cupy.empty(count, dtype.np_dtype)
    return out, out.data.ptr


def stream_pointer(stream: object | None, inputs: Sequence[object] = ()) -> int:
    """The CUDA stream handle a call is ordered on: ``stream`` (a CuPy or torch stream, an object
    with ``__cuda_stream__``, or a raw handle), else the current stream of the inputs' library
    (torch's for torch tensors, else CuPy's)."""
    if stream is None:
        for x in inputs:
            if device_kind(x) == "torch":
                import torch

                return int(torch.cuda.current_stream().cuda_stream)
        import cupy

        return cupy.cuda.get_current_stream().ptr
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        value: Any = protocol() if callable(protocol) else protocol
        return int(value[1])
    for attr in ("ptr", "cuda_stream"):  # CuPy streams, torch streams
        handle = getattr(stream, attr, None)
        if isinstance(handle, int):
            return handle
    raise InvalidProgram(f"stream={stream!r} is not a CUDA stream",
                         "pass a CuPy or torch stream, an object with __cuda_stream__, or a stream handle (int).")
