"""Dispatch inputs that already live on a CUDA device (docs/semantics.md, inputs).

``device_array(data, what, device_id)`` wraps objects exposing ``__cuda_array_interface__``
(CuPy, PyTorch, Numba) or a CUDA ``__dlpack__`` (JAX, PyTorch) as a CuPy array without a host
round trip, checking device and contiguity; host objects give None and take the host path.
``device_input(decl, data, device_id)`` does the same for a dispatch input and first checks that
a typed array holds the buffer's element type (``vyre.driver.inputs.check_input_dtype``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vyre.driver.errors import DeviceLost, InvalidProgram
from vyre.driver.inputs import bfloat16_bits, check_input_dtype, is_bfloat16
from vyre.ir.program import BufferDecl
from vyre_cuda.runtime.errors import cuda_errors

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
    if arr.device.id != device_id:
        raise InvalidProgram(f"{what} is on CUDA device {arr.device.id}, the backend runs on device {device_id}",
                             f"move the array to device {device_id} (or acquire 'cuda:{arr.device.id}').")
    if not arr.flags.c_contiguous:
        raise InvalidProgram(f"{what} is a non-contiguous device array",
                             "pass a contiguous array (cupy.ascontiguousarray(x) or tensor.contiguous()).")
    return arr


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
