"""``CudaBackend``: the ``cuda`` backend of SPEC sections 3, 4 and 8.

This module holds the backend's state, capabilities, program preparation, launch primitives, metrics
and lifecycle. The rest lives in modules with one job each, mixed into ``CudaBackend``:

- ``vyre_cuda.dispatch.prepared``: ``PreparedProgram`` (re-exported here).
- ``vyre_cuda.dispatch.host``: ``dispatch`` / ``dispatch_async`` / ``dispatch_timed`` (the flow of one dispatch).
- ``vyre_cuda.dispatch.resident``: resident buffers and ``dispatch_resident``.
- ``vyre_cuda.runtime.faults``: device faults and recovery (``_mark_lost``, ``_forget_device``, ``_inject_fault``).

Primitives for the pipeline / sequence / graph code (hold ``backend.lock`` around their use):

- ``backend.stream``: the backend's non-blocking ``cupy.cuda.Stream``; all work goes on it.
- ``backend.resident`` (``ResidentPool``: ``resolve(handle) -> DeviceBuffer``, ``retain``/``release``),
  ``backend.transient`` (``TransientPool``: ``acquire(nbytes)``, ``recycle(buffers)``),
  ``backend.staging`` (``PinnedStaging``), ``backend.heap`` (``DeviceHeap``).
- ``backend.telemetry`` (``Telemetry.add(name, n)``), ``backend.lock`` (an ``RLock``).
- ``backend.prepared(program, config, coarsen=1) -> PreparedProgram`` (``kernel``, ``bound``,
  ``block``, ``coarsen``, ``words(counts, elements, grid)``, ``elements(config, counts)``,
  ``launch_grid(grid)``); ``backend.for_grid(prepared, grid, config)``: the variant of ``prepared``
  that runs the logical ``grid`` (coarsened along x when ``vyre_cuda.dispatch.coarsening.factor`` says so).
  Grids passed to the calls below are always logical; plans launch ``prepared.launch_grid(grid)``.
- ``backend.resident_layout(prepared, handles, config) -> (buffers, counts, grid)``: checked handles of a
  resident dispatch in binding order, their element counts and the grid.
- ``backend.plan_for(prepared, buffers, counts, grid, elements=None) -> LaunchPlan`` with its own
  ``ParamBlock`` (``plan.params``), bound and written; ``backend.update_plan(plan, prepared, counts,
  grid, elements=None)`` rewrites the words (no-op when unchanged); ``backend.close_plan(plan)``.
- ``backend.zero(buffer, nbytes)``: enqueue a zero fill (output buffers are zeroed before every dispatch).
- ``backend.launch(plan, name)``: one launch on ``stream`` with the counters and ``VYRE_CUDA_SYNC_EACH``.
- ``backend.wait(event, timeout_s, name)``: wait for an event with an optional deadline.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from vyre.driver.backend import Backend, Resident
from vyre.driver.config import DispatchConfig, effective_workgroup
from vyre.driver.errors import (
    BackendUnavailable,
    DeviceLost,
    DispatchFailed,
    InvalidProgram,
    UnsupportedFeature,
    VyreError,
)
from vyre.ir.program import BufferDecl, Program
from vyre.ir.types import DataType
from vyre_cuda.dispatch.coarsening import factor as coarsen_factor
from vyre_cuda.dispatch.host import HostDispatch
from vyre_cuda.dispatch.prepared import PreparedProgram
from vyre_cuda.dispatch.resident import _MEMO_CAP, ResidentDispatch, _ResidentMemo
from vyre_cuda.runtime.errors import FIX_LOST, cuda_errors, needs_reset, quiet_teardown, reset_device, watch_device
from vyre_cuda.runtime.faults import FaultHandling
from vyre_cuda.runtime.launch import (
    DeviceLimits,
    LaunchPlan,
    ParamBlock,
    PinnedRing,
    check_cooperative,
    check_geometry,
    check_workgroup_memory,
)
from vyre_cuda.runtime.pools import DeviceBuffer, DeviceHeap, PinnedStaging, ResidentPool, TransientPool, memory_limit
from vyre_cuda.runtime.profiler import nvtx_range
from vyre_cuda.runtime.telemetry import COUNTERS, Telemetry

FIX_TIMEOUT = ("raise DispatchConfig.timeout_s or shrink the work; the kernel may still be running, and later "
               "calls on this backend queue behind it until it finishes")


class CudaBackend(HostDispatch, ResidentDispatch, FaultHandling, Backend):
    """The ``cuda`` backend: PTX kernels launched through CuPy and the CUDA driver."""

    id = "cuda"

    def __init__(self, device: int | str | None = None) -> None:
        from vyre import __version__
        from vyre_cuda.runtime.device import import_cupy, probe, resolve_index

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
        from vyre_cuda.runtime.cache import DiskCache
        from vyre_cuda.runtime.loader import ModuleCache

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
        coarsened along x when ``vyre_cuda.dispatch.coarsening.factor`` says so, else the plain kernel."""
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

    # ---- delegated to the pipeline / sequence modules ------------------------------------------
    def compile(self, program: Program, config: DispatchConfig | None = None) -> Any:
        from vyre_cuda.dispatch.pipeline import CudaPipeline

        return CudaPipeline(self, program, config)

    def dispatch_sequence(self, steps: Sequence[tuple], reads: Sequence[tuple] = ()) -> list[np.ndarray]:
        from vyre_cuda.dispatch.sequence import run_sequence

        return run_sequence(self, steps, reads)

    def dispatch_repeated(self, prefix: Sequence[tuple], repeated: Sequence[tuple], count: int,
                          reads: Sequence[tuple] = ()) -> list[np.ndarray]:
        from vyre_cuda.dispatch.sequence import run_repeated

        return run_repeated(self, prefix, repeated, count, reads)

    def dispatch_until(self, steps: Sequence[tuple], flag_handle: Resident, max_iterations: int) -> int:
        from vyre_cuda.dispatch.sequence import run_until

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
