"""Scratch buffers of ``vyre.lib``, reused across calls: one ``ScratchCache`` per backend instance.

A call asks for a buffer by role ("scan.level1", "sort.keys_b", ...) and byte size; sizes are
capacity classes (powers of two), so calls of similar sizes get the same handles back, and on
``cuda`` the same handles mean the same captured graph. ``release`` frees them; a backend that
is garbage-collected takes its cache with it.

Results of ``ResidentArray`` calls are new handles the caller owns (``issue``). A caller that
hands them back with ``vyre.lib.recycle`` puts them in a pool by (role, size); the next call
with the same role and capacity class takes the same handle again, so its captured graph is
replayed instead of captured anew.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any

import numpy as np

from vyre.driver.backend import Resident
from vyre.driver.errors import InvalidProgram
from vyre.driver.registry import default_backend

FAST_CALLS = 64  # compiled device calls kept per backend
REPEATS = 32  # repeatable calls kept per backend (``vyre.lib.repeat``)


def resolve_backend(backend: Any) -> Any:
    """``backend=`` of a library call: None (the shared default), a backend id string, or a started backend."""
    if backend is None or isinstance(backend, str):
        return default_backend(backend or None)
    if not all(hasattr(backend, name) for name in ("dispatch", "allocate_resident")):
        raise InvalidProgram(f"backend={backend!r} is not a backend",
                             'pass a backend from vyre.acquire(), an id such as backend="reference", or None.')
    return backend


def raw_backend(backend: Any) -> Any:
    """The backend behind a ``vyre.acquire`` proxy (the scratch cache is keyed by it)."""
    return getattr(backend, "backend", backend)


class ScratchCache:
    """Resident buffers of one backend, by (role, nbytes); ``lock`` serialises calls that use them."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.raw = raw_backend(backend)  # for calls no hook observes (streams, new arrays): no proxy between
        self.lock = threading.RLock()
        self._handles: dict[tuple[str, int], Resident] = {}
        self._issued: weakref.WeakKeyDictionary[Resident, tuple[str, int]] = weakref.WeakKeyDictionary()
        self._recycled: dict[tuple[str, int], list[Resident]] = {}
        self._borrowed: dict[str, Resident] = {}  # role -> a handle over the caller's array (``borrow``)
        self._abilities: tuple[bool, bool] | None = None
        self._resident: bool | None = None
        self.fast: dict[tuple, Any] = {}  # compiled device calls (``vyre.lib.io.FastCall``) by call key
        self.repeats: OrderedDict[tuple, Any] = OrderedDict()  # ``vyre.lib.repeat.Repeat`` by call key
        self.ran: Any = None  # the compiled call the current library call ran (``vyre.lib.repeat.Ran``)
        # plans chosen by data read back, tried first next time: ``unique``'s bins by (dtype, capacity class)
        self.guesses: dict[tuple, int] = {}

    def get(self, role: str, nbytes: int, zeroed: bool = False) -> Resident:
        """The scratch handle of ``role`` with at least ``nbytes`` (a new one the first time, all
        zero bytes with ``zeroed``)."""
        key = (role, max(int(nbytes), 4))
        handle = self._handles.get(key)
        if handle is None:
            handle = self.backend.allocate_resident(key[1])
            if zeroed:
                self.backend.upload_resident(handle, np.zeros(key[1], np.uint8))
            self._handles[key] = handle
        return handle

    def abilities(self) -> tuple[bool, bool]:
        """Whether the backend has subgroup operations, and binds device arrays (asked once)."""
        if self._abilities is None:
            supports = getattr(self.backend, "supports_subgroup_ops", None)
            binds = all(hasattr(self.backend, name) for name in ("borrow", "enqueue_sequence", "new_array"))
            self._abilities = (supports is None or bool(supports()), binds)
        return self._abilities

    def compiles_resident(self) -> bool:
        """Whether ``ResidentArray`` calls run compiled here: the backend aliases resident handles
        (``alias_resident``), compiles calls (``compile_caller_sequence``) and enqueues without a
        wait (``enqueue_sequence``). Asked once."""
        if self._resident is None:
            names = ("alias_resident", "compile_caller_sequence", "enqueue_sequence")
            self._resident = all(hasattr(self.backend, name) for name in names)
        return self._resident

    def alias(self, role: str, source: Resident, nbytes: int) -> Resident:
        """The handle of ``role`` pointed at the first ``nbytes`` of resident ``source``
        (``backend.alias_resident``): the same handle every call, as ``borrow`` gives."""
        handle = self.backend.alias_resident(self._borrowed.get(role), source, nbytes)
        self._borrowed[role] = handle
        return handle

    def borrow(self, role: str, array: object) -> Resident:
        """The handle of ``role`` pointed at the caller's device ``array`` (``backend.borrow``): the
        same handle every call, so bindings and captured graphs over it are reused."""
        handle = self.backend.borrow(self._borrowed.get(role), array)
        self._borrowed[role] = handle
        return handle

    def add_fast(self, key: tuple, call: Any) -> None:
        """Keep a compiled device call (at most ``FAST_CALLS``, the oldest closed first)."""
        self.drop_fast(key)
        self.fast[key] = call
        while len(self.fast) > FAST_CALLS:
            self._close_fast(self.fast.pop(next(iter(self.fast))))

    def keep_repeat(self, key: tuple, repeat: Any) -> None:
        """Keep ``repeat`` (None: nothing to keep) for calls whose arguments give ``key`` (at most ``REPEATS``)."""
        if repeat is None:
            return
        self.repeats[key] = repeat
        self.repeats.move_to_end(key)
        while len(self.repeats) > REPEATS:
            self.repeats.popitem(last=False)

    def drop_fast(self, key: tuple) -> None:
        old = self.fast.pop(key, None)
        if old is not None:
            self._close_fast(old)

    def _close_fast(self, call: Any) -> None:
        """Close a compiled call, and forget the repeats that would run it."""
        for key in [k for k, repeat in self.repeats.items() if repeat.entry is call]:
            del self.repeats[key]
        call.close()

    def issue(self, role: str, nbytes: int) -> Resident:
        """A result handle for the caller: a recycled one of ``role`` and ``nbytes`` if any, else a new one."""
        key = (role, max(int(nbytes), 4))
        pool = self._recycled.get(key)
        handle = pool.pop() if pool else self.backend.allocate_resident(key[1])
        self._issued[handle] = key
        return handle

    def recycle(self, handle: Resident) -> bool:
        """Take back a handle ``issue`` gave out (False if it did not come from here, or came back already)."""
        key = self._issued.pop(handle, None)
        if key is None:
            return False
        self._recycled.setdefault(key, []).append(handle)
        return True

    @property
    def nbytes(self) -> int:
        pooled = sum(size * len(pool) for (_, size), pool in self._recycled.items())
        return sum(size for _, size in self._handles) + pooled

    def release(self) -> None:
        """Free every scratch and recycled handle; those the backend no longer holds (after a shutdown) are skipped."""
        from vyre.driver.errors import VyreError

        self.repeats.clear()
        self.guesses.clear()
        for key in list(self.fast):  # their bindings pin the buffers freed below
            try:
                self.drop_fast(key)
            except VyreError:
                pass
        handles, self._handles = list(self._handles.values()), {}
        handles += [h for pool in self._recycled.values() for h in pool]
        handles += list(self._borrowed.values())  # freeing these leaves the caller's arrays alone
        self._recycled, self._borrowed = {}, {}
        for handle in handles:
            try:
                self.backend.free_resident(handle)
            except VyreError:
                pass


_caches: weakref.WeakKeyDictionary[Any, ScratchCache] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def scratch_for(backend: Any) -> ScratchCache:
    """The scratch cache of ``backend`` (created on first use)."""
    raw = raw_backend(backend)
    cache = _caches.get(raw)  # the common case, without the lock: a cache made earlier
    if cache is not None:
        return cache
    with _caches_lock:
        cache = _caches.get(raw)
        if cache is None:
            cache = _caches[raw] = ScratchCache(backend)
        return cache


def release_scratch(backend: Any = None) -> int:
    """Free the scratch buffers ``vyre.lib`` keeps for ``backend`` (default: ``vyre.default_backend()``,
    the one library calls use without ``backend=``); returns the bytes released."""
    backend = resolve_backend(backend)
    with _caches_lock:
        cache = _caches.pop(raw_backend(backend), None)
    if cache is None:
        return 0
    with cache.lock:
        nbytes = cache.nbytes
        cache.release()
    return nbytes
