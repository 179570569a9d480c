"""vyre: a GPU compute IR with a CPU reference oracle and pluggable backends.

Build a ``vyre.ir.Program``, check it with ``vyre.validate``, and run it on
``vyre.acquire()`` (the best backend that starts) or on the oracle (``vyre.reference.run``).
"""

from __future__ import annotations

__version__ = "0.1.0"

from vyre import errors, ir, reference
from vyre.driver.config import DispatchConfig
from vyre.driver.devices import Device, devices
from vyre.driver.hookspecs import hookimpl
from vyre.driver.registry import BackendRegistration, acquire, registered_backends
from vyre.ir.program import Program


def validate(program: Program) -> None:
    """Check ``program``; raises ``vyre.errors.ValidationError`` listing every finding."""
    from vyre.ir.validate import validate as _validate

    _validate(program)


__all__ = [
    "BackendRegistration", "Device", "DispatchConfig", "__version__", "acquire", "devices", "errors", "hookimpl",
    "ir", "reference", "registered_backends", "validate",
]
