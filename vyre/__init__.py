"""vyre: a GPU compute IR with a CPU reference oracle and pluggable backends.

Write a kernel as a Python function with ``@vyre.kernel`` (docs/kernels.md) or build a
``vyre.ir.Program``, check it with ``vyre.validate``, and run it on
``vyre.acquire()`` (the best backend that starts) or on the oracle (``vyre.reference.run``).
"""

from __future__ import annotations

from vyre import errors, ir, reference
from vyre.driver.config import DispatchConfig
from vyre.driver.devices import Device, devices
from vyre.driver.hookspecs import hookimpl
from vyre.driver.registry import BackendRegistration, acquire, default_backend, registered_backends
from vyre.frontend import (
    Const,
    In,
    InOut,
    Out,
    Uniform,
    bf16,
    boolean,
    f16,
    f32,
    f64,
    func,
    i8,
    i16,
    i32,
    i64,
    kernel,
    u8,
    u16,
    u32,
    u64,
)
from vyre.frontend.intrinsics import *  # noqa: F403 - vyre.sqrt, vyre.gid, vyre.atomic_add, ... (docs/kernels.md)
from vyre.frontend.intrinsics import INTRINSICS as _INTRINSICS
from vyre.frontend.intrinsics import __all__ as _intrinsics
from vyre.ir.program import Program
from vyre.version import __version__

_LAZY = ("dask", "lib")  # submodules imported on first use, so ``import vyre`` stays cheap

abs, max, min, round = (_INTRINSICS[n] for n in ("abs", "max", "min", "round"))  # vyre.min etc., not exported by *


def validate(program: Program) -> None:
    """Check ``program``; raises ``vyre.errors.ValidationError`` listing every finding."""
    from vyre.ir.validate import validate as _validate

    _validate(program)


def __getattr__(name: str) -> object:
    """``vyre.lib`` and ``vyre.dask`` after a plain ``import vyre`` (PEP 562): imported on first use."""
    if name in _LAZY:
        import importlib

        return importlib.import_module(f"vyre.{name}")
    raise AttributeError(f"module 'vyre' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "BackendRegistration", "Const", "Device", "DispatchConfig", "In", "InOut", "Out", "Uniform", "__version__",
    "acquire",
    "default_backend",
    "bf16", "boolean", "devices", "errors", "f16", "f32", "f64", "func", "hookimpl", "i8", "i16", "i32", "i64", "ir",
    "kernel",
    "reference", "registered_backends", "u8", "u16", "u32", "u64", "validate", *_intrinsics,
]
