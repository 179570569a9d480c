"""``ResidentDispatcher``: resident buffers of the cuda backend and ``dispatch_resident`` over them.

``allocate_resident`` / ``upload_resident`` (host data, or device arrays device to device) /
``download_resident`` (``download_into``: into the caller's host array) / ``free_resident`` /
``view`` manage the ``Resident`` handles of the
runtime's ``ResidentPool``. ``dispatch_resident`` is the hot path: each (program, config, handles)
has a ``_ResidentMemo`` holding a ``BoundKernel`` (``_dispatch.bound``: its own launch plan and
parameter block, the zero fills of the ``output`` buffers the kernel may not write whole,
``_codegen.written``, the handles' pointers), so a repeated call is identity checks and the
kernel's prebound relauncher (``BoundKernel.relauncher``: zero fills, one launch). The first
call, one after a handle was freed (the pool's ``generation`` moved), debug syncs and empty grids
take the checked path, whose launch is ``BoundKernel.enqueue``. ``resident_layout`` gives
pipelines and sequences the checked layout of a resident dispatch. Host bytes travel through the runtime's pinned chunk
ring (``PinnedStaging``: the host copy of one chunk overlaps the DMA of the one before);
``to_device`` / ``to_host`` move a host array into a new CuPy array on this device and back the
same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre.driver.backend import Resident
from vyre.driver.config import DispatchConfig, resolve_grid
from vyre.driver.errors import InvalidProgram
from vyre.driver.inputs import check_byte_length, host_bytes, resident_decls
from vyre.driver.resident_args import check_allocation, check_byte_range, download_size
from vyre.ir.program import Program
from vyre_cuda._dispatch.bound import BoundKernel, Relaunch
from vyre_cuda._dispatch.prepared import MEMO_CAP, PreparedProgram, ProgramCache
from vyre_cuda._runtime.arrays import device_array, is_device_array, order_after_producers
from vyre_cuda._runtime.context import DeviceRuntime
from vyre_cuda._runtime.errors import cuda_errors
from vyre_cuda._runtime.pools import D2D, DeviceBuffer


def _never_yet(_: Sequence[Resident]) -> bool:
    """The relauncher of a memo with no kernel yet: the checked path binds one."""
    return False


def _recheck() -> bool:
    """A memo's handles after the pool's generation moved: take the checked path (it re-resolves them)."""
    return False


@dataclass(eq=False)
class _ResidentMemo:
    """What a repeated ``dispatch_resident`` with the same program, config and handles reuses.

    The checked layout (``resident_layout`` reads it too) and, from the first dispatch on, ``kernel``:
    a ``BoundKernel`` (own launch plan and parameter block, written once: resident counts are
    fixed by the handles; zero fills; the handles' pointers) with ``relaunch``, its prebound
    relauncher. Valid while ``generation`` equals the resident pool's (no handle was freed since,
    the backend is open): ``relaunch`` says False once it moved, and the checked path re-resolves
    the handles and re-points the kernel."""

    program: Program
    config: DispatchConfig | None
    handles: tuple[Resident, ...]
    prepared: PreparedProgram  # the kernel variant that runs ``grid``
    order: tuple[int, ...]  # handle index of each bound buffer
    counts: dict[str, int]  # elements of each buffer
    grid: tuple[int, int, int]  # logical
    generation: int = -1  # ResidentPool.generation when the kernel was last pointed
    kernel: BoundKernel | None = None  # made by the first dispatch (``resident_layout`` alone needs none)
    relaunch: Relaunch = _never_yet  # ``kernel.relauncher``: the launch of a repeated call


class ResidentDispatcher:
    """Resident buffers and ``dispatch_resident`` (see the module docstring)."""

    def __init__(self, runtime: DeviceRuntime, programs: ProgramCache) -> None:
        self.runtime = runtime
        self.programs = programs
        self.memo: dict[tuple, _ResidentMemo] = {}
        self.last: _ResidentMemo | None = None

    # ---- buffers -------------------------------------------------------------------------------------
    def allocate_resident(self, nbytes: int) -> Resident:
        """A new handle to ``nbytes`` of device memory (contents undefined until uploaded)."""
        rt = self.runtime
        with rt.lock:
            rt.check_open()
            rt.use_device()
            return rt.resident.allocate(check_allocation(nbytes))

    def upload_resident(self, handle: Resident, data: object, offset: int = 0) -> None:
        """Copy host bytes, or a device array (device to device), into ``handle`` at ``offset``."""
        rt = self.runtime
        with rt.lock:
            rt.check_open()
            rt.use_device()
            buf = rt.resident.resolve(handle)
            if is_device_array(data):
                arr = device_array(data, f"upload to {handle!r}", rt.device_id)
                nbytes = int(arr.nbytes)
                check_byte_range(handle, offset, nbytes)
                with cuda_errors(f"copying into {handle!r}"):
                    order_after_producers(rt.stream)
                    rt.cuda.memcpyAsync(buf.ptr + offset, arr.data.ptr, nbytes, D2D, rt.stream_ptr)
                    rt.stream.record().synchronize()  # the source array may be freed after we return
                rt.telemetry.add("cuda_d2d_bytes", nbytes)
                return
            view = host_bytes(data, f"upload to {handle!r}")
            check_byte_range(handle, offset, view.nbytes)
            rt.staging.upload(buf.ptr + offset, view)

    def download_resident(self, handle: Resident, offset: int = 0, nbytes: int | None = None) -> np.ndarray:
        """``nbytes`` (default: to the end) of ``handle`` from ``offset``, as a new uint8 array."""
        rt = self.runtime
        with rt.lock:
            rt.check_open()
            rt.use_device()
            buf = rt.resident.resolve(handle)
            nbytes = download_size(handle, offset, nbytes)
            return rt.staging.download(buf.ptr + offset, nbytes)

    def download_into(self, handle: Resident, out: np.ndarray, offset: int = 0) -> np.ndarray:
        """``out.nbytes`` bytes of ``handle`` from ``offset`` into the C-contiguous host array ``out``
        (no intermediate array: the chunks land in ``out``); returns ``out``."""
        if not isinstance(out, np.ndarray) or not out.flags.c_contiguous or not out.flags.writeable:
            raise InvalidProgram(f"download_into takes a writeable C-contiguous numpy array, got {type(out).__name__}",
                                 "pass numpy.empty(n, dtype) (or a contiguous slice of one).")
        rt = self.runtime
        with rt.lock:
            rt.check_open()
            rt.use_device()
            buf = rt.resident.resolve(handle)
            check_byte_range(handle, offset, out.nbytes)
            rt.staging.download_into(out, buf.ptr + offset)
            return out

    def to_device(self, data: object) -> Any:
        """A new CuPy array on this device holding the host array ``data`` (same dtype and shape),
        copied through the pinned chunk ring; finished before returning."""
        import cupy

        host = np.ascontiguousarray(data)
        rt = self.runtime
        with rt.lock:
            rt.check_open()
            rt.use_device()
            with cupy.cuda.Device(rt.device_id):
                arr = cupy.empty(host.shape, host.dtype)
            with cuda_errors("copying a host array to the device"):
                order_after_producers(rt.stream)  # the allocation is ordered on CuPy's stream
                if host.nbytes:
                    rt.staging.upload(arr.data.ptr, host.reshape(-1).view(np.uint8))
                rt.stream.synchronize()
            return arr

    def lend(self, array: object) -> Resident:
        """A resident handle over the device ``array`` (of this device), no copy; the backend's
        stream is ordered after the array's producers. Freeing the handle leaves the array alone;
        the caller keeps the array alive until the work reading it has run."""
        rt = self.runtime
        with rt.lock:
            rt.check_open()
            rt.use_device()
            arr = device_array(array, "a device array read in place", rt.device_id)
            with cuda_errors("ordering the backend's stream after the array's producers"):
                order_after_producers(rt.stream)
            return rt.resident.borrow(arr.data.ptr, int(arr.nbytes))

    def new_lent(self, count: int, dtype: Any) -> tuple[Any, Resident]:
        """A new CuPy array of ``count`` ``dtype`` elements on this device, and a handle over it
        (``lend``): a result that dispatches write in place and the caller keeps."""
        import cupy

        with cupy.cuda.Device(self.runtime.device_id):
            arr = cupy.empty(count, dtype)
        return arr, self.lend(arr)

    def synchronize(self) -> None:
        """Wait until the work queued on the backend's stream has run."""
        rt = self.runtime
        with cuda_errors("waiting for the backend's stream"):
            rt.stream.synchronize()
        rt.telemetry.add("cuda_sync_points")

    def host_empty(self, count: int, dtype: Any) -> np.ndarray:
        """A new host array for a result (large ones in pinned memory, filled by one DMA)."""
        return self.runtime.staging.empty(count, np.dtype(dtype))

    def to_host(self, arr: Any, out: np.ndarray) -> np.ndarray:
        """The CuPy array ``arr`` (on this device) into the C-contiguous host array ``out`` of the
        same byte size, through the pinned chunk ring (after the work queued on CuPy's stream)."""
        if int(arr.nbytes) != out.nbytes or not out.flags.c_contiguous or not arr.flags.c_contiguous:
            raise InvalidProgram(f"to_host got a device array of {int(arr.nbytes)} bytes for a host array of "
                                 f"{out.nbytes} bytes",
                                 "pass C-contiguous arrays of the same byte size (cupy.ascontiguousarray(arr)).")
        rt = self.runtime
        with rt.lock:
            rt.check_open()
            rt.use_device()
            with cuda_errors("copying a device array to the host"):
                order_after_producers(rt.stream)
                rt.staging.download_into(out, arr.data.ptr)
            return out

    def free_resident(self, handle: Resident) -> None:
        """Release ``handle``; using it afterwards is ``InvalidHandle``."""
        rt = self.runtime
        with rt.lock:
            rt.check_open()
            rt.resident.free(handle)

    def view(self, handle: Resident, dtype: Any = np.uint8) -> Any:
        """A CuPy array of ``dtype`` over ``handle``'s memory, no copy; valid until the handle is freed.

        Work on the backend's stream is finished first, so the view reads what earlier dispatches
        wrote; writes through it must be finished (``cupy.cuda.get_current_stream().synchronize()``)
        before the next dispatch reads them."""
        rt = self.runtime
        with rt.lock:
            rt.check_open()
            buf = rt.resident.resolve(handle)
            dt = np.dtype(dtype)
            if handle.nbytes % dt.itemsize:
                raise InvalidProgram(f"{handle!r} holds {handle.nbytes} bytes, not a whole number of {dt} elements",
                                     f"view it with a dtype whose size divides {handle.nbytes}.")
            with cuda_errors(f"viewing {handle!r}"):
                rt.stream.synchronize()
                return _cupy_over(buf.ptr, handle, dt, handle.nbytes // dt.itemsize, rt.device_id)

    def device_view(self, handle: Resident) -> tuple[int, int, int]:
        """``(pointer, device ordinal, stream handle)`` of ``handle``'s memory (``InvalidHandle`` for
        a freed or foreign one); the backend's stream, so a consumer waits for the work on it."""
        rt = self.runtime
        with rt.lock:
            rt.check_open()
            return rt.resident.resolve(handle).ptr, rt.device_id, rt.stream_ptr

    def dlpack(self, handle: Resident, dtype: Any, count: int, stream: object | None, **options: Any) -> Any:
        """DLPack export of ``count`` ``dtype`` elements at ``handle`` (``view`` without its wait: the
        consumer's ``stream`` waits for the backend's instead). ``options`` are the consumer's other
        ``__dlpack__`` keywords (``max_version``, ...), passed on when given."""
        import cupy

        ptr, device, _ = self.device_view(handle)
        view = _cupy_over(ptr, handle, np.dtype(dtype), count, device)
        producer = self.runtime.stream  # the backend's stream: the consumer's waits for it
        assert producer is not None, "device_view checked that the backend is open"
        with cupy.cuda.Device(device), producer:
            return view.__dlpack__(stream=stream, **options)

    # ---- dispatch --------------------------------------------------------------------------------------
    def resident_layout(self, prepared: PreparedProgram, handles: Sequence[Resident],
                        config: DispatchConfig | None) -> tuple[list[DeviceBuffer], dict[str, int], tuple]:
        """Checked buffers (binding order), element counts and grid of a resident dispatch."""
        memo = self._layout(prepared.program, tuple(handles), config)
        bufs = [self.runtime.resident.resolve(h) for h in handles]
        counts = {b.name: memo.counts[b.name] for b in prepared.bound}
        return [bufs[i] for i in memo.order], counts, memo.grid

    def dispatch_resident(self, program: Program, handles: Sequence[Resident],
                          config: DispatchConfig | None = None) -> None:
        """Run ``program`` on resident buffers (one handle per declared buffer); results stay on the device.

        A repeated call is the memo's relauncher (``BoundKernel.relauncher``: handle identity and
        pool generation checks, zero fills, one prebound launch); anything else takes the checked
        path (``_launch``)."""
        rt = self.runtime
        with rt.lock:
            memo = self.last  # the same call as last time: identity checks only (handles compare by identity)
            if memo is not None and memo.program is program and memo.config is config and memo.relaunch(handles):
                return
            memo = self.memo.get((id(program), id(config), *map(id, handles)))  # the memo keeps them alive
            if memo is None or not memo.relaunch(handles):
                memo = self._launch(program, handles, config, memo)
            self.last = memo

    def _launch(self, program: Program, handles: Sequence[Resident], config: DispatchConfig | None,
                memo: _ResidentMemo | None) -> _ResidentMemo:
        """The checked path of ``dispatch_resident``: open check, handle checks (a memo made, or its
        kernel re-pointed after a free), the counted launch (``BoundKernel.enqueue``: an armed
        fault, ``VYRE_CUDA_SYNC_EACH``, an empty grid), then a new relauncher."""
        rt = self.runtime
        rt.check_open()
        rt.use_device()
        if memo is None:
            memo = self._layout(program, tuple(handles), config)
            if len(self.memo) >= MEMO_CAP:
                self._drop_all()
            self.memo[(id(program), id(config), *map(id, memo.handles))] = memo
        if memo.kernel is None:
            memo.kernel = self._bind(memo)
        elif memo.generation != rt.resident.generation:
            self._refresh(memo)
        memo.kernel.enqueue()
        memo.relaunch = memo.kernel.relauncher(memo.handles, _recheck)
        return memo

    def _layout(self, program: Program, handles: tuple[Resident, ...],
                config: DispatchConfig | None) -> _ResidentMemo:
        """A new memo of ``(program, handles, config)`` with its checked layout (no kernel yet)."""
        rt = self.runtime
        rt.check_open()
        prep = self.programs.prepared(program, config)
        decls = resident_decls(program, handles)
        counts: dict[str, int] = {}
        for decl, handle in zip(decls, handles):
            rt.resident.resolve(handle)
            counts[decl.name] = check_byte_length(decl, handle.nbytes)
        grid = resolve_grid(program, config, counts)
        self.programs.check_launch(prep, grid, config)
        prep = self.programs.for_grid(prep, grid, config)
        index = {b.name: i for i, b in enumerate(decls)}
        return _ResidentMemo(program, config, handles, prep, tuple(index[b.name] for b in prep.bound), counts, grid)

    def _bind(self, memo: _ResidentMemo) -> BoundKernel:
        """The memo's kernel: its own plan (parameter block written once), pointed at the handles."""
        rt = self.runtime
        bufs = [rt.resident.resolve(h) for h in memo.handles]
        bound = [bufs[i] for i in memo.order]
        plan = self.programs.plan_for(memo.prepared, bound, memo.counts, memo.grid, config=memo.config)
        kernel = BoundKernel(rt, memo.prepared, plan, memo.grid, memo.counts)
        kernel.point([buf.ptr for buf in bound])
        memo.generation = rt.resident.generation
        return kernel

    def _refresh(self, memo: _ResidentMemo) -> None:
        """Resolve the memo's handles again (one was freed since): InvalidHandle if any is gone."""
        rt = self.runtime
        bufs = [rt.resident.resolve(h) for h in memo.handles]
        assert memo.kernel is not None, "only a bound memo is refreshed"
        memo.kernel.point([bufs[i].ptr for i in memo.order])
        memo.generation = rt.resident.generation

    def _drop_all(self) -> None:
        """Drop every memo and give their plans' parameter blocks back, once the stream is past
        their last launches (a block may next be written on a caller's stream)."""
        kernels = [m.kernel for m in self.memo.values() if m.kernel is not None]
        self.memo.clear()
        self.last = None
        if not kernels:
            return
        rt = self.runtime
        if not rt.closed:
            with cuda_errors("waiting for the backend's stream before reusing parameter blocks"):
                rt.stream.synchronize()
            rt.telemetry.add("cuda_sync_points")
        for kernel in kernels:
            self.programs.close_plan(kernel.plan)

    def forget(self) -> None:
        """Drop every memo (they hold programs, handles, pointers and parameter blocks)."""
        self.memo.clear()
        self.last = None


def _cupy_over(ptr: int, handle: Resident, dtype: np.dtype, count: int, device: int) -> Any:
    """A CuPy array of ``count`` ``dtype`` elements at ``ptr`` (``handle``'s memory, which it keeps
    no hold on): no copy, no wait."""
    import cupy

    memory = cupy.cuda.UnownedMemory(ptr, max(count * dtype.itemsize, 1), handle, device)
    return cupy.ndarray((count,), dtype, cupy.cuda.MemoryPointer(memory, 0))

