"""Host-input dispatch of the ``cuda`` backend: ``dispatch``, ``dispatch_async`` and ``dispatch_timed``.

Flow of one ``dispatch``: ``prepared`` (validate -> emit PTX -> load module -> launch plan, cached
per program and workgroup size) -> inputs staged into transient device buffers (host data through
pinned staging, device arrays device-to-device or by pointer) -> outputs zeroed -> one launch ->
outputs copied back -> one synchronisation.

``HostDispatch`` is a mixin of ``vyre_cuda.backend.CudaBackend``: it works on the backend's state and
launch primitives (``lock``, ``stream``, ``staging``, ``transient``, ``prepared``, ``for_grid``,
``update_plan``, ``launch``, ``wait``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre.driver.backend import PendingDispatch, TimedDispatch
from vyre.driver.config import DispatchConfig, resolve_grid
from vyre.driver.inputs import as_bytes_view, buffer_counts, check_byte_length, check_input_count
from vyre.ir.program import Access, BufferDecl, Program
from vyre_cuda.dispatch.prepared import PreparedProgram
from vyre_cuda.runtime.arrays import device_input, order_after_producers
from vyre_cuda.runtime.errors import cuda_errors
from vyre_cuda.runtime.pools import D2D, D2H, H2D, DeviceBuffer, PinnedStaging, StagingSlot
from vyre_cuda.runtime.profiler import nvtx_range

_ALIGN = 16


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


class HostDispatch:
    """Dispatches whose inputs come from the host (or as device arrays) and whose outputs are
    copied back: a mixin of ``CudaBackend``."""

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
            dev = device_input(decl, data, self.device_id)
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


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN
