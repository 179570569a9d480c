"""Scratch buffers of ``vyre.lib``, reused across calls: one ``ScratchCache`` per backend instance.

A call asks for a buffer by role ("scan.level1", "sort.keys_b", ...) and byte size; sizes are
capacity classes (powers of two), so calls of similar sizes get the same handles back, and on
``cuda`` the same handles mean the same captured graph. ``release`` frees them; a backend that
is garbage-collected takes its cache with it.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from vyre.driver.backend import Resident


def raw_backend(backend: Any) -> Any:
    """The backend behind a ``vyre.acquire`` proxy (the scratch cache is keyed by it)."""
    return getattr(backend, "backend", backend)


class ScratchCache:
    """Resident buffers of one backend, by (role, nbytes); ``lock`` serialises calls that use them."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.lock = threading.RLock()
        self._handles: dict[tuple[str, int], Resident] = {}

    def get(self, role: str, nbytes: int) -> Resident:
        """The scratch handle of ``role`` with at least ``nbytes`` (a new one the first time)."""
        key = (role, max(int(nbytes), 4))
        handle = self._handles.get(key)
        if handle is None:
            handle = self.backend.allocate_resident(key[1])
            self._handles[key] = handle
        return handle

    @property
    def nbytes(self) -> int:
        return sum(size for _, size in self._handles)

    def forget(self) -> None:
        """Drop every handle without freeing (the backend already lost them, e.g. after shutdown)."""
        self._handles.clear()

    def release(self) -> None:
        """Free every scratch handle; handles the backend no longer knows are skipped."""
        from vyre.driver.errors import InvalidHandle

        handles, self._handles = list(self._handles.values()), {}
        for handle in handles:
            try:
                self.backend.free_resident(handle)
            except InvalidHandle:
                pass


_caches: weakref.WeakKeyDictionary[Any, ScratchCache] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def scratch_for(backend: Any) -> ScratchCache:
    """The scratch cache of ``backend`` (created on first use)."""
    raw = raw_backend(backend)
    with _caches_lock:
        cache = _caches.get(raw)
        if cache is None:
            cache = _caches[raw] = ScratchCache(backend)
        return cache


def release_scratch(backend: Any) -> int:
    """Free the scratch buffers ``vyre.lib`` keeps for ``backend``; returns the bytes released."""
    with _caches_lock:
        cache = _caches.pop(raw_backend(backend), None)
    if cache is None:
        return 0
    with cache.lock:
        nbytes = cache.nbytes
        cache.release()
    return nbytes
