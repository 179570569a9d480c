"""``Tracer``: hook implementations that turn each dispatch into a ``TraceRecord``."""

from __future__ import annotations

import json
import os
import sys
import threading
from dataclasses import asdict, dataclass

import vyre


@dataclass(frozen=True)
class TraceRecord:
    """One observed dispatch."""

    backend: str
    kind: str
    programs: tuple[str, ...]
    label: str | None
    duration_ns: int
    error: str | None


_records: list[TraceRecord] = []
_lock = threading.Lock()


def records() -> list[TraceRecord]:
    """Every dispatch traced so far in this process, oldest first."""
    with _lock:
        return list(_records)


class Tracer:
    """Registered as the ``trace`` plugin when ``VYRE_TRACE=1``; prints and records each dispatch."""

    def __init__(self, stream=None, path: str | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.path = path

    @vyre.hookimpl
    def vyre_after_dispatch(self, backend_id, kind, programs, config, duration_ns, error) -> None:
        record = TraceRecord(
            backend=backend_id,
            kind=kind,
            programs=tuple(p.name or "<unnamed>" for p in programs),
            label=getattr(config, "label", None),
            duration_ns=duration_ns,
            error=None if error is None else f"{type(error).__name__}: {error}",
        )
        with _lock:
            _records.append(record)
        self._emit(record)

    def _emit(self, record: TraceRecord) -> None:
        outcome = "ok" if record.error is None else f"FAILED {record.error.splitlines()[0]}"
        print(f"vyre-trace: {record.backend} {record.kind} {'+'.join(record.programs)} "
              f"{record.duration_ns / 1e6:.3f} ms {outcome}", file=self.stream, flush=True)
        if self.path:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(asdict(record)) + "\n")


def from_environment() -> object:
    """A ``Tracer`` when ``VYRE_TRACE`` is set to something other than 0, else an object with no hooks."""
    if os.environ.get("VYRE_TRACE", "0") in ("", "0"):
        return _Disabled()
    return Tracer(path=os.environ.get("VYRE_TRACE_FILE") or None)


class _Disabled:
    """Registered instead of a Tracer when tracing is off: implements no hook, costs nothing."""
