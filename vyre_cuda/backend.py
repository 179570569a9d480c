"""``CudaBackend``: the ``cuda`` backend of SPEC sections 3, 4 and 8.

Flow of one ``dispatch``: ``prepared`` (validate -> emit PTX -> load module -> launch plan, cached
per program and workgroup size) -> inputs staged into transient device buffers (host data through
pinned staging, device arrays device-to-device or by pointer) -> outputs zeroed -> one launch ->
outputs copied back -> one synchronisation.

Primitives for the pipeline / sequence / graph code (hold ``backend.lock`` around their use):

- ``backend.stream``: the backend's non-blocking ``cupy.cuda.Stream``; all work goes on it.
- ``backend.resident`` (``ResidentPool``: ``resolve(handle) -> DeviceBuffer``, ``retain``/``release``),
  ``backend.transient`` (``TransientPool``: ``acquire(nbytes)``, ``recycle(buffers)``),
  ``backend.staging`` (``PinnedStaging``), ``backend.heap`` (``DeviceHeap``).
- ``backend.telemetry`` (``Telemetry.add(name, n)``), ``backend.lock`` (an ``RLock``).
- ``backend.prepared(program, config, coarsen=1) -> PreparedProgram`` (``kernel``, ``bound``,
  ``block``, ``coarsen``, ``words(counts, elements, grid)``, ``elements(config, counts)``,
  ``launch_grid(grid)``); ``backend.for_grid(prepared, grid, config)``: the variant of ``prepared``
  that runs the logical ``grid`` (coarsened along x when ``vyre_cuda.coarsen.factor`` says so).
  Grids passed to the calls below are always logical; plans launch ``prepared.launch_grid(grid)``.
- ``backend.resident_layout(prepared, handles, config) -> (buffers, counts, grid)``: checked handles of a
  resident dispatch in binding order, their element counts and the grid.
- ``backend.plan_for(prepared, buffers, counts, grid, elements=None) -> LaunchPlan`` with its own
  ``ParamBlock`` (``plan.params``), bound and written; ``backend.update_plan(plan, prepared, counts,
  grid, elements=None)`` rewrites the words (no-op when unchanged); ``backend.close_plan(plan)``.
- ``backend.zero(buffer, nbytes)``: enqueue a zero fill (output buffers are zeroed before every dispatch).
- ``backend.launch(plan, name)``: one launch on ``stream`` with the counters and ``VYRE_CUDA_SYNC_EACH``.
- ``backend.wait(event, timeout_s, name)``: wait for an event with an optional deadline.

Device faults and recovery: a device-side fault (illegal address, trap, ECC) is a sticky CUDA
error that poisons the device's primary context for the whole process. It surfaces from the call
that meets it (usually the next synchronisation) as ``DeviceLost``; ``vyre_cuda.errors`` then
confirms the context is poisoned, records the device as needing a reset and marks every backend
on it lost (``_mark_lost``): each refuses further use with ``DeviceLost``. The next ``CudaBackend``
started on that device (``vyre.acquire("cuda")``) first calls ``vyre_cuda.errors.reset_device``:
the lost backends drop their CUDA objects without freeing through the dead context
(``_forget_device``), CuPy's pools and memoised modules are dropped, the primary context is
reset, and the new backend starts clean. CuPy arrays, pipelines and graphs made before the fault
are dead: drop them before acquiring again. ``_inject_fault(kind)`` is the test hook that makes
the next launch run a real faulting kernel (``vyre_cuda.modules.fault_ptx``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from operator import is_
from typing import Any

import numpy as np

from vyre.driver.backend import Backend, PendingDispatch, Resident, TimedDispatch
from vyre.driver.config import DispatchConfig, effective_workgroup, resolve_grid
from vyre.driver.errors import (
    BackendUnavailable,
    DeviceLost,
    DispatchFailed,
    InvalidHandle,
    InvalidProgram,
    UnsupportedFeature,
    VyreError,
)
from vyre.driver.inputs import (
    as_bytes_view,
    buffer_counts,
    check_byte_length,
    check_input_count,
    host_bytes,
    resident_decls,
)
from vyre.ir.program import Access, BufferDecl, Program
from vyre.ir.types import DataType
from vyre_cuda.arrays import device_array, is_device_array, order_after_producers
from vyre_cuda.coarsen import factor as coarsen_factor
from vyre_cuda.coarsen import launch_grid
from vyre_cuda.errors import FIX_LOST, cuda_errors, needs_reset, quiet_teardown, reset_device, watch_device
from vyre_cuda.launch import (
    DeviceLimits,
    LaunchPlan,
    ParamBlock,
    PinnedRing,
    check_cooperative,
    check_geometry,
    check_workgroup_memory,
)
from vyre_cuda.memory import (
    D2D,
    D2H,
    H2D,
    DeviceBuffer,
    DeviceHeap,
    PinnedStaging,
    ResidentPool,
    StagingSlot,
    TransientPool,
    memory_limit,
)
from vyre_cuda.profiler import nvtx_range
from vyre_cuda.telemetry import COUNTERS, Telemetry

_ALIGN = 16
_MEMO_CAP = 512
FIX_TIMEOUT = ("raise DispatchConfig.timeout_s or shrink the work; the kernel may still be running, and later "
               "calls on this backend queue behind it until it finishes")


@dataclass(eq=False)
class PreparedProgram:
    """A program ready to launch on this backend: module, kernel and its default launch plan."""

    program: Program
    name: str
    block: tuple[int, int, int]
    kernel: Any  # vyre_cuda.modules.LoadedKernel
    ptx: str
    bound: tuple[BufferDecl, ...]  # kernel ABI order (binding order)
    shared_bytes: int
    plan: LaunchPlan  # the default plan that dispatch / dispatch_resident rebind each call
    emit_ns: int = 0
    load_ns: int = 0
    coarsen: int = 1  # logical workgroups along x per hardware workgroup (codegen.coarsen)

    def elements(self, config: DispatchConfig | None, counts: dict[str, int]) -> int:
        """Word 0 of the parameter block: ``config.elements``, else the largest output, else input."""
        if config is not None and config.elements is not None:
            return config.elements
        outs = [counts[b.name] for b in self.program.outputs]
        ins = [counts[b.name] for b in self.program.inputs]
        return max(outs) if outs else (max(ins) if ins else 0)

    @property
    def nwords(self) -> int:
        """u32 words of the kernel's parameter block (``codegen.abi.param_block_layout``)."""
        return len(self.bound) + (2 if self.coarsen > 1 else 1)

    def words(self, counts: dict[str, int], elements: int,
              grid: Sequence[int] | None = None) -> tuple[int, ...]:
        """The parameter block: elements, each bound buffer's element count, then (coarsened
        kernels only) the logical grid x."""
        words = (elements, *(counts[b.name] for b in self.bound))
        if self.coarsen == 1:
            return words
        if grid is None:
            raise ValueError(f"program {self.name}: a coarsened kernel's parameter words need the grid. "
                             "Fix: pass the logical grid to words().")
        return (*words, int(grid[0]))

    def launch_grid(self, grid: Sequence[int]) -> tuple[int, int, int]:
        """The hardware grid that runs the logical ``grid``."""
        return launch_grid(grid, self.coarsen) if self.coarsen > 1 else tuple(grid)


@dataclass(eq=False)
class _Run:
    """One enqueued dispatch: where its outputs land in the staging slot."""

    prepared: PreparedProgram
    slot: StagingSlot
    outputs: list[tuple[BufferDecl, int, int]]  # decl, byte offset in slot, element count
    keep: list[Any]  # device arrays read in place: alive until the dispatch finished
    timing: tuple[Any, Any] | None = None
    enqueue_ns: int = 0
    started_ns: int = 0


@dataclass(eq=False)
class _ResidentMemo:
    """What a repeated ``dispatch_resident`` with the same program, config and handles reuses.

    Valid while ``generation`` equals the resident pool's (no handle was freed since, the backend
    is open); the launch plan is reconfigured only when someone else configured it last."""

    program: Program
    config: DispatchConfig | None
    handles: tuple[Resident, ...]
    prepared: PreparedProgram
    order: tuple[int, ...]  # handle index of each bound buffer
    zero_index: tuple[tuple[int, int], ...]  # (handle index, bytes) of output buffers
    grid: tuple[int, int, int]  # logical
    words: tuple[int, ...]
    cooperative: bool = False
    launch: tuple[int, int, int] = (0, 0, 0)  # the hardware grid (prepared.launch_grid(grid))
    generation: int = -1  # ResidentPool.generation when the pointers below were resolved
    values: tuple[int, ...] = ()  # launch slots: bound buffer pointers, then the parameter block
    zero_ptrs: tuple[tuple[int, int], ...] = ()  # (pointer, bytes) to zero before each launch


class CudaBackend(Backend):
    """The ``cuda`` backend: PTX kernels launched through CuPy and the CUDA driver."""

    id = "cuda"

    def __init__(self, device: int | str | None = None) -> None:
        from vyre import __version__
        from vyre_cuda.device import import_cupy, probe, resolve_index

        self.version = __version__
        index = resolve_index(device)
        if needs_reset(index):  # an earlier backend on this device met a device fault
            reset_device(index)
        self.info = probe(index)  # BackendUnavailable with the reason when there is no driver/device
        cupy = import_cupy()
        self.device_id = self.info.index
        self.lock = threading.RLock()
        self.telemetry = Telemetry()
        self.limits = DeviceLimits.from_info(self.info)
        self.sync_each = os.environ.get("VYRE_CUDA_SYNC_EACH", "") == "1"
        self._rt = cupy.cuda.runtime
        self._closed = False
        self._lost = False
        self._fault: LaunchPlan | None = None  # armed by _inject_fault: launched before the next kernel
        self._launches = 0  # kernel launches (cuda_kernel_launches), counted under self.lock
        with cuda_errors(f"starting the cuda backend on device {self.device_id}"):
            cupy.cuda.Device(self.device_id).use()
            self.stream = cupy.cuda.Stream(non_blocking=True)
            self._stream_ptr = self.stream.ptr
            self.heap = DeviceHeap(memory_limit(), self.telemetry)
            self.resident = ResidentPool(self.heap, self.telemetry, owner=id(self))
            self.transient = TransientPool(self.heap, self.telemetry)
            self.staging = PinnedStaging(self.stream, self.telemetry)
            self.ring = PinnedRing(self.stream, on_sync=lambda: self.telemetry.add("cuda_sync_points"))
        self.modules = self._module_cache()
        self._prepared: dict[tuple[bytes, tuple[int, int, int], int], PreparedProgram] = {}
        self._by_id: dict[tuple[int, tuple[int, int, int], int], PreparedProgram] = {}
        self._memo: dict[tuple, _ResidentMemo] = {}
        self._last_resident: _ResidentMemo | None = None
        self._param_buffers: list[DeviceBuffer] = []
        self._worker: ThreadPoolExecutor | None = None
        self.bandwidth_gbps: float | None = None
        _warm_up_host_side(self.info.compute_capability)
        watch_device(self.device_id, self)

    def _module_cache(self) -> Any:
        from vyre_cuda.cache import DiskCache
        from vyre_cuda.modules import ModuleCache

        return ModuleCache(self.info, DiskCache())

    # ---- identity and capabilities ------------------------------------------------------------
    def device_profile(self) -> dict[str, Any]:
        profile = self.info.as_profile()
        profile.update(backend=self.id, version=self.version, cc=self.info.compute_capability,
                       memory_bytes=self.info.total_memory, sm_count=self.info.sm_count,
                       warp_size=self.info.warp_size, measured_bandwidth_gbps=self.bandwidth_gbps,
                       memory_limit=self.heap.limit)
        return profile

    def supports_subgroup_ops(self) -> bool:
        return self.info.warp_size == 32

    def supports_f16(self) -> bool:
        return int(self.info.compute_capability.rstrip("a")) >= 53

    def supports_bf16(self) -> bool:
        return int(self.info.compute_capability.rstrip("a")) >= 80

    def supports_cooperative(self) -> bool:
        return self.info.cooperative_launch

    def max_workgroup_size(self) -> tuple[int, int, int]:
        return self.limits.max_block

    def max_grid_size(self) -> tuple[int, int, int]:
        return self.limits.max_grid

    def max_buffer_bytes(self) -> int:
        limit = self.heap.limit
        return min(self.info.total_memory, limit) if limit is not None else self.info.total_memory

    # ---- preparation ---------------------------------------------------------------------------
    def prepared(self, program: Program, config: DispatchConfig | None = None, coarsen: int = 1) -> PreparedProgram:
        """The cached ``PreparedProgram`` for ``program`` at its effective workgroup size, its
        kernel coarsened ``coarsen`` times along x (1: as written)."""
        block = effective_workgroup(program, config)
        fast = self._by_id.get((id(program), block, coarsen))
        if fast is not None and fast.program is program:
            return fast
        with self.lock:
            self._check_open()
            key = (program.fingerprint(), block, coarsen)
            prep = self._prepared.get(key)
            if prep is None:
                prep = self._prepare(program, block, coarsen)
                self._prepared[key] = prep
            if len(self._by_id) > _MEMO_CAP:
                self._by_id.clear()
            self._by_id[(id(program), block, coarsen)] = prep
            return prep

    def for_grid(self, prepared: PreparedProgram, grid: Sequence[int],
                 config: DispatchConfig | None = None) -> PreparedProgram:
        """The variant of ``prepared`` (same program and block) that runs the logical ``grid``:
        coarsened along x when ``vyre_cuda.coarsen.factor`` says so, else the plain kernel."""
        k = coarsen_factor(grid, prepared.block, self.limits.sm_count, bool(config is not None and config.cooperative))
        if k == prepared.coarsen:
            return prepared
        return self.prepared(prepared.program, config, coarsen=k)

    def _prepare(self, program: Program, block: tuple[int, int, int], coarsen: int = 1) -> PreparedProgram:
        from vyre.ir.validate import validate
        from vyre_cuda import ENTRY_NAME, emit_ptx
        from vyre_cuda.codegen.versions import ptx_version_for_driver

        name = program.name or "<unnamed>"
        validate(program)
        self._check_capabilities(program)
        check_workgroup_memory(program, self.limits)
        check_geometry(name, (1, 1, 1), block, 0, self.limits)
        cc = self.info.compute_capability
        config = DispatchConfig(workgroup_override=block) if block != program.workgroup_size else None
        t0 = time.perf_counter_ns()
        with nvtx_range("vyre.cuda.codegen"):
            ptx = emit_ptx(program, sm=cc, ptx_version=ptx_version_for_driver(self.info.driver_version, cc),
                           config=config, coarsen=coarsen)
        t1 = time.perf_counter_ns()
        with nvtx_range("vyre.cuda.compile"), cuda_errors(f"loading the kernel of program {name}"):
            kernel = self.modules.load(ptx, ENTRY_NAME)
        t2 = time.perf_counter_ns()
        max_threads, static_shared = self._kernel_attributes(kernel.ptr)
        check_geometry(name, (1, 1, 1), block, static_shared, self.limits, max_threads)
        bound = program.bound_buffers
        plan = LaunchPlan(kernel.ptr, (0, 0, 0), block, 0, len(bound) + 1, name)
        prep = PreparedProgram(program, name, block, kernel, ptx, bound, static_shared, plan, t1 - t0, t2 - t1,
                               coarsen)
        plan.params = self._param_block(prep.nwords)
        return prep

    def _check_capabilities(self, program: Program) -> None:
        dtypes = {b.dtype for b in program.buffers}
        if DataType.BF16 in dtypes and not self.supports_bf16():
            raise UnsupportedFeature("BF16 buffers", self.id,
                                     f"use F32 or F16 buffers (device cc {self.info.compute_capability} < 80).")
        if DataType.F16 in dtypes and not self.supports_f16():
            raise UnsupportedFeature("F16 buffers", self.id, "use F32 buffers on this device.")

    def _kernel_attributes(self, func_ptr: int) -> tuple[int | None, int]:
        from cupy.cuda import driver

        try:
            return int(driver.funcGetAttribute(0, func_ptr)), int(driver.funcGetAttribute(1, func_ptr))
        except Exception:  # noqa: BLE001 - attributes only sharpen the geometry check
            return None, 0

    def _param_block(self, nwords: int) -> ParamBlock:
        buf = self.heap.take(nwords * 4)
        self._param_buffers.append(buf)
        return ParamBlock(buf, nwords, self.ring)

    # ---- launch primitives (also used by pipelines, sequences and graphs) ------------------------
    def plan_for(self, prepared: PreparedProgram, buffers: Sequence[DeviceBuffer], counts: dict[str, int],
                 grid: Sequence[int], elements: int | None = None,
                 config: DispatchConfig | None = None) -> LaunchPlan:
        """A new plan for ``prepared`` over ``buffers`` (binding order), with its own parameter block."""
        with self.lock:
            self._check_open()
            if len(buffers) != len(prepared.bound):
                raise InvalidProgram(f"program {prepared.name} binds {len(prepared.bound)} buffers, got {len(buffers)}",
                                     "pass one buffer per bound buffer, in binding order.")
            plan = LaunchPlan(prepared.kernel.ptr, prepared.launch_grid(grid), prepared.block, 0,
                              len(prepared.bound) + 1, prepared.name)
            plan.params = self._param_block(prepared.nwords)
            self.update_plan(plan, prepared, counts, grid, elements, config)
            plan.bind([b.ptr for b in buffers], plan.params.ptr)
            return plan

    def update_plan(self, plan: LaunchPlan, prepared: PreparedProgram, counts: dict[str, int],
                    grid: Sequence[int], elements: int | None = None,
                    config: DispatchConfig | None = None) -> None:
        """Set ``plan``'s grid (checked; ``grid`` is logical, the plan launches ``prepared.launch_grid``)
        and enqueue its parameter words if they changed."""
        check_geometry(prepared.name, grid, prepared.block, prepared.shared_bytes, self.limits)
        plan.cooperative = bool(config is not None and config.cooperative)
        if plan.cooperative:
            check_cooperative(prepared.name, prepared.kernel.ptr, grid, prepared.block, 0, self.limits,
                              self.supports_cooperative())
        plan.set_grid(prepared.launch_grid(grid))
        if elements is None:
            elements = prepared.elements(config, counts)
        plan.params.write(prepared.words(counts, elements, grid), self.stream)

    def close_plan(self, plan: LaunchPlan) -> None:
        """Give a plan's parameter block back (the plan may not be launched afterwards)."""
        with self.lock:
            params = plan.params
            if params is None or self._closed:
                return
            plan.params = None
            if params.buffer in self._param_buffers:
                self._param_buffers.remove(params.buffer)
                self.heap.put(params.buffer)

    def zero(self, buffer: DeviceBuffer, nbytes: int) -> None:
        """Enqueue a zero fill of the first ``nbytes`` of ``buffer``."""
        if nbytes:
            self._rt.memsetAsync(buffer.ptr, 0, nbytes, self.stream.ptr)

    def launch(self, plan: LaunchPlan, name: str | None = None) -> None:
        """Launch ``plan`` on the stream (skipped for an empty grid), honouring ``VYRE_CUDA_SYNC_EACH``."""
        if self._fault is not None:
            self._fire_fault()
        if plan.empty:
            return
        plan.launch(self._stream_ptr)
        self._launches += 1
        if self.sync_each:
            self._sync_each(name or plan.name)

    def _sync_each(self, name: str) -> None:
        self.telemetry.add("cuda_sync_points")
        with cuda_errors(f"program {name} failed (VYRE_CUDA_SYNC_EACH=1 synchronised after its launch)"):
            self.stream.synchronize()

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

    # ---- dispatch ----------------------------------------------------------------------------------
    def dispatch(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None
                 ) -> list[np.ndarray]:
        with self.lock, nvtx_range("vyre.cuda.dispatch"):
            run = self._enqueue(program, inputs, config, private=False, timed=False)
            self.wait(run.slot.event, config.timeout_s if config else None, run.prepared.name)
            run.slot.pending = False
            return self._collect(run)

    def dispatch_async(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None
                       ) -> PendingDispatch:
        with self.lock, nvtx_range("vyre.cuda.dispatch"):
            run = self._enqueue(program, inputs, config, private=True, timed=False)
            if self._worker is None:
                self._worker = ThreadPoolExecutor(1, thread_name_prefix="vyre-cuda-wait",
                                                  initializer=self._rt.setDevice, initargs=(self.device_id,))
            future: Future = self._worker.submit(self._finish_async, run, config)
        return PendingDispatch(future)

    def _finish_async(self, run: _Run, config: DispatchConfig | None) -> list[np.ndarray]:
        self.wait(run.slot.event, config.timeout_s if config else None, run.prepared.name)
        return self._collect(run)

    def dispatch_timed(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None
                       ) -> TimedDispatch:
        with self.lock, nvtx_range("vyre.cuda.dispatch"):
            start = time.perf_counter_ns()
            run = self._enqueue(program, inputs, config, private=False, timed=True)
            enqueued = time.perf_counter_ns()
            self.wait(run.slot.event, config.timeout_s if config else None, run.prepared.name)
            run.slot.pending = False
            waited = time.perf_counter_ns()
            outputs = self._collect(run)
            device_ns = 0
            if run.timing is not None:
                import cupy

                device_ns = int(cupy.cuda.get_elapsed_time(*run.timing) * 1e6)
            self.telemetry.add("cuda_timed_dispatches")
            self.telemetry.add("cuda_device_ns", device_ns)
            return TimedDispatch(outputs, time.perf_counter_ns() - start, device_ns, enqueued - start,
                                 waited - enqueued)

    def _enqueue(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None,
                 private: bool, timed: bool) -> _Run:
        """Stage inputs, zero outputs, launch and queue the output copies (no waiting)."""
        self._check_open()
        self._use_device()
        prep = self.prepared(program, config)
        check_input_count(program, inputs)
        staged: list[tuple[BufferDecl, Any, int, bool]] = []  # decl, data, count, on device
        input_counts: dict[str, int] = {}
        for decl, data in zip(program.inputs, inputs):
            dev = device_array(data, f"input for buffer {decl.name!r}", self.device_id)
            data = as_bytes_view(decl, data) if dev is None else dev
            count = check_byte_length(decl, data.nbytes)
            input_counts[decl.name] = count
            staged.append((decl, data, count, dev is not None))
        counts = buffer_counts(program, input_counts)
        grid = resolve_grid(program, config, counts)
        prep = self.for_grid(prep, grid, config)
        host_bytes = sum(_aligned(c * d.dtype.size) for d, _, c, on_dev in staged if not on_dev)
        out_bytes = sum(_aligned(counts[b.name] * b.dtype.size) for b in program.outputs)
        slot = PinnedStaging.private(host_bytes + out_bytes) if private else self.staging.slot(host_bytes + out_bytes)
        ptrs: dict[str, int] = {}
        lent: list[DeviceBuffer] = []
        keep: list[Any] = []
        stream = self.stream.ptr
        try:
            with cuda_errors(f"staging the buffers of program {prep.name}"):
                if any(on_dev for *_, on_dev in staged):
                    order_after_producers(self.stream)
                off = 0
                for decl, data, count, on_dev in staged:
                    nbytes = count * decl.dtype.size
                    if on_dev and decl.access is not Access.READ_WRITE and data.data.ptr % decl.dtype.size == 0:
                        ptrs[decl.name] = data.data.ptr
                        keep.append(data)
                        continue
                    buf = self.transient.acquire(nbytes)
                    lent.append(buf)
                    ptrs[decl.name] = buf.ptr
                    if on_dev:
                        keep.append(data)
                        if nbytes:
                            self._rt.memcpyAsync(buf.ptr, data.data.ptr, nbytes, D2D, stream)
                            self.telemetry.add("cuda_d2d_bytes", nbytes)
                        continue
                    if nbytes:
                        slot.array[off:off + nbytes] = np.frombuffer(data, np.uint8, nbytes)
                        self._rt.memcpyAsync(buf.ptr, slot.ptr + off, nbytes, H2D, stream)
                        self.telemetry.add("cuda_h2d_bytes", nbytes)
                    off += _aligned(nbytes)
                for b in program.buffers:
                    if b.access is Access.OUTPUT:
                        buf = self.transient.acquire(b.count * b.dtype.size)
                        lent.append(buf)
                        ptrs[b.name] = buf.ptr
                        self.zero(buf, b.count * b.dtype.size)
                plan = prep.plan
                self.update_plan(plan, prep, counts, grid, None, config)
                plan.bind([ptrs[b.name] for b in prep.bound], plan.params.ptr)
                timing = None
                if timed:
                    import cupy

                    timing = (cupy.cuda.Event(), cupy.cuda.Event())
                    timing[0].record(self.stream)
                self.launch(plan, prep.name)
                if timing is not None:
                    timing[1].record(self.stream)
                outputs = []
                for b in program.outputs:
                    nbytes = counts[b.name] * b.dtype.size
                    if nbytes:
                        self._rt.memcpyAsync(slot.ptr + off, ptrs[b.name], nbytes, D2H, stream)
                        self.telemetry.add("cuda_d2h_bytes", nbytes)
                    outputs.append((b, off, counts[b.name]))
                    off += _aligned(nbytes)
                slot.fence(self.stream)
        except BaseException:
            if not slot.pending:  # copies may be queued from the slot: keep it busy until they ran
                try:
                    slot.fence(self.stream)
                except Exception:  # noqa: BLE001 - the original error matters more
                    pass
            raise
        finally:
            self.transient.recycle(lent)  # stream order keeps reuse safe even before the copies ran
        self.telemetry.add("cuda_dispatches")
        return _Run(prep, slot, outputs, keep, timing)

    @staticmethod
    def _collect(run: _Run) -> list[np.ndarray]:
        """Typed copies of the outputs from the staging slot (after its event completed)."""
        out = []
        for decl, off, count in run.outputs:
            nbytes = count * decl.dtype.size
            out.append(run.slot.array[off:off + nbytes].view(decl.dtype.np_dtype).copy())
        run.keep.clear()
        return out

    # ---- resident buffers ------------------------------------------------------------------------
    def allocate_resident(self, nbytes: int) -> Resident:
        with self.lock:
            self._check_open()
            self._use_device()
            return self.resident.allocate(nbytes)

    def upload_resident(self, handle: Resident, data: object, offset: int = 0) -> None:
        with self.lock:
            self._check_open()
            self._use_device()
            buf = self.resident.resolve(handle)
            if is_device_array(data):
                arr = device_array(data, f"upload to {handle!r}", self.device_id)
                nbytes = int(arr.nbytes)
                _check_range(handle, offset, nbytes)
                with cuda_errors(f"copying into {handle!r}"):
                    order_after_producers(self.stream)
                    self._rt.memcpyAsync(buf.ptr + offset, arr.data.ptr, nbytes, D2D, self.stream.ptr)
                    self.stream.record().synchronize()  # the source array may be freed after we return
                self.telemetry.add("cuda_d2d_bytes", nbytes)
                return
            view = host_bytes(data, f"upload to {handle!r}")
            _check_range(handle, offset, view.nbytes)
            self.staging.upload(buf.ptr + offset, view)

    def download_resident(self, handle: Resident, offset: int = 0, nbytes: int | None = None) -> np.ndarray:
        with self.lock:
            self._check_open()
            self._use_device()
            buf = self.resident.resolve(handle)
            if nbytes is None:
                nbytes = handle.nbytes - offset if isinstance(offset, int) else -1
            _check_range(handle, offset, nbytes)
            return self.staging.download(buf.ptr + offset, nbytes)

    def free_resident(self, handle: Resident) -> None:
        with self.lock:
            self._check_open()
            self.resident.free(handle)

    def resident_layout(self, prepared: PreparedProgram, handles: Sequence[Resident],
                        config: DispatchConfig | None) -> tuple[list[DeviceBuffer], dict[str, int], tuple]:
        """Checked buffers (binding order), element counts and grid of a resident dispatch."""
        memo = self._resident_memo(prepared.program, tuple(handles), config)
        bufs = [self.resident.resolve(h) for h in handles]
        counts = dict(zip((b.name for b in prepared.bound), memo.words[1:1 + len(prepared.bound)]))
        return [bufs[i] for i in memo.order], counts, memo.grid

    def dispatch_resident(self, program: Program, handles: Sequence[Resident],
                          config: DispatchConfig | None = None) -> None:
        with self.lock:
            memo = self._last_resident  # the same call as last time: identity checks only
            if (memo is None or memo.program is not program or memo.config is not config
                    or len(handles) != len(memo.handles) or not all(map(is_, handles, memo.handles))):
                memo = self._memo.get((id(program), id(config), *map(id, handles)))  # the memo keeps them alive
            if memo is None or memo.generation != self.resident.generation:
                memo = self._resident_memo_checked(program, handles, config, memo)
            self._last_resident = memo
            plan = memo.prepared.plan
            if plan.configured is not memo or plan.params._last is not memo.words:
                self._configure(plan, memo)
            if memo.zero_ptrs:
                self._zero_outputs(memo)
            if not plan.empty:
                plan.launch(self._stream_ptr)
                self._launches += 1
                if self.sync_each:
                    self._sync_each(memo.prepared.name)

    def _resident_memo_checked(self, program: Program, handles: Sequence[Resident], config: DispatchConfig | None,
                               memo: _ResidentMemo | None) -> _ResidentMemo:
        """The slow path of ``dispatch_resident``: open check, handle checks, an armed fault."""
        self._check_open()
        self._use_device()
        if memo is None:
            memo = self._resident_memo(program, tuple(handles), config)
        else:
            self._refresh_memo(memo)
            memo.prepared.plan.configured = None  # rebind the refreshed pointers
        if self._fault is not None:
            self._fire_fault()
        return memo

    def _configure(self, plan: LaunchPlan, memo: _ResidentMemo) -> None:
        """Point the program's default plan at the memo's grid, parameter words and buffers."""
        if plan.grid != memo.launch:
            plan.set_grid(memo.launch)
        plan.cooperative = memo.cooperative
        plan.params.write(memo.words, self.stream)
        plan.bind_values(memo.values)
        plan.configured = memo

    def _zero_outputs(self, memo: _ResidentMemo) -> None:
        with cuda_errors(f"zeroing the outputs of program {memo.prepared.name}"):
            for ptr, nbytes in memo.zero_ptrs:
                self._rt.memsetAsync(ptr, 0, nbytes, self._stream_ptr)

    def _resident_memo(self, program: Program, handles: tuple[Resident, ...],
                       config: DispatchConfig | None) -> _ResidentMemo:
        self._check_open()
        prep = self.prepared(program, config)
        decls = resident_decls(program, handles)
        counts: dict[str, int] = {}
        for decl, handle in zip(decls, handles):
            self.resident.resolve(handle)
            counts[decl.name] = check_byte_length(decl, handle.nbytes)
        grid = resolve_grid(program, config, counts)
        check_geometry(prep.name, grid, prep.block, prep.shared_bytes, self.limits)
        cooperative = bool(config is not None and config.cooperative)
        if cooperative:
            check_cooperative(prep.name, prep.kernel.ptr, grid, prep.block, 0, self.limits,
                              self.supports_cooperative())
        prep = self.for_grid(prep, grid, config)
        index = {b.name: i for i, b in enumerate(decls)}
        zero = tuple((index[b.name], counts[b.name] * b.dtype.size) for b in decls
                     if b.access is Access.OUTPUT and counts[b.name])
        memo = _ResidentMemo(program, config, handles, prep, tuple(index[b.name] for b in prep.bound), zero,
                             grid, prep.words(counts, prep.elements(config, counts), grid), cooperative,
                             prep.launch_grid(grid))
        self._refresh_memo(memo)
        if len(self._memo) >= _MEMO_CAP:
            self._memo.clear()
        self._memo[(id(program), id(config), *map(id, handles))] = memo
        return memo

    def _refresh_memo(self, memo: _ResidentMemo) -> None:
        """Resolve the memo's handles again (one was freed since): InvalidHandle if any is gone."""
        self._check_open()
        bufs = [self.resident.resolve(h) for h in memo.handles]
        memo.values = (*(bufs[i].ptr for i in memo.order), memo.prepared.plan.params.ptr)
        memo.zero_ptrs = tuple((bufs[i].ptr, nbytes) for i, nbytes in memo.zero_index)
        memo.generation = self.resident.generation

    # ---- delegated to the pipeline / sequence modules ------------------------------------------
    def compile(self, program: Program, config: DispatchConfig | None = None) -> Any:
        from vyre_cuda.pipeline import CudaPipeline

        return CudaPipeline(self, program, config)

    def dispatch_sequence(self, steps: Sequence[tuple], reads: Sequence[tuple] = ()) -> list[np.ndarray]:
        from vyre_cuda.sequence import run_sequence

        return run_sequence(self, steps, reads)

    def dispatch_repeated(self, prefix: Sequence[tuple], repeated: Sequence[tuple], count: int,
                          reads: Sequence[tuple] = ()) -> list[np.ndarray]:
        from vyre_cuda.sequence import run_repeated

        return run_repeated(self, prefix, repeated, count, reads)

    def dispatch_until(self, steps: Sequence[tuple], flag_handle: Resident, max_iterations: int) -> int:
        from vyre_cuda.sequence import run_until

        return run_until(self, steps, flag_handle, max_iterations)

    # ---- metrics and lifecycle -------------------------------------------------------------------
    def metrics(self) -> dict[str, int]:
        out = self.telemetry.snapshot()
        out["cuda_kernel_launches"] = out.get("cuda_kernel_launches", 0) + self._launches
        out["cuda_resident_bytes_in_use"] = self.resident.in_use
        out["cuda_transient_bytes_in_use"] = self.transient.in_use
        out["cuda_cached_bytes"] = self.heap.cached
        out["cuda_reserved_bytes"] = self.heap.reserved
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

    def prepare(self) -> None:
        """Start the worker-free parts now: context, stream, staging (done in ``__init__``)."""
        self._check_open()

    def shutdown(self) -> None:
        if self._lost:  # nothing may be freed through a poisoned context; the device reset frees it all
            with quiet_teardown():
                self._forget_device()
            return
        with self.lock:
            if self._closed:
                return
            self._closed = True
            self.resident.invalidate()
            try:
                self.stream.synchronize()
            except Exception:  # noqa: BLE001 - shutting down regardless
                pass
            if self._worker is not None:
                self._worker.shutdown(wait=True)
            self.staging.close()
            self.heap.close(self.resident.outstanding() + self.transient.outstanding() + self._param_buffers)
            self._param_buffers.clear()
            self._prepared.clear()
            self._by_id.clear()
            self._memo.clear()
            self.modules.clear()

    def __enter__(self) -> CudaBackend:
        self.prepare()
        return self

    def _check_open(self) -> None:
        if self._closed:
            if self._lost:
                raise DeviceLost(f"this cuda backend lost its CUDA context on device {self.device_id} "
                                 "after a device fault", FIX_LOST)
            raise BackendUnavailable("this cuda backend was shut down",
                                     "acquire a new backend with vyre.acquire('cuda').")

    # ---- device faults (see the module docstring) ------------------------------------------------
    def _mark_lost(self) -> None:
        """Called by ``vyre_cuda.errors`` when this backend's device context is poisoned: refuse further use."""
        self._lost = self._closed = True
        self.resident.invalidate()  # cached resident dispatches take the checked path, which raises

    def _forget_device(self) -> None:
        """Drop every CUDA object of the lost context without freeing through it (the reset frees all)."""
        self._lost = self._closed = True
        self._fault = self._last_resident = None
        self._prepared.clear()
        self._by_id.clear()
        self._memo.clear()
        self._param_buffers.clear()
        self.modules.clear()
        self.heap.forget()
        self.staging = self.ring = self.stream = None
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.shutdown(wait=False)

    def _inject_fault(self, kind: str = "illegal_address") -> None:
        """Test hook, not public API: the next kernel launch of this backend first runs a real kernel that
        faults on the device (``kind`` in ``vyre_cuda.modules.FAULT_KINDS``), loaded like any other."""
        from vyre_cuda.codegen.versions import ptx_version_for_driver
        from vyre_cuda.modules import FAULT_ADDRESS, FAULT_ENTRY, fault_ptx

        with self.lock:
            self._check_open()
            cc = self.info.compute_capability
            ptx = fault_ptx(kind, cc, ptx_version_for_driver(self.info.driver_version, cc))
            with cuda_errors("loading the fault-injection kernel"):
                kernel = self.modules.load(ptx, FAULT_ENTRY)
            plan = LaunchPlan(kernel.ptr, (1, 1, 1), (1, 1, 1), 0, 1, f"fault_injection_{kind}")
            plan.bind_values((FAULT_ADDRESS,))
            self._fault = plan
            self.resident.invalidate()  # so that a cached dispatch_resident fires it too

    def _fire_fault(self) -> None:
        plan, self._fault = self._fault, None
        if plan is not None:
            plan.launch(self._stream_ptr)

    def _use_device(self) -> None:
        if self._rt.getDevice() != self.device_id:
            self._rt.setDevice(self.device_id)

    def __repr__(self) -> str:
        return f"CudaBackend(device={self.device_id}, name={self.info.name!r})"


def _warm_up_host_side(cc: str) -> None:
    """Validate, fingerprint and emit a tiny program once, so the lazy imports of the validator,
    wire format and emitter (tens of ms) are paid when the backend starts, not on its first dispatch."""
    from vyre.ir.expr import Expr
    from vyre.ir.node import Node
    from vyre.ir.validate import validate
    from vyre_cuda import emit_ptx

    program = Program([BufferDecl.output("o", 0, DataType.U32, 1)], (1, 1, 1),
                      [Node.store("o", Expr.local_id(0), Expr.u32(1))], name="warm_up")
    try:
        validate(program)
        program.fingerprint()
        emit_ptx(program, sm=cc)
    except VyreError:  # an unsupported target surfaces on the first real dispatch, with its Fix
        pass


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _check_range(handle: Resident, offset: int, nbytes: int) -> None:
    bad = any(isinstance(v, bool) or not isinstance(v, int) for v in (offset, nbytes))
    if bad or offset < 0 or nbytes < 0 or offset + nbytes > handle.nbytes:
        raise InvalidHandle(f"byte range offset={offset!r} nbytes={nbytes!r} is outside {handle!r}",
                            f"keep offset + nbytes within the handle's {handle.nbytes} bytes.")
