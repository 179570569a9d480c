"""``CudaBackend``: the ``cuda`` backend, composed of parts that each own their state.

- ``runtime`` (``vyre_cuda._runtime.context.DeviceRuntime``): stream, memory pools, module cache,
  parameter blocks, the zero-and-launch step, faults, open / lost state, counters;
- ``programs`` (``vyre_cuda._dispatch.prepared.ProgramCache``): prepared programs and launch plans;
- ``host`` (``_dispatch.host.HostDispatcher``): ``dispatch``, ``dispatch_async``, ``dispatch_timed``;
- ``residents`` (``_dispatch.resident.ResidentDispatcher``): resident buffers, ``view`` and
  ``dispatch_resident``;
- ``sequences`` (``_dispatch.sequence.SequenceDispatcher``): ``dispatch_sequence``,
  ``dispatch_repeated``, ``dispatch_until`` and their graphs;
- ``compile`` makes ``_dispatch.pipeline.CudaPipeline`` objects, which own their own buffers and graphs.

Every public method is an ordinary method of the class that hands the call to the part that does
the work (``backend.dispatch_resident(...)`` -> ``residents.dispatch_resident(...)``), so a reader,
an IDE or a type checker following a call lands on the real definition.
``shutdown`` closes every part (graphs, bindings, pools, modules); ``forget_device`` drops them
without a CUDA call after a device fault.

Primitives for pipeline / sequence / graph code and tests (hold ``backend.lock`` around their use):
``stream``, ``resident`` (the ``ResidentPool``), ``transient``, ``staging``, ``ring``, ``heap``,
``telemetry``, ``lock``, ``info``, ``limits``, ``sync_each``; ``prepared``, ``for_grid``,
``resident_layout``, ``plan_for``, ``update_plan``, ``close_plan``, ``zero``, ``launch``, ``wait``.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vyre.driver.backend import Backend, PendingDispatch, Resident, TimedDispatch
from vyre.driver.config import DispatchConfig
from vyre.driver.errors import VyreError
from vyre.ir.program import BufferDecl, Program
from vyre.ir.types import DataType
from vyre_cuda._dispatch import device_arrays
from vyre_cuda._dispatch.host import HostDispatcher
from vyre_cuda._dispatch.inplace import InPlaceDispatcher, takes
from vyre_cuda._dispatch.pipeline import CudaPipeline
from vyre_cuda._dispatch.prepared import PreparedProgram, ProgramCache
from vyre_cuda._dispatch.resident import ResidentDispatcher
from vyre_cuda._dispatch.sequence import CallerSequence, CompiledLoop, SequenceDispatcher
from vyre_cuda._runtime.context import DeviceRuntime
from vyre_cuda._runtime.errors import needs_reset, quiet_teardown, reset_device, watch_device
from vyre_cuda._runtime.launch import DeviceLimits, LaunchPlan, PinnedRing
from vyre_cuda._runtime.pools import DeviceBuffer, DeviceHeap, PinnedStaging, ResidentPool, TransientPool
from vyre_cuda._runtime.telemetry import Telemetry

if TYPE_CHECKING:  # loaded when the runtime starts, not on import
    from vyre_cuda._runtime.loader import ModuleCache

__all__ = ["CudaBackend", "PreparedProgram"]


class CudaBackend(Backend):
    """The ``cuda`` backend: PTX kernels launched through the CUDA driver (see the module docstring)."""

    id = "cuda"
    device_arrays = device_arrays  # CuPy work on caller arrays for vyre.lib.multi

    def __init__(self, device: int | str | None = None) -> None:
        from vyre.version import __version__
        from vyre_cuda._runtime.device import probe, resolve_index

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
        self.inplace = InPlaceDispatcher(rt, programs)
        self.sequences = SequenceDispatcher(self)
        self.pipelines: weakref.WeakSet[CudaPipeline] = weakref.WeakSet()  # closed by shutdown
        _warm_up_host_side(self.info.compute_capability)
        watch_device(self.device_id, self)

    # ---- the runtime's state, read through --------------------------------------------------------
    @property
    def stream(self) -> Any:
        """The backend's non-blocking CuPy stream."""
        return self.runtime.stream

    @property
    def resident(self) -> ResidentPool:
        return self.runtime.resident

    @property
    def transient(self) -> TransientPool:
        return self.runtime.transient

    @property
    def staging(self) -> PinnedStaging | None:
        return self.runtime.staging

    @property
    def ring(self) -> PinnedRing | None:
        return self.runtime.ring

    @property
    def heap(self) -> DeviceHeap:
        return self.runtime.heap

    @property
    def telemetry(self) -> Telemetry:
        return self.runtime.telemetry

    @property
    def limits(self) -> DeviceLimits:
        return self.runtime.limits

    @property
    def sync_each(self) -> bool:
        return self.runtime.sync_each

    @property
    def modules(self) -> ModuleCache:
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

    # ---- host dispatches (``_dispatch.host``) -----------------------------------------------------
    def dispatch_async(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None
                       ) -> PendingDispatch:
        return self.host.dispatch_async(program, inputs, config)

    def dispatch_timed(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None
                       ) -> TimedDispatch:
        return self.host.dispatch_timed(program, inputs, config)

    # ---- resident buffers (``_dispatch.resident``) ------------------------------------------------
    def allocate_resident(self, nbytes: int) -> Resident:
        return self.residents.allocate_resident(nbytes)

    def upload_resident(self, handle: Resident, data: object, offset: int = 0) -> None:
        self.residents.upload_resident(handle, data, offset)

    def download_resident(self, handle: Resident, offset: int = 0, nbytes: int | None = None) -> np.ndarray:
        return self.residents.download_resident(handle, offset, nbytes)

    def free_resident(self, handle: Resident) -> None:
        self.residents.free_resident(handle)

    def view(self, handle: Resident, dtype: Any = np.uint8) -> Any:
        return self.residents.view(handle, dtype)

    def dispatch_resident(self, program: Program, handles: Sequence[Resident],
                          config: DispatchConfig | None = None) -> None:
        self.residents.dispatch_resident(program, handles, config)

    def resident_layout(self, prepared: PreparedProgram, handles: Sequence[Resident], config: DispatchConfig | None
                        ) -> tuple[list[DeviceBuffer], dict[str, int], tuple]:
        """The handles' buffers, the run-time counts and the grid of a resident dispatch."""
        return self.residents.resident_layout(prepared, handles, config)

    # ---- sequences, repeats, fixed points (``_dispatch.sequence``) --------------------------------
    def dispatch_sequence(self, steps: Sequence[tuple], reads: Sequence[tuple] = ()) -> list[np.ndarray]:
        return self.sequences.dispatch_sequence(steps, reads)

    def dispatch_repeated(self, prefix: Sequence[tuple], repeated: Sequence[tuple], count: int,
                          reads: Sequence[tuple] = ()) -> list[np.ndarray]:
        return self.sequences.dispatch_repeated(prefix, repeated, count, reads)

    def dispatch_until(self, steps: Sequence[tuple], flag_handle: Resident, max_iterations: int) -> int:
        return self.sequences.dispatch_until(steps, flag_handle, max_iterations)

    def enqueue_until(self, steps: Sequence[tuple], flag_handle: Resident, max_iterations: int) -> None:
        """``dispatch_until`` with no host wait where the loop runs as a conditional graph (the
        iteration count is not read back); otherwise ``dispatch_until``."""
        self.sequences.enqueue_until(steps, flag_handle, max_iterations)

    def enqueue_sequence(self, steps: Sequence[object], *, stream: Any = None,
                         writes: Sequence[tuple[Resident, np.ndarray]] = (), reads: Sequence[tuple] = (),
                         watch: Sequence[tuple[Resident, int, Callable[[int], Exception]]] = ()) -> list[np.ndarray]:
        """Steps on a caller's stream with no wait (the caller's arrays in ``vyre.lib`` sequences)."""
        return self.sequences.enqueue_sequence(steps, stream=stream, writes=writes, reads=reads, watch=watch)

    def compile_caller_sequence(self, steps: Sequence[object], reads: Sequence[tuple] = ()) -> CallerSequence:
        """The steps of one library call over borrowed handles, bound once (``CallerSequence``);
        ``reads``: the ranges every call reads back (copied by a last step of its own)."""
        return CallerSequence(self, steps, reads)

    def compile_until(self, prefix: Sequence[object], steps: Sequence[object], flag_handle: Resident,
                      max_iterations: int) -> CompiledLoop:
        """``enqueue_sequence(prefix, writes=...)`` then ``enqueue_until(steps, ...)``, looked up once for a
        search run again and again on the same buffers (``CompiledLoop``)."""
        return CompiledLoop(self.sequences, prefix, steps, flag_handle, max_iterations)

    # ---- the caller's arrays (``_dispatch.inplace``) ----------------------------------------------
    def borrow(self, handle: Resident | None, array: object) -> Resident:
        """A resident handle over ``array``'s memory, no copy (re-pointed when ``handle`` is given)."""
        return self.inplace.borrow(handle, array)

    def alias_resident(self, handle: Resident | None, source: Resident, nbytes: int) -> Resident:
        """A borrowed handle over the first ``nbytes`` of resident ``source`` (re-pointed when ``handle``
        is given): how ``vyre.lib`` binds ``ResidentArray``s into its compiled calls."""
        return self.inplace.alias_resident(handle, source, nbytes)

    def new_array(self, like: Sequence[object], dtype: DataType, count: int, stream: Any) -> Any:
        """A new (uninitialised) array of the callers' kind (CuPy or torch), allocated in ``stream``'s
        order (None: the current stream's)."""
        return self.inplace.new_array(like, dtype, count, stream)

    def device_view(self, handle: Resident) -> tuple[int, int, int]:
        """``(pointer, device ordinal, stream handle)`` of a resident handle's memory, for
        ``ResidentArray``'s ``__cuda_array_interface__``: the stream is the backend's."""
        return self.residents.device_view(handle)

    def dlpack(self, handle: Resident, dtype: Any, count: int, stream: object | None, **options: Any) -> Any:
        """A DLPack capsule over ``count`` elements of ``dtype`` at ``handle``, ``stream`` (the
        consumer's: a handle, -1 for none, None for the legacy default) waiting for the backend's work;
        ``options``: the consumer's other ``__dlpack__`` keywords."""
        return self.residents.dlpack(handle, dtype, count, stream, **options)

    def as_cupy(self, array: object) -> Any:
        """``array`` (CuPy, torch, CAI/DLPack) as a CuPy array over the same memory."""
        return self.inplace.as_cupy(array)

    def to_device(self, data: object, stream: Any) -> Any:
        """Host ``data`` copied to a new CuPy array on ``stream``."""
        return self.inplace.to_device(data, stream)

    def stream_for(self, stream: object | None, arrays: Sequence[object] = ()) -> Any:
        """The CuPy stream a call on the caller's arrays runs on."""
        return self.inplace.stream_for(stream, arrays)

    # ---- prepared programs and launch plans (``_dispatch.prepared``) -------------------------------
    def prepared(self, program: Program, config: DispatchConfig | None = None, coarsen: int = 1) -> PreparedProgram:
        """``program`` validated, emitted and loaded (cached)."""
        return self.programs.prepared(program, config, coarsen)

    def for_grid(self, prepared: PreparedProgram, grid: Sequence[int],
                 config: DispatchConfig | None = None) -> PreparedProgram:
        """The kernel variant (coarsened along x or not) that runs ``grid``."""
        return self.programs.for_grid(prepared, grid, config)

    def plan_for(self, prepared: PreparedProgram, buffers: Sequence[Any], counts: Mapping[str, int],
                 grid: Sequence[int], elements: int | None = None,
                 config: DispatchConfig | None = None, stream: Any = None) -> LaunchPlan:
        """A launch plan with its own parameter block (given back by ``close_plan``)."""
        return self.programs.plan_for(prepared, buffers, counts, grid, elements, config, stream)

    def update_plan(self, plan: LaunchPlan, prepared: PreparedProgram, counts: Mapping[str, int],
                    grid: Sequence[int], elements: int | None = None,
                    config: DispatchConfig | None = None, stream: Any = None) -> None:
        """Rewrite ``plan``'s grid and parameter words for new counts."""
        self.programs.update_plan(plan, prepared, counts, grid, elements, config, stream)

    def close_plan(self, plan: LaunchPlan) -> None:
        """Give ``plan``'s parameter block back."""
        self.programs.close_plan(plan)

    # ---- the runtime's launch primitives (``_runtime.context``) -------------------------------------
    def zero(self, buffer: DeviceBuffer, nbytes: int) -> None:
        """Zero the first ``nbytes`` of ``buffer`` on the backend's stream."""
        self.runtime.zero(buffer, nbytes)

    def launch(self, plan: LaunchPlan, zero: tuple[tuple[int, int], ...] = (), name: str | None = None,
               stream_ptr: int | None = None) -> None:
        """The zero-and-launch step (``DeviceRuntime.run``)."""
        self.runtime.run(plan, zero, name, stream_ptr)

    def wait(self, event: Any, timeout_s: float | None, name: str) -> None:
        """Wait for ``event`` with an optional deadline (``DeviceRuntime.wait``)."""
        self.runtime.wait(event, timeout_s, name)

    # ---- pipelines --------------------------------------------------------------------------------
    def dispatch(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None,
                 stream: object | None = None) -> list[Any]:
        """Run ``program`` once. Device-array inputs are bound in place and the call is
        stream-ordered with no wait (``_dispatch.inplace``); host inputs give numpy outputs after one
        synchronisation (``_dispatch.host``)."""
        if takes(program, inputs, config):
            return self.inplace.dispatch(program, inputs, config, stream)
        return self.host.dispatch(program, inputs, config)

    def compile(self, program: Program, config: DispatchConfig | None = None) -> CudaPipeline:
        """A ``CudaPipeline``: ``program`` prepared once for repeated dispatch."""
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
        """Called by ``vyre_cuda._runtime.errors`` when the device context is poisoned: refuse further use."""
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
    from vyre_cuda._codegen import emit_ptx
    from vyre_cuda._codegen.written import whole_writes

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
