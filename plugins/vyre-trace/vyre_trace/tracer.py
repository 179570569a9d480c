"""``Tracer``: hook implementations that turn each dispatch into a ``TraceRecord``.

Output: one line per dispatch on stderr; with ``VYRE_TRACE_FILE`` also a file, either JSON lines
(``VYRE_TRACE_FORMAT=jsonl``, the default) or one Chrome-trace JSON document
(``VYRE_TRACE_FORMAT=chrome``, written when the process exits) that ui.perfetto.dev and
chrome://tracing open.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import vyre
from vyre.driver.config import resolve_grid
from vyre.driver.errors import VyreError

FORMATS = ("jsonl", "chrome")
DEFAULT_CHROME_FILE = "vyre-trace.json"
MAX_RECORDS = 1_000_000  # kept in memory for records() and the Chrome trace; later dispatches are counted only


@dataclass(frozen=True)
class TraceRecord:
    """One observed dispatch.

    ``grid`` is the workgroup grid ``(x, y, z)`` when the dispatch's config fixes it
    (``grid_source`` ``"grid"`` or ``"elements"``), else None: ``"buffer sizes"`` when the backend
    derives it from the arrays passed at dispatch (hooks do not see them), ``"steps"`` for
    multi-step kinds, whose steps carry their own configs. ``start_ns`` is ``time.perf_counter_ns``
    at the start of the call; ``thread`` the native id of the calling thread.
    """

    backend: str
    kind: str
    programs: tuple[str, ...]
    label: str | None
    grid: tuple[int, int, int] | None
    grid_source: str
    start_ns: int
    duration_ns: int
    thread: int
    error: str | None


_records: list[TraceRecord] = []
_dropped = 0
_lock = threading.Lock()


def records() -> list[TraceRecord]:
    """Every dispatch traced so far in this process, oldest first (at most ``MAX_RECORDS``)."""
    with _lock:
        return list(_records)


def dispatch_grid(program, config, grid=None) -> tuple[tuple[int, int, int] | None, str]:
    """The grid of one dispatch (the host's ``grid`` when it passed one) and where it comes from."""
    if program is None:
        return None, "steps"
    if config is not None and config.grid is not None:
        source = "grid"
    elif config is not None and config.elements is not None:
        source = "elements"
    else:
        source = "buffer sizes"
    if grid is not None:
        return tuple(grid), source
    if source == "buffer sizes":
        return None, source
    try:
        return resolve_grid(program, config, {}), source
    except (VyreError, KeyError, TypeError, ValueError):  # the dispatch itself reports a bad config
        return None, source


def describe_grid(record: TraceRecord) -> str:
    """``grid=64x1x1`` or ``grid=(buffer sizes)`` for the trace line."""
    if record.grid is None:
        return f"grid=({record.grid_source})"
    return "grid=" + "x".join(str(g) for g in record.grid)


def chrome_trace(trace: list[TraceRecord], pid: int | None = None) -> dict:
    """``trace`` as a Chrome-trace JSON object: one complete (``ph: "X"``) event per dispatch.

    ``ts`` and ``dur`` are microseconds from the first traced dispatch; ``tid`` is the calling
    thread, so concurrent dispatches get their own tracks in Perfetto.
    """
    pid = os.getpid() if pid is None else pid
    origin = min((r.start_ns for r in trace), default=0)
    events: list[dict] = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "vyre"}}]
    for tid in sorted({r.thread for r in trace}):
        events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": f"thread {tid}"}})
    for r in trace:
        events.append({
            "name": "+".join(r.programs), "cat": r.kind, "ph": "X", "pid": pid, "tid": r.thread,
            "ts": (r.start_ns - origin) / 1000.0, "dur": r.duration_ns / 1000.0,
            "args": {"backend": r.backend, "kind": r.kind, "grid": list(r.grid) if r.grid else None,
                     "grid_source": r.grid_source, "label": r.label, "error": r.error},
        })
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"producer": "vyre-trace"}}


def write_chrome_trace(path: str | os.PathLike, trace: list[TraceRecord] | None = None) -> Path:
    """Write ``trace`` (default: every record so far) as Chrome-trace JSON to ``path``, atomically."""
    target = Path(path)
    partial = target.with_name(target.name + ".partial")
    partial.write_text(json.dumps(chrome_trace(records() if trace is None else trace)), encoding="utf-8")
    partial.replace(target)
    return target


class Tracer:
    """Registered as the ``trace`` plugin when ``VYRE_TRACE=1``; prints and records each dispatch."""

    def __init__(self, stream=None, path: str | None = None, fmt: str = "jsonl") -> None:
        if fmt not in FORMATS:
            raise ValueError(f"trace format {fmt!r} is not one of {', '.join(FORMATS)}. "
                             "Fix: set VYRE_TRACE_FORMAT=jsonl or chrome.")
        self.stream = stream if stream is not None else sys.stderr
        self.format = fmt
        self.path = path or (DEFAULT_CHROME_FILE if fmt == "chrome" else None)

    @vyre.hookimpl
    def vyre_after_dispatch(self, backend_id, kind, program, programs, config, duration_ns, error, grid) -> None:
        global _dropped
        grid, source = dispatch_grid(program, config, grid)
        record = TraceRecord(
            backend=backend_id,
            kind=kind,
            programs=tuple(p.name or "<unnamed>" for p in programs),
            label=getattr(config, "label", None),
            grid=grid,
            grid_source=source,
            start_ns=time.perf_counter_ns() - duration_ns,
            duration_ns=duration_ns,
            thread=threading.get_native_id(),
            error=None if error is None else f"{type(error).__name__}: {error}",
        )
        with _lock:
            if len(_records) < MAX_RECORDS:
                _records.append(record)
            else:
                _dropped += 1
        self._emit(record)

    def _emit(self, record: TraceRecord) -> None:
        outcome = "ok" if record.error is None else f"FAILED {record.error.splitlines()[0]}"
        line = (f"vyre-trace: {record.backend} {record.kind} {'+'.join(record.programs)} {describe_grid(record)} "
                f"{record.duration_ns / 1e6:.3f} ms {outcome}\n")
        with _lock:  # one write per line, so that lines of concurrent dispatches do not interleave
            self.stream.write(line)
            self.stream.flush()
            if self.path and self.format == "jsonl":
                with open(self.path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(asdict(record)) + "\n")

    def write_chrome(self) -> None:
        """Write the Chrome trace of every dispatch so far to ``self.path`` (registered with ``atexit``)."""
        if not records():
            return
        try:
            target = write_chrome_trace(self.path)
        except OSError as exc:
            print(f"vyre-trace: cannot write {self.path}: {exc.strerror}. Fix: set VYRE_TRACE_FILE to a writable "
                  "path.", file=self.stream, flush=True)
            return
        dropped = f" ({_dropped} more not kept)" if _dropped else ""
        print(f"vyre-trace: wrote {len(records())} dispatches{dropped} to {target} (open it in ui.perfetto.dev)",
              file=self.stream, flush=True)


def from_environment() -> object:
    """A ``Tracer`` when ``VYRE_TRACE`` is set to something other than 0, else an object with no hooks."""
    if os.environ.get("VYRE_TRACE", "0") in ("", "0"):
        return _Disabled()
    fmt = os.environ.get("VYRE_TRACE_FORMAT", "").strip().lower() or "jsonl"
    if fmt not in FORMATS:
        print(f"vyre-trace: VYRE_TRACE_FORMAT={fmt!r} is not one of {', '.join(FORMATS)}; writing jsonl. "
              "Fix: set VYRE_TRACE_FORMAT=jsonl or chrome.", file=sys.stderr, flush=True)
        fmt = "jsonl"
    tracer = Tracer(path=os.environ.get("VYRE_TRACE_FILE") or None, fmt=fmt)
    if fmt == "chrome":
        atexit.register(tracer.write_chrome)
    return tracer


class _Disabled:
    """Registered instead of a Tracer when tracing is off: implements no hook, costs nothing."""
