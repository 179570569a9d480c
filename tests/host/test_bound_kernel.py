"""``BoundKernel`` on the CPU: a real prepared program and plan whose driver calls are recorded."""

from __future__ import annotations

from types import SimpleNamespace

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
