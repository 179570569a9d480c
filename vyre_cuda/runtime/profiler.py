"""NVTX ranges for Nsight (``VYRE_CUDA_NVTX=1``): ``with nvtx_range("vyre.cuda.dispatch"): ...``.

Ranges are pushed only when ``VYRE_CUDA_NVTX=1``; otherwise ``nvtx_range`` returns one shared
no-op object, so an idle profiler costs a function call and nothing else. The variable is read
once; call ``refresh()`` after changing it in a running process.
"""

from __future__ import annotations

from types import TracebackType

from vyre_cuda.runtime import settings

RANGES = ("vyre.cuda.codegen", "vyre.cuda.compile", "vyre.cuda.dispatch", "vyre.cuda.sequence",
          "vyre.cuda.graph_replay")


class _NoRange:
    """The disabled range: entering and leaving do nothing."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


class _NvtxRange:
    """One pushed NVTX range (``RangePush`` on enter, ``RangePop`` on exit)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> None:
        _nvtx().RangePush(self.name)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        _nvtx().RangePop()


_NO_RANGE = _NoRange()
_enabled: bool | None = None


def _nvtx():  # noqa: ANN202 - cupy module, imported lazily
    from cupy.cuda import nvtx

    return nvtx


def enabled() -> bool:
    """True when ``VYRE_CUDA_NVTX=1`` (read once, see ``refresh``)."""
    global _enabled
    if _enabled is None:
        _enabled = settings.nvtx()
    return _enabled


def refresh() -> bool:
    """Re-read ``VYRE_CUDA_NVTX``; returns the new state."""
    global _enabled
    _enabled = None
    return enabled()


def nvtx_range(name: str) -> _NoRange | _NvtxRange:
    """A context manager marking ``name`` on the Nsight timeline (a shared no-op when disabled)."""
    if _enabled is False or (_enabled is None and not enabled()):
        return _NO_RANGE
    return _NvtxRange(name)
