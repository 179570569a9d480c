"""The backend protocol of SPEC section 4: a ``typing.Protocol`` and an ABC base with safe defaults.

A backend implements at least ``id``, ``version`` and ``dispatch``; everything else in ``Backend``
raises ``UnsupportedFeature`` (or answers "no") until the backend overrides it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from vyre.driver.config import DispatchConfig
from vyre.driver.errors import UnsupportedFeature
from vyre.ir.program import Program


@dataclass(frozen=True)
class TimedDispatch:
    """Outputs of a timed dispatch and where the time went (nanoseconds)."""

    outputs: list[np.ndarray]
    wall_ns: int
    device_ns: int
    enqueue_ns: int
    wait_ns: int


class PendingDispatch:
    """A dispatch in flight: ``done()`` polls, ``result(timeout)`` waits for the outputs."""

    def __init__(self, future: Future) -> None:
        self._future = future

    def done(self) -> bool:
        return self._future.done()

    def result(self, timeout: float | None = None) -> list[np.ndarray]:
        return self._future.result(timeout)


class Resident:
    """Opaque handle to device memory owned by one backend instance (see ``allocate_resident``)."""

    __slots__ = ("id", "nbytes", "owner", "__weakref__")

    def __init__(self, id: int, nbytes: int, owner: int) -> None:
        self.id, self.nbytes, self.owner = id, nbytes, owner

    def __repr__(self) -> str:
        return f"Resident(id={self.id}, nbytes={self.nbytes})"


class CompiledPipeline:
    """A program prepared once for repeated dispatch; results equal ``backend.dispatch``."""

    def __init__(self, backend: Backend, program: Program, config: DispatchConfig | None) -> None:
        self.backend, self.program, self.config = backend, program, config

    def dispatch(self, inputs: Sequence[object]) -> list[np.ndarray]:
        return self.backend.dispatch(self.program, inputs, self.config)

    def dispatch_resident(self, handles: Sequence[Resident]) -> None:
        self.backend.dispatch_resident(self.program, handles, self.config)

    def dispatch_batch(self, batch: Sequence[Sequence[object]]) -> list[list[np.ndarray]]:
        return [self.dispatch(inputs) for inputs in batch]


@runtime_checkable
class BackendProtocol(Protocol):
    """What the host needs of any backend."""

    id: str
    version: str

    def supported_ops(self) -> frozenset[str]: ...
    def device_profile(self) -> dict[str, Any]: ...
    def dispatch(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None
                 ) -> list[np.ndarray]: ...
    def metrics(self) -> dict[str, int]: ...


class Backend:
    """Base class with safe defaults; subclasses override what they support."""

    id: str = "abstract"
    version: str = "0"

    # ---- identity and capabilities ------------------------------------------------------
    def supported_ops(self) -> frozenset[str]:
        from vyre.ir.expr import ALL_OPS

        return frozenset(ALL_OPS)

    def device_profile(self) -> dict[str, Any]:
        return {"name": self.id}

    def supports_subgroup_ops(self) -> bool:
        return False

    def supports_f16(self) -> bool:
        return False

    def supports_bf16(self) -> bool:
        return False

    def supports_cooperative(self) -> bool:
        return False

    def max_workgroup_size(self) -> tuple[int, int, int]:
        return (1024, 1024, 64)

    def max_grid_size(self) -> tuple[int, int, int]:
        return (2**31 - 1, 65535, 65535)

    def max_buffer_bytes(self) -> int:
        return 2**31

    # ---- dispatch ---------------------------------------------------------------------------
    def dispatch(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None
                 ) -> list[np.ndarray]:
        raise UnsupportedFeature("dispatch", self.id)

    def dispatch_async(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None
                       ) -> PendingDispatch:
        """Default: run now and hand back a finished pending dispatch."""
        future: Future = Future()
        try:
            future.set_result(self.dispatch(program, inputs, config))
        except BaseException as exc:  # noqa: BLE001 - delivered through the future
            future.set_exception(exc)
        return PendingDispatch(future)

    def dispatch_timed(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None
                       ) -> TimedDispatch:
        """Default: wall time only (host backends have no separate device clock)."""
        start = time.perf_counter_ns()
        outputs = self.dispatch(program, inputs, config)
        wall = time.perf_counter_ns() - start
        return TimedDispatch(outputs, wall, wall, wall, 0)

    # ---- resident buffers -----------------------------------------------------------------
    def allocate_resident(self, nbytes: int) -> Resident:
        raise UnsupportedFeature("resident buffers", self.id)

    def upload_resident(self, handle: Resident, data: object, offset: int = 0) -> None:
        raise UnsupportedFeature("resident buffers", self.id)

    def download_resident(self, handle: Resident, offset: int = 0, nbytes: int | None = None) -> np.ndarray:
        raise UnsupportedFeature("resident buffers", self.id)

    def free_resident(self, handle: Resident) -> None:
        raise UnsupportedFeature("resident buffers", self.id)

    def view(self, handle: Resident, dtype: Any = np.uint8) -> Any:
        """A typed array over ``handle``'s memory without a copy, valid until the handle is freed."""
        raise UnsupportedFeature("views of resident buffers", self.id)

    def dispatch_resident(self, program: Program, handles: Sequence[Resident],
                          config: DispatchConfig | None = None) -> None:
        raise UnsupportedFeature("resident dispatch", self.id)

    def dispatch_sequence(self, steps: Sequence[tuple], reads: Sequence[tuple] = ()) -> list[np.ndarray]:
        raise UnsupportedFeature("dispatch sequences", self.id)

    def dispatch_repeated(self, prefix: Sequence[tuple], repeated: Sequence[tuple], count: int,
                          reads: Sequence[tuple] = ()) -> list[np.ndarray]:
        raise UnsupportedFeature("repeated dispatch", self.id)

    def dispatch_until(self, steps: Sequence[tuple], flag_handle: Resident, max_iterations: int) -> int:
        raise UnsupportedFeature("fixed-point dispatch", self.id)

    # ---- pipelines, metrics, lifecycle -------------------------------------------------------
    def compile(self, program: Program, config: DispatchConfig | None = None) -> CompiledPipeline:
        return CompiledPipeline(self, program, config)

    def metrics(self) -> dict[str, int]:
        return {}

    def prepare(self) -> None:
        """Do any expensive start-up now rather than on the first dispatch."""

    def shutdown(self) -> None:
        """Release what the backend holds; it may not be used afterwards."""

    def __enter__(self) -> Backend:
        self.prepare()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
