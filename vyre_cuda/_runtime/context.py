"""``DeviceRuntime``: the device side of one cuda backend, owning every CUDA object it made.

It holds the stream, the memory (``DeviceHeap``, ``ResidentPool``, ``TransientPool``,
``PinnedStaging``, the ``PinnedRing`` of parameter words and the parameter blocks), the
``ModuleCache``, the launch counter and the open / lost state, and offers the primitives every
dispatcher uses:

- ``check_open()`` / ``use_device()``: refuse a closed or lost backend; make its device current;
- ``param_block(nwords)`` / ``release_params(block)``: a kernel's device-resident parameter words;
- ``run(plan, zero, name)``: every eager launch - the one zero-fill-then-launch step
  (``launch.record_launch``: zero fills of ``(pointer, bytes)`` pairs, one launch, skipped for an
  empty grid) plus the launch counter, an armed test fault and ``VYRE_CUDA_SYNC_EACH``. Inside a
  graph capture callers use ``record_launch`` itself (no counters);
- ``wait(event, timeout_s, name)``: wait with an optional deadline.

Device faults: a sticky CUDA error poisons the device's primary context for the whole process.
``vyre_cuda._runtime.errors`` confirms it, records the device as needing a reset and calls
``mark_lost`` on each backend watching it; the next backend started on that device first calls
``errors.reset_device``, which has the lost backends drop their CUDA objects without freeing
through the dead context (``forget``). ``inject_fault(kind)`` is the test hook that makes the
next launch run a real faulting kernel (``_codegen.snippets.fault_ptx``).
"""

from __future__ import annotations

import functools
import time
from typing import Any

from vyre.driver.errors import BackendUnavailable, DeviceLost, DispatchFailed
from vyre_cuda._runtime import settings
from vyre_cuda._runtime.device import DeviceInfo, import_cupy
from vyre_cuda._runtime.errors import FIX_LOST, cuda_errors
from vyre_cuda._runtime.launch import (
    DeviceLimits,
    LaunchPlan,
    ParamBlock,
    PinnedRing,
    launch_mode,
    record_launch,
    zero_fills,
)
from vyre_cuda._runtime.pools import H2D, DeviceBuffer, DeviceHeap, PinnedStaging, ResidentPool, TransientPool
from vyre_cuda._runtime.telemetry import COUNTERS, Telemetry

WARM_STAGING_BYTES = 1 << 16  # pinned bytes of each staging slot made at start
WARM_BLOCKS = (256, 256, 4096, 4096, 4096, 65536)  # device blocks taken and cached at start
FIX_TIMEOUT = ("raise DispatchConfig.timeout_s or shrink the work; the kernel may still be running, and later "
               "calls on this backend queue behind it until it finishes")


class DeviceRuntime:
    """Stream, memory, modules and launches of one backend on one device (see the module docstring)."""

    def __init__(self, info: DeviceInfo, lock: Any, owner: int) -> None:
        from vyre_cuda._runtime.cache import DiskCache
        from vyre_cuda._runtime.loader import ModuleCache

        cupy = import_cupy()
        self.info = info
        self.device_id = info.index
        self.lock = lock
        self.telemetry = Telemetry()
        self.limits = DeviceLimits.from_info(info)
        self.sync_each = settings.sync_each()
        self.cuda = cupy.cuda.runtime
        self.memset = self.cuda.memsetAsync  # (ptr, value, bytes, stream): the zero fills of every launch
        self.closed = False
        self.lost = False
        self.fault: LaunchPlan | None = None  # armed by inject_fault: launched before the next kernel
        self.launches = 0  # kernel launches (cuda_kernel_launches), counted under the lock
        with cuda_errors(f"starting the cuda backend on device {self.device_id}"):
            cupy.cuda.Device(self.device_id).use()
            self.stream = cupy.cuda.Stream(non_blocking=True)
            self.stream_ptr: int = self.stream.ptr
            self.heap = DeviceHeap(settings.memory_limit(), self.telemetry)
            self.resident = ResidentPool(self.heap, self.telemetry, owner=owner)
            self.transient = TransientPool(self.heap, self.telemetry)
            self.staging = PinnedStaging(self.stream, self.telemetry)
            self.ring: PinnedRing | None = PinnedRing(  # None once forget() dropped it
                self.stream, on_sync=lambda: self.telemetry.add("cuda_sync_points"))
        self.modules = ModuleCache(info, DiskCache())
        self.param_buffers: list[DeviceBuffer] = []
        self.warm_up()

    def warm_up(self) -> None:
        """Pay first-use costs when the backend starts rather than in its first dispatch: the
        allocator's first ``cudaMalloc`` and a few small blocks, both pinned staging slots with their
        events, a first copy, and the driver entry point of launches."""
        with cuda_errors("warming up the cuda backend"):
            for _ in range(2):
                self.staging.slot(WARM_STAGING_BYTES)
            blocks = [self.heap.take(n) for n in WARM_BLOCKS]
            self.cuda.memcpyAsync(blocks[0].ptr, self.staging.slot(4).ptr, 4, H2D, self.stream_ptr)
            self.stream.synchronize()
            for block in blocks:
                self.heap.put(block)
        launch_mode()

    # ---- state -------------------------------------------------------------------------------------
    def check_open(self) -> None:
        """``DeviceLost`` after a device fault, ``BackendUnavailable`` after ``close``."""
        if self.closed:
            if self.lost:
                raise DeviceLost(f"this cuda backend lost its CUDA context on device {self.device_id} "
                                 "after a device fault", FIX_LOST)
            raise BackendUnavailable("this cuda backend was shut down",
                                     "acquire a new backend with vyre.acquire('cuda').")

    def use_device(self) -> None:
        """Make this backend's device current on the calling thread."""
        if self.cuda.getDevice() != self.device_id:
            self.cuda.setDevice(self.device_id)

    # ---- parameter blocks ----------------------------------------------------------------------------
    def param_block(self, nwords: int) -> ParamBlock:
        """A new device block of ``nwords`` u32 parameter words (given back by ``release_params``)."""
        assert self.ring is not None, "param_block on a lost runtime"  # callers check_open first; forget() closes
        buf = self.heap.take(nwords * 4)
        self.param_buffers.append(buf)
        return ParamBlock(buf, nwords, self.ring)

    def release_params(self, params: ParamBlock) -> None:
        """Give a parameter block back to the heap (a no-op once the runtime is closed)."""
        if self.closed or params.buffer not in self.param_buffers:
            return
        self.param_buffers.remove(params.buffer)
        self.heap.put(params.buffer)

    # ---- the zero-and-launch step ---------------------------------------------------------------------
    def zero(self, buffer: DeviceBuffer, nbytes: int) -> None:
        """Enqueue a zero fill of the first ``nbytes`` of ``buffer``."""
        zero_fills(self.memset, ((buffer.ptr, nbytes),) if nbytes else (), self.stream_ptr, "a buffer")

    def run(self, plan: LaunchPlan, zero: tuple[tuple[int, int], ...] = (), name: str | None = None,
            stream_ptr: int | None = None) -> bool:
        """``launch.record_launch`` (zero fills, then ``plan``, skipped for an empty grid) on the backend's
        stream (or ``stream_ptr``, a caller's stream), counted; honours an armed test fault and
        ``VYRE_CUDA_SYNC_EACH``. Returns whether ``plan`` was launched."""
        stream_ptr = self.stream_ptr if stream_ptr is None else stream_ptr
        if self.fault is not None:
            self.fire_fault(stream_ptr)
        if not record_launch(self.memset, plan, zero, stream_ptr, False, False, name):
            return False  # an empty grid: nothing launched, nothing counted
        self.launches += 1
        if self.sync_each:
            self.sync_after(name or plan.name, stream_ptr)
        return True

    def sync_after(self, name: str, stream_ptr: int | None = None) -> None:
        """Synchronise after program ``name`` (``VYRE_CUDA_SYNC_EACH``), naming it in any error."""
        self.telemetry.add("cuda_sync_points")
        with cuda_errors(f"program {name} failed (VYRE_CUDA_SYNC_EACH=1 synchronised after its launch)"):
            if stream_ptr is None or stream_ptr == self.stream_ptr:
                self.stream.synchronize()
            else:
                self.cuda.streamSynchronize(stream_ptr)

    def wait(self, event: Any, timeout_s: float | None, name: str) -> None:
        """Wait for ``event``; with ``timeout_s`` poll it and raise ``DispatchFailed('timeout')``."""
        self.telemetry.add("cuda_sync_points")
        with cuda_errors(f"running program {name}"):
            if timeout_s is None:
                event.synchronize()
                return
            deadline = time.perf_counter() + timeout_s
            pause = 20e-6
            while not event.done:
                if time.perf_counter() >= deadline:
                    raise DispatchFailed("timeout", f"program {name} did not finish within {timeout_s} s "
                                         "(the kernel may still be running on the device)", FIX_TIMEOUT)
                time.sleep(pause)
                pause = min(pause * 2, 1e-3)

    # ---- faults ------------------------------------------------------------------------------------------
    def inject_fault(self, kind: str = "illegal_address") -> None:
        """Test hook: the next launch first runs a real kernel that faults on the device (``kind`` in
        ``_codegen.snippets.FAULT_KINDS``), loaded like any other."""
        from vyre_cuda._codegen.snippets import FAULT_ADDRESS, FAULT_ENTRY, fault_ptx

        self.check_open()
        with cuda_errors("loading the fault-injection kernel"):
            kernel = self.modules.load_snippet(functools.partial(fault_ptx, kind), FAULT_ENTRY)
        plan = LaunchPlan(kernel.ptr, (1, 1, 1), (1, 1, 1), 0, 1, f"fault_injection_{kind}")
        plan.bind_values((FAULT_ADDRESS,))
        self.fault = plan
        self.resident.invalidate()  # so that cached resident dispatches take the path that fires it

    def fire_fault(self, stream_ptr: int | None = None) -> None:
        """Launch the armed fault kernel (once)."""
        plan, self.fault = self.fault, None
        if plan is not None:
            plan.launch(self.stream_ptr if stream_ptr is None else stream_ptr)

    def mark_lost(self) -> None:
        """The device context is poisoned: refuse further use."""
        self.lost = self.closed = True
        self.resident.invalidate()  # cached resident dispatches take the checked path, which raises

    # ---- lifecycle -------------------------------------------------------------------------------------
    def close(self) -> None:
        """Synchronise, then free every block (resident, transient, parameter blocks, cache) and the modules."""
        if self.closed:
            return
        self.closed = True
        self.resident.invalidate()
        try:
            self.stream.synchronize()
        except Exception:  # noqa: BLE001, S110 - shutting down regardless
            pass
        self.staging.close()
        self.heap.close(self.resident.outstanding() + self.transient.outstanding() + self.param_buffers)
        self.param_buffers.clear()
        self.modules.clear()

    def forget(self) -> None:
        """After a device fault: drop every CUDA object without freeing through the dead context."""
        self.lost = self.closed = True
        self.fault = None
        self.resident.invalidate()
        self.param_buffers.clear()
        self.modules.clear()
        self.heap.forget()
        self.staging = self.ring = self.stream = None

    def metrics(self) -> dict[str, int]:
        """The ``cuda_*`` counters and gauges of this runtime (names listed in docs/resident.md; never fails)."""
        out = self.telemetry.snapshot()
        out["cuda_kernel_launches"] = out.get("cuda_kernel_launches", 0) + self.launches
        out["cuda_dispatches"] = out.get("cuda_dispatches", 0) + out.get("cuda_inplace_dispatches", 0)
        out["cuda_resident_bytes_in_use"] = self.resident.in_use
        out["cuda_transient_bytes_in_use"] = self.transient.in_use
        out["cuda_cached_bytes"] = self.heap.cached
        out["cuda_reserved_bytes"] = self.heap.reserved
        out["cuda_param_blocks"] = len(self.param_buffers)
        try:
            values = self.modules.counters()
        except Exception:  # noqa: BLE001 - metrics never fail
            values = {}
        for key, value in values.items():
            if isinstance(value, int):
                out[key if key.startswith("cuda_") else f"cuda_{key}"] = value
        for key in COUNTERS:
            out.setdefault(key, 0)
        return out
