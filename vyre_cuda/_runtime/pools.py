"""Device memory: a size-class heap, resident handles, transient buffers and pinned staging.

Layers (each usable by the pipelines/graphs code):

- ``DeviceHeap`` takes raw device memory from ``cudaMalloc`` in size classes (next power of two,
  at least 256 bytes), keeps freed blocks for reuse, honours ``VYRE_CUDA_MEMORY_LIMIT`` and maps
  running out of memory to ``DeviceOutOfMemory(requested, available)`` after freeing its cached
  blocks and retrying once. Reusing a block right after it is given back is safe because every
  copy and launch of a backend goes on that backend's one stream.
- ``DeviceBuffer(ptr, nbytes, capacity)`` is one block. ``retain()``/``release()`` pin it: a
  pinned block given back (a live CUDA graph still points at it) returns to the heap only when
  the last pin is released. ``ResidentPool.retain``/``release`` and the transient pool's do the same.
- ``ResidentPool`` issues ``vyre.driver.backend.Resident`` handles. A handle is valid only while
  it is the very object this pool issued and has not been freed: ``resolve`` rejects freed,
  foreign (another backend's) and forged (re-created or copied) handles with ``InvalidHandle``.
  Its ``generation`` changes with every free (and ``invalidate``), so a caller may keep resolved
  pointers while it is unchanged.
- ``TransientPool`` lends buffers for one dispatch (``acquire`` / ``recycle``).
- ``PinnedStaging`` moves bytes between host and device through pinned host memory with async
  copies on the backend stream: two slots for a dispatch's small inputs and outputs, and a ring
  of ``RING`` pinned chunks of ``CHUNK`` bytes through which every host transfer of at least
  ``PIPELINE_MIN`` bytes is pipelined (the host copy of chunk k+1 runs, on ``copy_threads()``
  threads of its own, while the DMA of chunk k runs); smaller ones take one shared slot. Large
  arrays that are pinned or can be page-locked in place (``host_pins``) skip the ring: one DMA
  at the link's speed. ``empty`` makes large host results in pinned memory for the same reason.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from vyre.driver.backend import Resident
from vyre.driver.errors import DeviceOutOfMemory, InvalidHandle
from vyre.driver.resident_args import invalid_handle
from vyre_cuda._runtime import settings
from vyre_cuda._runtime.errors import cuda_errors
from vyre_cuda._runtime.host_pins import PINS
from vyre_cuda._runtime.telemetry import Telemetry

MIN_BLOCK = 256
CHUNK = 16 << 20  # bytes per pinned chunk of a pipelined host transfer
RING = 3  # pinned chunks per device: two DMAs queued while the host fills or drains the third
PIPELINE_MIN = 1 << 20  # host transfers from this size are chunked; below it one staged copy is cheaper
PARALLEL_COPY_MIN = 8 << 20  # below this a host copy stays on the calling thread (a 4 MiB copy split over 8
# threads took 2.7 ms a Dask block, on one thread 2.0: the threads' page faults on a fresh result contend)
H2D, D2H, D2D = 1, 2, 3  # cudaMemcpyKind
_OOM_STATUS = 2  # cudaErrorMemoryAllocation


def capacity_class(nbytes: int) -> int:
    """The block size serving a request: the next power of two, at least ``MIN_BLOCK`` bytes."""
    return MIN_BLOCK if nbytes <= MIN_BLOCK else 1 << (nbytes - 1).bit_length()


memory_limit = settings.memory_limit  # ``VYRE_CUDA_MEMORY_LIMIT`` in bytes (None when unset)


def _runtime() -> Any:
    from cupy.cuda import runtime

    return runtime


class DeviceBuffer:
    """One block of device memory: ``ptr`` (int), ``nbytes`` asked for, ``capacity`` reserved."""

    __slots__ = ("ptr", "nbytes", "capacity", "pins", "retired", "_heap")

    def __init__(self, ptr: int, nbytes: int, capacity: int, heap: DeviceHeap | None = None) -> None:
        self.ptr, self.nbytes, self.capacity = ptr, nbytes, capacity
        self.pins = 0
        self.retired = False
        self._heap = heap

    def __repr__(self) -> str:
        return f"DeviceBuffer(ptr=0x{self.ptr:x}, nbytes={self.nbytes}, capacity={self.capacity})"

    @property
    def borrowed(self) -> bool:
        """True for a caller's memory bound through ``ResidentPool.borrow`` (no heap behind it)."""
        return self._heap is None

    def retain(self) -> DeviceBuffer:
        """Pin the block: it is not reused until every pin is released."""
        self.pins += 1
        return self

    def release(self) -> None:
        """Drop one pin; a block already given back returns to the heap with its last pin."""
        if self.pins <= 0:
            raise ValueError(f"{self!r} released more often than retained. Fix: pair retain() with release().")
        self.pins -= 1
        if self.pins == 0 and self.retired and self._heap is not None:
            self._heap.put(self)


class DeviceHeap:
    """Raw device memory in size classes with reuse, a byte limit and out-of-memory recovery."""

    def __init__(self, limit: int | None = None, telemetry: Telemetry | None = None) -> None:
        self._rt = _runtime()
        self._free: dict[int, list[int]] = {}
        self.limit = limit
        self.reserved = 0  # bytes held from cudaMalloc (in use + cached)
        self.cached = 0  # bytes of freed blocks kept for reuse
        self.lock = threading.RLock()
        self._telemetry = telemetry or Telemetry()
        self._closed = False
        # called before a cached block is handed out again: work on another stream may still read
        # it (``SequenceDispatcher.settle`` orders the backend's stream after that work)
        self.on_reuse: Callable[[], None] | None = None

    @property
    def in_use(self) -> int:
        return self.reserved - self.cached

    def take(self, nbytes: int) -> DeviceBuffer:
        """A block of at least ``nbytes`` (reused when one of its class is cached)."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
            raise ValueError(f"cannot allocate {nbytes!r} bytes. Fix: pass a byte count >= 0.")
        cap = capacity_class(nbytes)
        with self.lock:
            free = self._free.get(cap)
            if free:
                if self.on_reuse is not None:
                    self.on_reuse()
                self.cached -= cap
                self._publish()
                return DeviceBuffer(free.pop(), nbytes, cap, self)
            cap = self._fit_limit(nbytes, cap)
            ptr, cap = self._malloc(nbytes, cap)
            self.reserved += cap
            self._publish()
            return DeviceBuffer(ptr, nbytes, cap, self)

    def put(self, buf: DeviceBuffer) -> None:
        """Give a block back; a pinned one waits for its last ``release``."""
        with self.lock:
            if buf.pins:
                buf.retired = True
                return
            if self._closed:
                return
            buf.retired = False
            self._free.setdefault(buf.capacity, []).append(buf.ptr)
            self.cached += buf.capacity
            self._publish()

    def trim(self) -> int:
        """Free every cached block (returns the bytes released)."""
        with self.lock:
            released = 0
            with cuda_errors("freeing cached device memory"):
                for cap, ptrs in self._free.items():
                    while ptrs:
                        self._rt.free(ptrs.pop())
                        released += cap
            self.reserved -= released
            self.cached -= released
            self._publish()
            return released

    def close(self, buffers: list[DeviceBuffer]) -> None:
        """Free the cache and ``buffers`` (everything still handed out); the heap is unusable after."""
        with self.lock:
            self.trim()
            with cuda_errors("freeing device memory at shutdown"):
                for buf in buffers:
                    self._rt.free(buf.ptr)
                    self.reserved -= buf.capacity
            self._closed = True
            self._publish()

    def forget(self) -> None:
        """After a device fault: drop every block without freeing it (the context reset frees them all)."""
        with self.lock:
            self._free.clear()
            self.reserved = self.cached = 0
            self._closed = True
            self._publish()

    # ---- internals ----------------------------------------------------------------------------
    def _fit_limit(self, nbytes: int, cap: int) -> int:
        """Apply ``limit``: trim the cache, fall back to an exact-size block, else DeviceOutOfMemory."""
        if self.limit is None:
            return cap
        if self.reserved + cap > self.limit and self.cached:
            self.trim()
        if self.reserved + cap <= self.limit:
            return cap
        exact = max(MIN_BLOCK, -(-nbytes // MIN_BLOCK) * MIN_BLOCK)
        if self.reserved + exact <= self.limit:
            return exact
        raise DeviceOutOfMemory(nbytes, max(0, self.limit - self.in_use),
                                "free resident buffers or raise VYRE_CUDA_MEMORY_LIMIT "
                                f"(now {self.limit} bytes).")

    def _malloc(self, nbytes: int, cap: int) -> tuple[int, int]:
        """cudaMalloc with one retry after freeing caches, then an exact-size try."""
        exact = max(MIN_BLOCK, -(-nbytes // MIN_BLOCK) * MIN_BLOCK)
        attempts = [(cap, False), (cap, True)] + ([(exact, False)] if exact < cap else [])
        for size, trim_first in attempts:
            if trim_first:
                self.trim()
                _free_cupy_pools()
            try:
                with PINS.lock:  # never alongside a host registration (see host_pins.HostPins.lock)
                    return self._rt.malloc(size), size
            except Exception as exc:  # noqa: BLE001 - classified below
                if not _is_oom(exc):
                    with cuda_errors(f"allocating {nbytes} device bytes"):
                        raise
        raise DeviceOutOfMemory(nbytes, self._free_bytes())

    def _free_bytes(self) -> int:
        try:
            return int(self._rt.memGetInfo()[0])
        except Exception:  # noqa: BLE001 - best effort for the message
            return 0

    def _publish(self) -> None:
        self._telemetry.set("cuda_cached_bytes", self.cached)


def _is_oom(exc: BaseException) -> bool:
    return getattr(exc, "status", None) == _OOM_STATUS or "out of memory" in str(exc).lower() \
        or "cudaErrorMemoryAllocation" in str(exc)


def _free_cupy_pools() -> None:
    """Release CuPy's own cached blocks too (user arrays are untouched)."""
    try:
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()
    except Exception:  # noqa: BLE001 - best effort
        pass


class _Pool:
    """Shared accounting of a pool of blocks lent from a ``DeviceHeap``."""

    gauge = "cuda_pool_bytes_in_use"

    def __init__(self, heap: DeviceHeap, telemetry: Telemetry) -> None:
        self.heap, self.telemetry = heap, telemetry
        self.in_use = 0
        self.peak = 0
        self._out: dict[int, DeviceBuffer] = {}  # id(buf) -> buf, everything lent and not back

    def _lend(self, nbytes: int) -> DeviceBuffer:
        buf = self.heap.take(nbytes)
        self._out[id(buf)] = buf
        self._account(buf.capacity)
        return buf

    def _return(self, buf: DeviceBuffer) -> None:
        if self._out.pop(id(buf), None) is None:
            return
        self._account(-buf.capacity)
        self.heap.put(buf)

    def _account(self, delta: int) -> None:
        self.in_use += delta
        self.peak = max(self.peak, self.in_use)
        self.telemetry.gauge(self.gauge, self.in_use)

    @staticmethod
    def retain(buf: DeviceBuffer) -> DeviceBuffer:
        """Pin ``buf`` (a CUDA graph uses it): it is not reused until ``release``."""
        return buf.retain()

    @staticmethod
    def release(buf: DeviceBuffer) -> None:
        """Drop a pin taken with ``retain``."""
        buf.release()

    def outstanding(self) -> list[DeviceBuffer]:
        return list(self._out.values())


class TransientPool(_Pool):
    """Buffers lent for one dispatch and recycled by capacity class across dispatches."""

    gauge = "cuda_transient_bytes_in_use"

    def acquire(self, nbytes: int) -> DeviceBuffer:
        """A block of at least ``nbytes`` for this dispatch."""
        with self.heap.lock:
            return self._lend(nbytes)

    def recycle(self, buffers: list[DeviceBuffer]) -> None:
        """Give a dispatch's blocks back (safe once its work is enqueued on the backend stream)."""
        with self.heap.lock:
            for buf in buffers:
                self._return(buf)


class ResidentPool(_Pool):
    """Device buffers behind checked, opaque ``Resident`` handles."""

    gauge = "cuda_resident_bytes_in_use"

    def __init__(self, heap: DeviceHeap, telemetry: Telemetry, owner: int) -> None:
        super().__init__(heap, telemetry)
        self.owner = owner
        self._ids = itertools.count(1)
        self._issued = 0
        self._live: dict[int, tuple[Resident, DeviceBuffer]] = {}
        self.generation = 0  # bumped by every free: callers may cache resolutions while it is unchanged

    def allocate(self, nbytes: int) -> Resident:
        """A new handle to ``nbytes`` of device memory (contents undefined until uploaded)."""
        with self.heap.lock:
            buf = self._lend(nbytes)
            handle = Resident(next(self._ids), nbytes, self.owner)
            self._issued = handle.id
            self._live[handle.id] = (handle, buf)
            self.telemetry.set("cuda_resident_handles", len(self._live))
            return handle

    def resolve(self, handle: object) -> DeviceBuffer:
        """The buffer behind ``handle``; ``InvalidHandle`` for freed, foreign or forged handles."""
        key: Any = getattr(handle, "id", None)  # a forged handle's id may be anything (or none): refused below
        entry = self._live.get(key)
        if entry is not None and entry[0] is handle:
            return entry[1]
        raise self._why_invalid(handle)

    def free(self, handle: Resident) -> None:
        """Release ``handle``; its memory returns to the heap (after the last pin, if pinned)."""
        with self.heap.lock:
            buf = self.resolve(handle)
            del self._live[handle.id]
            self.generation += 1
            self.telemetry.set("cuda_resident_handles", len(self._live))
            if buf.borrowed:  # the caller's memory stays theirs
                buf.retired = True
                return
            self._return(buf)

    def borrow(self, ptr: int, nbytes: int) -> Resident:
        """A handle to ``nbytes`` of the caller's device memory at ``ptr`` (a CuPy or torch array's):
        never freed or reused by the pools; ``repoint`` moves it to another array of the caller's."""
        with self.heap.lock:
            handle = Resident(next(self._ids), nbytes, self.owner)
            self._issued = handle.id
            self._live[handle.id] = (handle, DeviceBuffer(ptr, nbytes, nbytes))
            return handle

    def repoint(self, handle: Resident, ptr: int, nbytes: int) -> None:
        """Point a ``borrow``ed handle at other caller memory. Bindings over it notice the move
        (``ResidentBinding.moved``); a new size also bumps ``generation``, as a free does."""
        buf = self.resolve(handle)
        if not buf.borrowed:
            raise InvalidHandle(f"{handle!r} owns its memory; only borrowed handles are re-pointed",
                                "re-point handles made by borrow().")
        if nbytes != buf.nbytes:
            handle.nbytes = buf.nbytes = buf.capacity = nbytes
            self.generation += 1
        buf.ptr = ptr

    def handles(self) -> list[Resident]:
        return [h for h, _ in self._live.values()]

    def invalidate(self) -> None:
        """Bump ``generation`` without a free: every cached resolution must be checked again."""
        self.generation += 1

    def _why_invalid(self, handle: object) -> InvalidHandle:
        return invalid_handle(handle, self.owner, self._issued, self._live)


def copy_threads() -> int:
    """Host threads per device filling/draining pinned chunks: half the cores, 1 to 8 (one
    thread's memcpy moves ~6-11 GB/s, a PCIe 5 link ~50 GB/s)."""
    return max(1, min(8, (os.cpu_count() or 2) // 2))


class HostCopier:
    """``dst[:] = src`` for byte arrays, split over its own threads when large (numpy releases the
    GIL while copying, so the parts run in parallel). One per device, so devices do not queue
    behind each other's copies."""

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads or copy_threads()
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def copy(self, dst: np.ndarray, src: np.ndarray) -> None:
        n = dst.nbytes
        if n < PARALLEL_COPY_MIN or self.threads == 1:
            np.copyto(dst, src)
            return
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="vyre-staging")
        step = -(-n // self.threads)
        parts = [self._pool.submit(np.copyto, dst[i:i + step], src[i:i + step]) for i in range(step, n, step)]
        np.copyto(dst[:step], src[:step])
        for part in parts:
            part.result()

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


class StagingSlot:
    """A pinned host area with a fence event: ``array`` is safe to write once ``ready`` returned."""

    __slots__ = ("mem", "array", "ptr", "capacity", "event", "pending")

    def __init__(self) -> None:
        self.mem: Any = None
        self.array = np.empty(0, np.uint8)
        self.ptr = 0
        self.capacity = 0
        self.event: Any = None
        self.pending = False

    def ready(self, nbytes: int, on_wait: Callable[[], None]) -> np.ndarray:
        """Wait for copies still reading/writing this slot, grow it to ``nbytes``; the byte array."""
        import cupy

        if self.pending:
            with cuda_errors("waiting for a staged copy"):
                self.event.synchronize()
            self.pending = False
            on_wait()
        if self.capacity < nbytes:
            cap = capacity_class(nbytes)
            with cuda_errors(f"allocating {cap} bytes of pinned host memory"), PINS.lock:
                mem = cupy.cuda.alloc_pinned_memory(cap)
            self.mem, self.ptr, self.capacity = mem, mem.ptr, cap
            self.array = np.frombuffer(mem, np.uint8, cap)
        if self.event is None:
            self.event = cupy.cuda.Event(disable_timing=True)
        return self.array

    def fence(self, stream: Any) -> None:
        """Mark the slot busy until the work enqueued so far on ``stream`` is done."""
        self.event.record(stream)
        self.pending = True


class PinnedStaging:
    """Host <-> device transfers through pinned memory on one stream: two reusable slots for small
    staged copies, and a ring of ``RING`` chunks through which large transfers are pipelined."""

    def __init__(self, stream: Any, telemetry: Telemetry, threads: int | None = None) -> None:
        self._rt = _runtime()
        self.stream = stream
        self.telemetry = telemetry
        self._slots = (StagingSlot(), StagingSlot())
        self._turn = 0
        self._ring = tuple(StagingSlot() for _ in range(RING))
        self._ring_turn = 0
        self.copier = HostCopier(threads)
        self._held: deque[tuple[Any, object]] = deque()  # (event, host data a direct copy still reads)

    def slot(self, nbytes: int) -> StagingSlot:
        """The next shared slot, ready for ``nbytes`` (call ``fence`` after enqueuing its copies)."""
        slot = self._slots[self._turn]
        self._turn ^= 1
        slot.ready(nbytes, self._count_sync)
        return slot

    @staticmethod
    def private(nbytes: int) -> StagingSlot:
        """A slot owned by the caller (for dispatches still in flight when the call returns)."""
        slot = StagingSlot()
        slot.ready(nbytes, lambda: None)
        return slot

    def _chunk(self, total: int, size: int) -> StagingSlot:
        """Where ``size`` bytes of a ``total``-byte transfer are staged: the next chunk of the ring
        (once the copy that last used it is done), or a shared slot for a small transfer."""
        if total < PIPELINE_MIN:
            return self.slot(size)
        slot = self._ring[self._ring_turn]
        self._ring_turn = (self._ring_turn + 1) % RING
        slot.ready(CHUNK, self._count_sync)
        return slot

    def upload(self, dst_ptr: int, data: memoryview | np.ndarray) -> None:
        """Copy host bytes to the device. Pinned or pinnable arrays (``host_pins``) go in one DMA,
        kept alive until it ran; others through the ring: chunk k+1 is copied into pinned memory
        while chunk k's DMA runs. Returns before the last DMA ends."""
        n = data.nbytes
        direct = PINS.address(data)
        if direct is not None:
            with cuda_errors("copying host data to the device"):
                self._rt.memcpyAsync(dst_ptr, direct.ptr, n, H2D, self.stream.ptr)
                self._in_flight(direct.pin, data)
            self.telemetry.add("cuda_h2d_bytes", n)
            self.telemetry.add("cuda_direct_bytes", n)
            return
        src = np.frombuffer(data, np.uint8, n)
        with cuda_errors("copying host data to the device"):
            for off in range(0, n, CHUNK):
                size = min(CHUNK, n - off)
                slot = self._chunk(n, size)
                self.copier.copy(slot.array[:size], src[off:off + size])
                self._rt.memcpyAsync(dst_ptr + off, slot.ptr, size, H2D, self.stream.ptr)
                slot.fence(self.stream)
        self.telemetry.add("cuda_h2d_bytes", n)

    def download(self, src_ptr: int, nbytes: int) -> np.ndarray:
        """Device bytes into a new host array (waits)."""
        out = self.empty(nbytes, np.uint8)
        self.download_into(out, src_ptr)
        return out

    def download_into(self, out: np.ndarray, src_ptr: int) -> None:
        """``out.nbytes`` device bytes from ``src_ptr`` into the C-contiguous host array ``out``
        (waits). Up to ``RING`` chunk DMAs are queued; the oldest is drained while the rest run."""
        if not out.flags.c_contiguous:
            raise ValueError("download_into needs a C-contiguous host array. Fix: pass numpy.empty(n, dtype) "
                             "or a contiguous slice of one.")
        nbytes = out.nbytes
        direct = PINS.address(out)
        if direct is not None:
            with cuda_errors("copying device data to the host"):
                self._rt.memcpyAsync(direct.ptr, src_ptr, nbytes, D2H, self.stream.ptr)
                self._in_flight(direct.pin, out).synchronize()
            self._held.clear()  # the stream has run everything before this copy
            self._count_sync()
            self.telemetry.add("cuda_d2h_bytes", nbytes)
            self.telemetry.add("cuda_direct_bytes", nbytes)
            return
        dst = out.reshape(-1).view(np.uint8)
        pending: deque[tuple[StagingSlot, int, int]] = deque()
        with cuda_errors("copying device data to the host"):
            for off in range(0, nbytes, CHUNK):
                if len(pending) == RING:
                    self._drain(pending.popleft(), dst)
                size = min(CHUNK, nbytes - off)
                slot = self._chunk(nbytes, size)
                self._rt.memcpyAsync(slot.ptr, src_ptr + off, size, D2H, self.stream.ptr)
                slot.fence(self.stream)
                pending.append((slot, off, size))
            while pending:
                self._drain(pending.popleft(), dst)
        self.telemetry.add("cuda_d2h_bytes", nbytes)

    def _in_flight(self, pin: Any, data: object) -> Any:
        """Keep ``data`` alive (and ``pin`` registered) until the copy just enqueued has run;
        returns the event that marks it."""
        import cupy

        event = cupy.cuda.Event(disable_timing=True)
        event.record(self.stream)
        PINS.used(pin, event)
        while self._held and self._held[0][0].done:
            self._held.popleft()
        self._held.append((event, data))
        return event

    def empty(self, count: int, dtype: DTypeLike) -> np.ndarray:
        """A new host array for a result: pinned (from a pool) when large, so it is filled by one DMA."""
        return PINS.pinned_empty(count, dtype)

    def _drain(self, item: tuple[StagingSlot, int, int], out: np.ndarray) -> None:
        slot, off, size = item
        slot.event.synchronize()
        self._held.clear()  # the stream has run everything before this chunk
        slot.pending = False
        self._count_sync()
        self.copier.copy(out[off:off + size], slot.array[:size])

    def _count_sync(self) -> None:
        self.telemetry.add("cuda_sync_points")

    def close(self) -> None:
        while self._held:
            self._held.popleft()[0].synchronize()
        for slot in (*self._slots, *self._ring):
            if slot.pending:
                slot.event.synchronize()
            slot.mem = None
            slot.array = np.empty(0, np.uint8)
            slot.capacity = 0
        self.copier.close()
