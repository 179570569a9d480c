"""``vyre.devices()``: the devices of every dispatching backend that can list them.

A backend lists its devices through the optional ``devices`` callable of its
``BackendRegistration`` (the ``cuda`` plugin reads device properties, which creates no CUDA
context). Backends without one, and the reference oracle, are not listed: on a machine without
GPUs ``devices()`` is an empty list. Each entry's ``id`` is what ``vyre.acquire`` takes.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vyre.driver.errors import BackendUnavailable


@dataclass(frozen=True)
class Device:
    """One device: ``acquire(device.id)`` starts a backend on it."""

    backend: str
    index: int
    name: str
    memory_bytes: int | None = None
    details: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def id(self) -> str:
        """``"cuda:1"``: the backend id and device index, as ``vyre.acquire`` takes them."""
        return f"{self.backend}:{self.index}"


def devices() -> list[Device]:
    """Every device of every dispatching backend that lists its devices (backends in rank order).

    A backend whose listing fails because its driver is missing contributes nothing; any other
    failure is reported as a warning and that backend is skipped.
    """
    from vyre.driver.registry import registered_backends, registration

    found: list[Device] = []
    for info in registered_backends():
        reg = registration(info.id)
        if reg is None or not info.dispatches or reg.devices is None:
            continue
        try:
            rows = list(reg.devices() or ())
        except BackendUnavailable:
            continue
        except Exception as exc:  # noqa: BLE001 - a plugin's bug must not hide the other devices
            warnings.warn(f"backend {info.id!r} could not list its devices: {type(exc).__name__}: {exc}",
                          stacklevel=2)
            continue
        found.extend(_device(info.id, row) for row in rows)
    return found


def _device(backend_id: str, row: Mapping[str, Any]) -> Device:
    memory = row.get("memory_bytes")
    return Device(backend_id, int(row["index"]), str(row.get("name", "")),
                  None if memory is None else int(memory), dict(row))


__all__ = ["Device", "devices"]
