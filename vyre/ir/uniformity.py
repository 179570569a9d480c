"""Workgroup-uniformity analysis: which values and control paths may differ between invocations.

The validator records, while it walks a program, a graph whose nodes are variable declarations
and control contexts (the branches of an ``if``, the body of a ``loop``). A node is *varying*
when it is a source (its defining expression reads something invocation-dependent) or when a
varying node has an edge into it (a varying variable feeds it, or its enclosing context varies).
``propagate`` solves the graph in linear time, which also covers loop-carried assignments.

The validator also records a small tree of synchronisation events (barriers, subgroup
collectives, returns, and the ``if``/``loop`` structure around them); ``sync_findings`` then
rejects every barrier or collective that some invocations of a workgroup could skip: one in a
varying context, one after a ``return`` in a varying context, and one anywhere in a loop whose
body holds such a ``return`` (later iterations run after it).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from vyre.driver.errors import Finding


class UniformityGraph:
    """Variables and control contexts as graph nodes; ``propagate`` marks the varying ones."""

    ROOT = 0  # the program's top-level context: uniform

    def __init__(self) -> None:
        self._edges: list[list[int]] = [[]]
        self._sources: list[int] = []
        self._varying: list[bool] | None = None

    def add_node(self, source: bool = False, parents: tuple[int, ...] = ()) -> int:
        """A new node; ``source`` makes it varying; each parent's varyingness flows into it."""
        node = len(self._edges)
        self._edges.append([])
        if source:
            self._sources.append(node)
        for p in parents:
            self.add_edge(p, node)
        return node

    def add_edge(self, src: int, dst: int) -> None:
        self._edges[src].append(dst)

    def mark_source(self, node: int) -> None:
        self._sources.append(node)

    def propagate(self) -> None:
        varying = [False] * len(self._edges)
        queue = deque(self._sources)
        for s in self._sources:
            varying[s] = True
        while queue:
            for nxt in self._edges[queue.popleft()]:
                if not varying[nxt]:
                    varying[nxt] = True
                    queue.append(nxt)
        self._varying = varying

    def varying(self, node: int) -> bool:
        if self._varying is None:
            raise RuntimeError("call propagate() first")
        return self._varying[node]


# ---- synchronisation events ---------------------------------------------------------------
@dataclass
class SyncOp:
    """A barrier or subgroup collective reached in context ``ctx``."""

    what: str  # "barrier" or the subgroup op's name
    ctx: int
    path: str


@dataclass
class ReturnEvent:
    ctx: int


@dataclass
class Branches:
    """The two arms of an ``if``: events in ``then`` and ``otherwise``."""

    then: list = field(default_factory=list)
    otherwise: list = field(default_factory=list)


@dataclass
class LoopEvent:
    body: list = field(default_factory=list)


def _has_varying_return(events: list, graph: UniformityGraph) -> bool:
    stack = [events]
    while stack:
        for ev in stack.pop():
            if isinstance(ev, ReturnEvent) and graph.varying(ev.ctx):
                return True
            if isinstance(ev, Branches):
                stack += [ev.then, ev.otherwise]
            elif isinstance(ev, LoopEvent):
                stack.append(ev.body)
    return False


def sync_findings(events: list, graph: UniformityGraph) -> list[Finding]:
    """Findings for barriers/collectives that not every invocation of a workgroup reaches."""
    out: list[Finding] = []
    _walk_events(events, graph, False, out)
    return out


def _walk_events(events: list, graph: UniformityGraph, after_return: bool, out: list[Finding]) -> bool:
    """Check ``events`` in program order; returns whether a varying return may have run."""
    for ev in events:
        if isinstance(ev, SyncOp):
            _check_sync(ev, graph, after_return, out)
        elif isinstance(ev, ReturnEvent):
            after_return = after_return or graph.varying(ev.ctx)
        elif isinstance(ev, Branches):
            a = _walk_events(ev.then, graph, after_return, out)
            b = _walk_events(ev.otherwise, graph, after_return, out)
            after_return = a or b
        elif isinstance(ev, LoopEvent):
            tainted = after_return or _has_varying_return(ev.body, graph)
            after_return = _walk_events(ev.body, graph, tainted, out) or after_return
    return after_return


def _check_sync(ev: SyncOp, graph: UniformityGraph, after_return: bool, out: list[Finding]) -> None:
    kind = "barrier" if ev.what == "barrier" else f"subgroup op {ev.what}"
    if graph.varying(ev.ctx):
        code = "varying_barrier" if ev.what == "barrier" else "varying_subgroup_op"
        out.append(Finding(
            code, f"{kind} is under control flow that can differ between invocations of a workgroup",
            "move it out of the if/loop, or make the condition and loop bounds workgroup-uniform "
            "(built from literals, workgroup_id, buf_len and read-only loads at uniform indices)",
            ev.path))
    elif after_return:
        out.append(Finding(
            "sync_after_varying_return", f"{kind} can run after a return that only some invocations took",
            "place the return after the last barrier/subgroup op, or make its condition workgroup-uniform",
            ev.path))
