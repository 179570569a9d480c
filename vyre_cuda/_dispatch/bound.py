"""``BoundKernel``: THE binding of a compiled program to buffers: its own launch plan, its zero fills, one launch step.

Every binding that launches a program on buffers it was given builds on it: the memo of a
repeated ``dispatch_resident`` (``resident._ResidentMemo``: fixed handles, re-pointed after a
free), ``pipeline.ResidentBinding`` (fixed resident handles, bound once, re-pointed when a
borrowed buffer moves; sequences, graphs, ``vyre.lib`` steps), the pipelines' capacity-class
buffer sets (``pipeline._SlotSet``: one per coarsening factor, re-sized per call) and the
in-place binding of ``inplace`` (the caller's arrays, re-pointed on every call). What they share
lives here:

- ``point(pointers)`` binds the plan's argument slots to ``pointers`` (one per bound buffer, in
  binding order; the plan's parameter block goes last) and takes the zero fills' pointers from
  them; ``size(grid, counts)`` recomputes which buffers are zero-filled, and how many bytes, for
  a launch of other sizes over the same pointers;
- ``enqueue(stream_ptr, capturing)`` is the launch: the runtime's counted eager step
  (``DeviceRuntime.run``) or, inside a graph capture, ``launch.record_launch`` alone (no
  counters; ``after_kernel``/``overlap`` pick a programmatic launch);
- ``relauncher(handles, live)`` is the same launch with every check done once: a closure of the
  prebound driver call (``LaunchPlan.prebound``) that the repeated resident calls (the
  dispatcher's memo, a compiled pipeline's ``dispatch_resident``) call instead of ``enqueue``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from vyre.driver.backend import Resident
from vyre_cuda._dispatch.prepared import PreparedProgram
from vyre_cuda._runtime.context import DeviceRuntime
from vyre_cuda._runtime.launch import LaunchPlan, record_launch, zero_fills

Relaunch = Callable[[Sequence[Resident]], bool]  # True: launched; False: take the checked path


class BoundKernel:
    """``prepared`` with its own ``plan`` (own parameter block) and the zero fills of its buffers."""

    __slots__ = ("runtime", "prepared", "plan", "slot", "fills", "zero")

    def __init__(self, runtime: DeviceRuntime, prepared: PreparedProgram, plan: LaunchPlan, grid: Sequence[int],
                 counts: Mapping[str, int]) -> None:
        """``plan`` launches ``prepared`` on the logical ``grid`` over buffers of ``counts`` elements;
        the buffers ``prepared.zero_fills`` names for them are zero-filled before each launch."""
        self.runtime, self.prepared, self.plan = runtime, prepared, plan
        self.slot = {b.name: i for i, b in enumerate(prepared.bound)}
        self.fills: tuple[tuple[int, int], ...] = ()  # (binding slot, bytes)
        self.zero: tuple[tuple[int, int], ...] = ()  # (pointer, bytes) at the bound pointers
        self.size(grid, counts)

    def point(self, pointers: Sequence[int]) -> None:
        """Bind the plan's buffer slots to ``pointers`` (binding order) and aim the zero fills at them."""
        plan = self.plan
        plan.bind(pointers, plan.params.ptr)
        fills = self.fills
        self.zero = tuple([(pointers[i], nbytes) for i, nbytes in fills]) if fills else ()

    def size(self, grid: Sequence[int], counts: Mapping[str, int]) -> None:
        """The zero fills of a launch of the logical ``grid`` over ``counts`` elements, at the bound
        pointers (none before the plan is bound); a pipeline's buffer set runs many sizes of one
        capacity class."""
        slot, bound = self.slot, self.plan.bound
        fills = self.fills = tuple([(slot[b.name], counts[b.name] * b.dtype.size)
                                    for b in self.prepared.zero_fills(grid, counts)])
        self.zero = tuple([(bound[i], nbytes) for i, nbytes in fills]) if fills and bound else ()

    def enqueue(self, stream_ptr: int | None = None, capturing: bool = False, after_kernel: bool = False,
                overlap: bool = False) -> bool:
        """The zero fills and the launch on ``stream_ptr`` (default: the backend's stream): counted
        (``DeviceRuntime.run``), or while ``capturing`` a graph ``launch.record_launch`` with no
        counters. Returns whether a kernel is now the last work enqueued (false for an empty grid)."""
        if capturing:
            assert stream_ptr is not None, "a capture records on the stream being captured"
            return record_launch(self.runtime.memset, self.plan, self.zero, stream_ptr, after_kernel, overlap)
        return self.runtime.run(self.plan, self.zero, self.prepared.name, stream_ptr)

    def relauncher(self, handles: tuple[Resident, ...], live: Callable[[], bool]) -> Relaunch:
        """A closure that relaunches this kernel on the backend's stream when called with ``handles``
        (a list or tuple of the same objects); False means "take the checked path".

        Everything is bound once (the zero fills as pointed now, the prebound driver call), so a
        call is a handle comparison, a generation check, the zero fills (if any), one launch and one
        counter increment, and allocates nothing for a list or tuple of handles. The resident
        pool's generation moves with every free and when the runtime closes, is lost or has a test
        fault armed; only then is the runtime's state looked at and ``live()`` asked whether the
        bound buffers still hold (False: the checked path, which raises, fires the fault or binds
        anew). The zero fills are the closure's own: after ``point`` or ``size`` (or a new grid)
        make a new one. The caller holds the runtime's lock. Debug syncs (``VYRE_CUDA_SYNC_EACH``)
        and empty grids always take the checked path (``enqueue``).
        """
        runtime, plan = self.runtime, self.plan
        if runtime.sync_each or plan.empty:
            return _never
        expect_list, expect_tuple = list(handles), handles
        resident, zero, memset = runtime.resident, self.zero, runtime.memset
        stream_ptr, name = runtime.stream_ptr, self.prepared.name
        launch, args = plan.prebound(stream_ptr)
        seen = resident.generation

        def relaunch(handles: Sequence[Resident]) -> bool:
            nonlocal seen
            if handles != expect_list and tuple(handles) != expect_tuple:
                return False
            if resident.generation != seen:  # a free, a shutdown, a lost device or an armed test fault
                if runtime.closed or runtime.fault is not None or not live():
                    return False
                seen = resident.generation
            if zero:
                zero_fills(memset, zero, stream_ptr, name)
            try:
                failed = launch(*args)
            except Exception:  # noqa: BLE001 - relaunched below, which retries or raises the vyre error
                failed = True
            if failed:
                plan.launch(stream_ptr)
            runtime.launches += 1
            return True

        return relaunch


def _never(_: Sequence[Resident]) -> bool:
    return False


__all__ = ["BoundKernel", "Relaunch"]
