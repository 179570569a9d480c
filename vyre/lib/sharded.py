"""``Sharded``: one 1-D array held as contiguous parts, one per device, and the per-part helpers.

``vyre.lib.multi`` takes and returns ``Sharded`` values (or plain lists of per-device CuPy/torch
arrays) so that data spread over the GPUs of a host never goes through the host. A part is a
device array (CuPy, or anything with ``__cuda_array_interface__``, e.g. torch) on ``cuda``
backends, or a numpy array on backends without devices (the oracle: how CI runs it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre.driver.errors import InvalidProgram


def is_device_array(a: object) -> bool:
    return hasattr(a, "__cuda_array_interface__")


def device_index(a: object) -> int | None:
    """The CUDA device ordinal of a CuPy array or torch tensor (None for host arrays)."""
    dev = getattr(a, "device", None)
    for name in ("id", "index"):  # CuPy Device.id, torch device.index
        value = getattr(dev, name, None)
        if isinstance(value, int):
            return value
    return None


def device_ops(backend: Any = None) -> Any:
    """The CUDA backend's operations on device arrays (``backend.device_arrays``: CuPy work that
    ``vyre`` does not import itself); ``backend`` default: ``vyre.default_backend()``."""
    from vyre.driver.errors import UnsupportedFeature
    from vyre.driver.registry import default_backend

    found = getattr(backend if backend is not None else default_backend(), "device_arrays", None)
    if found is None:
        raise UnsupportedFeature("device arrays in vyre.lib.multi", getattr(backend, "id", "?"),
                                 "pass numpy arrays, or run on a backend that binds device arrays (cuda).")
    return found


def as_cupy(a: Any) -> Any:
    """A CuPy view of a device array (torch tensors and other ``__cuda_array_interface__`` arrays)."""
    return device_ops().as_cupy(a, device_index(a))


@dataclass(frozen=True)
class Sharded:
    """A 1-D array as ``parts[k]`` on ``devices[k]`` (ids such as ``"cuda:1"``, ``vyre.Device``
    values or started backends, as ``multi.map`` takes them); the array is the parts in order."""

    parts: tuple[Any, ...]
    devices: tuple[Any, ...]

    def __init__(self, parts: Sequence[Any], devices: Sequence[Any] | None = None) -> None:
        parts = tuple(parts)
        if not parts:
            raise InvalidProgram("a Sharded value needs at least one part", "pass one array per device.")
        if devices is None:
            index = [device_index(p) for p in parts]
            if None in index:
                raise InvalidProgram("Sharded(parts) without devices= needs device arrays (CuPy, torch) in every part",
                                     'name the devices: Sharded(parts, devices=["reference", "reference"]).')
            devices = [f"cuda:{i}" for i in index]
        devices = tuple(devices)
        if len(devices) != len(parts):
            raise InvalidProgram(f"Sharded has {len(parts)} parts but {len(devices)} devices",
                                 "pass one device per part, in order.")
        for p in parts:
            if getattr(p, "ndim", 1) != 1:
                raise InvalidProgram(f"a Sharded part has shape {getattr(p, 'shape', '?')}, not 1-D",
                                     "flatten each part (x.ravel()).")
        object.__setattr__(self, "parts", parts)
        object.__setattr__(self, "devices", devices)

    @property
    def sizes(self) -> list[int]:
        return [int(p.shape[0]) for p in self.parts]

    @property
    def size(self) -> int:
        return sum(self.sizes)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(str(self.parts[0].dtype).replace("torch.", ""))

    def gather(self) -> np.ndarray:
        """The whole array on the host (a copy)."""
        return np.concatenate([to_host(p) for p in self.parts])


def to_host(a: Any) -> np.ndarray:
    """A numpy copy (or the array itself) of a part or of a value a library call returned."""
    if isinstance(a, (np.ndarray, np.generic)):
        return np.asarray(a)
    if is_device_array(a):
        return device_ops().to_host(a, device_index(a))
    return np.asarray(a)


def as_sharded(value: object) -> tuple[Sharded | None, bool]:
    """``(Sharded, given_as_list)`` for a ``Sharded`` or a list of device arrays, else ``(None, False)``."""
    if isinstance(value, Sharded):
        return value, False
    if isinstance(value, (list, tuple)) and value and all(is_device_array(p) for p in value):
        return Sharded(value), True
    return None, False


def same_kind(result: Sharded, as_list: bool) -> Sharded | list:
    """The result in the form the input came in: a list of parts, or a ``Sharded``."""
    return list(result.parts) if as_list else result


def residents(backend: Any) -> Any:
    """The cuda backend's resident dispatcher (``to_device``, ``download_into``), else None."""
    unwrap = getattr(backend, "unwrap", None)
    raw = unwrap() if callable(unwrap) else backend
    found = getattr(raw, "residents", None)
    return found if hasattr(found, "to_device") else None


def host_empty(backend: Any, count: int, dtype: np.dtype) -> np.ndarray:
    """A new host array for results of ``backend`` (pinned when large on ``cuda``: one DMA fills it)."""
    res = residents(backend)
    return res.host_empty(count, dtype) if res is not None else np.empty(count, dtype)


def put(backend: Any, host: np.ndarray) -> Any:
    """``host`` on ``backend``'s device (through its pinned chunk ring), or itself on the oracle."""
    res = residents(backend)
    return res.to_device(host) if res is not None else host


def owned_copy(backend: Any, handle: Any, dtype: np.dtype, elements: int | None = None) -> Any:
    """The contents of a resident ``handle`` (its first ``elements``; None: all of it) as an array
    that owns its memory (a device array on a device, numpy on the oracle), finished before
    returning so the handle may be freed."""
    view = backend.view(handle, dtype)
    if elements is not None:
        view = view[:elements]
    if isinstance(view, np.ndarray):
        return view.copy()
    return device_ops(backend).run_on(device_index(view), view.copy, wait=True)


def empty_like(part: Any, dtype: np.dtype) -> Any:
    """An empty array of ``dtype`` where ``part`` lives (its device, or the host)."""
    index = device_index(part) if is_device_array(part) else None
    if index is None:
        return np.zeros(0, dtype)
    return device_ops().zeros(index, dtype)


def fetch_into(backend: Any, part: Any, out: np.ndarray) -> None:
    """A part (device array, or numpy on the oracle) into the host array ``out`` (through the
    backend's pinned chunk ring on ``cuda``)."""
    res = residents(backend)
    if res is not None and is_device_array(part):
        res.to_host(as_cupy(part), out)
    else:
        out[...] = part


def concat_on(device: int | None, pieces: Sequence[Any]) -> Any:
    """The pieces (device arrays on any devices, or numpy) one after another in one new array on
    ``device`` (numpy when ``device`` is None): peer copies between GPUs, finished on return."""
    if device is None:
        return np.concatenate([to_host(p) for p in pieces])
    return device_ops().concat_on(device, [as_cupy(p) for p in pieces])


def download_into(backend: Any, handle: Any, out: np.ndarray) -> None:
    """``out.nbytes`` bytes of ``handle`` into the host array ``out`` (straight into it on ``cuda``)."""
    if not out.nbytes:
        return
    res = residents(backend)
    if res is not None:
        res.download_into(handle, out)
    else:
        out[...] = backend.download_resident(handle, 0, out.nbytes).view(out.dtype)


__all__ = ["Sharded", "as_sharded", "concat_on", "device_index", "device_ops", "download_into", "fetch_into",
           "host_empty", "owned_copy", "put", "to_host"]
