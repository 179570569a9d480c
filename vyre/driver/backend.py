"""The backend protocol (docs/architecture.md): a ``typing.Protocol`` and an ABC base with safe defaults.

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
        """True once the dispatch finished (successfully or not); never blocks."""
        return self._future.done()

    def result(self, timeout: float | None = None) -> list[np.ndarray]:
        """The outputs (as ``dispatch`` returns them), waiting up to ``timeout`` seconds (None: no limit).

        Raises the dispatch's error if it failed, ``TimeoutError`` if it is still running.
        """
        return self._future.result(timeout)

    def __repr__(self) -> str:
        if not self._future.done():
            return "PendingDispatch(running)"
        if self._future.cancelled():
            return "PendingDispatch(cancelled)"
        error = self._future.exception()
        return "PendingDispatch(done)" if error is None else f"PendingDispatch(failed: {type(error).__name__})"


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
        self.backend: Any = backend  # any backend: plugin ones may take more than Backend's arguments (stream=)
        self.program, self.config = program, config

    def dispatch(self, inputs: Sequence[object], stream: object | None = None) -> list[Any]:
        """``backend.dispatch(program, inputs, config, stream=...)`` with the compiled program and config
        (``stream`` orders device-array calls on a backend that has streams; host backends ignore it)."""
        if stream is None:
            return self.backend.dispatch(self.program, inputs, self.config)
        return self.backend.dispatch(self.program, inputs, self.config, stream=stream)

    def dispatch_resident(self, handles: Sequence[Resident]) -> None:
        """``backend.dispatch_resident(program, handles, config)`` with the compiled program and config."""
        self.backend.dispatch_resident(self.program, handles, self.config)

    def dispatch_batch(self, batch: Sequence[Sequence[object]]) -> list[list[np.ndarray]]:
        """One ``dispatch`` per input list of ``batch``; the outputs of each, in order."""
        return [self.dispatch(inputs) for inputs in batch]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(program={self.program.name!r}, backend={self.backend!r})"


@runtime_checkable
class BackendProtocol(Protocol):
    """What the host needs of any backend."""

    id: str
    version: str

    def supported_ops(self) -> frozenset[str]:
        """Expression ops this backend runs (``vyre.ir.expr.ALL_OPS`` names)."""
        ...

    def device_profile(self) -> dict[str, Any]:
        """What the backend runs on: name, compute capability, memory, SM count, warp size, limits."""
        ...

    def dispatch(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None
                 ) -> list[np.ndarray]:
        """Run ``program`` once; one output array per read_write/output buffer (see ``Backend.dispatch``)."""
        ...

    def metrics(self) -> dict[str, int]:
        """Counters of this backend instance (names prefixed with the backend id)."""
        ...


class Backend:
    """Base class with safe defaults; subclasses override what they support."""

    id: str = "abstract"
    version: str = "0"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, version={self.version!r})"

    # ---- identity and capabilities ------------------------------------------------------
    def supported_ops(self) -> frozenset[str]:
        """Expression ops this backend runs (``vyre.ir.expr.ALL_OPS`` names); default: all of them."""
        from vyre.ir.expr import ALL_OPS

        return frozenset(ALL_OPS)

    def device_profile(self) -> dict[str, Any]:
        """What the backend runs on: name, compute capability, memory, SM count, warp size, limits."""
        return {"name": self.id}

    def supports_subgroup_ops(self) -> bool:
        """True when ``subgroup_*`` ops run here (32 lanes)."""
        return False

    def supports_f16(self) -> bool:
        """True when F16 buffers run here."""
        return False

    def supports_bf16(self) -> bool:
        """True when BF16 buffers run here."""
        return False

    def supports_cooperative(self) -> bool:
        """True when cooperative launches (``DispatchConfig(cooperative=True)``) run here."""
        return False

    def max_workgroup_size(self) -> tuple[int, int, int]:
        """The largest workgroup size per axis."""
        return (1024, 1024, 64)

    def max_grid_size(self) -> tuple[int, int, int]:
        """The most workgroups per grid axis."""
        return (2**31 - 1, 65535, 65535)

    def max_buffer_bytes(self) -> int:
        """The largest buffer, in bytes."""
        return 2**31

    # ---- dispatch ---------------------------------------------------------------------------
    def dispatch(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None
                 ) -> list[np.ndarray]:
        """Run ``program`` once; one array per ``read_write``/``output`` buffer, in declaration order.

        ``inputs``: one per ``read``, ``read_write`` and ``uniform`` buffer, in declaration order:
        bytes-like data (raw little-endian bytes) or a typed array of the buffer's element type
        (numpy; device arrays on GPU backends). ``config`` (``DispatchConfig``) sets the grid,
        ``elements``, a workgroup override, a timeout, ... Validates the program first.
        """
        raise UnsupportedFeature("dispatch", self.id)

    def dispatch_async(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None
                       ) -> PendingDispatch:
        """Start ``dispatch(program, inputs, config)``; returns a ``PendingDispatch`` for its outputs.

        Default: run now and hand back a finished pending dispatch.
        """
        future: Future = Future()
        try:
            future.set_result(self.dispatch(program, inputs, config))
        except BaseException as exc:  # noqa: BLE001 - delivered through the future
            future.set_exception(exc)
        return PendingDispatch(future)

    def dispatch_timed(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None
                       ) -> TimedDispatch:
        """``dispatch`` timed: a ``TimedDispatch`` with the outputs and wall/device/enqueue/wait ns.

        Default: wall time only (host backends have no separate device clock).
        """
        start = time.perf_counter_ns()
        outputs = self.dispatch(program, inputs, config)
        wall = time.perf_counter_ns() - start
        return TimedDispatch(outputs, wall, wall, wall, 0)

    # ---- resident buffers -----------------------------------------------------------------
    def allocate_resident(self, nbytes: int) -> Resident:
        """A new ``Resident`` handle to ``nbytes`` of device memory that stays between dispatches."""
        raise UnsupportedFeature("resident buffers", self.id)

    def upload_resident(self, handle: Resident, data: object, offset: int = 0) -> None:
        """Copy ``data`` (any contiguous array or bytes, taken as its bytes) into ``handle`` at ``offset``.

        Host arrays in non-native byte order are refused; the range must fit the handle.
        """
        raise UnsupportedFeature("resident buffers", self.id)

    def download_resident(self, handle: Resident, offset: int = 0, nbytes: int | None = None) -> np.ndarray:
        """``nbytes`` (None: to the end) of ``handle`` from ``offset``, as a new uint8 array."""
        raise UnsupportedFeature("resident buffers", self.id)

    def free_resident(self, handle: Resident) -> None:
        """Release ``handle``; using it afterwards is ``InvalidHandle``."""
        raise UnsupportedFeature("resident buffers", self.id)

    def view(self, handle: Resident, dtype: Any = np.uint8) -> Any:
        """A typed array over ``handle``'s memory without a copy, valid until the handle is freed."""
        raise UnsupportedFeature("views of resident buffers", self.id)

    def dispatch_resident(self, program: Program, handles: Sequence[Resident],
                          config: DispatchConfig | None = None) -> None:
        """Run ``program`` on resident buffers: one handle per non-workgroup buffer, in declaration order.

        Inputs are read from the handles, ``output`` buffers are zeroed first, results stay on
        the device (``download_resident`` reads them).
        """
        raise UnsupportedFeature("resident dispatch", self.id)

    # ---- composite dispatches, once for every backend, on the primitives above ----------------------
    # A backend that only provides resident buffers and ``dispatch_resident`` gets these as they are;
    # the oracle and ``cuda`` override them for speed (bound steps; captured graphs, device loops).
    def dispatch_sequence(self, steps: Sequence[tuple], reads: Sequence[tuple] = ()) -> list[np.ndarray]:
        """Run ``steps`` (``(program, handles[, config])``) in order, then read ``reads`` back.

        ``reads`` are ``(handle, offset, nbytes)``; one uint8 array each. Backends run the steps
        with one synchronisation at the end; every argument is checked before any step runs.
        """
        return self.dispatch_repeated(steps, (), 0, reads)

    def dispatch_repeated(self, prefix: Sequence[tuple], repeated: Sequence[tuple], count: int,
                          reads: Sequence[tuple] = ()) -> list[np.ndarray]:
        """Run ``prefix`` once and ``repeated`` ``count`` times (an int >= 0), then read ``reads`` back."""
        from vyre.driver import resident_args as args

        args.check_repeat_count(count)
        head = [args.unpack_step(s) for s in prefix]
        body = [args.unpack_step(s) for s in repeated] if count else []
        checked = [args.unpack_read(r) for r in reads]
        for handle, offset, nbytes in checked:
            args.check_byte_range(handle, offset, nbytes, "read range")
        for program, handles, config in head + body * count:
            self.dispatch_resident(program, handles, config)
        return [np.asarray(self.download_resident(h, off, n)).view(np.uint8) for h, off, n in checked]

    def dispatch_until(self, steps: Sequence[tuple], flag_handle: Resident, max_iterations: int) -> int:
        """Repeat ``steps`` until they leave the flag's first u32 word zero; returns the iterations run.

        Before each iteration the word is zeroed; a step sets it non-zero to ask for another.
        Stops after ``max_iterations`` (an int >= 0) at the latest.
        """
        from vyre.driver import resident_args as args

        args.check_max_iterations(max_iterations)
        args.check_flag(flag_handle)
        body = [args.unpack_step(s) for s in steps]
        zero = np.zeros(1, np.uint32)
        for iteration in range(1, max_iterations + 1):
            self.upload_resident(flag_handle, zero)
            for program, handles, config in body:
                self.dispatch_resident(program, handles, config)
            if not np.asarray(self.download_resident(flag_handle, 0, 4)).any():
                return iteration
        return max_iterations

    def compile(self, program: Program, config: DispatchConfig | None = None) -> CompiledPipeline:
        """``program`` prepared once for repeated dispatch (``CompiledPipeline``); results equal ``dispatch``."""
        return CompiledPipeline(self, program, config)

    def metrics(self) -> dict[str, int]:
        """Counters of this backend instance (names prefixed with the backend id)."""
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
