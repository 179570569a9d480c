"""All-reduce of equal resident buffers held by several ``cuda`` backends, through NCCL.

``vyre.lib.multi.map`` calls this (through the ``cuda`` registration's ``all_reduce``) to combine
the partial results of a reduced output in place on every device. It needs CuPy's NCCL binding
(``cupy.cuda.nccl``) and one backend per distinct device; when either is missing it returns
False and the caller combines on the host instead.
Communicators are made once per tuple of devices and kept for the process.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from vyre_cuda.runtime.errors import cuda_errors

_OPS = {"add": "NCCL_SUM", "min": "NCCL_MIN", "max": "NCCL_MAX"}
_TYPES = {np.dtype(np.uint32): "NCCL_UINT32", np.dtype(np.int32): "NCCL_INT32"}
_comms: dict[tuple[int, ...], list[Any]] = {}
_lock = threading.Lock()


def nccl_module() -> Any | None:
    """``cupy.cuda.nccl`` when CuPy has a working NCCL, else None."""
    try:
        from cupy.cuda import nccl
    except Exception:  # noqa: BLE001 - any import failure means no NCCL
        return None
    return nccl if getattr(nccl, "available", True) else None


def _raw(backend: Any) -> Any:
    unwrap = getattr(backend, "unwrap", None)
    return unwrap() if callable(unwrap) else backend


def device_pointer(backend: Any, handle: Any) -> int | None:
    """Device address of a resident handle: from the backend's resident pool, else ``backend.view``."""
    resolve = getattr(getattr(backend, "resident", None), "resolve", None)
    if callable(resolve):
        return int(resolve(handle).ptr)
    view = getattr(backend, "view", None)
    if not callable(view):
        return None
    from vyre.ir.types import DataType

    return int(view(handle, DataType.U8 if handle.nbytes % 4 else DataType.U32).data.ptr)


def _communicators(nccl: Any, devices: tuple[int, ...]) -> list[Any]:
    with _lock:
        comms = _comms.get(devices)
        if comms is None:
            comms = _comms[devices] = list(nccl.NcclCommunicator.initAll(list(devices)))
        return comms


def all_reduce(backends: Sequence[Any], handles: Sequence[Any], dtype: np.dtype, op: str) -> bool:
    """Combine ``handles[k]`` (on ``backends[k]``, equal sizes) with ``op`` in place on every device.

    Returns False, touching nothing, when NCCL, the op or the element type is missing, or two
    backends share a device. Ordered on each backend's stream after its earlier work, and
    finished before returning.
    """
    nccl = nccl_module()
    raws = [_raw(b) for b in backends]
    devices = tuple(getattr(b, "device_id", -1) for b in raws)
    dtype = np.dtype(dtype)
    if (nccl is None or op not in _OPS or dtype not in _TYPES or len(set(devices)) != len(devices)
            or min(devices, default=-1) < 0):
        return False
    pointers = [device_pointer(b, h) for b, h in zip(raws, handles)]
    if None in pointers:
        return False
    count = handles[0].nbytes // dtype.itemsize
    comms = _communicators(nccl, devices)
    nccl_op, nccl_type = getattr(nccl, _OPS[op]), getattr(nccl, _TYPES[dtype])
    import cupy

    with cuda_errors(f"NCCL all-reduce ({op}) over devices {list(devices)}"):
        nccl.groupStart()
        try:
            for comm, backend, ptr in zip(comms, raws, pointers):
                with cupy.cuda.Device(backend.device_id):
                    comm.allReduce(ptr, ptr, count, nccl_type, nccl_op, backend.stream.ptr)
        finally:
            nccl.groupEnd()
        for backend in raws:
            backend.stream.synchronize()
    return True


__all__ = ["all_reduce", "device_pointer", "nccl_module"]
