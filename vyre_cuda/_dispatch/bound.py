"""``BoundKernel``: a compiled program bound to its own launch plan and zero fills, launched in one step.

The bindings that own a launch plan build on it: ``pipeline.ResidentBinding`` (fixed resident
handles, bound once, re-pointed when a borrowed buffer moves) and the in-place binding of
``inplace`` (the caller's arrays, re-pointed on every call). What they share lives here:

- ``point(pointers)`` binds the plan's argument slots to ``pointers`` (one per bound buffer, in
  binding order; the plan's parameter block goes last) and takes the zero fills' pointers from
  them;
- ``enqueue(stream_ptr, capturing)`` is the launch: the runtime's counted eager step
  (``DeviceRuntime.run``) or, inside a graph capture, ``launch.record_launch`` alone (no
  counters; ``after_kernel``/``overlap`` pick a programmatic launch).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vyre_cuda._dispatch.prepared import PreparedProgram
from vyre_cuda._runtime.context import DeviceRuntime
from vyre_cuda._runtime.launch import LaunchPlan, record_launch


class BoundKernel:
    """``prepared`` with its own ``plan`` (own parameter block) and the zero fills of its buffers."""

    __slots__ = ("runtime", "prepared", "plan", "fills", "zero")

    def __init__(self, runtime: DeviceRuntime, prepared: PreparedProgram, plan: LaunchPlan, grid: Sequence[int],
                 counts: Mapping[str, int]) -> None:
        """``plan`` launches ``prepared`` on the logical ``grid`` over buffers of ``counts`` elements;
        the buffers ``prepared.zero_fills`` names for them are zero-filled before each launch."""
        slot = {b.name: i for i, b in enumerate(prepared.bound)}
        fills = prepared.zero_fills(grid, counts)
        self.runtime, self.prepared, self.plan = runtime, prepared, plan
        self.fills = tuple((slot[b.name], counts[b.name] * b.dtype.size) for b in fills)  # (binding slot, bytes)
        self.zero: tuple[tuple[int, int], ...] = ()  # (pointer, bytes) of the last ``point``

    def point(self, pointers: Sequence[int]) -> None:
        """Bind the plan's buffer slots to ``pointers`` (binding order) and aim the zero fills at them."""
        plan = self.plan
        plan.bind(pointers, plan.params.ptr)
        fills = self.fills
        self.zero = tuple([(pointers[i], nbytes) for i, nbytes in fills]) if fills else ()

    def enqueue(self, stream_ptr: int | None = None, capturing: bool = False, after_kernel: bool = False,
                overlap: bool = False) -> bool:
        """The zero fills and the launch on ``stream_ptr`` (default: the backend's stream): counted
        (``DeviceRuntime.run``), or while ``capturing`` a graph ``launch.record_launch`` with no
        counters. Returns whether a kernel is now the last work enqueued (false for an empty grid)."""
        if capturing:
            assert stream_ptr is not None, "a capture records on the stream being captured"
            return record_launch(self.runtime.memset, self.plan, self.zero, stream_ptr, after_kernel, overlap)
        return self.runtime.run(self.plan, self.zero, self.prepared.name, stream_ptr)


__all__ = ["BoundKernel"]
