"""``DeviceContext``: what bindings and sequences use of the backend they run for (``CudaBackend`` is one).

A ``typing.Protocol``, so the dispatch layer names the backend's type without importing it (the
backend sits a floor above, docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from vyre.driver.backend import Resident
from vyre.driver.config import DispatchConfig
from vyre.ir.program import Program
from vyre_cuda._dispatch.prepared import PreparedProgram
from vyre_cuda._runtime.context import DeviceRuntime
from vyre_cuda._runtime.launch import LaunchPlan
from vyre_cuda._runtime.pools import DeviceBuffer

if TYPE_CHECKING:
    from vyre_cuda._dispatch.sequence import SequenceDispatcher


class DeviceContext(Protocol):
    """The runtime, its lock, the sequence dispatcher and the program cache's entry points."""

    runtime: DeviceRuntime
    lock: Any  # the runtime's re-entrant lock

    @property
    def sequences(self) -> SequenceDispatcher: ...

    def prepared(self, program: Program, config: DispatchConfig | None = None, coarsen: int = 1
                 ) -> PreparedProgram: ...

    def for_grid(self, prepared: PreparedProgram, grid: Sequence[int],
                 config: DispatchConfig | None = None) -> PreparedProgram: ...

    def resident_layout(self, prepared: PreparedProgram, handles: Sequence[Resident], config: DispatchConfig | None
                        ) -> tuple[list[DeviceBuffer], dict[str, int], tuple]: ...

    def plan_for(self, prepared: PreparedProgram, buffers: Sequence[Any], counts: Mapping[str, int],
                 grid: Sequence[int], elements: int | None = None,
                 config: DispatchConfig | None = None, stream: Any = None) -> LaunchPlan: ...

    def close_plan(self, plan: LaunchPlan) -> None: ...
