"""``BoundKernel`` on the CPU: a real prepared program and plan whose driver calls are recorded.

The plan's prebound driver call (``LaunchPlan.prebound``, what ``relauncher`` calls) is recorded
too, returning ``plan.rc`` (non-zero: a failed launch, which ``relauncher`` hands to ``launch``)."""

from __future__ import annotations

from types import SimpleNamespace

from vyre.driver.backend import Resident
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre_cuda._dispatch.bound import BoundKernel
from vyre_cuda._runtime.context import DeviceRuntime
from vyre_cuda.testing import LaunchPlan, PreparedProgram

U32 = DataType.U32


class RecordedPlan(LaunchPlan):
    """A real plan whose launches are written to ``log`` instead of reaching the driver."""

    def __init__(self, log: list) -> None:
        super().__init__(0, (2, 1, 1), (64, 1, 1), 0, 4, "bound")
        self.params = SimpleNamespace(ptr=0xF000)
        self.log = log
        self.rc = 0

    def prebound(self, stream_ptr: int) -> tuple:
        return self.prebound_call, (stream_ptr,)

    def prebound_call(self, stream_ptr: int) -> int:
        self.log.append(("prebound", stream_ptr))
        return self.rc

    def launch(self, stream_ptr: int) -> None:
        self.log.append(("launch", stream_ptr))

    def launch_programmatic(self, stream_ptr: int) -> None:
        self.log.append(("programmatic", stream_ptr))


def program() -> Program:
    """``some`` is written only where ``a`` is odd (so it is zero-filled), ``whole`` at every index (it is not)."""
    i = Expr.var("i")
    return Program([BufferDecl.read("a", 0, U32), BufferDecl.output("some", 1, U32, 128),
                    BufferDecl.output("whole", 2, U32, 128)],
                   (64, 1, 1),
                   [Node.let("i", Expr.invocation_id(0)),
                    Node.store("whole", i, Expr.load("a", i)),
                    Node.if_(Expr.ne(Expr.bitand(Expr.load("a", i), Expr.u32(1)), Expr.u32(0)),
                             [Node.store("some", i, Expr.u32(1))])], name="bound")


def bound(log: list) -> BoundKernel:
    prog = program()
    plan = RecordedPlan(log)
    prepared = PreparedProgram(prog, "bound", (64, 1, 1), None, prog.bound_buffers, 0, plan, lambda: "")
    runtime = DeviceRuntime.__new__(DeviceRuntime)  # only what the launch step reads: no device here
    runtime.stream_ptr, runtime.fault, runtime.launches, runtime.sync_each = 5, None, 0, False
    runtime.closed, runtime.resident = False, SimpleNamespace(generation=0)
    runtime.memset = lambda ptr, value, nbytes, stream: log.append(("memset", ptr, value, nbytes, stream))
    return BoundKernel(runtime, prepared, plan, (2, 1, 1), {"a": 128, "some": 128, "whole": 128})


def test_point_binds_the_plan_and_aims_the_zero_fills() -> None:
    kernel = bound([])
    kernel.point([0x100, 0x200, 0x300])
    assert kernel.plan.bound == (0x100, 0x200, 0x300, 0xF000)
    assert kernel.zero == ((0x200, 512),)  # only ``some``: 128 u32
    kernel.point([0x400, 0x500, 0x600])
    assert kernel.zero == ((0x500, 512),) and kernel.plan.bound[1] == 0x500


def test_enqueue_is_the_counted_step_or_a_recorded_one() -> None:
    log: list = []
    kernel = bound(log)
    kernel.point([0x100, 0x200, 0x300])
    assert kernel.enqueue()  # eager, on the backend's stream, counted
    assert log == [("memset", 0x200, 0, 512, 5), ("launch", 5)] and kernel.runtime.launches == 1
    log.clear()
    assert kernel.enqueue(9, capturing=True, after_kernel=True, overlap=True)  # a fill first: a plain launch
    assert log == [("memset", 0x200, 0, 512, 9), ("launch", 9)] and kernel.runtime.launches == 1


def test_size_re_aims_the_zero_fills_at_the_bound_pointers() -> None:
    kernel = bound([])
    kernel.point([0x100, 0x200, 0x300])
    kernel.size((2, 1, 1), {"a": 64, "some": 64, "whole": 64})  # a smaller size of one capacity class
    assert kernel.zero == ((0x200, 256),)
    kernel.size((1, 1, 1), {"a": 128, "some": 128, "whole": 128})  # 64 invocations: ``whole`` half written
    assert kernel.zero == ((0x200, 512), (0x300, 512))


HANDLES = (Resident(1, 512, 0), Resident(2, 512, 0), Resident(3, 512, 0))


def test_relauncher_launches_for_the_same_handles_only() -> None:
    log: list = []
    kernel = bound(log)
    kernel.point([0x100, 0x200, 0x300])
    relaunch = kernel.relauncher(HANDLES, lambda: True)
    assert relaunch(list(HANDLES)) and relaunch(HANDLES)
    assert log == [("memset", 0x200, 0, 512, 5), ("prebound", 5)] * 2 and kernel.runtime.launches == 2
    log.clear()
    copies = tuple(Resident(h.id, h.nbytes, h.owner) for h in HANDLES)  # equal fields, other objects
    assert not relaunch(HANDLES[:2]) and not relaunch(HANDLES[::-1]) and not relaunch(copies)
    assert log == [] and kernel.runtime.launches == 2


def test_relauncher_asks_live_only_after_the_generation_moved() -> None:
    log: list = []
    kernel = bound(log)
    kernel.point([0x100, 0x200, 0x300])
    asked: list = []
    answer = [True]
    relaunch = kernel.relauncher(HANDLES, lambda: asked.append(1) or answer[0])
    runtime = kernel.runtime
    assert relaunch(HANDLES) and asked == []
    runtime.resident.generation += 1  # a free elsewhere: the bound buffers still hold
    assert relaunch(HANDLES) and relaunch(HANDLES) and asked == [1] and runtime.launches == 3
    runtime.resident.generation += 1
    answer[0] = False  # one of ours was freed
    assert not relaunch(HANDLES) and not relaunch(HANDLES) and runtime.launches == 3
    answer[0] = True
    runtime.fault = object()  # an armed test fault: the checked path fires it
    assert not relaunch(HANDLES)
    runtime.fault, runtime.closed = None, True
    assert not relaunch(HANDLES) and runtime.launches == 3


def test_a_failed_prebound_launch_is_launched_again_through_the_plan() -> None:
    log: list = []
    kernel = bound(log)
    kernel.point([0x100, 0x200, 0x300])
    kernel.plan.rc = 201  # no current context: ``launch`` retries (or raises the vyre error)
    assert kernel.relauncher(HANDLES, lambda: True)(HANDLES)
    assert log[1:] == [("prebound", 5), ("launch", 5)] and kernel.runtime.launches == 1


def test_debug_syncs_and_empty_grids_take_the_checked_path() -> None:
    log: list = []
    kernel = bound(log)
    kernel.point([0x100, 0x200, 0x300])
    kernel.runtime.sync_each = True
    assert not kernel.relauncher(HANDLES, lambda: True)(HANDLES)
    kernel.runtime.sync_each = False
    kernel.plan.set_grid((0, 1, 1))
    assert not kernel.relauncher(HANDLES, lambda: True)(HANDLES)
    assert log == [] and kernel.runtime.launches == 0
