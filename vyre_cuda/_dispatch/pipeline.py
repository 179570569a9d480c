"""``CudaPipeline``: one program prepared once for repeated dispatch (docs/resident.md, compiled pipelines).

- ``dispatch(inputs)``: inputs are copied into device buffers the pipeline owns, one set per
  tuple of capacity classes (next power of two of each bound buffer), so sizes within a class
  reuse the same pointers. Counts go to the pipeline's parameter block by an async copy *before*
  the launch, outside any graph; with graphs on, the zero fills and the launch are captured once
  per (classes, grid, coarsening factor) and replayed. One synchronisation per call. The kernel
  variant (coarsened along x or not, ``backend.for_grid``) is chosen per call from its grid; each
  buffer set keeps one ``BoundKernel`` per variant (own plan and parameter block, bound to the
  set's buffers once, its zero fills re-sized per call: ``BoundKernel.size``), launched by
  ``BoundKernel.enqueue`` (eager, or recorded into the graph).
- ``dispatch_batch(list_of_inputs)``: the same for many inputs, with one synchronisation.
- ``dispatch_resident(handles)``: a ``ResidentBinding`` made on the first call with these handles
  (own launch plan and parameter block, arguments packed once, buffers pinned); later calls with
  the same handles are the zero fills of ``output`` buffers and one ``cuLaunchKernel``
  (``BoundKernel.relauncher``, the prebound launch the dispatcher's memos use too).

Results are bit-identical to ``backend.dispatch`` / ``backend.dispatch_resident``: same kernel,
same parameter words, same zero fills (only the ``output`` buffers ``_codegen.written`` cannot prove
written whole). Every method holds the runtime's lock.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vyre.driver.backend import CompiledPipeline, Resident
from vyre.driver.config import DispatchConfig, resolve_grid
from vyre.ir.program import BufferDecl, Program
from vyre_cuda._dispatch.bound import BoundKernel, Relaunch
from vyre_cuda._dispatch.context import DeviceContext
from vyre_cuda._dispatch.graphs import GraphCache, GraphKey, graphs_enabled, pin, unpin
from vyre_cuda._dispatch.inplace import takes
from vyre_cuda._dispatch.staging import Source, aligned, check_inputs, copy_in, copy_out, host_bytes_of
from vyre_cuda._runtime.arrays import order_after_producers
from vyre_cuda._runtime.errors import cuda_errors
from vyre_cuda._runtime.pools import StagingSlot, capacity_class
from vyre_cuda._runtime.profiler import nvtx_range

SLOT_SETS = 4  # capacity-class buffer sets a pipeline keeps (least recently used freed first)
PIPELINE_GRAPHS = 16


# ---- resident dispatch bound once -------------------------------------------------------------------
class ResidentBinding(BoundKernel):
    """A resident dispatch of one program over fixed handles, bound once (a ``BoundKernel``).

    Owns a launch plan with its own parameter block (written at creation, never again: resident
    counts are fixed by the handles) and pins the handles' buffers, so a freed handle is seen as
    ``buffer.retired`` and its memory is not reused while the binding exists.
    """

    __slots__ = ("program", "config", "handles", "buffers", "key", "closed", "spans", "_head")

    def __init__(self, backend: DeviceContext, program: Program, handles: Sequence[Resident],
                 config: DispatchConfig | None) -> None:
        handles = tuple(handles)
        prepared = backend.prepared(program, config)
        buffers, counts, grid = backend.resident_layout(prepared, handles, config)
        prepared = backend.for_grid(prepared, grid, config)
        super().__init__(backend.runtime, prepared, backend.plan_for(prepared, buffers, counts, grid, config=config),
                         grid, counts)
        self.program, self.config, self.handles = program, config, handles
        self.buffers = tuple(buffers)  # binding order
        words = prepared.words(counts, prepared.elements(config, counts), grid)
        self._head = (program.fingerprint(), prepared.block, tuple(grid), prepared.coarsen, words)
        self._point()
        self.closed = False
        pin(self.buffers)

    def _point(self) -> None:
        """Take the buffers' pointers now: zero fills, graph key and the plan's arguments."""
        bufs = self.buffers
        self.spans = tuple((buf.ptr, buf.nbytes) for buf in bufs)
        self.key = GraphKey((*self._head, tuple((b.binding, buf.ptr, buf.capacity)
                                          for b, buf in zip(self.prepared.bound, bufs))))
        self.point([buf.ptr for buf in bufs])

    def moved(self) -> bool:
        """True when a borrowed buffer (the caller's array) was re-pointed since binding."""
        return any((buf.ptr, buf.nbytes) != span for buf, span in zip(self.buffers, self.spans))

    def repoint(self) -> bool:
        """Follow re-pointed buffers of unchanged sizes (False: a size changed, bind anew)."""
        if any(buf.nbytes != span[1] for buf, span in zip(self.buffers, self.spans)):
            return False
        self._point()
        return True

    def matches(self, program: Program, handles: tuple, config: DispatchConfig | None) -> bool:
        """Same program, config and handle objects, and no handle freed since binding."""
        return program is self.program and config is self.config and handles == self.handles and self.live()

    def live(self) -> bool:
        """False once any bound handle was freed (seen while someone pins the buffers)."""
        for buf in self.buffers:
            if buf.retired:
                return False
        return True

    def device_buffers(self) -> tuple:
        """Every device buffer a captured launch of this binding points at (to pin in a graph)."""
        return (*self.buffers, self.plan.params.buffer)

    def close(self, backend: DeviceContext) -> None:
        """Unpin the buffers and give the parameter block back (a graph may still pin both)."""
        if not self.closed:
            self.closed = True
            unpin(self.buffers)
            backend.close_plan(self.plan)


# ---- device buffers owned by a pipeline ---------------------------------------------------------------
@dataclass(eq=False)
class _SlotSet:
    """Device buffers for one tuple of capacity classes, and the kernels bound to them."""

    classes: tuple[int, ...]
    buffers: dict[str, Any]  # bound buffer name -> DeviceBuffer
    kernels: dict[int, BoundKernel] = field(default_factory=dict)  # coarsening factor -> kernel (own plan)


@dataclass(eq=False)
class _Call:
    """One dispatch's inputs, checked: sources, run-time counts, grid and capacity classes."""

    sources: list[Source]
    counts: dict[str, int]
    grid: tuple[int, int, int]  # logical
    prepared: Any  # the kernel variant that runs ``grid`` (backend.for_grid)
    classes: tuple[int, ...]
    host_bytes: int
    out_bytes: int


@dataclass(eq=False)
class _Resources:
    """What a pipeline holds on the device; freed by ``close`` or when the pipeline is collected."""

    backend: Any
    graphs: GraphCache
    slots: OrderedDict = field(default_factory=OrderedDict)
    resident: ResidentBinding | None = None
    fast: Relaunch | None = None  # ``resident.relauncher``

    def drop_resident(self) -> None:
        self.fast = None
        if self.resident is not None:
            self.resident.close(self.backend)
            self.resident = None

    def drop_slots(self, slots: _SlotSet) -> None:
        self.graphs.evict_if(lambda key, _: key[0] == slots.classes)
        self.backend.runtime.transient.recycle(list(slots.buffers.values()))
        for kernel in slots.kernels.values():
            self.backend.close_plan(kernel.plan)

    def release(self) -> None:
        with self.backend.lock:
            self.graphs.clear()
            while self.slots:
                self.drop_slots(self.slots.popitem(last=False)[1])
            self.drop_resident()


def _release(resources: _Resources) -> None:
    try:
        resources.release()
    except Exception:  # noqa: BLE001, S110 - a collected pipeline of a shut-down backend holds nothing
        pass


class CudaPipeline(CompiledPipeline):
    """A program compiled once on a ``CudaBackend``; see the module docstring."""

    def __init__(self, backend: Any, program: Program, config: DispatchConfig | None = None) -> None:
        super().__init__(backend, program, config)
        self.runtime = backend.runtime
        self.prepared = backend.prepared(program, config)  # validate, emit and load now
        self.stage = StagingSlot()
        telemetry = self.runtime.telemetry
        self.resources = _Resources(backend, GraphCache(telemetry.add, PIPELINE_GRAPHS, telemetry.bump))
        self._finalizer = weakref.finalize(self, _release, self.resources)
        self._lock = backend.lock

    # ---- resident fast path ----------------------------------------------------------------------
    def dispatch_resident(self, handles: Sequence[Resident]) -> None:
        """Run on resident buffers; after the first call with the same handles, one pre-packed launch."""
        with self._lock:
            fast = self.resources.fast
            if fast is None or not fast(handles):
                self._dispatch_resident_slow(handles)

    def _dispatch_resident_slow(self, handles: Sequence[Resident]) -> None:
        """Check the handles, (re)bind when they changed, then launch with counters and debug modes."""
        rt, res = self.runtime, self.resources
        rt.check_open()
        rt.use_device()
        handles = tuple(handles)
        binding = res.resident
        if binding is None or not binding.matches(self.program, handles, self.config):
            res.drop_resident()
            binding = res.resident = ResidentBinding(self.backend, self.program, handles, self.config)
            res.fast = binding.relauncher(binding.handles, binding.live)
        binding.enqueue()

    # ---- host/device inputs --------------------------------------------------------------------------
    def dispatch(self, inputs: Sequence[object], stream: object | None = None) -> list[Any]:
        """Outputs of one dispatch, bit-identical to ``backend.dispatch``: on device arrays bound in
        place with no wait (``_dispatch.inplace``), else one synchronisation."""
        if takes(self.program, inputs, self.config):
            return self.backend.inplace.dispatch(self.program, inputs, self.config, stream)
        return self._run([inputs])[0]

    def dispatch_batch(self, batch: Sequence[Sequence[object]]) -> list[list[np.ndarray]]:
        """Outputs of each dispatch in ``batch``, enqueued back to back with one synchronisation."""
        return self._run(list(batch))

    def _run(self, batch: list[Sequence[object]]) -> list[list[np.ndarray]]:
        rt = self.runtime
        with rt.lock, nvtx_range("vyre.cuda.dispatch"):
            rt.check_open()
            rt.use_device()
            calls = [self._check(inputs) for inputs in batch]
            if not calls:
                return []
            stage = self.stage.ready(sum(c.host_bytes + c.out_bytes for c in calls), self._count_wait)
            graphs = graphs_enabled(rt)
            layout: list[list[tuple[BufferDecl, int, int]]] = []
            off = 0
            try:
                with cuda_errors(f"dispatching program {self.prepared.name}"):
                    if any(s.on_device for c in calls for s in c.sources):
                        order_after_producers(rt.stream)
                    for call in calls:
                        outputs, off = self._enqueue(call, stage, off, graphs)
                        layout.append(outputs)
            finally:  # copies already enqueued still read the staging area: fence it in any case
                with cuda_errors("fencing the staging area"):
                    self.stage.fence(rt.stream)
            timeout = self.config.timeout_s if self.config else None
            rt.wait(self.stage.event, timeout, self.prepared.name)
            self.stage.pending = False
            rt.telemetry.add("cuda_dispatches", len(calls))
            return [[stage[o:o + n * d.dtype.size].view(d.dtype.np_dtype).copy() for d, o, n in outs]
                    for outs in layout]

    def _check(self, inputs: Sequence[object]) -> _Call:
        """Validate one input list and size it: counts, grid, capacity classes."""
        program = self.program
        sources, counts = check_inputs(program, inputs, self.runtime.device_id)
        grid = resolve_grid(program, self.config, counts)
        classes = tuple(capacity_class(counts[b.name] * b.dtype.size) for b in self.prepared.bound)
        out = sum(aligned(counts[b.name] * b.dtype.size) for b in program.outputs)
        prepared = self.backend.for_grid(self.prepared, grid, self.config)
        return _Call(sources, counts, grid, prepared, classes, host_bytes_of(sources), out)

    def _enqueue(self, call: _Call, stage: np.ndarray, off: int, graphs: bool
                 ) -> tuple[list[tuple[BufferDecl, int, int]], int]:
        """Copy inputs in, update the parameter block, launch (graph or eager), copy outputs out."""
        rt = self.runtime
        slots = self._slots(call)
        for src in call.sources:
            off = copy_in(rt, src, slots.buffers[src.decl.name].ptr, stage, self.stage.ptr, off)
        kernel = self._kernel(slots, call)
        self.backend.update_plan(kernel.plan, call.prepared, call.counts, call.grid, None, self.config)
        kernel.size(call.grid, call.counts)
        self._launch(slots, kernel, (call.grid, call.prepared.coarsen), graphs)
        outputs = []
        for b in self.program.outputs:
            nbytes = call.counts[b.name] * b.dtype.size
            outputs.append((b, off, call.counts[b.name]))
            off = copy_out(rt, slots.buffers[b.name].ptr, nbytes, self.stage.ptr, off)
        return outputs, off

    def _launch(self, slots: _SlotSet, kernel: BoundKernel, shape: tuple, graphs: bool) -> None:
        """``kernel.enqueue``, eager or as a graph keyed by (classes, logical grid, factor, zero
        fills): the key holds everything the recording reads, so a replayed recording is this call's."""
        zero = kernel.zero
        if not graphs or (kernel.plan.empty and not zero):
            kernel.enqueue()
            return

        def record(stream_ptr: int) -> None:
            kernel.enqueue(stream_ptr, capturing=True)

        pinned = (*slots.buffers.values(), kernel.plan.params.buffer)
        self.resources.graphs.run((slots.classes, *shape, zero), self.runtime.stream, record, pinned)

    def _slots(self, call: _Call) -> _SlotSet:
        """The buffer set for ``call``'s capacity classes (taken from the transient pool once)."""
        res = self.resources
        slots = res.slots.get(call.classes)
        if slots is not None:
            res.slots.move_to_end(call.classes)
            return slots
        transient = self.runtime.transient
        slots = _SlotSet(call.classes, {})
        try:
            for b, cap in zip(self.prepared.bound, call.classes):
                slots.buffers[b.name] = transient.acquire(cap)
            self._kernel(slots, call)
        except BaseException:
            transient.recycle(list(slots.buffers.values()))
            raise
        res.slots[call.classes] = slots
        while len(res.slots) > SLOT_SETS:
            res.drop_slots(res.slots.popitem(last=False)[1])
        return slots

    def _kernel(self, slots: _SlotSet, call: _Call) -> BoundKernel:
        """``call``'s kernel variant bound to ``slots`` (made on first use; re-sized per call)."""
        kernel = slots.kernels.get(call.prepared.coarsen)
        if kernel is None:
            bound = [slots.buffers[b.name] for b in call.prepared.bound]
            plan = self.backend.plan_for(call.prepared, bound, call.counts, call.grid, config=self.config)
            kernel = BoundKernel(self.runtime, call.prepared, plan, call.grid, call.counts)
            kernel.point([buf.ptr for buf in bound])
            slots.kernels[call.prepared.coarsen] = kernel
        return kernel

    def _count_wait(self) -> None:
        self.runtime.telemetry.add("cuda_sync_points")

    # ---- lifecycle ----------------------------------------------------------------------------------
    def close(self) -> None:
        """Give the pipeline's buffers, plans and graphs back (the pipeline stays usable)."""
        self.resources.release()

    def __enter__(self) -> CudaPipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"CudaPipeline({self.prepared.name}, slot_sets={len(self.resources.slots)}, "
                f"graphs={len(self.resources.graphs)})")
