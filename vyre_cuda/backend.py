"""``CudaBackend``: the ``cuda`` backend, composed of parts that each own their state.

- ``runtime`` (``vyre_cuda.runtime.context.DeviceRuntime``): stream, memory pools, module cache,
  parameter blocks, the zero-and-launch step, faults, open / lost state, counters;
- ``programs`` (``vyre_cuda.dispatch.prepared.ProgramCache``): prepared programs and launch plans;
- ``host`` (``dispatch.host.HostDispatcher``): ``dispatch``, ``dispatch_async``, ``dispatch_timed``;
- ``residents`` (``dispatch.resident.ResidentDispatcher``): resident buffers, ``view`` and
  ``dispatch_resident``;
- ``sequences`` (``dispatch.sequence.SequenceDispatcher``): ``dispatch_sequence``,
  ``dispatch_repeated``, ``dispatch_until`` and their graphs;
- ``compile`` makes ``dispatch.pipeline.CudaPipeline`` objects, which own their own buffers and graphs.

The public methods are the parts' bound methods, set as instance attributes in ``__init__``, so a
call such as ``backend.dispatch_resident(...)`` is one Python call into the part that does the work.
``shutdown`` closes every part (graphs, bindings, pools, modules); ``forget_device`` drops them
without a CUDA call after a device fault.

Primitives for pipeline / sequence / graph code and tests (hold ``backend.lock`` around their use):
``stream``, ``resident`` (the ``ResidentPool``), ``transient``, ``staging``, ``ring``, ``heap``,
``telemetry``, ``lock``, ``info``, ``limits``, ``sync_each``; ``prepared``, ``for_grid``,
``resident_layout``, ``plan_for``, ``update_plan``, ``close_plan``, ``zero``, ``launch``, ``wait``.
"""

from __future__ import annotations

import functools
import threading
import weakref
from typing import Any

from vyre.driver.backend import Backend
from vyre.driver.config import DispatchConfig
from vyre.driver.errors import VyreError
from vyre.ir.program import BufferDecl, Program
from vyre.ir.types import DataType
from vyre_cuda.dispatch import device_arrays
from vyre_cuda.dispatch.host import HostDispatcher
from vyre_cuda.dispatch.inplace import InPlaceDispatcher, takes
from vyre_cuda.dispatch.prepared import PreparedProgram, ProgramCache
from vyre_cuda.dispatch.resident import ResidentDispatcher
from vyre_cuda.dispatch.sequence import CallerSequence, SequenceDispatcher
from vyre_cuda.runtime.context import DeviceRuntime
from vyre_cuda.runtime.errors import needs_reset, quiet_teardown, reset_device, watch_device

__all__ = ["CudaBackend", "PreparedProgram"]


class CudaBackend(Backend):
    """The ``cuda`` backend: PTX kernels launched through the CUDA driver (see the module docstring)."""

    id = "cuda"

    def __init__(self, device: int | str | None = None) -> None:
        from vyre import __version__
        from vyre_cuda.runtime.device import probe, resolve_index

        self.version = __version__
        index = resolve_index(device)
        if needs_reset(index):  # an earlier backend on this device met a device fault
            reset_device(index)
        self.info = probe(index)  # BackendUnavailable with the reason when there is no driver/device
        self.device_id = self.info.index
        self.lock = threading.RLock()
        self.bandwidth_gbps: float | None = None
        self.runtime = rt = DeviceRuntime(self.info, self.lock, owner=id(self))
        self.programs = programs = ProgramCache(rt)
        self.host = HostDispatcher(rt, programs)
        self.residents = ResidentDispatcher(rt, programs)
        # the hot paths: bound methods of the parts, one call deep
        self.inplace = InPlaceDispatcher(rt, programs)
        self.dispatch_async, self.dispatch_timed = self.host.dispatch_async, self.host.dispatch_timed
        res = self.residents
        self.allocate_resident, self.upload_resident, self.download_resident, self.free_resident = (
            res.allocate_resident, res.upload_resident, res.download_resident, res.free_resident)
        self.dispatch_resident, self.resident_layout, self.view = res.dispatch_resident, res.resident_layout, res.view
        self.prepared, self.for_grid = programs.prepared, programs.for_grid
        self.plan_for, self.update_plan, self.close_plan = programs.plan_for, programs.update_plan, programs.close_plan
        self.zero, self.launch, self.wait = rt.zero, rt.run, rt.wait
        self.sequences = SequenceDispatcher(self)
        self.pipelines: weakref.WeakSet = weakref.WeakSet()  # closed by shutdown
        seq = self.sequences
        self.dispatch_sequence, self.dispatch_repeated, self.dispatch_until = (
            seq.dispatch_sequence, seq.dispatch_repeated, seq.dispatch_until)
        # the caller's arrays in library sequences (vyre.lib): no copy, the caller's stream, no wait
        self.enqueue_sequence = seq.enqueue_sequence
        caller = self.inplace
        self.borrow, self.new_array, self.stream_for = caller.borrow, caller.new_array, caller.stream_for
        self.to_device, self.as_cupy = caller.to_device, caller.as_cupy
        self.compile_caller_sequence = functools.partial(CallerSequence, self)
        self.device_arrays = device_arrays  # CuPy work on caller arrays for vyre.lib.multi
        _warm_up_host_side(self.info.compute_capability)
        watch_device(self.device_id, self)

    # ---- the runtime's state, read through --------------------------------------------------------
    @property
    def stream(self) -> Any:
        return self.runtime.stream

    @property
    def resident(self) -> Any:
        return self.runtime.resident

    @property
    def transient(self) -> Any:
        return self.runtime.transient

    @property
    def staging(self) -> Any:
        return self.runtime.staging

    @property
    def ring(self) -> Any:
        return self.runtime.ring

    @property
    def heap(self) -> Any:
        return self.runtime.heap

    @property
    def telemetry(self) -> Any:
        return self.runtime.telemetry

    @property
    def limits(self) -> Any:
        return self.runtime.limits

    @property
    def sync_each(self) -> bool:
        return self.runtime.sync_each

    @property
    def modules(self) -> Any:
        return self.runtime.modules

    # ---- identity and capabilities ------------------------------------------------------------
    def device_profile(self) -> dict[str, Any]:
        profile = self.info.as_profile()
        profile.update(backend=self.id, version=self.version, cc=self.info.compute_capability,
                       memory_bytes=self.info.total_memory, sm_count=self.info.sm_count,
                       warp_size=self.info.warp_size, measured_bandwidth_gbps=self.bandwidth_gbps,
                       memory_limit=self.runtime.heap.limit)
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
        return self.runtime.limits.max_block

    def max_grid_size(self) -> tuple[int, int, int]:
        return self.runtime.limits.max_grid

    def max_buffer_bytes(self) -> int:
        limit = self.runtime.heap.limit
        return min(self.info.total_memory, limit) if limit is not None else self.info.total_memory

    @property
    def closed(self) -> bool:
        """True after ``shutdown`` or a device fault: ``vyre.default_backend()`` then starts a new one."""
        return self.runtime.closed

    # ---- pipelines --------------------------------------------------------------------------------
    def dispatch(self, program: Program, inputs: Any, config: DispatchConfig | None = None,
                 stream: object | None = None) -> list[Any]:
        """Run ``program`` once. Device-array inputs are bound in place and the call is
        stream-ordered with no wait (``dispatch.inplace``); host inputs give numpy outputs after one
        synchronisation (``dispatch.host``)."""
        if takes(program, inputs, config):
            return self.inplace.dispatch(program, inputs, config, stream)
        return self.host.dispatch(program, inputs, config)

    def compile(self, program: Program, config: DispatchConfig | None = None) -> Any:
        """A ``CudaPipeline``: ``program`` prepared once for repeated dispatch."""
        from vyre_cuda.dispatch.pipeline import CudaPipeline

        pipeline = CudaPipeline(self, program, config)
        self.pipelines.add(pipeline)
        return pipeline

    # ---- metrics and lifecycle -------------------------------------------------------------------
    def metrics(self) -> dict[str, int]:
        out = self.runtime.metrics()
        out["cuda_sequence_graphs"] = len(self.sequences.graphs)
        out["cuda_sequence_bindings"] = len(self.sequences.bindings)
        return out

    def prepare(self) -> None:
        """Start the worker-free parts now: context, stream, staging (done in ``__init__``)."""
        self.runtime.check_open()

    def shutdown(self) -> None:
        """Release everything the backend holds: graphs, bindings, memos, worker, pools, modules."""
        if self.runtime.lost:  # nothing may be freed through a poisoned context; the device reset frees it all
            with quiet_teardown():
                self.forget_device()
            return
        with self.lock:
            if self.runtime.closed:
                return
            self.host.close(wait=True)
            self.inplace.close()
            for pipeline in list(self.pipelines):
                pipeline.close()
            self.sequences.close()
            self.residents.forget()
            self.programs.forget()
            self.runtime.close()

    def mark_lost(self) -> None:
        """Called by ``vyre_cuda.runtime.errors`` when the device context is poisoned: refuse further use."""
        self.runtime.mark_lost()

    def forget_device(self) -> None:
        """Drop every CUDA object of the lost context without freeing through it (the reset frees it all)."""
        self.runtime.lost = self.runtime.closed = True
        self.host.close(wait=False)
        for pipeline in list(self.pipelines):
            pipeline.close()
        self.sequences.close()
        self.residents.forget()
        self.programs.forget()
        self.runtime.forget()

    def _inject_fault(self, kind: str = "illegal_address") -> None:
        """Test hook, not public API: the next kernel launch first runs a real faulting kernel."""
        with self.lock:
            self.runtime.inject_fault(kind)

    def __enter__(self) -> CudaBackend:
        self.prepare()
        return self

    def __repr__(self) -> str:
        return f"CudaBackend(device={self.device_id}, name={self.info.name!r})"


def _warm_up_host_side(cc: str) -> None:
    """Validate, fingerprint, analyse and emit a tiny program once, so the lazy imports of the validator,
    wire format and emitter (tens of ms) are paid when the backend starts, not on its first dispatch."""
    from vyre.ir.expr import Expr
    from vyre.ir.node import Node
    from vyre.ir.validate import validate
    from vyre_cuda import emit_ptx
    from vyre_cuda.codegen.written import whole_writes

    i = Expr.var("i")
    value = Expr.add(Expr.bitxor(Expr.load("a", i), Expr.u32(1)), Expr.load("o", i))
    program = Program([BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("o", 1, DataType.U32, 1)],
                      (64, 1, 1), [Node.let("i", Expr.invocation_id(0)),
                                   Node.if_(Expr.lt(i, Expr.buf_len("o")), Node.store("o", i, value))],
                      name="warm_up")
    try:
        validate(program)
        program.fingerprint()
        whole_writes(program)
        emit_ptx(program, sm=cc)
    except VyreError:  # an unsupported target surfaces on the first real dispatch, with its Fix
        pass
