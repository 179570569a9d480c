"""Backend counters reported by ``CudaBackend.metrics()`` (names prefixed ``cuda_``; docs/resident.md lists them).

A ``Telemetry`` is a dict of ints behind a lock: ``add`` costs one dict update, so it is cheap
enough for the launch path. Byte gauges (``*_in_use``) keep their high-water mark in ``*_peak``.
"""

from __future__ import annotations

import threading

#: Every counter the backend reports, always present in ``metrics()`` (0 until something happens).
COUNTERS: tuple[str, ...] = (
    "cuda_module_cache_entries", "cuda_module_cache_hits", "cuda_module_cache_misses",
    "cuda_disk_cache_hits", "cuda_disk_cache_misses",
    "cuda_kernel_launches", "cuda_dispatches", "cuda_inplace_dispatches",
    "cuda_graph_captures", "cuda_graph_replays", "cuda_graph_capture_failures", "cuda_graphs_live",
    "cuda_sync_points", "cuda_h2d_bytes", "cuda_d2h_bytes", "cuda_d2d_bytes", "cuda_direct_bytes",
    "cuda_resident_bytes_in_use", "cuda_resident_bytes_peak",
    "cuda_transient_bytes_in_use", "cuda_transient_bytes_peak",
    "cuda_cached_bytes", "cuda_resident_handles",
    "cuda_timed_dispatches", "cuda_device_ns",
)


class Telemetry:
    """Thread-safe named integer counters and gauges."""

    __slots__ = ("_values", "_lock")

    def __init__(self) -> None:
        self._values: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self._lock = threading.Lock()

    def add(self, name: str, amount: int = 1) -> None:
        """Add ``amount`` to counter ``name`` (created on first use)."""
        with self._lock:
            self._values[name] = self._values.get(name, 0) + amount

    def bump(self, name: str) -> None:
        """Add 1 without taking this object's lock: only for counters whose writers already hold
        one common lock (the backend lock serialises every launch)."""
        values = self._values
        values[name] = values.get(name, 0) + 1

    def gauge(self, name: str, value: int) -> None:
        """Set gauge ``name`` (e.g. ``cuda_resident_bytes_in_use``) and raise its ``_peak`` twin."""
        peak = name.replace("_in_use", "_peak")
        with self._lock:
            self._values[name] = value
            if peak != name and value > self._values.get(peak, 0):
                self._values[peak] = value

    def set(self, name: str, value: int) -> None:
        """Overwrite counter ``name`` (used for values mirrored from other components)."""
        with self._lock:
            self._values[name] = value

    def get(self, name: str) -> int:
        return self._values.get(name, 0)

    def snapshot(self) -> dict[str, int]:
        """A copy of every counter."""
        with self._lock:
            return dict(self._values)
