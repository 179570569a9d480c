"""Resident work on one stream with one synchronisation: sequences, repeats and fixed points (SPEC 4).

- ``run_sequence(backend, steps, reads)``: steps of ``(program, handles[, config])`` enqueued on the
  backend stream, then the ``reads`` (``(handle, offset, nbytes)``) copied back, one sync.
- ``run_repeated(backend, prefix, repeated, count, reads)``: ``prefix`` once, ``repeated`` ``count``
  times. With graphs on, the repeated body is captured unrolled in power-of-two chunks (at most
  ``UNROLL_LAUNCHES`` launches per graph) and ``count`` is replayed as a sum of those chunks.
- ``run_until(backend, steps, flag_handle, max_iterations)``: a fixed-point loop. Each iteration
  clears the flag word on the device, runs ``steps`` and copies the flag into a per-iteration
  slot of a small device array; iterations run in batches of 1, 2, 4 ... ``MAX_BATCH`` with one
  small readback per batch, which tells exactly the first iteration whose flag stayed zero.
- ``compile_sequence(backend, steps)``: a ``CompiledSequence`` whose ``launch()`` is one graph replay.

Each step becomes a ``ResidentBinding`` (own plan and parameter block, buffers pinned), cached
per backend; with graphs on (``VYRE_CUDA_GRAPHS``, default 1) bodies are captured once in the
backend's ``GraphCache`` and replayed. A binding fixes its kernel variant (coarsened along x or
not, ``backend.for_grid``) when it is made, and its ``key`` names the factor, so graph keys built
from binding keys never mix variants. Everything runs under ``backend.lock``.

While recording a graph on sm_90+, a step launched right after another kernel (no zero fill in
between) is a programmatic launch (``LaunchPlan.launch_programmatic``): it starts and reads its
parameter block while the previous step runs, then waits for it (``griddepcontrol.wait``) before
touching any buffer. ``VYRE_CUDA_PDL=0`` records plain launches (applies to new captures).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from vyre.driver.backend import Resident
from vyre.driver.errors import InvalidHandle
from vyre.driver.resident_args import (
    check_byte_range,
    check_flag,
    check_max_iterations,
    check_repeat_count,
    unpack_read,
    unpack_step,
)
from vyre_cuda.dispatch.graphs import GraphCache, graphs_enabled
from vyre_cuda.dispatch.pipeline import ResidentBinding, run_binding
from vyre_cuda.runtime.errors import cuda_errors
from vyre_cuda.runtime.launch import programmatic_launches
from vyre_cuda.runtime.pools import D2D, D2H, StagingSlot
from vyre_cuda.runtime.profiler import nvtx_range

MAX_BATCH = 64  # iterations of run_until per readback
UNROLL_LAUNCHES = 256  # launches in one captured chunk of a repeated body
BINDINGS_CAP = 1024
GRAPHS_CAP = 128
_ALIGN = 16


def _runtime() -> Any:
    from cupy.cuda import runtime

    return runtime


# ---- per-backend state -------------------------------------------------------------------------------
class SequenceState:
    """A backend's step bindings, graph cache, staging area and run_until flag slots."""

    def __init__(self, backend: Any) -> None:
        self.graphs = GraphCache(backend.telemetry.add, GRAPHS_CAP, backend.telemetry.bump)
        self.bindings: OrderedDict[tuple, ResidentBinding] = OrderedDict()
        self.stage = StagingSlot()
        self.flag_slots: Any = None  # DeviceBuffer of MAX_BATCH u32 words

    def bind(self, backend: Any, step: object) -> ResidentBinding:
        """The binding of one ``(program, handles[, config])`` step (made once, then reused)."""
        program, handles, config = unpack_step(step)
        key = (id(program), id(config), *map(id, handles))
        binding = self.bindings.get(key)
        if binding is not None and binding.matches(program, handles, config):
            self.bindings.move_to_end(key)
            return binding
        self.prune(backend)
        binding = ResidentBinding(backend, program, handles, config)
        old = self.bindings.pop(key, None)
        if old is not None:
            old.close(backend)
        self.bindings[key] = binding
        while len(self.bindings) > BINDINGS_CAP:
            self.bindings.popitem(last=False)[1].close(backend)
        return binding

    def prune(self, backend: Any) -> None:
        """Drop bindings and graphs that use a freed handle (their memory then returns to the heap)."""
        self.graphs.evict_if(lambda _, entry: not all(b.live() for b in entry.keepalive))
        for key in [k for k, b in self.bindings.items() if not b.live()]:
            self.bindings.pop(key).close(backend)

    def flags(self, backend: Any) -> Any:
        """The device array of per-iteration flag words used by ``run_until``."""
        if self.flag_slots is None:
            self.flag_slots = backend.transient.acquire(MAX_BATCH * 4)
        return self.flag_slots

    def close(self, backend: Any) -> None:
        """Drop every graph and binding and give the flag slots back."""
        self.graphs.clear()
        while self.bindings:
            self.bindings.popitem(last=False)[1].close(backend)
        if self.flag_slots is not None:
            backend.transient.recycle([self.flag_slots])
            self.flag_slots = None


_STATES: weakref.WeakKeyDictionary[Any, SequenceState] = weakref.WeakKeyDictionary()


def state_for(backend: Any) -> SequenceState:
    """The backend's ``SequenceState`` (made on first use)."""
    state = _STATES.get(backend)
    if state is None:
        state = _STATES[backend] = SequenceState(backend)
    return state


def release(backend: Any) -> None:
    """Drop what sequences keep for ``backend`` (graphs, bindings, flag slots).

    Meant for ``shutdown`` and for forgetting a lost device (inside ``quiet_teardown``): apart from
    the graphs' own destructors it makes no CUDA call, only pool bookkeeping.
    """
    with backend.lock:
        state = _STATES.pop(backend, None)
        if state is not None:
            state.close(backend)


def _open(backend: Any) -> SequenceState:
    backend._check_open()
    backend._use_device()
    return state_for(backend)


# ---- running bodies ----------------------------------------------------------------------------------
def _pins(bindings: Iterable[ResidentBinding], *extra: Any) -> tuple:
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


def run_body(backend: Any, state: SequenceState, bindings: Sequence[ResidentBinding], count: int = 1) -> None:
    """Enqueue ``bindings`` ``count`` times: replayed graphs when graphs are on, else eager launches."""
    if not bindings or count <= 0:
        return
    if not graphs_enabled(backend):
        for _ in range(count):
            for b in bindings:
                run_binding(backend, b)
        return
    body = tuple(b.key for b in bindings)
    pins = _pins(bindings)
    overlap = programmatic_launches(backend.info.compute_capability)
    for chunk in _chunks(count, _unroll(count, len(bindings))):
        def record(stream_ptr: int, chunk: int = chunk) -> None:
            after_kernel = False
            for _ in range(chunk):
                for b in bindings:
                    after_kernel = b.record(stream_ptr, after_kernel, overlap)

        with cuda_errors("running a captured sequence"):
            state.graphs.run(body_key(body, chunk, overlap), backend.stream, record, pins, tuple(bindings))


def _until_batch(backend: Any, state: SequenceState, bindings: Sequence[ResidentBinding], flag: Any,
                 slots: Any, n: int) -> None:
    """Enqueue ``n`` iterations: clear the flag, run the steps, copy the flag to slot ``i``."""
    rt = _runtime()
    overlap = programmatic_launches(backend.info.compute_capability)

    def record(stream_ptr: int) -> None:
        for i in range(n):
            rt.memsetAsync(flag.ptr, 0, 4, stream_ptr)
            after_kernel = False
            for b in bindings:
                after_kernel = b.record(stream_ptr, after_kernel, overlap)
            rt.memcpyAsync(slots.ptr + 4 * i, flag.ptr, 4, D2D, stream_ptr)

    if graphs_enabled(backend):
        key = ("until", tuple(b.key for b in bindings), flag.ptr, slots.ptr, n, overlap)
        with cuda_errors("running a captured dispatch_until batch"):
            state.graphs.run(key, backend.stream, record, _pins(bindings, flag, slots), tuple(bindings))
        return
    stream = backend.stream.ptr
    for i in range(n):
        with cuda_errors("clearing the dispatch_until flag"):
            rt.memsetAsync(flag.ptr, 0, 4, stream)
        for b in bindings:
            run_binding(backend, b)
        with cuda_errors("recording the dispatch_until flag"):
            rt.memcpyAsync(slots.ptr + 4 * i, flag.ptr, 4, D2D, stream)


# ---- reading back --------------------------------------------------------------------------------------
def _read_ranges(backend: Any, reads: Sequence[tuple]) -> list[tuple[int, int]]:
    """``(device pointer, nbytes)`` of each read, checked before any work is enqueued."""
    out = []
    for read in reads:
        handle, offset, nbytes = unpack_read(read)
        buf = backend.resident.resolve(handle)
        check_byte_range(handle, offset, nbytes, "read range")
        out.append((buf.ptr + offset, nbytes))
    return out


def read_back(backend: Any, state: SequenceState, ranges: Sequence[tuple[int, int]], what: str
              ) -> list[np.ndarray]:
    """Copy ``ranges`` to the host after everything enqueued so far: the one synchronisation."""
    stage = state.stage
    total = sum(-(-n // _ALIGN) * _ALIGN for _, n in ranges)
    array = stage.ready(total, lambda: backend.telemetry.add("cuda_sync_points"))
    places = []
    off = 0
    try:
        with cuda_errors(f"reading back the results of {what}"):
            rt = _runtime()
            for ptr, nbytes in ranges:
                if nbytes:
                    rt.memcpyAsync(stage.ptr + off, ptr, nbytes, D2H, backend.stream.ptr)
                places.append((off, nbytes))
                off += -(-nbytes // _ALIGN) * _ALIGN
    finally:
        with cuda_errors("fencing the staging area"):
            stage.fence(backend.stream)
    backend.telemetry.add("cuda_d2h_bytes", sum(n for _, n in ranges))
    backend.wait(stage.event, None, what)
    stage.pending = False
    return [array[o:o + n].copy() for o, n in places]


# ---- the backend entry points --------------------------------------------------------------------------
def run_sequence(backend: Any, steps: Sequence[object], reads: Sequence[tuple] = ()) -> list[np.ndarray]:
    """Run ``steps`` on the backend stream, then read ``reads`` back; one synchronisation."""
    return run_repeated(backend, steps, (), 0, reads)


def run_repeated(backend: Any, prefix: Sequence[object], repeated: Sequence[object], count: int,
                 reads: Sequence[tuple] = ()) -> list[np.ndarray]:
    """Run ``prefix`` once and ``repeated`` ``count`` times, then read ``reads`` back; one sync."""
    check_repeat_count(count)
    with backend.lock, nvtx_range("vyre.cuda.sequence"):
        state = _open(backend)
        head = [state.bind(backend, s) for s in prefix]
        body = [state.bind(backend, s) for s in repeated] if count else []
        ranges = _read_ranges(backend, reads)
        run_body(backend, state, head)
        run_body(backend, state, body, count)
        return read_back(backend, state, ranges, "dispatch_sequence")


def run_until(backend: Any, steps: Sequence[object], flag_handle: Resident, max_iterations: int) -> int:
    """Repeat ``steps`` until the flag's first u32 word stays zero; the iterations that took (<= max)."""
    check_max_iterations(max_iterations)
    with backend.lock, nvtx_range("vyre.cuda.sequence"):
        state = _open(backend)
        bindings = [state.bind(backend, s) for s in steps]
        flag = backend.resident.resolve(flag_handle)
        check_flag(flag_handle)
        slots = state.flags(backend)
        done, batch = 0, 1
        while done < max_iterations:
            n = min(batch, max_iterations - done)
            _until_batch(backend, state, bindings, flag, slots, n)
            words = read_back(backend, state, [(slots.ptr, 4 * n)], "dispatch_until")[0].view(np.uint32)
            settled = np.flatnonzero(words == 0)
            if settled.size:
                return done + int(settled[0]) + 1
            done += n
            batch = min(batch * 2, MAX_BATCH)
        return max_iterations


class CompiledSequence:
    """Steps bound and (with graphs on) captured once: ``launch()`` is one graph replay."""

    def __init__(self, backend: Any, steps: Sequence[object]) -> None:
        self.backend = backend
        self._bindings: tuple[ResidentBinding, ...] = ()
        with backend.lock:
            self._state = _open(backend)
            try:
                for step in steps:
                    self._bindings += (ResidentBinding(backend, *unpack_step(step)),)
            except BaseException:
                self.close()
                raise
        self._buffers = tuple({id(b): b for x in self._bindings for b in x.buffers}.values())
        self._body = tuple(b.key for b in self._bindings)
        self._entry: Any = None  # the CapturedGraph of the last launch, replayed while still cached
        self._seen = backend.resident.generation

    def launch(self) -> None:
        """Enqueue the steps once (no synchronisation): a replay once captured, else eager launches."""
        backend = self.backend
        with backend.lock:
            if backend.resident.generation != self._seen:  # something was freed: one of ours?
                for buf in self._buffers:
                    if buf.retired:
                        raise InvalidHandle("a handle of this compiled sequence was freed",
                                            "compile the sequence again with live handles.")
                self._seen = backend.resident.generation
            entry = self._entry
            if entry is not None and entry.alive and not backend._closed:  # captured while graphs were on
                self._state.graphs.replay(entry, backend.stream)
                return
            backend._check_open()
            run_body(backend, self._state, self._bindings)
            if graphs_enabled(backend):
                overlap = programmatic_launches(backend.info.compute_capability)
                self._entry = self._state.graphs.lookup(body_key(self._body, 1, overlap))
            else:
                self._entry = None

    def run(self, reads: Sequence[tuple] = ()) -> list[np.ndarray]:
        """``launch()`` then read ``reads`` back: one synchronisation."""
        with self.backend.lock:
            ranges = _read_ranges(self.backend, reads)
            self.launch()
            return read_back(self.backend, self._state, ranges, "compiled sequence")

    def close(self) -> None:
        """Unpin the buffers and give the parameter blocks back."""
        with self.backend.lock:
            for b in self._bindings:
                b.close(self.backend)
            self._bindings, self._buffers, self._entry = (), (), None


def compile_sequence(backend: Any, steps: Sequence[object]) -> CompiledSequence:
    """Bind ``steps`` once for repeated ``launch()``/``run()`` (see ``CompiledSequence``)."""
    return CompiledSequence(backend, steps)
