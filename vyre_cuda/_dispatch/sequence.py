"""Resident work on one stream with one synchronisation: sequences, repeats and fixed points (docs/resident.md).

- ``run_sequence(backend, steps, reads)``: steps of ``(program, handles[, config])`` enqueued on the
  backend stream, then the ``reads`` (``(handle, offset, nbytes)``) copied back, one sync.
- ``run_repeated(backend, prefix, repeated, count, reads)``: ``prefix`` once, ``repeated`` ``count``
  times. With graphs on, the repeated body is captured unrolled in power-of-two chunks (at most
  ``UNROLL_LAUNCHES`` launches per graph) and ``count`` is replayed as a sum of those chunks.
- ``run_until(backend, steps, flag_handle, max_iterations)``: a fixed-point loop. Each iteration
  starts with the flag word clear and runs ``steps``. Where the driver supports conditional graph
  nodes (``_runtime.conditional``), the whole loop is one launch of a graph whose WHILE node has
  the iteration as its body; a one-thread kernel at the end of each iteration counts it and keeps
  looping (clearing the flag) while the flag is set and the cap is not reached; one readback of
  the count and the flag follows. Otherwise (``VYRE_CUDA_CONDITIONAL=0``, graphs off, an older driver, a body
  the driver refuses), each iteration copies the flag into a per-iteration slot of a small device
  array; iterations run in batches of 1, 2, 4 ... ``MAX_BATCH`` with one small readback per batch,
  which tells exactly the first iteration whose flag stayed zero. Both give the same count.
- ``compile_sequence(backend, steps)``: a ``CompiledSequence`` whose ``launch()`` is one graph replay.

``SequenceDispatcher`` (one per backend, released by ``close``) owns everything these keep: step
bindings, the graph cache (conditional loop graphs included), the staging area, the flag slots,
the loop control block and the recently used *bodies*. A
body is a list of steps bound once, with its graph key and pinned buffers; a later call whose
steps compare equal (same program, handle and config objects, checked in one C-level list
comparison) reuses it, so a repeated call costs one lookup plus a graph replay, whatever the
number of steps. Freeing a handle of a body retires it (the pool's ``generation`` moved and one of
its buffers is ``retired``).

Each step becomes a ``ResidentBinding`` (own plan and parameter block, buffers pinned), cached
per backend; with graphs on (``VYRE_CUDA_GRAPHS``, default 1) bodies are captured once in the
backend's ``GraphCache`` and replayed. A binding fixes its kernel variant (coarsened along x or
not, ``backend.for_grid``) when it is made, and its ``key`` names the factor, so graph keys built
from binding keys never mix variants. Everything runs under the runtime's lock.

While recording a graph on sm_90+, a step launched right after another kernel (no zero fill in
between) is a programmatic launch (``LaunchPlan.launch_programmatic``): it starts and reads its
parameter block while the previous step runs, then waits for it (``griddepcontrol.wait``) before
touching any buffer. ``VYRE_CUDA_PDL=0`` records plain launches (applies to new captures).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vyre.driver.backend import Resident
from vyre.driver.errors import DispatchFailed, InvalidHandle
from vyre.driver.resident_args import (
    check_byte_range,
    check_flag,
    check_max_iterations,
    check_repeat_count,
    unpack_read,
    unpack_step,
)
from vyre_cuda._codegen.snippets import CONDITION_ENTRY, condition_ptx
from vyre_cuda._dispatch.context import DeviceContext
from vyre_cuda._dispatch.graphs import CapturedGraph, GraphCache, graphs_enabled
from vyre_cuda._dispatch.pipeline import ResidentBinding
from vyre_cuda._dispatch.readout import Readout
from vyre_cuda._dispatch.staging import aligned
from vyre_cuda._runtime import conditional, settings
from vyre_cuda._runtime.arrays import array_pointer
from vyre_cuda._runtime.errors import cuda_errors
from vyre_cuda._runtime.launch import LaunchPlan, ParamBlock, programmatic_launches, record_launch
from vyre_cuda._runtime.pools import D2D, D2H, H2D, StagingSlot
from vyre_cuda._runtime.profiler import nvtx_range

MAX_BATCH = 64  # iterations of run_until per readback
UNROLL_LAUNCHES = 256  # launches in one captured chunk of a repeated body
BINDINGS_CAP = 1024
GRAPHS_CAP = 128
BODIES_CAP = 32  # recently used step lists kept bound (several per list over alternating caller arrays)
SIGHTINGS_CAP = 256  # graph keys over caller arrays remembered (captured when met again)


@dataclass(eq=False)
class Body:
    """A list of steps bound once: what a repeated call with equal steps reuses."""

    steps: Sequence  # a copy of the steps as given (containers copied), compared with ``==``
    bindings: tuple[ResidentBinding, ...]
    key: tuple  # the binding keys (graph keys are made from them)
    pins: tuple  # unique device buffers a captured graph of the body points at
    buffers: tuple  # unique resident buffers of the steps (a retired one kills the body)
    generation: int  # ResidentPool.generation when the body was last seen live
    borrowed: tuple = ()  # (buffer, ptr, nbytes) of the caller's arrays bound when the body was made
    # (chunk, overlap) -> CapturedGraph, replayed while alive; ("while", flag ptr, overlap) -> the
    # conditional loop graph, or None when the driver refused it
    graphs: dict = field(default_factory=dict)


def snapshot(steps: Sequence) -> Sequence:
    """A copy of ``steps`` with each step and handle list copied, so in-place edits are noticed."""
    copied = [type(s)((s[0], type(s[1])(s[1]), *s[2:])) if isinstance(s, (tuple, list)) and len(s) >= 2
              and isinstance(s[1], (tuple, list)) else s for s in steps]
    return copied if isinstance(steps, list) else tuple(copied)


class SequenceDispatcher:
    """Sequences, repeats and fixed points of one backend (see the module docstring)."""

    def __init__(self, backend: DeviceContext) -> None:
        self.backend = backend  # its prepared / resident_layout / for_grid / plan_for / close_plan
        self.runtime = backend.runtime
        telemetry = self.runtime.telemetry
        self.graphs = GraphCache(telemetry.add, GRAPHS_CAP, telemetry.bump)
        self.bindings: OrderedDict[tuple, ResidentBinding] = OrderedDict()
        self.bodies: list[Body] = []  # most recently used first
        self.stage = StagingSlot()
        self.flag_slots: Any = None  # DeviceBuffer of MAX_BATCH u32 words
        self.control: ParamBlock | None = None  # the loop control words of conditional graphs
        self.conditional_off: str | None = None  # set when the condition kernel cannot load
        self.sightings: OrderedDict[tuple, None] = OrderedDict()  # graph keys over caller arrays run once
        self.last_stream: Any = None  # the stream the last sequence ran on (``order``; never used again
        # unless ``_lasting``: a caller's own stream may be destroyed after its call)
        self.finished: Any = None  # an event recorded after the last call on a caller's stream
        self.unsettled: Any = None  # the caller's stream of the last call, until the backend's stream waits for it
        self.runtime.heap.on_reuse = self.settle  # a block handed out again may still be read there
        self.written: dict[int, tuple[Any, bytes]] = {}  # id(buffer) -> (buffer, bytes) last written by ``write``
        self.watches = Watches(self.runtime)
        telemetry.add("cuda_conditional_loops", 0)  # listed in metrics() from the start

    # ---- binding -----------------------------------------------------------------------------------
    def bind(self, step: object) -> ResidentBinding:
        """The binding of one ``(program, handles[, config])`` step (made once, then reused)."""
        program, handles, config = unpack_step(step)
        key = (id(program), id(config), *map(id, handles))
        binding = self.bindings.get(key)
        if binding is not None and binding.matches(program, handles, config):
            if not binding.moved() or binding.repoint():
                self.bindings.move_to_end(key)
                return binding
        self.prune()
        binding = ResidentBinding(self.backend, program, handles, config)
        old = self.bindings.pop(key, None)
        if old is not None:
            self.retire(old)
        self.bindings[key] = binding
        while len(self.bindings) > BINDINGS_CAP:
            self.retire(self.bindings.popitem(last=False)[1])
        return binding

    def retire(self, binding: ResidentBinding) -> None:
        """Close ``binding`` after dropping the graphs and bodies that use it: a graph replayed after
        its binding gave the parameter block back would read another plan's words."""
        self.graphs.evict_if(lambda _, entry: any(b is binding for b in entry.keepalive))
        self.bodies = [body for body in self.bodies if not any(b is binding for b in body.bindings)]
        binding.close(self.backend)

    def body(self, steps: Sequence[object]) -> Body:
        """The bound body of ``steps``: a recent one whose steps compare equal and are all live, else new."""
        generation = self.runtime.resident.generation
        for i, body in enumerate(self.bodies):
            if body.steps == steps:
                if body.borrowed and any(buf.ptr != ptr or buf.nbytes != n for buf, ptr, n in body.borrowed):
                    continue  # bound to other arrays of the caller's: a body for these may follow
                if body.generation != generation:
                    if any(buf.retired for buf in body.buffers):
                        del self.bodies[i]
                        break
                    body.generation = generation
                if i:
                    self.bodies.insert(0, self.bodies.pop(i))
                return body
        bindings = tuple(self.bind(s) for s in steps)
        buffers = tuple({id(buf): buf for b in bindings for buf in b.buffers}.values())
        body = Body(snapshot(steps), bindings, tuple(b.key for b in bindings), pins(bindings), buffers, generation,
                    tuple((buf, buf.ptr, buf.nbytes) for buf in buffers if buf.borrowed))
        self.bodies.insert(0, body)
        del self.bodies[BODIES_CAP:]
        return body

    def prune(self) -> None:
        """Drop bodies, bindings and graphs that use a freed handle (their memory then returns to the heap)."""
        self.bodies = [b for b in self.bodies if not any(buf.retired for buf in b.buffers)]
        self.graphs.evict_if(lambda _, entry: not all(b.live() for b in entry.keepalive))
        for key in [k for k, b in self.bindings.items() if not b.live()]:
            self.bindings.pop(key).close(self.backend)

    def flags(self) -> Any:
        """The device buffer of per-iteration flag words used by ``dispatch_until``."""
        if self.flag_slots is None:
            self.flag_slots = self.runtime.transient.acquire(MAX_BATCH * 4)
        return self.flag_slots

    def control_block(self) -> ParamBlock:
        """The two control words of conditional loops: iterations run, then the cap."""
        if self.control is None:
            self.control = self.runtime.param_block(conditional.CONTROL_WORDS)
        return self.control

    def open(self) -> None:
        self.runtime.check_open()
        self.runtime.use_device()

    # ---- running bodies ----------------------------------------------------------------------------
    def run_body(self, body: Body | Sequence[ResidentBinding], count: int = 1, stream: Any = None) -> None:
        """Enqueue the body ``count`` times on ``stream`` (default: the backend's): replayed graphs
        when graphs are on, else eager launches.

        A body over the caller's arrays is captured the second time its pointers are seen (on the
        backend's stream, then replayed on ``stream``); the first time it launches eagerly, so
        arrays that change every call never pay for a capture."""
        if isinstance(body, Body):
            bindings, key, pinned, captured = body.bindings, body.key, body.pins, body.graphs
            borrowed = bool(body.borrowed)
        else:
            bindings = tuple(body)
            key, pinned, captured, borrowed = tuple(b.key for b in bindings), pins(bindings), {}, False
        if not bindings or count <= 0:
            return
        rt = self.runtime
        stream = rt.stream if stream is None else stream
        if not graphs_enabled(rt):
            if borrowed:
                _point(bindings)
            for _ in range(count):
                for b in bindings:
                    b.enqueue(stream.ptr)
            return
        overlap = programmatic_launches(rt.info.compute_capability)
        for chunk in _chunks(count, _unroll(count, len(bindings))):
            entry = captured.get((chunk, overlap))
            if entry is not None and entry.alive:  # the body's own graph: no key to hash or compare
                self.graphs.replay(entry, stream)
                continue

            def record(stream_ptr: int, chunk: int = chunk) -> None:
                after_kernel = False
                for _ in range(chunk):
                    for b in bindings:
                        after_kernel = b.enqueue(stream_ptr, True, after_kernel, overlap)

            graph_key = body_key(key, chunk, overlap)
            if borrowed:  # bodies over other arrays share these bindings: point them at this body's
                _point(bindings)
            if borrowed and self.graphs.lookup(graph_key) is None and not self._seen(graph_key):
                for _ in range(chunk):
                    for b in bindings:
                        b.enqueue(stream.ptr)
                continue
            with cuda_errors("running a captured sequence"):
                entry = self.graphs.run(graph_key, stream, record, pinned, bindings,
                                        None if stream is rt.stream else rt.stream)
            captured[(chunk, overlap)] = entry

    def _seen(self, key: tuple) -> bool:
        """Whether ``key`` was met before (remembering it now): graphs over caller arrays are captured
        on the second sight."""
        if key in self.sightings:
            return True
        self.sightings[key] = None
        while len(self.sightings) > SIGHTINGS_CAP:
            self.sightings.popitem(last=False)
        return False

    def _until_batch(self, body: Body, flag: Any, slots: Any, n: int) -> None:
        """Enqueue ``n`` iterations: clear the flag, run the steps, copy the flag to slot ``i``."""
        rt = self.runtime
        cuda, bindings = rt.cuda, body.bindings
        overlap = programmatic_launches(rt.info.compute_capability)

        def record(stream_ptr: int) -> None:
            for i in range(n):
                cuda.memsetAsync(flag.ptr, 0, 4, stream_ptr)
                after_kernel = False
                for b in bindings:
                    after_kernel = b.enqueue(stream_ptr, True, after_kernel, overlap)
                cuda.memcpyAsync(slots.ptr + 4 * i, flag.ptr, 4, D2D, stream_ptr)

        if graphs_enabled(rt):
            key = ("until", body.key, flag.ptr, slots.ptr, n, overlap)
            with cuda_errors("running a captured dispatch_until batch"):
                self.graphs.run(key, rt.stream, record, (*body.pins, flag, slots), bindings)
            return
        for i in range(n):
            with cuda_errors("clearing the dispatch_until flag"):
                cuda.memsetAsync(flag.ptr, 0, 4, rt.stream_ptr)
            for b in bindings:
                b.enqueue()
            with cuda_errors("recording the dispatch_until flag"):
                cuda.memcpyAsync(slots.ptr + 4 * i, flag.ptr, 4, D2D, rt.stream_ptr)

    # ---- fixed points in a conditional graph node ------------------------------------------------------
    def conditional_reason(self) -> str | None:
        """Why ``dispatch_until`` reads its flag back per batch now (None: it loops on the device)."""
        rt = self.runtime
        return self.conditional_off or conditional.unavailable_reason(
            settings.conditional(), graphs_enabled(rt), rt.info.driver_version, conditional.missing_entry_points())

    def while_graph(self, body: Body, flag: Any) -> CapturedGraph | None:
        """The conditional graph looping ``body`` with ``flag`` (built once per body and flag), or None.

        With programmatic launches on, a body the driver refuses is built again with plain launches;
        a body it refuses either way is remembered and takes the batched path.
        """
        if self.conditional_reason() is not None:
            return None
        rt = self.runtime
        overlap = programmatic_launches(rt.info.compute_capability)
        for mode in dict.fromkeys((overlap, False)):
            slot = ("while", flag.ptr, mode)
            entry = body.graphs.get(slot)
            if entry is not None and entry.alive:
                return entry
            if slot in body.graphs and entry is None:
                continue  # refused before
            try:
                entry = self._build_while(body, flag, mode)
            except Exception:  # noqa: BLE001 - the batched path runs instead (and raises a real fault)
                rt.telemetry.add("cuda_graph_capture_failures")
                body.graphs[slot] = None
                continue
            body.graphs[slot] = entry
            return entry
        return None

    def _build_while(self, body: Body, flag: Any, overlap: bool) -> CapturedGraph:
        """Build, cache and pin the WHILE graph of ``body`` (see ``_runtime.conditional``)."""
        rt = self.runtime
        control = self.control_block()
        key = ("while", body.key, flag.ptr, control.ptr, overlap)
        entry = self.graphs.lookup(key)
        if entry is not None:
            return entry
        try:
            kernel = rt.modules.load_snippet(condition_ptx, CONDITION_ENTRY)
        except Exception as exc:
            self.conditional_off = f"the loop condition kernel did not load ({exc})"
            raise
        memset, bindings = rt.memset, body.bindings
        condition = LaunchPlan(kernel.ptr, (1, 1, 1), (1, 1, 1), 0, 3, CONDITION_ENTRY)

        def record(stream_ptr: int, handle: int) -> None:  # the flag is clear: by the host or the last condition
            after_kernel = False
            for b in bindings:
                after_kernel = b.enqueue(stream_ptr, True, after_kernel, overlap)
            condition.bind_values((flag.ptr, control.ptr, handle))
            record_launch(memset, condition, (), stream_ptr, after_kernel, overlap)

        graph = conditional.WhileGraph(rt.stream_ptr, record)
        return self.graphs.insert(key, graph, None, (*body.pins, flag, control.buffer), bindings, graph.close)

    def _until_on_device(self, entry: CapturedGraph, flag: Any, max_iterations: int) -> int:
        """Run the loop graph (cap: ``max_iterations``, in u32-sized parts); the iterations it took."""
        done = 0
        while done < max_iterations:
            cap = min(max_iterations - done, conditional.CAP_LIMIT)
            control = self.replay_loop(entry, flag, cap)
            count, word = (int(a.view(np.uint32)[0]) for a in
                           self.read_back([(control.ptr, 4), (flag.ptr, 4)], "dispatch_until"))
            if word == 0:
                return done + count
            if count != cap:
                raise DispatchFailed("conditional", f"the conditional loop stopped after {count} of {cap} "
                                     "iterations with its flag still set",
                                     "set VYRE_CUDA_CONDITIONAL=0 (the batched loop) and report the driver version.")
            done += cap
        return max_iterations

    def replay_loop(self, entry: CapturedGraph, flag: Any, cap: int) -> Any:
        """Enqueue one run of the loop graph on the backend's stream: at most ``cap`` iterations, the
        flag cleared first; returns the control block (word 0 counts the iterations)."""
        rt, control = self.runtime, self.control_block()
        loop = entry.graph
        if isinstance(loop, conditional.WhileGraph) and loop.in_flight():
            rt.wait(loop.finished, None, "the previous run of a dispatch_until loop")  # never two runs in flight
        control.invalidate()  # the kernel counted in word 0 since the last write
        control.write((0, cap), rt.stream)
        with cuda_errors("clearing the dispatch_until flag"):
            rt.cuda.memsetAsync(flag.ptr, 0, 4, rt.stream_ptr)
        self.graphs.replay(entry, rt.stream)
        rt.telemetry.add("cuda_conditional_loops")
        return control

    # ---- reading back --------------------------------------------------------------------------------
    def read_ranges(self, reads: Sequence[tuple]) -> list[tuple[int, int]]:
        """``(device pointer, nbytes)`` of each read, checked before any work is enqueued."""
        out = []
        for read in reads:
            handle, offset, nbytes = unpack_read(read)
            buf = self.runtime.resident.resolve(handle)
            check_byte_range(handle, offset, nbytes, "read range")
            out.append((buf.ptr + offset, nbytes))
        return out

    def read_back(self, ranges: Sequence[tuple[int, int]], what: str, stream: Any = None) -> list[np.ndarray]:
        """Copy ``ranges`` to the host after everything enqueued so far on ``stream`` (default: the
        backend's): the one synchronisation."""
        rt, stage = self.runtime, self.stage
        stream = rt.stream if stream is None else stream
        array = stage.ready(sum(aligned(n) for _, n in ranges), lambda: rt.telemetry.add("cuda_sync_points"))
        places = []
        off = 0
        try:
            with cuda_errors(f"reading back the results of {what}"):
                for ptr, nbytes in ranges:
                    if nbytes:
                        rt.cuda.memcpyAsync(stage.ptr + off, ptr, nbytes, D2H, stream.ptr)
                    places.append((off, nbytes))
                    off += aligned(nbytes)
        finally:
            with cuda_errors("fencing the staging area"):
                stage.fence(stream)
        rt.telemetry.add("cuda_d2h_bytes", sum(n for _, n in ranges))
        rt.wait(stage.event, None, what)
        stage.pending = False
        return [array[o:o + n].copy() for o, n in places]

    # ---- streams other than the backend's -----------------------------------------------------------
    def order(self, stream: Any) -> None:
        """Order ``stream`` after the stream the last sequence ran on (an event, no host wait), so
        work on several streams never overlaps on the scratch buffers they share. A caller's stream
        is never touched after its call (it may be destroyed): its work is marked by ``finish``.

        A caller's stream also waits for work still queued on the backend's stream outside
        sequences: a new binding's parameter words, zero fills and uploads into scratch go there,
        and the backend's stream is non-blocking, so nothing else orders the call's kernels after
        them (one ``cudaStreamQuery`` when that stream is idle)."""
        rt = self.runtime
        last = self.last_stream
        after_backend = False  # ``stream`` waits for the backend's stream already
        if last is not None and last.ptr != stream.ptr:
            with cuda_errors("ordering the caller's stream after earlier work"):
                stream.wait_event(last.record() if _lasting(last, rt) else self.finished)
            after_backend = last.ptr == rt.stream.ptr
        if stream.ptr == rt.stream.ptr:
            self.unsettled = None  # the backend's stream waited above, or the last call ran on it
        elif not after_backend:
            with cuda_errors("ordering the caller's stream after the backend's"):
                if not rt.stream.done:
                    stream.wait_event(rt.stream.record())
        self.last_stream = stream

    def finish(self, stream: Any) -> None:
        """Mark the end of a call's work on a caller's ``stream`` (what ``order`` waits for next);
        streams that live as long as the process (the backend's, the default streams) need no mark.
        Work on a caller's stream leaves the backend's stream unordered after it (``settle``)."""
        if not _lasting(stream, self.runtime):
            if self.finished is None:
                import cupy

                self.finished = cupy.cuda.Event(block=False, disable_timing=True)
            with cuda_errors("marking the end of the call's work"):
                self.finished.record(stream)
        if stream.ptr != self.runtime.stream.ptr:
            self.unsettled = stream

    def settle(self) -> None:
        """Order the backend's stream after the last call's work on a caller's stream, if it is not
        yet. The device heap calls this before it hands out a block again (``DeviceHeap.on_reuse``):
        that work may still read the block (a parameter block of a binding closed since, scratch
        released), and its new owner may write it on the backend's stream at once."""
        stream, self.unsettled = self.unsettled, None
        rt = self.runtime
        if stream is None or rt.stream is None:
            return
        with cuda_errors("ordering the backend's stream after the caller's work"):
            rt.stream.wait_event(stream.record() if _lasting(stream, rt) else self.finished)

    def write(self, writes: Sequence[tuple[Resident, np.ndarray]], stream: Any) -> None:
        """Enqueue host words into resident buffers on ``stream`` (through the pinned ring), skipping
        a write to a backend-owned buffer whose bytes equal the last ones written to it here."""
        self.write_packed(pack_writes(writes), stream)

    def write_packed(self, writes: Sequence[tuple[Resident, bytes, np.ndarray]], stream: Any) -> None:
        """``write`` of writes already packed by ``pack_writes`` (a compiled call packs its words once)."""
        rt = self.runtime
        for handle, raw, data in writes:
            buf = rt.resident.resolve(handle)
            owned = not buf.borrowed  # only words nobody else writes (parameter blocks) may be skipped
            last = self.written.get(id(buf)) if owned else None
            if last is not None and last[0] is buf and (last[1] is raw or last[1] == raw):
                continue  # these bytes went into this very buffer before: checked then
            check_byte_range(handle, 0, len(raw), "write")
            if owned:
                self.written[id(buf)] = (buf, raw)
            host = rt.ring.put(data, stream)
            with cuda_errors("writing parameter words"):
                rt.cuda.memcpyAsync(buf.ptr, host, len(raw), H2D, stream.ptr)

    def enqueue_sequence(self, steps: Sequence[object], *, stream: Any = None,
                         writes: Sequence[tuple[Resident, np.ndarray]] = (),
                         reads: Sequence[tuple] = (),
                         watch: Sequence[tuple[Resident, int, Callable[[int], Exception]]] = ()) -> list[np.ndarray]:
        """``writes`` then ``steps`` on ``stream`` (a CuPy stream object; default the backend's),
        ordered after earlier sequences on other streams. No ``reads``: returns ``[]`` at once, with
        no host wait. With ``reads``: waits for ``stream`` and returns them (one synchronisation).

        ``watch``: ``(handle, byte offset, fail)`` status words checked without waiting
        (``Watches``): a non-zero word raises ``fail(word)`` from this or a later call."""
        with self.runtime.lock, nvtx_range("vyre.cuda.sequence"):
            self.open()
            self.watches.poll()
            stream = self.runtime.stream if stream is None else stream
            return self.enqueue_body(self.body(steps) if steps else None, stream, writes, reads, watch)

    def enqueue_body(self, body: Body | Sequence[ResidentBinding] | None, stream: Any,
                     writes: Sequence[tuple[Resident, np.ndarray]] = (), reads: Sequence[tuple] = (),
                     watch: Sequence[tuple[Resident, int, Callable[[int], Exception]]] = ()) -> list[np.ndarray]:
        """The part of ``enqueue_sequence`` after the body is bound (``CallerSequence`` binds its own):
        order, parameter writes, the body (bare bindings: launched eagerly, nothing captured),
        watched words, the end mark, and the reads if any."""
        ranges = self.read_ranges(reads)
        watched = self.watched(watch)
        self.order(stream)
        self.write(writes, stream)
        if isinstance(body, Body):
            self.run_body(body, 1, stream)
        elif body is not None:
            for b in body:
                b.enqueue(stream.ptr)
        return self.end_call(stream, watched, ranges)

    def watched(self, watch: Sequence[tuple[Resident, int, Callable[[int], Exception]]]
                ) -> list[tuple[int, Callable[[int], Exception]]]:
        """``(device address, fail)`` of each watched word ``(handle, byte offset, fail)``."""
        return [(self.runtime.resident.resolve(h).ptr + off, fail) for h, off, fail in watch]

    def end_call(self, stream: Any, watched: Sequence[tuple[int, Callable[[int], Exception]]],
                 ranges: Sequence[tuple[int, int]]) -> list[np.ndarray]:
        """The end of a library call's work on ``stream``: copy the watched words, mark the end
        (``finish``), and read ``ranges`` back if any (the one wait, then the watched words' check)."""
        for ptr, fail in watched:
            self.watches.add(ptr, fail, stream)
        self.finish(stream)
        if not ranges:
            return []
        out = self.read_back(ranges, "a library call", stream)
        self.watches.poll()
        return out

    # ---- the backend entry points ------------------------------------------------------------------
    def dispatch_sequence(self, steps: Sequence[object], reads: Sequence[tuple] = ()) -> list[np.ndarray]:
        """Run ``steps`` on the backend stream, then read ``reads`` back; one synchronisation."""
        return self.dispatch_repeated(steps, (), 0, reads)

    def dispatch_repeated(self, prefix: Sequence[object], repeated: Sequence[object], count: int,
                          reads: Sequence[tuple] = ()) -> list[np.ndarray]:
        """Run ``prefix`` once and ``repeated`` ``count`` times, then read ``reads`` back; one sync."""
        check_repeat_count(count)
        with self.runtime.lock, nvtx_range("vyre.cuda.sequence"):
            self.open()
            head = self.body(prefix) if prefix else None
            body = self.body(repeated) if count and repeated else None
            ranges = self.read_ranges(reads)
            self.order(self.runtime.stream)
            if head is not None:
                self.run_body(head)
            if body is not None:
                self.run_body(body, count)
            return self.read_back(ranges, "dispatch_sequence")

    def dispatch_until(self, steps: Sequence[object], flag_handle: Resident, max_iterations: int) -> int:
        """Repeat ``steps`` until the flag's first u32 word stays zero; the iterations that took (<= max)."""
        with self.runtime.lock, nvtx_range("vyre.cuda.sequence"):
            body, flag, entry = self._loop(steps, flag_handle, max_iterations)
            if max_iterations == 0:
                return 0
            if entry is not None:
                return self._until_on_device(entry, flag, max_iterations)
            slots = self.flags()
            done, batch = 0, 1
            while done < max_iterations:
                n = min(batch, max_iterations - done)
                self._until_batch(body, flag, slots, n)
                words = self.read_back([(slots.ptr, 4 * n)], "dispatch_until")[0].view(np.uint32)
                settled = np.flatnonzero(words == 0)
                if settled.size:
                    return done + int(settled[0]) + 1
                done += n
                batch = min(batch * 2, MAX_BATCH)
            return max_iterations

    def enqueue_until(self, steps: Sequence[object], flag_handle: Resident, max_iterations: int) -> None:
        """``dispatch_until`` with no host wait: the loop graph (conditional WHILE nodes) is enqueued on
        the backend's stream and its iteration count is not read. Without conditional graphs, or past
        one graph's cap (``conditional.CAP_LIMIT`` iterations), it is ``dispatch_until`` (it waits)."""
        with self.runtime.lock, nvtx_range("vyre.cuda.sequence"):
            _, flag, entry = self._loop(steps, flag_handle, max_iterations)
            if max_iterations == 0:
                return
            if entry is not None and max_iterations <= conditional.CAP_LIMIT:
                self.replay_loop(entry, flag, max_iterations)
                return
        self.dispatch_until(steps, flag_handle, max_iterations)

    def _loop(self, steps: Sequence[object], flag_handle: Resident, max_iterations: int
              ) -> tuple[Body, Any, CapturedGraph | None]:
        """The checked loop of ``dispatch_until``/``enqueue_until``, ordered on the backend's stream:
        its body, the flag's buffer and its conditional graph (None: the batched path)."""
        check_max_iterations(max_iterations)
        self.open()
        body = self.body(steps)
        flag = self.runtime.resident.resolve(flag_handle)
        check_flag(flag_handle)
        self.order(self.runtime.stream)
        return body, flag, self.while_graph(body, flag) if max_iterations else None

    def close(self) -> None:
        """Drop every body, graph (conditional loop graphs freed) and binding; give the flag slots
        and the control block back.

        Apart from the graphs' own destructors it makes no CUDA call, only pool bookkeeping, so it
        also serves for forgetting a lost device (inside ``errors.quiet_teardown``)."""
        self.bodies.clear()
        self.graphs.clear()
        self.sightings.clear()
        self.written.clear()
        self.last_stream, self.finished, self.unsettled = None, None, None
        while self.bindings:
            self.bindings.popitem(last=False)[1].close(self.backend)
        if self.flag_slots is not None:
            self.runtime.transient.recycle([self.flag_slots])
            self.flag_slots = None
        if self.control is not None:
            self.runtime.release_params(self.control)
            self.control = None


class Watches:
    """Status words of earlier sequences, copied to pinned memory in stream order and checked once
    their event has passed, so a rare failure (a look-back that gave up) costs no wait.

    ``add`` takes the next of ``SLOTS`` slots (waiting only when all are still in flight); ``poll``
    checks landed words oldest first and raises the first failure."""

    SLOTS = 64

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        self.mem: Any = None  # pinned u32 words, one per slot
        self.words = np.zeros(0, np.uint32)
        self.events: list[Any] = []
        self.queue: deque[tuple[int, Callable[[int], Exception]]] = deque()  # (slot, fail), oldest first
        self.next = 0

    def add(self, ptr: int, fail: Callable[[int], Exception], stream: Any) -> None:
        """Copy the word at device ``ptr`` after the work enqueued so far on ``stream``."""
        import cupy

        rt = self.runtime
        if self.mem is None:
            self.mem = cupy.cuda.alloc_pinned_memory(4 * self.SLOTS)
            self.words = np.frombuffer(self.mem, np.uint32, self.SLOTS)
            self.events = [cupy.cuda.Event(block=False, disable_timing=True) for _ in range(self.SLOTS)]
        if len(self.queue) == self.SLOTS:
            slot, _ = self.queue[0]
            rt.wait(self.events[slot], None, "an earlier library call's status word")
            self.poll()
        slot, self.next = self.next, (self.next + 1) % self.SLOTS
        with cuda_errors("copying a status word"):
            rt.cuda.memcpyAsync(self.mem.ptr + 4 * slot, ptr, 4, D2H, stream.ptr)
            self.events[slot].record(stream)
        self.queue.append((slot, fail))

    def poll(self) -> None:
        """Check the words that have landed, oldest first; raise the first that is not zero."""
        queue = self.queue
        while queue and self.events[queue[0][0]].done:
            slot, fail = queue.popleft()
            word = int(self.words[slot])
            if word:
                raise fail(word)


def release(backend: DeviceContext) -> None:
    """Drop what sequences keep for ``backend`` (graphs, bindings, bodies, flag slots, control block)."""
    with backend.lock:
        backend.sequences.close()


def pack_writes(writes: Sequence[tuple[Resident, np.ndarray]]) -> tuple[tuple[Resident, bytes, np.ndarray], ...]:
    """``(handle, bytes, u32 words)`` of each write: the bytes compared with the last ones written,
    the words (padded to whole u32s) copied."""
    packed = []
    for handle, words in writes:
        raw = np.ascontiguousarray(words).tobytes()
        packed.append((handle, raw, np.frombuffer(raw + b"\0" * (-len(raw) % 4), np.uint32)))
    return tuple(packed)


def _lasting(stream: Any, runtime: Any) -> bool:
    """The backend's stream or a default stream (legacy, per-thread): never destroyed."""
    return stream is runtime.stream or stream.ptr in (0, 1, 2)


def _point(bindings: Iterable[ResidentBinding]) -> None:
    """Point bindings shared with bodies over other caller arrays at their buffers' pointers now."""
    for b in bindings:
        if b.moved() and not b.repoint():
            raise DispatchFailed("binding", "a step's buffer changed size under its sequence body",
                                 "report this as a vyre bug; meanwhile call vyre.lib.release_scratch().")


def pins(bindings: Iterable[ResidentBinding], *extra: Any) -> tuple:
    """Unique device buffers of ``bindings`` plus ``extra`` (what a captured graph points at)."""
    seen: dict[int, Any] = {}
    for b in bindings:
        for buf in b.device_buffers():
            seen.setdefault(id(buf), buf)
    for buf in extra:
        seen.setdefault(id(buf), buf)
    return tuple(seen.values())


def _chunks(count: int, unroll: int) -> Iterator[int]:
    """``count`` as ``unroll``-sized chunks, then the powers of two of the remainder (largest first)."""
    whole, rest = divmod(count, unroll)
    yield from (unroll,) * whole
    bit = unroll >> 1
    while bit:
        if rest & bit:
            yield bit
        bit >>= 1


def _unroll(count: int, per_body: int) -> int:
    """Largest power of two ``u`` with ``u <= count`` and ``u * per_body <= UNROLL_LAUNCHES`` (>= 1)."""
    limit = max(1, min(count, UNROLL_LAUNCHES // max(1, per_body)))
    return 1 << (limit.bit_length() - 1)


def body_key(body: tuple, chunk: int, overlap: bool) -> tuple:
    """The graph key of ``chunk`` repeats of the steps whose binding keys are ``body``."""
    return ("body", body, chunk, overlap)


class CompiledSequence:
    """Steps bound and (with graphs on) captured once: ``launch()`` is one graph replay."""

    def __init__(self, backend: DeviceContext, steps: Sequence[object]) -> None:
        self.backend = backend
        self.runtime = backend.runtime
        self.sequences: SequenceDispatcher = backend.sequences
        self.bindings: tuple[ResidentBinding, ...] = ()
        with self.runtime.lock:
            self.sequences.open()
            try:
                for step in steps:
                    self.bindings += (ResidentBinding(backend, *unpack_step(step)),)
            except BaseException:
                self.close()
                raise
        self.buffers = tuple({id(b): b for x in self.bindings for b in x.buffers}.values())
        self.key = tuple(b.key for b in self.bindings)
        self.entry: Any = None  # the CapturedGraph of the last launch, replayed while still cached
        self.seen = self.runtime.resident.generation

    def launch(self) -> None:
        """Enqueue the steps once (no synchronisation): a replay once captured, else eager launches."""
        rt, sequences = self.runtime, self.sequences
        with rt.lock:
            if rt.resident.generation != self.seen:  # something was freed: one of ours?
                for buf in self.buffers:
                    if buf.retired:
                        raise InvalidHandle("a handle of this compiled sequence was freed",
                                            "compile the sequence again with live handles.")
                self.seen = rt.resident.generation
            entry = self.entry
            if entry is not None and entry.alive and not rt.closed:  # captured while graphs were on
                sequences.graphs.replay(entry, rt.stream)
                return
            rt.check_open()
            sequences.run_body(self.bindings)
            if graphs_enabled(rt):
                overlap = programmatic_launches(rt.info.compute_capability)
                self.entry = sequences.graphs.lookup(body_key(self.key, 1, overlap))
            else:
                self.entry = None

    def run(self, reads: Sequence[tuple] = ()) -> list[np.ndarray]:
        """``launch()`` then read ``reads`` back: one synchronisation."""
        with self.runtime.lock:
            ranges = self.sequences.read_ranges(reads)
            self.launch()
            return self.sequences.read_back(ranges, "compiled sequence")

    def close(self) -> None:
        """Unpin the buffers and give the parameter blocks back."""
        with self.runtime.lock:
            for b in self.bindings:
                b.close(self.backend)
            self.bindings, self.buffers, self.entry = (), (), None


class CallerSequence(CompiledSequence):
    """The steps of one library call over borrowed handles (the caller's arrays), bound once.

    ``enqueue`` follows the arrays' current pointers: one sequence body per pointer set (the
    ``BODIES`` most recent), so a loop whose arrays recur replays graphs captured on the second
    sight, with no step list to compare, no plan to build and unchanged parameter words skipped.
    """

    BODIES = 8

    def __init__(self, backend: DeviceContext, steps: Sequence[object], reads: Sequence[tuple] = ()) -> None:
        self.bodies: OrderedDict[tuple, Body] = OrderedDict()
        # the words every call reads back (the one wait): whole words are copied by a last step of
        # the body into pinned host memory; others by the copy engine after it
        self.reads = tuple(reads)
        self.readout: Readout | None = None
        if Readout.takes(reads):
            with backend.runtime.lock:
                self.readout = Readout(backend.runtime, reads)
            steps = [*steps, self.readout.step]
        super().__init__(backend, steps)
        self.borrowed = tuple(b for b in self.buffers if b.borrowed)
        self.sizes = tuple(b.nbytes for b in self.borrowed)
        self.overlap = programmatic_launches(self.runtime.info.compute_capability)
        self.sightings: OrderedDict[tuple, None] = OrderedDict()  # pointer sets met once, launched eagerly
        self.last: Body | None = None  # the body the last ``enqueue`` ran (what ``replay`` runs again)

    #: the device address of a caller's array: what ``replay``'s callers compare to know the
    #: arrays are where the last call's were
    pointer = staticmethod(array_pointer)
    #: ``replay``'s writes, packed once by the caller (``pack_writes``)
    pack = staticmethod(pack_writes)

    def replay(self, stream: Any, writes: Sequence[tuple[Resident, bytes, np.ndarray]] = (),
               watch: Sequence[tuple[Resident, int, Callable[[int], Exception]]] = ()) -> list[np.ndarray] | None:
        """The last ``enqueue``'s graph replayed on ``stream`` with ``writes`` (``pack``ed), for a
        caller whose arrays are where that call's were (the caller checks with ``pointer``): no re-pointing, no
        body lookup. ``watch``: status words copied after it, as ``enqueue`` does (``Watches``).
        Returns the sequence's reads (``[]`` with no wait when it has none), or None (nothing
        enqueued) when there is no live graph of it, graphs are off, a handle was freed or
        resized, or the backend closed: ``enqueue`` instead. ``stream`` None: the backend's
        (``ResidentArray`` calls)."""
        rt, seq, body = self.runtime, self.sequences, self.last
        with rt.lock:
            if body is None or rt.closed or rt.resident.generation != self.seen or not graphs_enabled(rt):
                return None
            stream = rt.stream if stream is None else stream
            entry = body.graphs.get((1, self.overlap))
            if entry is None or not entry.alive:
                return None
            ranges = seq.read_ranges(self.reads) if self.readout is None else ()
            rt.use_device()  # open (``rt.closed`` was checked above)
            if seq.watches.queue:
                seq.watches.poll()
            seq.order(stream)
            seq.write_packed(writes, stream)
            seq.graphs.replay(entry, stream)
            out = seq.end_call(stream, seq.watched(watch), ranges)  # handles live: the graph's generation
            return self._collect(out, stream)

    def _collect(self, out: list[np.ndarray], stream: Any) -> list[np.ndarray]:
        """The call's reads: ``out`` (the copy engine's, or none), or with a readout step the
        words it stored, after the wait, then the watched words' check."""
        if self.readout is None:
            return out
        words = self.readout.collect(stream, "a library call")
        self.sequences.watches.poll()
        return words

    def enqueue(self, stream: Any, writes: Sequence[tuple[Resident, np.ndarray]] = (),
                watch: Sequence[tuple[Resident, int, Callable[[int], Exception]]] = ()) -> list[np.ndarray] | None:
        """``enqueue_sequence`` of the bound steps on ``stream`` with ``watch``; returns the
        sequence's reads (none: ``[]``, no wait), or None (nothing enqueued) when a handle was
        freed, a borrowed array changed size or the backend closed: compile again. ``stream``
        None: the backend's (``ResidentArray`` calls)."""
        rt, seq = self.runtime, self.sequences
        with rt.lock:
            if rt.closed or not self.bindings:
                return None
            stream = rt.stream if stream is None else stream
            if rt.resident.generation != self.seen:
                if any(buf.retired for buf in self.buffers) or tuple(b.nbytes for b in self.borrowed) != self.sizes:
                    return None
                self.seen = rt.resident.generation
            seq.open()
            seq.watches.poll()
            reads = self.reads if self.readout is None else ()  # else the body's last step copies them (``_collect``)
            ptrs = tuple(b.ptr for b in self.borrowed)
            body = self.bodies.get(ptrs)
            if body is None:
                _point(self.bindings)
                if ptrs not in self.sightings:  # first sight (a loop that keeps its results): eager, no body
                    self.sightings[ptrs] = None
                    while len(self.sightings) > self.BODIES:
                        self.sightings.popitem(last=False)
                    self.last = None
                    out = seq.enqueue_body(self.bindings, stream, writes, reads, watch)
                    return self._collect(out, stream)
                body = Body((), self.bindings, tuple(b.key for b in self.bindings), pins(self.bindings), self.buffers,
                            self.seen, tuple((b, b.ptr, b.nbytes) for b in self.borrowed))
                self.bodies[ptrs] = body
                while len(self.bodies) > self.BODIES:
                    self.bodies.popitem(last=False)
            self.last = None
            out = seq.enqueue_body(body, stream, writes, reads, watch)
            self.last = body
            return self._collect(out, stream)

    def close(self) -> None:
        """Drop the bindings and the graphs made from them, and the readout's handle."""
        with self.runtime.lock:
            for b in self.bindings:
                self.sequences.retire(b)
            self.bindings, self.bodies, self.last = (), OrderedDict(), None
            if self.readout is not None:
                self.readout.close()
                self.readout = None


class CompiledLoop:
    """``enqueue_sequence(prefix, writes=...)`` then ``enqueue_until(steps, flag, cap)``, looked up once.

    A search called again and again on the same buffers (``Graph.bfs``, its components) makes the same two calls
    each time; their host work (binding lookups, step comparisons, graph-key hashing, checks) came
    before the loop's first kernel could start. ``enqueue`` replays the two graphs those calls
    captured, with only the parameter words written, while both are cached, no buffer of theirs
    was freed and no caller's array moved; otherwise it makes the two calls themselves (which bind
    and capture again) and keeps what they made. No host wait either way (the loop over its cap
    or without conditional graphs waits, as ``enqueue_until`` does). It owns nothing to free.
    """

    def __init__(self, sequences: SequenceDispatcher, prefix: Sequence[object], steps: Sequence[object],
                 flag_handle: Resident, max_iterations: int) -> None:
        check_max_iterations(max_iterations)
        check_flag(flag_handle)
        self.sequences, self.runtime = sequences, sequences.runtime
        self.prefix, self.steps = snapshot(prefix), snapshot(steps)
        self.flag_handle, self.cap = flag_handle, max_iterations
        self.replays: tuple[Body, Body, Any, CapturedGraph | None, CapturedGraph] | None = None
        self.seen = -1  # ResidentPool.generation when ``replays`` was last checked

    def enqueue(self, writes: Sequence[tuple[Resident, np.ndarray]] = (), after: Any = None,
                watch: Callable[[int], Exception] | None = None) -> None:
        """Write ``writes``, run the prefix once and the loop until its flag stays zero, on the backend's
        stream after the work queued so far on stream ``after`` (None: the backend's own). ``writes``
        are words only the host writes (as ``enqueue_sequence``'s: skipped when equal to the last
        ones written to the buffer).

        ``watch``: the flag is checked after the loop without waiting (``Watches``): still set (the
        cap ended the loop), it raises ``watch(word)`` from this or a later call."""
        rt, seq = self.runtime, self.sequences
        with rt.lock, nvtx_range("vyre.cuda.sequence"):
            replays = self._replays()
            if replays is None:
                if after is not None:
                    seq.enqueue_sequence([], stream=after)
                seq.enqueue_sequence(self.prefix, writes=writes)
                seq.enqueue_until(self.steps, self.flag_handle, self.cap)
                if watch is not None:
                    seq.enqueue_sequence([], watch=[(self.flag_handle, 0, watch)])
                self._keep()
                return
            _, _, flag, head, loop = replays
            rt.use_device()
            if seq.watches.queue:
                seq.watches.poll()
            if after is not None:
                seq.order(after)
                seq.finish(after)
            seq.order(rt.stream)
            seq.write(writes, rt.stream)
            if head is not None:
                seq.graphs.replay(head, rt.stream)
            seq.replay_loop(loop, flag, self.cap)
            if watch is not None:
                seq.watches.add(flag.ptr, watch, rt.stream)

    def _replays(self) -> tuple[Body, Body, Any, CapturedGraph | None, CapturedGraph] | None:
        """What ``enqueue`` replays, or None when it must make the calls themselves."""
        rt, replays = self.runtime, self.replays
        if replays is None or rt.closed or self.sequences.conditional_reason() is not None:
            return None  # (graphs or conditional loops switched off since)
        head_body, loop_body, _, head, loop = replays
        if not (loop.alive and (head is None or head.alive)):
            return None
        for body in (head_body, loop_body):  # a caller's array re-borrowed elsewhere: the graphs point at the old one
            if any(buf.ptr != ptr or buf.nbytes != n for buf, ptr, n in body.borrowed):
                return None
        if rt.resident.generation != self.seen:
            if any(buf.retired for body in (head_body, loop_body) for buf in body.buffers):
                return None
            self.seen = rt.resident.generation
        return replays

    def _keep(self) -> None:
        """Remember the bodies and graphs the calls just made (None while one was not captured: a
        body over a caller's arrays is captured the second time they are seen)."""
        seq, rt = self.sequences, self.runtime
        self.replays = None
        if self.cap > conditional.CAP_LIMIT or seq.conditional_reason() is not None:
            return
        head_body, loop_body = seq.body(self.prefix), seq.body(self.steps)
        flag = rt.resident.resolve(self.flag_handle)
        overlap = programmatic_launches(rt.info.compute_capability)
        head = head_body.graphs.get((1, overlap)) if self.prefix else None  # no steps: nothing to replay
        loop = loop_body.graphs.get(("while", flag.ptr, overlap)) or loop_body.graphs.get(("while", flag.ptr, False))
        if loop is not None and loop.alive and (head.alive if head is not None else not self.prefix):
            self.replays = (head_body, loop_body, flag, head, loop)
            self.seen = rt.resident.generation


def compile_sequence(backend: DeviceContext, steps: Sequence[object]) -> CompiledSequence:
    """Bind ``steps`` once for repeated ``launch()``/``run()`` (see ``CompiledSequence``)."""
    return CompiledSequence(backend, steps)
