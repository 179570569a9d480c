"""The built-in plugin that registers the reference oracle as backend ``reference`` (rank 900)."""

from __future__ import annotations

from vyre.driver.hookspecs import hookimpl
from vyre.driver.registry import BackendRegistration

REFERENCE_RANK = 900


def _factory(device: int | None = None):
    from vyre.reference.backend import ReferenceBackend

    return ReferenceBackend(device)


@hookimpl
def vyre_register_backends() -> list[BackendRegistration]:
    from vyre.version import __version__

    return [BackendRegistration("reference", REFERENCE_RANK, _factory, version=__version__)]
