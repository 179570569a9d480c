"""Fixed-point loops on the device: a WHILE conditional CUDA graph node (drivers of CUDA 12.4+).

CuPy has no binding for conditional nodes, so the driver calls go through ``_runtime.driver``
(NVIDIA's ``cuda.bindings``, with ``cuda.h``'s own structs):

1. ``cuGraphCreate`` makes an outer graph and ``cuGraphConditionalHandleCreate`` a handle whose
   value is reset to 1 at every launch (``CU_GRAPH_COND_ASSIGN_DEFAULT``): the body runs at least once;
2. ``cuGraphAddNode`` adds one conditional node of type WHILE; the driver makes its empty body graph;
3. ``cuStreamBeginCaptureToGraph`` records one iteration into that body: the caller's
   ``record(stream_ptr, handle)`` enqueues the iteration's steps and then a one-thread kernel
   (``_codegen.snippets.condition_ptx``) that counts the iteration in a control block and calls
   ``cudaGraphSetConditional(handle, flag != 0 && count < cap)``; when it goes on, it also clears
   the flag for the next iteration (the caller clears it before the first), so an iteration is
   its steps plus one tiny kernel, which on sm_90+ may start while the last step runs (it waits
   with ``griddepcontrol.wait``);
4. ``cuGraphInstantiate`` once; each ``cuGraphLaunch`` then runs the whole loop with no host
   round trip.

``cudaGraphSetConditional`` is a builtin of the device runtime that ptxas resolves by itself (as it
does ``vprintf``): the condition kernel is plain PTX with an ``.extern .func`` declaration, linked
and loaded by the module cache like any other kernel, without the device runtime library.

The control block is two u32 words: ``[0]`` iterations run so far (the caller writes 0 before each
launch), ``[1]`` the iteration cap. ``WhileGraph`` owns the graph and its executable and frees both
in ``close``. ``unavailable_reason`` says why a loop must take the batched readback path instead;
it is pure, so it is tested without a GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vyre_cuda._runtime import driver

MIN_DRIVER = 12040  # cuDriverGetVersion of CUDA 12.4: conditional nodes set from device code
CONTROL_WORDS = 2  # [0] iterations run, [1] the cap
CAP_LIMIT = 0xFFFFFFFF  # the cap is one u32 word
_CONTEXT = "building or running a conditional CUDA graph"


def missing_entry_points() -> tuple[str, ...]:
    """What conditional graphs need and this process lacks: empty, or why ``cuda.bindings`` cannot
    reach the driver (not installed, no libcuda). Checked once per process."""
    reason = driver.unavailable()
    return () if reason is None else (reason,)


def unavailable_reason(enabled: bool, graphs: bool, driver_version: int, missing: tuple[str, ...]) -> str | None:
    """Why a fixed-point loop must read its flag back per batch instead (None: it may loop on the device).

    ``enabled``: ``VYRE_CUDA_CONDITIONAL`` is not off; ``graphs``: CUDA graphs are on;
    ``driver_version``: ``cuDriverGetVersion``; ``missing``: ``missing_entry_points()``.
    """
    if not enabled:
        return "VYRE_CUDA_CONDITIONAL=0 (the batched path was asked for)"
    if not graphs:
        return "CUDA graphs are off (VYRE_CUDA_GRAPHS=0 or VYRE_CUDA_SYNC_EACH=1)"
    if driver_version < MIN_DRIVER:
        major, minor = divmod(driver_version // 10, 100)
        return f"the CUDA driver is {major}.{minor}; conditional graph nodes set from the device need 12.4+"
    if missing:
        return f"conditional graphs need cuda.bindings and libcuda: {'; '.join(missing)}"
    return None


class WhileGraph:
    """An instantiated graph of one WHILE node: ``launch(stream)`` runs the whole loop.

    ``record(stream_ptr, handle)`` enqueues one iteration (launches, memsets, device copies only)
    ending with the ``_codegen.snippets.CONDITION_ENTRY`` kernel given the conditional ``handle``. Any failure frees
    what was made and raises (callers then take the batched path).
    """

    def __init__(self, stream_ptr: int, record: Callable[[int, int], None]) -> None:
        missing = missing_entry_points()
        if missing:
            raise RuntimeError(f"conditional graphs need cuda.bindings and libcuda: {'; '.join(missing)}")
        self.graph, self.exec = 0, 0
        self.finished: Any = None  # a CuPy event recorded after the last launch (None: never launched)
        try:
            with driver.errors(_CONTEXT):
                self.graph = driver.graph_create()
                handle, body = driver.add_while_node(self.graph, _context())
                driver.capture_into(stream_ptr, body, lambda: record(stream_ptr, handle))
                self.exec = driver.instantiate(self.graph)
        except BaseException:
            self.close()
            raise

    def in_flight(self) -> bool:
        """Whether the last launch may still be running (its event not yet reached)."""
        return self.finished is not None and not self.finished.done

    def launch(self, stream: Any) -> None:
        """Run the loop on ``stream`` (a CuPy stream): one driver call, then an event record.

        Callers wait for ``finished`` before launching again while ``in_flight()``: the executable
        is never launched a second time while its previous run is in flight (compute-sanitizer's
        memcheck reports illegal addresses in the body kernels of such a second launch)."""
        from cupy.cuda import Event

        with driver.errors(_CONTEXT):
            driver.graph_launch(self.exec, stream.ptr)
        if self.finished is None:
            self.finished = Event(disable_timing=True)
        self.finished.record(stream)

    def close(self) -> None:
        """Free the executable and the graph (with its body); a launch in flight still completes."""
        if self.exec:
            driver.graph_exec_destroy(self.exec)
            self.exec = 0
        if self.graph:
            driver.graph_destroy(self.graph)
            self.graph = 0


def _context() -> int:
    """The current CUDA context (CuPy's runtime makes the primary context current)."""
    ctx = driver.current_context()
    if not ctx:
        from cupy.cuda import runtime

        runtime.free(0)  # forces the runtime to make the device's primary context current
        ctx = driver.current_context()
    return ctx
