"""The devices of ``vyre.lib.multi``: started backends for a device list, and work on one thread per device."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from vyre.driver.errors import InvalidProgram

UFUNCS: dict[str, np.ufunc] = {
    "add": np.add, "min": np.minimum, "max": np.maximum, "or": np.bitwise_or, "and": np.bitwise_and,
    "xor": np.bitwise_xor,
}  # each reduce op on the host (integers wrap, as on the device)

_acquired: dict[tuple[str, int], Any] = {}  # started backends (and the default device list) by key
_acquire_lock = threading.Lock()


# ---- devices -------------------------------------------------------------------------------------------
def backends_for(devices: Sequence[object] | None = None) -> list[Any]:
    """Started backends for ``devices``: ids (``"cuda:1"``, ``"reference"``), ``vyre.Device``s or backends.

    ``None`` means every device of ``vyre.devices()`` (listed once per process), or one backend from
    ``vyre.acquire(allow_reference=True)`` when no backend lists devices. Backends started from an
    id are kept for the process; an id given twice starts two backends.
    """
    from vyre.driver.devices import Device
    from vyre.driver.devices import devices as list_devices
    from vyre.driver.registry import acquire
    from vyre.driver.registry import default_backend as shared_backend

    if devices is None:
        devices = _cached(("*", 0), lambda: [d.id for d in list_devices()])  # listed once per process
        if not devices:
            return [shared_backend()]
    if isinstance(devices, (str, Device)) or not len(devices):
        raise InvalidProgram(f"devices={devices!r} is not a non-empty list",
                             'pass a list such as ["cuda:0", "cuda:1"], or None for every device.')
    seen: dict[str, int] = {}
    out = []
    for item in devices:
        spec = item.id if isinstance(item, Device) else item
        if not isinstance(spec, str):
            out.append(_started(spec))
            continue
        seen[spec] = seen.get(spec, 0) + 1
        # the first use of an id is the process's shared backend; a repeat starts another one
        out.append(shared_backend(spec) if seen[spec] == 1
                   else _cached((spec, seen[spec]), lambda spec=spec: acquire(spec)))
    return out


def _started(backend: object) -> Any:
    """An item of ``devices=`` that is neither an id nor a ``Device``: it must be a started backend."""
    if not all(hasattr(backend, name) for name in ("allocate_resident", "dispatch_resident", "download_resident")):
        raise InvalidProgram(f"devices= holds {backend!r}, which is not a device id, a vyre.Device or a backend",
                             'pass ids such as ["cuda:0", "cuda:1"], vyre.devices() entries, or started backends.')
    return backend


def _cached(key: tuple[str, int], start: Callable[[], Any]) -> Any:
    with _acquire_lock:
        backend = _acquired.get(key)
        if backend is None:
            backend = _acquired[key] = start()
        return backend


def each(items: Sequence[Any], work: Callable[[Any], Any]) -> list[Any]:
    """``work(item)`` on one thread per item (one per device); raises the first failure after all
    finished, so no device is left running when the call returns. The threads are the process's
    shared pool (started once, not per call); a call made from one of them gets its own threads,
    so an outer call waiting on inner ones never waits for a thread it holds itself."""
    if len(items) == 1:
        return [work(items[0])]
    if getattr(_in_pool, "active", False):
        with ThreadPoolExecutor(len(items), thread_name_prefix="vyre-multi-nested") as own:
            return _gather([own.submit(work, s) for s in items])
    pool = _shared_pool(len(items))
    return _gather([pool.submit(_pooled, work, s) for s in items])


POOL_THREADS = 64  # most threads of the shared pool: more devices than this queue
_in_pool = threading.local()  # .active on the shared pool's threads
_pool: tuple[int, int, ThreadPoolExecutor] | None = None  # (pid, size, pool): a forked child starts its own


def _shared_pool(wanted: int) -> ThreadPoolExecutor:
    """The shared pool, with as many threads as the widest call so far (at most ``POOL_THREADS``):
    a pool wider than the device count would start idle threads on a many-core host."""
    global _pool
    size = min(max(wanted, 1), POOL_THREADS)
    with _acquire_lock:
        if _pool is None or _pool[0] != os.getpid() or _pool[1] < size:
            if _pool is not None and _pool[0] == os.getpid():
                _pool[2].shutdown(wait=False)  # its threads finish their items and exit
            _pool = (os.getpid(), size, ThreadPoolExecutor(size, thread_name_prefix="vyre-multi"))
        return _pool[2]


def _pooled(work: Callable[[Any], Any], item: Any) -> Any:
    _in_pool.active = True
    try:
        return work(item)
    finally:
        _in_pool.active = False


def _gather(futures: Sequence[Future]) -> list[Any]:
    errors = [f.exception() for f in futures]
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    return [f.result() for f in futures]


__all__ = ["UFUNCS", "backends_for", "each"]
