"""The one zero-fill-then-launch step (``launch.record_launch``) and the eager launch built on it
(``DeviceRuntime.run``), on the CPU: the plan records its launches instead of calling the driver."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from vyre.driver.errors import VyreError
from vyre_cuda._runtime.context import DeviceRuntime
from vyre_cuda.testing import LaunchPlan, launch


class RecordedPlan(LaunchPlan):
    """A real plan whose driver calls are written to ``log`` instead."""

    def __init__(self, log: list, grid: tuple[int, int, int] = (4, 1, 1)) -> None:
        super().__init__(0, grid, (32, 1, 1), 0, 2, "saxpy")
        self.log = log

    def launch(self, stream_ptr: int) -> None:
        self.log.append(("launch", stream_ptr))

    def launch_programmatic(self, stream_ptr: int) -> None:
        self.log.append(("programmatic", stream_ptr))


def memset_into(log: list) -> Callable[[int, int, int, int], None]:
    def memset(ptr: int, value: int, nbytes: int, stream_ptr: int) -> None:
        log.append(("memset", ptr, value, nbytes, stream_ptr))
    return memset


def test_zero_fills_come_first_then_one_launch() -> None:
    log: list = []
    assert launch.record_launch(memset_into(log), RecordedPlan(log), ((16, 64), (80, 4)), 7)
    assert log == [("memset", 16, 0, 64, 7), ("memset", 80, 0, 4, 7), ("launch", 7)]


def test_an_empty_grid_fills_but_does_not_launch() -> None:
    log: list = []
    assert not launch.record_launch(memset_into(log), RecordedPlan(log, (0, 1, 1)), ((16, 64),), 7, after_kernel=True)
    assert log == [("memset", 16, 0, 64, 7)]  # a fill is now the last work: not after a kernel
    assert launch.record_launch(memset_into(log), RecordedPlan(log, (0, 1, 1)), (), 7, after_kernel=True)


@pytest.mark.parametrize(("zero", "expected"), [((), "programmatic"), (((16, 4),), "launch")])
def test_only_a_launch_right_after_a_kernel_is_programmatic(zero: tuple, expected: str) -> None:
    log: list = []
    launch.record_launch(memset_into(log), RecordedPlan(log), zero, 7, after_kernel=True, overlap=True)
    assert log[-1] == (expected, 7)


@pytest.mark.parametrize(("name", "named"), [(None, "saxpy"), ("lib_scan", "lib_scan")])
def test_a_failing_zero_fill_names_the_program(name: str | None, named: str) -> None:
    def memset(*_: int) -> None:
        raise RuntimeError("cudaErrorInvalidValue")

    log: list = []
    with pytest.raises(VyreError, match=f"zeroing the outputs of program {named}"):
        launch.record_launch(memset, RecordedPlan(log), ((16, 4),), 7, name=name)
    assert log == []


def test_an_eager_run_counts_what_it_launched() -> None:
    """``DeviceRuntime.run`` is the step plus the launch counter (on the backend's stream by default)."""
    log: list = []
    runtime: Any = SimpleNamespace(stream_ptr=3, fault=None, memset=memset_into(log), launches=0, sync_each=False)
    DeviceRuntime.run(runtime, RecordedPlan(log), ((16, 4),))
    DeviceRuntime.run(runtime, RecordedPlan(log, (1, 0, 1)), (), "empty", 9)
    assert log == [("memset", 16, 0, 4, 3), ("launch", 3)] and runtime.launches == 1
