"""``HostDispatcher``: ``dispatch``, ``dispatch_async`` and ``dispatch_timed`` of the cuda backend.

Flow of one ``dispatch``: ``ProgramCache.prepared`` (validate -> emit PTX -> load module -> launch
plan, cached per program and workgroup size) -> inputs checked and staged (``_dispatch.staging``:
host data through pinned staging, device arrays device-to-device, or read in place when a
read-only buffer's array is aligned; host inputs of ``PIPELINE_MIN`` bytes or more are pipelined
through the runtime's pinned chunk ring) -> the ``output`` buffers that need it zeroed and the
kernel launched in one step (``DeviceRuntime.run``) -> small outputs copied back into the staging
slot -> one synchronisation -> large outputs pipelined straight into their numpy arrays through
the chunk ring (their device buffers stay lent until then).

With ``DispatchConfig(outputs="device")`` the written buffers are CuPy arrays allocated for the
call and returned as they are (they own their memory; no copy to the host).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from vyre.driver.backend import PendingDispatch, TimedDispatch
from vyre.driver.config import DispatchConfig, resolve_grid
from vyre.driver.errors import InvalidProgram
from vyre.ir.program import Access, BufferDecl, Program
from vyre_cuda._dispatch.prepared import PreparedProgram, ProgramCache
from vyre_cuda._dispatch.staging import aligned, check_inputs, copy_in, copy_out, host_bytes_of
from vyre_cuda._runtime.arrays import order_after_producers
from vyre_cuda._runtime.context import DeviceRuntime
from vyre_cuda._runtime.errors import cuda_errors
from vyre_cuda._runtime.pools import PIPELINE_MIN, DeviceBuffer, PinnedStaging, StagingSlot
from vyre_cuda._runtime.profiler import nvtx_range

OUTPUT_PLACES = ("auto", "host", "device")


@dataclass(eq=False)
class _Run:
    """One enqueued dispatch: where its outputs land (staging slot offsets, or device arrays)."""

    prepared: PreparedProgram
    slot: StagingSlot
    outputs: list[tuple[BufferDecl, int, int]]  # decl, byte offset in slot (-1: chunked), element count
    keep: list[Any]  # device arrays read in place: alive until the dispatch finished
    held: dict[str, DeviceBuffer]  # large outputs' buffers: lent until copied out by ``_collect``
    timing: tuple[Any, Any] | None = None
    device_outputs: list[Any] | None = None  # outputs="device": the CuPy arrays returned


class HostDispatcher:
    """Dispatches whose inputs come from the host (or as device arrays) and whose outputs are returned."""

    def __init__(self, runtime: DeviceRuntime, programs: ProgramCache) -> None:
        self.runtime = runtime
        self.programs = programs
        self.worker: ThreadPoolExecutor | None = None

    def dispatch(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None
                 ) -> list[Any]:
        """Run ``program`` once on ``inputs``; one array per ``read_write``/``output`` buffer."""
        with self.runtime.lock, nvtx_range("vyre.cuda.dispatch"):
            run = self._enqueue(program, inputs, config, private=False, timed=False)
            try:
                self.runtime.wait(run.slot.event, config.timeout_s if config else None, run.prepared.name)
                run.slot.pending = False
                return self._collect(run)
            finally:
                self._release(run)

    def dispatch_async(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None
                       ) -> PendingDispatch:
        """``dispatch`` that returns at once; ``result()`` waits (on a worker thread)."""
        rt = self.runtime
        with rt.lock, nvtx_range("vyre.cuda.dispatch"):
            run = self._enqueue(program, inputs, config, private=True, timed=False)
            if self.worker is None:
                self.worker = ThreadPoolExecutor(1, thread_name_prefix="vyre-cuda-wait",
                                                 initializer=rt.cuda.setDevice, initargs=(rt.device_id,))
            future: Future = self.worker.submit(self._finish_async, run, config)
        return PendingDispatch(future)

    def _finish_async(self, run: _Run, config: DispatchConfig | None) -> list[Any]:
        self.runtime.wait(run.slot.event, config.timeout_s if config else None, run.prepared.name)
        return self._collect(run)

    def dispatch_timed(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None
                       ) -> TimedDispatch:
        """``dispatch`` with wall, device (CUDA events), enqueue and wait times."""
        rt = self.runtime
        with rt.lock, nvtx_range("vyre.cuda.dispatch"):
            start = time.perf_counter_ns()
            run = self._enqueue(program, inputs, config, private=False, timed=True)
            enqueued = time.perf_counter_ns()
            try:
                rt.wait(run.slot.event, config.timeout_s if config else None, run.prepared.name)
                run.slot.pending = False
                waited = time.perf_counter_ns()
                outputs = self._collect(run)
            finally:
                self._release(run)
            device_ns = 0
            if run.timing is not None:
                import cupy

                device_ns = int(cupy.cuda.get_elapsed_time(*run.timing) * 1e6)
            rt.telemetry.add("cuda_timed_dispatches")
            rt.telemetry.add("cuda_device_ns", device_ns)
            return TimedDispatch(outputs, time.perf_counter_ns() - start, device_ns, enqueued - start,
                                 waited - enqueued)

    def _enqueue(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None,
                 private: bool, timed: bool) -> _Run:
        """Stage inputs, zero outputs, launch and queue the output copies (no waiting)."""
        rt = self.runtime
        rt.check_open()
        rt.use_device()
        on_device = _output_place(config) == "device"
        prep = self.programs.prepared(program, config)
        sources, counts = check_inputs(program, inputs, rt.device_id)
        grid = resolve_grid(program, config, counts)
        prep = self.programs.for_grid(prep, grid, config)
        chunked = set() if on_device or private else {
            b.name for b in program.outputs if counts[b.name] * b.dtype.size >= PIPELINE_MIN}
        out_bytes = 0 if on_device else sum(aligned(counts[b.name] * b.dtype.size) for b in program.outputs
                                            if b.name not in chunked)
        need = host_bytes_of(sources) + out_bytes
        slot = PinnedStaging.private(need) if private else rt.staging.slot(need)
        dev_out = _device_outputs(program, counts, rt.device_id) if on_device else {}
        ptrs: dict[str, int] = {name: arr.data.ptr for name, arr in dev_out.items()}
        lent: list[DeviceBuffer] = []
        bufs: dict[str, DeviceBuffer] = {}  # lent buffer of each buffer name
        held: dict[str, DeviceBuffer] = {}  # those of chunked outputs, kept until _collect
        keep: list[Any] = []
        try:
            with cuda_errors(f"staging the buffers of program {prep.name}"):
                if on_device or any(s.on_device for s in sources):  # after CuPy's stream: arrays, allocations
                    order_after_producers(rt.stream)
                off = 0
                for src in sources:
                    decl = src.decl
                    if decl.name not in ptrs:
                        if (src.on_device and decl.access is not Access.READ_WRITE
                                and src.data.data.ptr % decl.dtype.size == 0):
                            ptrs[decl.name] = src.data.data.ptr  # read in place
                            keep.append(src.data)
                            continue
                        buf = rt.transient.acquire(src.nbytes)
                        lent.append(buf)
                        ptrs[decl.name] = buf.ptr
                        bufs[decl.name] = buf
                    if src.on_device:
                        keep.append(src.data)
                    off = copy_in(rt, src, ptrs[decl.name], slot.array, slot.ptr, off)
                for b in program.buffers:
                    if b.access is Access.OUTPUT and b.name not in ptrs:
                        buf = rt.transient.acquire(counts[b.name] * b.dtype.size)
                        lent.append(buf)
                        ptrs[b.name] = buf.ptr
                        bufs[b.name] = buf
                zero = tuple((ptrs[b.name], counts[b.name] * b.dtype.size) for b in prep.zero_fills(grid, counts))
                plan = prep.plan
                self.programs.update_plan(plan, prep, counts, grid, None, config)
                plan.bind([ptrs[b.name] for b in prep.bound], plan.params.ptr)
                timing = None
                if timed:
                    import cupy

                    timing = (cupy.cuda.Event(), cupy.cuda.Event())
                    timing[0].record(rt.stream)
                rt.run(plan, zero, prep.name)
                if timing is not None:
                    timing[1].record(rt.stream)
                outputs = []
                held = {name: buf for name, buf in bufs.items() if name in chunked}
                if not on_device:
                    for b in program.outputs:
                        nbytes = counts[b.name] * b.dtype.size
                        if b.name in held:  # copied out by _collect, after the wait
                            outputs.append((b, -1, counts[b.name]))
                            continue
                        outputs.append((b, off, counts[b.name]))
                        off = copy_out(rt, ptrs[b.name], nbytes, slot.ptr, off)
                slot.fence(rt.stream)
        except BaseException:
            held = {}
            if not slot.pending:  # copies may be queued from the slot: keep it busy until they ran
                try:
                    slot.fence(rt.stream)
                except Exception:  # noqa: BLE001, S110 - the original error matters more
                    pass
            raise
        finally:  # stream order keeps reuse safe even before the copies ran
            rt.transient.recycle([buf for buf in lent if all(buf is not h for h in held.values())])
        rt.telemetry.add("cuda_dispatches")
        device_outputs = [dev_out[b.name] for b in program.outputs] if on_device else None
        return _Run(prep, slot, outputs, keep, held, timing, device_outputs)

    def _collect(self, run: _Run) -> list[Any]:
        """The outputs after the dispatch's event completed: typed host copies (large ones pipelined
        from their device buffers through the chunk ring), or the device arrays."""
        run.keep.clear()
        if run.device_outputs is not None:
            return run.device_outputs
        out = []
        for decl, off, count in run.outputs:
            nbytes = count * decl.dtype.size
            if off < 0:
                host = self.runtime.staging.empty(count, decl.dtype.np_dtype)
                with cuda_errors(f"copying output {decl.name!r} of program {run.prepared.name} to the host"):
                    self.runtime.staging.download_into(host, run.held[decl.name].ptr)
                out.append(host)
            else:
                out.append(run.slot.array[off:off + nbytes].view(decl.dtype.np_dtype).copy())
        return out

    def _release(self, run: _Run) -> None:
        """Give back the device buffers of large outputs (stream order makes it safe at any point)."""
        held, run.held = run.held, {}
        if held:
            self.runtime.transient.recycle(list(held.values()))

    def close(self, wait: bool = True) -> None:
        """Stop the worker thread of ``dispatch_async`` (after its pending waits when ``wait``)."""
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.shutdown(wait=wait)


def _output_place(config: DispatchConfig | None) -> str:
    place = getattr(config, "outputs", "auto") if config is not None else "auto"
    if place not in OUTPUT_PLACES:
        raise InvalidProgram(f"DispatchConfig(outputs={place!r}) is not one of {OUTPUT_PLACES}",
                             "pass outputs='auto' (results follow the inputs), 'host' (numpy results) or "
                             "'device' (device arrays).")
    return "device" if place == "device" else "host"  # "auto": host or mixed inputs (inplace takes the rest)


def _device_outputs(program: Program, counts: dict[str, int], device_id: int) -> dict[str, Any]:
    """A new CuPy array (owning its memory) per written buffer, for ``outputs="device"``."""
    import cupy

    with cupy.cuda.Device(device_id):
        return {b.name: cupy.empty(counts[b.name], b.dtype.np_dtype) for b in program.outputs}

