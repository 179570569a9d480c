"""Combining equal resident buffers held by several ``cuda`` backends (one per device).

``vyre.lib.multi.map`` calls ``all_reduce`` (the ``cuda`` registration's ``all_reduce``) to combine
the partial results of a reduced output on the devices:

- ``"nccl"``: an NCCL all-reduce (``cupy.cuda.nccl``) in place on every buffer, on each backend's
  stream, for the ops and types NCCL has (add, min, max on U32/I32). Communicators are made once
  per tuple of devices and kept for the process.
- ``"peer"``: otherwise, each partial is copied device to device onto the first backend's device
  and combined there with a CuPy ufunc; only the first buffer holds the result. When NCCL is
  missing for an op and type it has, a ``RuntimeWarning`` says so once per process, with the fix.

It returns None, touching nothing, when two backends share a device or a buffer's device address
cannot be found; the caller then combines on the host.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from vyre_cuda._runtime.errors import cuda_errors

_NCCL_OPS = {"add": "NCCL_SUM", "min": "NCCL_MIN", "max": "NCCL_MAX"}
_NCCL_TYPES = {np.dtype(np.uint32): "NCCL_UINT32", np.dtype(np.int32): "NCCL_INT32"}
_UFUNCS = {"add": "add", "min": "minimum", "max": "maximum", "or": "bitwise_or", "and": "bitwise_and",
           "xor": "bitwise_xor"}
_comms: dict[tuple[int, ...], list[Any]] = {}
_lock = threading.Lock()
_missing_said = False
NCCL_FIX = ("pip install 'vyre-cuda[cuda12]' (or [cuda13]): the extra installs NVIDIA's NCCL wheel "
            "(nvidia-nccl-cu12 or nvidia-nccl-cu13) and CuPy >= 14, which loads NCCL from it")


def nccl_missing_reason() -> str | None:
    """Why CuPy has no working NCCL (None when it has one)."""
    try:
        from cupy.cuda import nccl
    except Exception as exc:  # noqa: BLE001 - any import failure means no NCCL
        return f"cupy.cuda.nccl does not import ({type(exc).__name__}: {exc})"
    if not getattr(nccl, "available", True):
        return "CuPy found no NCCL library (cupy.cuda.nccl.available is False)"
    return None


def nccl_module() -> Any | None:
    """``cupy.cuda.nccl`` when CuPy has a working NCCL, else None."""
    if nccl_missing_reason() is not None:
        return None
    from cupy.cuda import nccl

    return nccl


def _say_nccl_missing() -> None:
    """Warn once per process that a reduction NCCL could do takes the slower peer-copy path."""
    global _missing_said
    reason = nccl_missing_reason()
    if _missing_said or reason is None:
        return
    _missing_said = True
    warnings.warn(f"vyre-cuda: NCCL is missing: {reason}; reduced outputs over several GPUs are combined "
                  f"with peer copies on the first device instead (reduction path 'peer'). Fix: {NCCL_FIX}.",
                  RuntimeWarning, stacklevel=3)


def _raw(backend: Any) -> Any:
    unwrap = getattr(backend, "unwrap", None)
    return unwrap() if callable(unwrap) else backend


def device_pointer(backend: Any, handle: Any) -> int | None:
    """Device address of a resident handle: from the backend's resident pool, else ``backend.view``."""
    resolve = getattr(getattr(backend, "resident", None), "resolve", None)
    if callable(resolve):
        block: Any = resolve(handle)  # the pool's CuPy memory block
        return int(block.ptr)
    view = getattr(backend, "view", None)
    if not callable(view):
        return None
    from vyre.ir.types import DataType

    array: Any = view(handle, DataType.U8 if handle.nbytes % 4 else DataType.U32)  # a CuPy array
    return int(array.data.ptr)


def all_reduce(backends: Sequence[Any], handles: Sequence[Any], dtype: np.dtype, op: str) -> str | None:
    """Combine ``handles[k]`` (on ``backends[k]``, equal sizes) with ``op``; the path taken, or None.

    Ordered after each backend's earlier work on its stream, and finished before returning.
    """
    raws = [_raw(b) for b in backends]
    devices = tuple(getattr(b, "device_id", -1) for b in raws)
    dtype = np.dtype(dtype)
    if op not in _UFUNCS or len(set(devices)) != len(devices) or min(devices, default=-1) < 0:
        return None
    found = [device_pointer(b, h) for b, h in zip(raws, handles)]
    pointers = [p for p in found if p is not None]
    if len(pointers) != len(found):
        return None
    count = handles[0].nbytes // dtype.itemsize
    nccl = nccl_module()
    with cuda_errors(f"combining a reduced output ({op}) over devices {list(devices)}"):
        if op in _NCCL_OPS and dtype in _NCCL_TYPES:
            if nccl is not None:
                _nccl(nccl, raws, pointers, count, dtype, op)
                return "nccl"
            _say_nccl_missing()
        _peer(raws, pointers, count, dtype, op)
        return "peer"


def _nccl(nccl: Any, raws: Sequence[Any], pointers: Sequence[int], count: int, dtype: np.dtype, op: str) -> None:
    import cupy

    devices = tuple(b.device_id for b in raws)
    with _lock:
        comms = _comms.get(devices)
        if comms is None:
            comms = _comms[devices] = list(nccl.NcclCommunicator.initAll(list(devices)))
    nccl_op, nccl_type = getattr(nccl, _NCCL_OPS[op]), getattr(nccl, _NCCL_TYPES[dtype])
    nccl.groupStart()
    try:
        for comm, backend, ptr in zip(comms, raws, pointers):
            with cupy.cuda.Device(backend.device_id):
                comm.allReduce(ptr, ptr, count, nccl_type, nccl_op, backend.stream.ptr)
    finally:
        nccl.groupEnd()
    for backend in raws:
        backend.stream.synchronize()


def _peer(raws: Sequence[Any], pointers: Sequence[int], count: int, dtype: np.dtype, op: str) -> None:
    """Copy every partial onto the first device (peer copies) and combine them there."""
    import cupy

    first = raws[0]
    for backend in raws[1:]:
        backend.stream.synchronize()  # each partial is complete before it is copied
    with cupy.cuda.Device(first.device_id), first.stream:
        memory = cupy.cuda.UnownedMemory(pointers[0], count * dtype.itemsize, first, first.device_id)
        acc = cupy.ndarray((count,), dtype, cupy.cuda.MemoryPointer(memory, 0))
        part = cupy.empty((count,), dtype)
        ufunc = getattr(cupy, _UFUNCS[op])
        for backend, ptr in zip(raws[1:], pointers[1:]):
            cupy.cuda.runtime.memcpyPeerAsync(part.data.ptr, first.device_id, ptr, backend.device_id,
                                              count * dtype.itemsize, first.stream.ptr)
            ufunc(acc, part, out=acc)
        first.stream.synchronize()


__all__ = ["NCCL_FIX", "all_reduce", "device_pointer", "nccl_missing_reason", "nccl_module"]
