"""NVTX ranges in the ``vyre`` domain for Nsight Systems: ``with nvtx_range("vyre.cuda.dispatch", name): ...``.

When ranges are pushed (``VYRE_CUDA_NVTX``, read once; ``refresh()`` reads it again):

- ``1`` pushes them always, ``0`` never;
- unset, they are pushed when a profiling tool is attached: a tool such as ``nsys profile`` sets
  ``NVTX_INJECTION64_PATH``, and NVIDIA's ``nvtx`` package (in the ``cuda12``/``cuda13`` extras)
  then reports the ``vyre`` domain enabled. An unprofiled process never pushes a range, nor
  imports the package (about 0.2 s).

Ranges go through the ``nvtx`` package, in the ``vyre`` domain, with registered message strings.
Without the package they go through ``cupy.cuda.nvtx`` (no domain), and only with
``VYRE_CUDA_NVTX=1``. When off, ``nvtx_range`` returns one shared no-op object: a function call
and nothing else. ``recording()`` lists the ranges a block of code pushes (for scripts and tests
that check what a profile will show).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from vyre_cuda._runtime import settings

DOMAIN = "vyre"
INJECTION_ENV = "NVTX_INJECTION64_PATH"  # set by Nsight Systems / Compute to load their NVTX handler
RANGES = ("vyre.cuda.codegen", "vyre.cuda.compile", "vyre.cuda.dispatch", "vyre.cuda.sequence",
          "vyre.cuda.graph_replay")
_MAX_CACHED = 4096  # distinct range messages kept with their registered attributes


class _NoRange:
    """The disabled range: entering and leaving do nothing."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


class _Range:
    """One NVTX range message, pushed on enter and popped on exit (reusable and re-entrant)."""

    __slots__ = ("message", "attributes")

    def __init__(self, message: str) -> None:
        self.message = message
        self.attributes = _sink().attributes(message)

    def __enter__(self) -> None:
        if _recorded is not None:
            _recorded.append(self.message)
        _sink().push(self)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        _sink().pop()


class _DomainSink:
    """Ranges through the ``nvtx`` package in the ``vyre`` domain."""

    def __init__(self, nvtx: Any) -> None:
        self.domain = nvtx.get_domain(DOMAIN)
        self.attached = type(self.domain).__name__ != "DummyDomain"  # a tool enabled the domain

    def attributes(self, message: str) -> Any:
        return self.domain.get_event_attributes(message=message)

    def push(self, r: _Range) -> None:
        self.domain.push_range(r.attributes)

    def pop(self) -> None:
        self.domain.pop_range()


class _CupySink:
    """Ranges through ``cupy.cuda.nvtx`` (no domain): the fallback without the ``nvtx`` package;
    nothing at all (ranges are only recorded) without CuPy either."""

    attached = False  # cannot tell; ranges only with VYRE_CUDA_NVTX=1

    def __init__(self) -> None:
        self.nvtx: Any = None  # cupy.cuda.nvtx, imported on the first push (False: no CuPy)

    def attributes(self, message: str) -> None:
        return None

    def push(self, r: _Range) -> None:
        if self.nvtx is None:
            try:
                from cupy.cuda import nvtx
            except ImportError:
                nvtx = False
            self.nvtx = nvtx
        if self.nvtx:
            self.nvtx.RangePush(r.message)

    def pop(self) -> None:
        if self.nvtx:
            self.nvtx.RangePop()


_NO_RANGE = _NoRange()
_enabled: bool | None = None
_sink_in_use: _DomainSink | _CupySink | None = None
_ranges: dict[str, _Range] = {}
_recorded: list[str] | None = None


def _sink() -> _DomainSink | _CupySink:
    global _sink_in_use
    if _sink_in_use is None:
        try:
            import nvtx
        except ImportError:
            _sink_in_use = _CupySink()
        else:
            _sink_in_use = _DomainSink(nvtx)
    return _sink_in_use


def backend() -> str:
    """Where ranges go: ``"nvtx"`` (the ``vyre`` domain of the ``nvtx`` package) or ``"cupy"``."""
    return "nvtx" if isinstance(_sink(), _DomainSink) else "cupy"


def tool_attached() -> bool:
    """Whether a profiling tool is attached (``NVTX_INJECTION64_PATH`` set) and enabled the ``vyre``
    domain; False without the ``nvtx`` package."""
    return bool(os.environ.get(INJECTION_ENV)) and _sink().attached


def enabled() -> bool:
    """Whether ranges are pushed (see the module docstring; read once, see ``refresh``)."""
    global _enabled
    if _enabled is None:
        forced = settings.nvtx()
        _enabled = tool_attached() if forced is None else forced
    return _enabled


def refresh() -> bool:
    """Re-read ``VYRE_CUDA_NVTX``; returns the new state."""
    global _enabled
    _enabled = None
    return enabled()


def nvtx_range(name: str, detail: str | None = None) -> _NoRange | _Range:
    """A context manager marking ``name`` (``"name detail"`` with a ``detail``, e.g. the program
    name) on the Nsight timeline; a shared no-op when ranges are off."""
    if _enabled is False or (_enabled is None and not enabled()):
        return _NO_RANGE
    message = name if detail is None else f"{name} {detail}"
    r = _ranges.get(message)
    if r is None:
        r = _Range(message)
        if len(_ranges) < _MAX_CACHED:
            _ranges[message] = r
    return r


@contextmanager
def recording() -> Iterator[list[str]]:
    """Ranges on for the block, and the list of every range message it pushes, in order."""
    global _enabled, _recorded
    saved, _enabled, _recorded = _enabled, True, []
    try:
        yield _recorded
    finally:
        _enabled, _recorded = saved, None
