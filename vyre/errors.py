"""The public error types of vyre (``vyre.errors``): every message ends with ``Fix: ...``.

``VyreError`` is the base; ``ValidationError`` (with ``Finding`` values), ``UnsupportedFeature``,
``DeviceOutOfMemory``, ``KernelCompileFailed``, ``DispatchFailed``, ``InvalidProgram``,
``InvalidHandle``, ``InvalidSetting`` (a bad ``VYRE_*`` variable), ``BackendUnavailable`` and
``DeviceLost`` derive from it. The classes live in
``vyre.driver.errors`` (so that ``vyre.ir`` can raise them without importing the package root);
this module is the name users import.
"""

from __future__ import annotations

from vyre.driver.errors import (
    BackendUnavailable,
    DeviceLost,
    DeviceOutOfMemory,
    DispatchFailed,
    Finding,
    InvalidHandle,
    InvalidProgram,
    InvalidSetting,
    KernelCompileFailed,
    UnsupportedFeature,
    ValidationError,
    VyreError,
)

__all__ = [
    "BackendUnavailable", "DeviceLost", "DeviceOutOfMemory", "DispatchFailed", "Finding",
    "InvalidHandle", "InvalidProgram", "InvalidSetting", "KernelCompileFailed", "UnsupportedFeature",
    "ValidationError", "VyreError",
]
