"""CUDA graph capture and replay: ``GraphCache``, a bounded LRU of captured work (docs/resident.md).

Work is recorded by a callable ``record(stream_ptr)`` that only enqueues launches, memsets and
device-to-device copies on one stream. Capture hygiene (see docs/architecture.md):

- callers build every launch plan (parameter blocks written), load modules and take buffers
  *before* capture, so nothing is loaded, allocated or copied from the host inside the window;
- the capture always ends (``try``/``except``: ``end_capture`` even on error) and a partial graph
  is discarded, never cached;
- device buffers a live graph uses are pinned (``DeviceBuffer.retain``) and unpinned only when
  the graph is evicted, so the pools never reuse them while a graph can still write them;
- when capture fails the same work runs eagerly once; if that succeeds the key is remembered as
  "eager" (never recaptured), and a genuine error surfaces from the eager run with nothing cached.

Keys are made by the callers (pipelines, sequences) and name everything a replay depends on:
program digests, logical grid, coarsening factor (``vyre_cuda._dispatch.coarsening``; a different factor is a
different kernel and parameter block), capacity classes or buffer pointers.

``VYRE_CUDA_GRAPHS=0`` (read on each call) turns capture off; callers then launch eagerly and
get identical results. Callers hold ``backend.lock`` around every method (so ``bump`` may be
lock-free); the cache itself has no lock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from vyre.driver.errors import DispatchFailed
from vyre_cuda._runtime import settings
from vyre_cuda._runtime.errors import cuda_errors, translate
from vyre_cuda._runtime.profiler import enabled as nvtx_enabled
from vyre_cuda._runtime.profiler import nvtx_range

GRAPHS_ENV = settings.GRAPHS
DEFAULT_CAPACITY = 64

Record = Callable[[int], None]
Counter = Callable[[str, int], None]


def graphs_enabled(backend: Any = None) -> bool:
    """False when ``VYRE_CUDA_GRAPHS`` is 0/false/off/no, or ``backend`` syncs after each launch."""
    if backend is not None and getattr(backend, "sync_each", False):
        return False  # VYRE_CUDA_SYNC_EACH=1 synchronises after every launch: impossible in a capture
    return settings.graphs()


def pin(buffers: Iterable[Any]) -> None:
    """Pin device buffers (``DeviceBuffer.retain``): the pools will not reuse them."""
    for buf in buffers:
        buf.retain()


def unpin(buffers: Iterable[Any]) -> None:
    """Drop pins taken with ``pin``; a buffer already given back then returns to the heap."""
    for buf in buffers:
        buf.release()


class GraphKey:
    """A hashable key part whose hash is computed once (graph keys nest many of them)."""

    __slots__ = ("parts", "_hash")

    def __init__(self, parts: tuple) -> None:
        self.parts = parts
        self._hash = hash(parts)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, GraphKey) and self._hash == hash(other)
                                 and self.parts == other.parts)

    def __repr__(self) -> str:
        return f"GraphKey({self.parts!r})"


@dataclass(eq=False)
class CapturedGraph:
    """One cache entry: an instantiated graph (None: replayed eagerly) and the buffers it pins.

    ``graph`` is anything with ``launch(stream)``: a ``cupy.cuda.Graph`` (destroyed by CuPy when
    dropped) or a ``conditional.WhileGraph`` (destroyed by ``free``). ``alive`` turns False when the
    entry is evicted, so holders can replay without a lookup.
    """

    graph: Any | None
    record: Record | None  # re-runs the work eagerly when ``graph`` is None
    pinned: tuple = ()
    keepalive: tuple = ()
    replays: int = 0
    alive: bool = True
    free: Callable[[], None] | None = None  # frees a graph its maker owns (conditional graphs) when dropped


def capture(stream: Any, record: Record) -> Any:
    """``record(stream.ptr)`` captured (relaxed mode) into an instantiated ``cupy.cuda.Graph``.

    The capture always ends: when ``record`` raises, the partial graph is dropped and the error
    re-raised; an invalidated capture raises ``DispatchFailed`` (CUDA errors are translated).
    """
    with cuda_errors("beginning a CUDA graph capture"):
        stream.begin_capture()
    try:
        record(stream.ptr)
    except BaseException:
        try:
            stream.end_capture()
        except Exception:  # noqa: BLE001, S110 - the capture is void anyway; the first error wins
            pass
        raise
    with cuda_errors("ending a CUDA graph capture"):
        return stream.end_capture()


class GraphCache:
    """Captured graphs by key, least recently used evicted first (``capacity`` entries)."""

    def __init__(self, count: Counter | None = None, capacity: int = DEFAULT_CAPACITY,
                 bump: Callable[[str], None] | None = None) -> None:
        self.capacity = max(1, capacity)
        self._count: Counter = count or _ignore
        self._bump = bump or (lambda name: self._count(name, 1))  # +1 on the replay path (lock-free)
        self._entries: OrderedDict[Hashable, CapturedGraph] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def lookup(self, key: Hashable) -> CapturedGraph | None:
        """The entry for ``key`` (now most recently used), or None."""
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def run(self, key: Hashable, stream: Any, record: Record, pinned: Iterable[Any] = (),
            keepalive: Iterable[Any] = (), capture_on: Any = None) -> CapturedGraph:
        """Replay the graph for ``key`` on ``stream``; capture ``record`` first when there is none yet
        (on ``capture_on`` when given: a caller's legacy default stream cannot be captured)."""
        entry = self.lookup(key)
        if entry is None:
            return self.capture(key, stream, record, pinned, keepalive, capture_on)
        self.replay(entry, stream)
        return entry

    def capture(self, key: Hashable, stream: Any, record: Record, pinned: Iterable[Any] = (),
                keepalive: Iterable[Any] = (), capture_on: Any = None) -> CapturedGraph:
        """Capture ``record`` under ``key`` and run it once on ``stream`` (as a replay, or eagerly on failure)."""
        try:
            graph = capture(stream if capture_on is None else capture_on, record)
        except Exception:  # noqa: BLE001 - the eager run below decides whether this was real
            graph = None
        if graph is None:
            record(stream.ptr)  # a genuine error raises here and nothing is cached
            self._count("cuda_graph_capture_failures", 1)
        entry = self.insert(key, graph, record, pinned, keepalive)
        if graph is not None:
            self.replay(entry, stream)
        return entry

    def insert(self, key: Hashable, graph: Any | None, record: Record | None, pinned: Iterable[Any] = (),
               keepalive: Iterable[Any] = (), free: Callable[[], None] | None = None) -> CapturedGraph:
        """Cache a graph made elsewhere (None: an eager entry) under ``key``, pinning ``pinned``;
        ``free`` releases the graph when the entry is dropped. Nothing runs."""
        self.evict(key)
        if graph is not None:
            self._count("cuda_graph_captures", 1)
            self._count("cuda_graphs_live", 1)
        entry = CapturedGraph(graph, record, tuple(pinned), tuple(keepalive), free=free)
        pin(entry.pinned)
        self._entries[key] = entry
        while len(self._entries) > self.capacity:
            self._drop(self._entries.popitem(last=False)[1])
        return entry

    def replay(self, entry: CapturedGraph, stream: Any) -> None:
        """Launch a captured graph on ``stream`` (an eager entry re-runs its recording)."""
        if entry.graph is None:
            if entry.record is None:
                raise DispatchFailed("graph", "a dropped conditional loop graph was replayed",
                                     "look the graph up again (an evicted entry is not alive).")
            entry.record(stream.ptr)
            return
        try:
            if nvtx_enabled():
                with nvtx_range("vyre.cuda.graph_replay"):
                    entry.graph.launch(stream)
            else:
                entry.graph.launch(stream)
        except Exception as exc:  # noqa: BLE001 - CuPy errors never reach users unwrapped
            raise translate(exc, "replaying a CUDA graph") from exc
        entry.replays += 1
        self._bump("cuda_graph_replays")

    def evict(self, key: Hashable) -> None:
        """Drop the entry for ``key`` (if any), unpinning its buffers."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._drop(entry)

    def evict_if(self, doomed: Callable[[Any, CapturedGraph], bool]) -> int:
        """Drop every entry for which ``doomed(key, entry)`` holds; returns how many. ``key`` is the
        owner's key as it was stored (its owner knows its shape, e.g. a tuple)."""
        keys = [k for k, e in self._entries.items() if doomed(k, e)]
        for key in keys:
            self.evict(key)
        return len(keys)

    def clear(self) -> None:
        """Drop every entry."""
        while self._entries:
            self._drop(self._entries.popitem(last=False)[1])

    def _drop(self, entry: CapturedGraph) -> None:
        # CuPy destroys its graphs on dealloc, ``free`` the others; CUDA lets an in-flight launch finish.
        if entry.graph is not None:
            self._count("cuda_graphs_live", -1)
        free, entry.free = entry.free, None
        entry.graph, entry.alive = None, False
        if free is not None:
            free()
        pinned, entry.pinned, entry.keepalive = entry.pinned, (), ()
        unpin(pinned)


def _ignore(_: str, __: int) -> None:
    return None
