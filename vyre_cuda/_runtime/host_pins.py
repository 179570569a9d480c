"""Direct DMA to and from the caller's large host arrays: page-locked once, kept while they live.

A copy from pageable memory must pass through pinned memory: the host copies each chunk (one
memcpy thread moves ~10 GB/s, all of them together ~35 GB/s on a 16-core host), so staging
tops out near half of a PCIe 5 link. Copies from page-locked memory run at the link's speed.
``HostPins.address`` gives the device-visible address of a host array's bytes when DMA can use
them directly:

- memory that is pinned already: large results this backend returned (``pinned_empty``, from
  ``RESULT_PIN_MIN`` bytes: numpy arrays over a pinned pool, so a result fed back in costs no
  registration) and CuPy pinned memory;
- a numpy array that owns its memory (``DIRECT_MIN`` bytes and more, any view into it) when
  that memory fills whole pages no other memory shares (``exclusive_pages``: glibc serves
  allocations above its mmap threshold, always above 32 MiB, from a mapping of their own): the
  owner's pages are registered with ``cudaHostRegister`` (portable: every device DMAs from it)
  the first time it is seen (about as long as staging it once), and unregistered when the owner
  is collected, or earlier when the pinned total would pass ``VYRE_CUDA_HOST_PIN_LIMIT``
  (default a quarter of the host's memory; ``0`` turns direct copies off).

Only whole, unshared allocations are registered because the driver judges a copy by the page its
source starts on: had vyre registered just the whole pages inside an array, another library's
copy of a slice starting there and ending in the array's last, shared page would fail with
``cudaErrorInvalidValue``, and a neighbour's copy starting in a shared page would too.

Anything else (small arrays, arrays on the heap's shared pages, memory maps, bytes, arrays owned
by other libraries) returns None and goes through the staging ring, as does an array the OS
will not page-lock (its locked-memory limit, or memory short: ``HostPins.refusals`` counts those,
and large results then come back in pageable memory). Registered arrays are never
moved by numpy; an owner that is resized is a new buffer and misses the cache.
"""

from __future__ import annotations

import ctypes
import mmap
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import DTypeLike

from vyre.reference.limits import physical_memory
from vyre_cuda._runtime import settings

DIRECT_MIN = 4 << 20  # bytes: larger host arrays DMA in place (a 4 MiB Dask block: 0.83 ms a dispatch, not 2.7)
RESULT_PIN_MIN = 64 << 20  # bytes: larger results come back in pinned memory (a pool block); smaller ones are
# staged into plain numpy memory (measured: pinned 4 MiB results kept by the caller cost a new pinned block each)
OWNER_SPAN = 16  # register an owner at most this many times larger than the part being copied
PORTABLE = 1  # cudaHostRegisterPortable: pinned for every device's context
FREE_BLOCKS = 8  # pinned result blocks the pool may keep unused before it gives them all back
MEMORY_TYPE_HOST = 1  # cudaMemoryTypeHost: page-locked host memory
PAGE = mmap.PAGESIZE  # registrations cover whole pages
CHUNK_HEADER = 2 * ctypes.sizeof(ctypes.c_size_t)  # glibc: a chunk's prev_size and size words before its memory
IS_MMAPPED = 2  # glibc: the size word's bit for a chunk that is a mapping of its own
SIZE_FLAGS = 7  # glibc: the size word's flag bits
MAPPING_SLACK = 2 << 20  # bytes a mapped chunk may hold past its request (huge-page rounding)


class Span(NamedTuple):
    """Where a direct copy of a host array's bytes goes: ``ptr`` is the array's address, ``pin`` the
    registration to mark with ``HostPins.used`` (None: pinned by its allocator)."""

    ptr: int
    pin: Any


@dataclass(eq=False)
class _Pin:
    ptr: int
    nbytes: int
    owner: weakref.ref
    finalizer: weakref.finalize
    uses: list = field(default_factory=list)  # CUDA events after copies from/to it that may still run


def _owner(data: np.ndarray | memoryview) -> object:
    """The object that owns ``data``'s memory (up the chain of views and buffer exporters)."""
    obj: object = data
    while True:
        if isinstance(obj, memoryview):
            obj = obj.obj
        elif isinstance(obj, np.ndarray) and obj.base is not None:
            obj = obj.base
        else:
            return obj


def exclusive_pages(owner: np.ndarray) -> tuple[int, int] | None:
    """``(start, nbytes)`` of the whole pages that hold ``owner``'s memory and nothing else, or None
    when it shares a page with other memory (a heap chunk) or its allocator cannot be told.

    Two layouts qualify: memory that starts and ends on page boundaries, and a glibc chunk that is
    a mapping of its own (its header, the two words before the memory, sits at a page start,
    records no leading gap and has the mapped bit; its size is whole pages just past the request).
    The header is read only when it lies on the memory's own first page, which is mapped."""
    ptr, nbytes = int(owner.ctypes.data), owner.nbytes
    if ptr % PAGE == 0 and nbytes % PAGE == 0:
        return ptr, nbytes
    if ptr % PAGE != CHUNK_HEADER:
        return None
    prev_size, size_word = (ctypes.c_size_t * 2).from_address(ptr - CHUNK_HEADER)
    size = size_word & ~SIZE_FLAGS
    if prev_size or not size_word & IS_MMAPPED or size % PAGE:
        return None
    if not nbytes + CHUNK_HEADER <= size <= nbytes + CHUNK_HEADER + MAPPING_SLACK:
        return None
    return ptr - CHUNK_HEADER, size


def _address(data: np.ndarray | memoryview) -> int:
    return int(np.frombuffer(data, np.uint8).ctypes.data) if isinstance(data, memoryview) else int(data.ctypes.data)


class HostPins:
    """The registry of page-locked caller arrays (one per process: registrations are portable)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.pinned = 0
        self.refusals = 0  # page-locks the OS or driver refused (registrations, pinned result blocks)
        self._pins: OrderedDict[tuple[int, int], _Pin] = OrderedDict()
        self._refused: dict[tuple[int, int], weakref.ref] = {}  # owners the driver would not pin
        # held while registering, unregistering or allocating pinned memory, and by the device heap
        # around cudaMalloc: a registration racing an allocation on another thread (another device)
        # failed that allocation with cudaErrorAlreadyMapped on a 4-GPU host. Reentrant: finalizers
        # may run inside a locked section (garbage collection).
        self.lock = threading.RLock()
        self._results: Any = None

    def _limit(self) -> int:
        if self.limit is None:
            configured = settings.host_pin_limit()
            self.limit = physical_memory() // 4 if configured is None else configured
        return self.limit

    def address(self, data: np.ndarray | memoryview) -> Span | None:
        """The ``Span`` of ``data`` when copies may DMA straight from/to it, else None."""
        nbytes = data.nbytes
        if nbytes < DIRECT_MIN or not self._limit():
            return None
        owner = _owner(data)
        ptr = _address(data)
        if _pinned_allocation(owner):
            return Span(ptr, None)
        if not isinstance(owner, np.ndarray) or not owner.flags.owndata or owner.nbytes > OWNER_SPAN * nbytes:
            return None
        base = int(owner.ctypes.data)
        if not base <= ptr <= ptr + nbytes <= base + owner.nbytes:
            return None
        with self.lock:
            pin = self._pins.get((base, owner.nbytes))
            if pin is not None and pin.owner() is owner:
                self._pins.move_to_end((base, owner.nbytes))
            else:
                pin = self._register(owner, base)
                if pin is None:
                    return None
        return Span(ptr, pin)

    def used(self, pin: _Pin | None, event: Any) -> None:
        """Record that a copy enqueued before ``event`` reads or writes ``pin``'s memory."""
        if pin is not None:
            with self.lock:
                pin.uses = [e for e in pin.uses if not e.done]
                pin.uses.append(event)

    def _register(self, owner: np.ndarray, base: int) -> _Pin | None:
        """Page-lock ``owner``'s pages when no other memory shares them (``exclusive_pages``)."""
        from cupy.cuda import runtime

        key = (base, owner.nbytes)
        pages = exclusive_pages(owner)
        if pages is None:
            return None
        base, nbytes = pages
        refused = self._refused.get(key)
        if refused is not None and refused() is owner:
            return None
        while self._pins and self.pinned + nbytes > self._limit():
            self._unpin(self._pins.popitem(last=False)[1])
        if self.pinned + nbytes > self._limit():
            return None
        if _pinned_by_others(base, nbytes):
            return None
        try:
            runtime.hostRegister(base, nbytes, PORTABLE)
        except runtime.CUDARuntimeError:  # the OS refused (locked-memory limits)
            self.refusals += 1
            self._refused = {k: r for k, r in self._refused.items() if r() is not None}
            self._refused[key] = weakref.ref(owner)
            return None
        finalizer = weakref.finalize(owner, self._collected, key)
        finalizer.atexit = False  # the process is going away: the driver frees everything
        pin = _Pin(base, nbytes, weakref.ref(owner), finalizer)
        self._pins[key] = pin
        self.pinned += nbytes
        return pin

    def _collected(self, key: tuple[int, int]) -> None:
        """The owner is being freed: unregister before its memory goes back to the allocator."""
        with self.lock:
            pin = self._pins.pop(key, None)
            if pin is not None:
                self._unpin(pin)

    def _unpin(self, pin: _Pin) -> None:
        from cupy.cuda import runtime

        pin.finalizer.detach()
        self.pinned -= pin.nbytes
        try:
            for event in pin.uses:
                event.synchronize()
            runtime.hostUnregister(pin.ptr)
        except Exception:  # noqa: BLE001, S110 - a driver already shut down has freed it
            pass

    def pinned_empty(self, count: int, dtype: DTypeLike) -> np.ndarray:
        """A new host array for a result, in pinned memory when it is large (from a pool, so a
        result dropped by the caller is reused by the next one of its size)."""
        dtype = np.dtype(dtype)
        nbytes = count * dtype.itemsize
        if nbytes < RESULT_PIN_MIN or not self._limit():
            return np.empty(count, dtype)
        import cupy

        with self.lock:
            if self._results is None:
                self._results = cupy.cuda.PinnedMemoryPool()
            pool = self._results
            if pool.n_free_blocks() > FREE_BLOCKS:
                pool.free_all_blocks()
            try:
                mem = pool.malloc(nbytes)
            except cupy.cuda.runtime.CUDARuntimeError:  # pinned memory exhausted: pageable works
                self.refusals += 1
                return np.empty(count, dtype)
        return np.frombuffer(mem, dtype, count)

    def release(self) -> None:
        """Unregister every array and give back the unused pinned result blocks."""
        with self.lock:
            while self._pins:
                self._unpin(self._pins.popitem(last=False)[1])
            if self._results is not None:
                self._results.free_all_blocks()


def _pinned_by_others(ptr: int, nbytes: int) -> bool:
    """Whether the first or last byte is already page-locked (``cudaHostRegister`` or
    ``cudaHostAlloc`` by other code): then it is theirs, and the range goes through staging."""
    from cupy.cuda import runtime

    try:
        return any(runtime.pointerGetAttributes(p).type == MEMORY_TYPE_HOST for p in (ptr, ptr + nbytes - 1))
    except runtime.CUDARuntimeError:  # drivers before CUDA 11 refuse unregistered host pointers
        return False


def _pinned_allocation(owner: object) -> bool:
    """Memory a CUDA pinned allocator made (CuPy's pinned memory, our pinned results)."""
    return type(owner).__name__ in ("PinnedMemoryPointer", "PinnedMemory") and \
        type(owner).__module__.startswith("cupy")


#: the process's registry (registrations are portable, so every device shares it)
PINS = HostPins()
