"""Equality saturation on any backend: e-matching of rule patterns on the device, rewrites applied,
the e-graph rebuilt by ``EGraph.congruence_closure``.

One iteration (egglog's): match every rule on the current e-graph, then apply every match, then
rebuild. Between iterations the columns are kept *compact*: canonical e-class ids numbered densely
from 0, one e-node per distinct (operator, canonical children), rows sorted by e-class, so the
e-nodes of class ``c`` are rows ``starts[c] .. starts[c + 1]`` (the e-class -> e-nodes index every
nested pattern reads).

- *match*, one program per rule's left-hand side, one invocation per e-node: an e-node of the
  root's operator and arity binds its children; a child pattern that is an operator or a leaf
  loops over the e-nodes of the child's class (through ``starts``), nested as deep as the pattern;
  a variable seen before must name the same class. Each match appends ``(root class, the classes
  of the variables)`` through an atomic counter into a slab, re-run larger if it overflowed; each
  rule's matches are then sorted, so the result does not depend on the order the counter gave.
- *apply*: each match adds the right-hand side's e-nodes, fresh classes for the inner ones and the
  match's root class for the top one; a right-hand side that is a bare variable becomes a union
  of the root's class and the variable's.
- *rebuild*: ``congruence_closure(unions=...)`` on the grown columns, then the compaction above.

``device=True`` (the default) sorts, applies and compacts on the device with the compact e-graph
resident (``vyre.lib.egraph_device``); ``device=False`` reads the matches back and does those
steps in numpy on the host (``find_matches``, ``_Growth``, ``compact``). Both number everything
alike, so their results are equal bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

from vyre.driver.config import DispatchConfig
from vyre.driver.errors import InvalidProgram
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.lib import egraph, egraph_device, graph
from vyre.lib.egraph_rules import App, Columns, Rule, Signature, Var, parse_rules

U32 = DataType.U32
V = Expr.var
_WG = 256


@dataclass
class Saturation:
    """What ``saturate`` returns: the e-class count and the compact columns after the last iteration,
    the class of every input e-class id (``canonical``), and per iteration the e-classes, e-nodes and
    matches (``history``: the first entry is the input rebuilt, before any rule ran)."""

    classes: int
    columns: Columns
    canonical: np.ndarray
    iterations: int = 0
    history: list[tuple[int, int, int]] = field(default_factory=list)


@cache
def match_program(lhs: App) -> Program:
    """One invocation per e-node (row ``r``): every match of ``lhs`` rooted at ``r`` appended to
    ``out`` as ``(eclass[r], class of each variable)``, ``1 + len(variables)`` words, through ``count``."""
    r = Expr.invocation_id(0)
    names: dict[str, str] = {}  # pattern variable -> the IR variable holding its class
    loops = [0]

    def emit() -> list[Node]:
        width = 1 + len(names)
        slot = V("slot") * Expr.u32(width)
        return [Node.let("slot", Expr.atomic(AtomicOp.ADD, "count", Expr.u32(0), Expr.u32(1), relaxed=True)),
                Node.store("out", slot, Expr.load("eclass", r)),  # stores past the slab's end do nothing
                *[Node.store("out", slot + Expr.u32(1 + k), V(names_k)) for k, names_k in enumerate(names.values())]]

    def children(pat: App, row: Expr, k: int, rest: Callable[[], list[Node]]) -> list[Node]:
        if k == len(pat.children):
            return rest()
        child = pat.children[k]
        cls = Expr.load("children", Expr.load("offsets", row) + Expr.u32(k))

        def then() -> list[Node]:
            return children(pat, row, k + 1, rest)

        if isinstance(child, Var):
            if child.name in names:  # a variable seen before: the same class or no match
                return [Node.if_(Expr.eq(V(names[child.name]), cls), then())]
            names[child.name] = f"v{len(names)}"
            return [Node.let(names[child.name], cls), *then()]
        loops[0] += 1
        s, c = f"s{loops[0]}", f"c{loops[0]}"
        is_child = Expr.and_(Expr.eq(Expr.load("op", V(s)), Expr.u32(child.op)),
                             Expr.eq(Expr.load("lens", V(s)), Expr.u32(len(child.children))))
        return [Node.let(c, cls),
                Node.loop(s, Expr.load("starts", V(c)), Expr.load("starts", V(c) + Expr.u32(1)),
                          [Node.if_(is_child, children(child, V(s), 0, then))])]

    is_root = Expr.and_(Expr.eq(Expr.load("op", r), Expr.u32(lhs.op)),
                        Expr.eq(Expr.load("lens", r), Expr.u32(len(lhs.children))))
    body = children(lhs, r, 0, emit)
    return Program(
        [*egraph.COLUMNS, BufferDecl.read("starts", 5, U32), BufferDecl.read_write("out", 6, U32),
         BufferDecl.read_write("count", 7, U32, 1)], (_WG, 1, 1),
        [Node.if_(Expr.lt(r, Expr.buf_len("op")), [Node.if_(is_root, body)])],
        name="egraph_match",
    )


def _gather(lens: np.ndarray, offsets: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values[offsets[i] : offsets[i] + lens[i]]`` for every ``i``, concatenated."""
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, np.uint32)
    starts = np.repeat(offsets.astype(np.int64) - np.cumsum(lens, dtype=np.int64) + lens, lens)
    return values[starts + np.arange(total)]


def compact(cols: Columns, labels: np.ndarray) -> tuple[Columns, np.ndarray, np.ndarray]:
    """The columns with canonical classes (``labels``) numbered densely, one e-node per distinct
    (class, operator, children), rows sorted by class then operator then children; the class index
    ``starts`` (classes + 1 offsets) and the new class of every old id (``0xFFFFFFFF``: an id whose
    class holds no e-node and no child)."""
    eclass, op, offsets, lens, children = cols
    ce, cc = labels[eclass], labels[children]
    used = np.unique(np.concatenate([ce, cc]))
    remap = np.full(labels.size, egraph.EMPTY, np.uint32)
    remap[used] = np.arange(used.size, dtype=np.uint32)
    ce, cc = remap[ce], remap[cc]
    arity = int(lens.max(initial=0))
    kids = np.full((ce.size, arity), egraph.EMPTY, np.uint32)  # children padded, one row per e-node
    if arity:
        kids[np.repeat(np.arange(ce.size), lens), np.arange(int(lens.sum())) - np.repeat(
            np.cumsum(lens, dtype=np.int64) - lens, lens)] = _gather(lens, offsets, cc)
    keys = np.column_stack([ce, op, lens, kids])
    _, keep = np.unique(keys, axis=0, return_index=True)  # rows ordered by (class, op, lens, children)
    new_lens = lens[keep]
    new_offsets = np.zeros(keep.size, np.uint32)
    new_offsets[1:] = np.cumsum(new_lens, dtype=np.uint32)[:-1]
    new_children = _gather(new_lens, offsets[keep], cc)
    new_eclass = ce[keep]
    starts = np.zeros(used.size + 1, np.uint32)
    starts[1:] = np.cumsum(np.bincount(new_eclass, minlength=used.size), dtype=np.uint32)
    return (new_eclass, op[keep], new_offsets, new_lens, new_children), starts, remap[labels]


def match_slabs(backend: Any, res: graph.ResidentSet, handles: Sequence[Any], n: int,
                rules: Sequence[Rule]) -> list[tuple[Any, int]]:
    """Every match of every rule's left-hand side on the resident compact columns and ``starts``
    (``handles``, ``n`` e-nodes): per rule a slab (in ``res``) holding its ``count`` matches of
    ``1 + variables`` words, in the order the atomic counter gave them. A slab that overflowed (its
    extra stores did nothing) is made again with room for its count and its rule run again."""
    found: dict[int, tuple[Any, int]] = {}
    room = [max(n, 16)] * len(rules)
    while len(found) < len(rules):
        todo = [k for k in range(len(rules)) if k not in found]
        slabs = {k: res.alloc(4 * room[k] * (1 + len(rules[k].variables))) for k in todo}
        counts = {k: res.upload(np.zeros(1, np.uint32)) for k in todo}
        words = backend.dispatch_sequence(
            [(match_program(rules[k].lhs), [*handles, slabs[k], counts[k]], DispatchConfig(elements=max(n, 1)))
             for k in todo], reads=[(counts[k], 0, 4) for k in todo])
        for k, w in zip(todo, words, strict=True):
            size = int(np.asarray(w).view(np.uint32)[0])
            if size <= room[k]:
                found[k] = (slabs[k], size)
            else:
                room[k] = size
    return [found[k] for k in range(len(rules))]


def find_matches(backend: Any, cols: Columns, starts: np.ndarray, rules: Sequence[Rule]) -> list[np.ndarray]:
    """Every match of every rule's left-hand side: per rule a ``(matches, 1 + variables)`` u32 array,
    rows in lexicographic order (so new e-classes are numbered alike on every backend, whatever
    order the slab's atomic counter handed out)."""
    with graph.ResidentSet(backend) as res:
        slabs = match_slabs(backend, res, [res.upload(c) for c in (*cols, starts)], cols[0].size, rules)
        widths = [1 + len(rule.variables) for rule in rules]
        wanted = [(slab, 0, 4 * size * w) for (slab, size), w in zip(slabs, widths, strict=True) if size]
        words = iter(backend.dispatch_sequence([], reads=wanted) if wanted else [])
        found = []
        for (_, size), w in zip(slabs, widths, strict=True):
            rows = np.asarray(next(words)).view(np.uint32).reshape(size, w) if size else np.zeros((0, w), np.uint32)
            found.append(rows[np.lexsort(rows.T[::-1])])  # the order the atomic counter gave them is not kept
        return found


class _Growth:
    """New e-nodes and unions of one iteration's rewrites, fresh classes numbered from ``classes``."""

    def __init__(self, classes: int) -> None:
        self.next = classes
        self.rows: list[tuple[np.ndarray, int, list[np.ndarray]]] = []  # (classes, op, child classes)
        self.unions: list[tuple[np.ndarray, np.ndarray]] = []

    def apply(self, rule: Rule, matches: np.ndarray) -> None:
        """Add ``rule``'s right-hand side for every match (one row per match)."""
        if matches.shape[0] == 0:
            return
        root, bound = matches[:, 0], {v: matches[:, 1 + k] for k, v in enumerate(rule.variables)}

        def build(p: Var | App, top: bool) -> np.ndarray:
            if isinstance(p, Var):
                return bound[p.name]
            kids = [build(c, False) for c in p.children]
            if top:
                cls = root
            else:
                cls = np.arange(self.next, self.next + root.size, dtype=np.uint32)
                self.next += root.size
            self.rows.append((cls, p.op, kids))
            return cls

        top = build(rule.rhs, True)
        if isinstance(rule.rhs, Var):
            self.unions.append((root, top))

    def columns(self, cols: Columns) -> tuple[Columns, tuple[np.ndarray, np.ndarray] | None]:
        """``cols`` with the new rows after them, and the unions (None: none)."""
        eclass, op, offsets, lens, children = ([c] for c in cols)
        used = int(cols[4].size)
        for cls, o, kids in self.rows:
            m, arity = cls.size, len(kids)
            eclass.append(cls)
            op.append(np.full(m, o, np.uint32))
            lens.append(np.full(m, arity, np.uint32))
            offsets.append((used + arity * np.arange(m)).astype(np.uint32))
            if arity:
                children.append(np.stack(kids, axis=1).reshape(-1))
            used += arity * m
        grown = tuple(np.concatenate(c).astype(np.uint32, copy=False) for c in (eclass, op, offsets, lens, children))
        unions = None
        if self.unions:
            unions = (np.concatenate([a for a, _ in self.unions]), np.concatenate([b for _, b in self.unions]))
        return (grown[0], grown[1], grown[2], grown[3], grown[4]), unions


def _rebuild(backend: Any, cols: Columns,
             unions: tuple[np.ndarray, np.ndarray] | None) -> tuple[Columns, np.ndarray, np.ndarray]:
    """Congruence closure of ``cols`` (with ``unions``) on the device, then ``compact`` on the host."""
    with egraph.EGraph(*cols, backend=backend) as g:
        labels = g.congruence_closure(unions=unions)
    return compact(cols, labels)


def _compose(remap: np.ndarray, canonical: np.ndarray) -> np.ndarray:
    """``remap[canonical]``, ``EMPTY`` kept (an input id whose class held no e-node and no child)."""
    out = np.full(canonical.size, egraph.EMPTY, np.uint32)
    keep = canonical != egraph.EMPTY
    out[keep] = remap[canonical[keep]]
    return out


def _saturate_host(be: Any, cols: Columns, parsed: list[Rule], iterations: int) -> Saturation:
    """The rounds with apply and compaction on the host (numpy), the columns uploaded every round."""
    current, starts, remap = _rebuild(be, cols, None)
    out = Saturation(starts.size - 1, current, remap, 0, [(starts.size - 1, current[0].size, 0)])
    for _ in range(iterations):
        matches = find_matches(be, current, starts, parsed)
        growth = _Growth(starts.size - 1)
        for rule, m in zip(parsed, matches, strict=True):
            growth.apply(rule, m)
        grown, unions = growth.columns(current)
        if grown[0].size == current[0].size and unions is None:
            break  # no match at all: nothing can change
        new, starts, remap = _rebuild(be, grown, unions)
        still = all(np.array_equal(a, b) for a, b in zip(new, current, strict=True))
        out.classes, out.columns, out.canonical = starts.size - 1, new, _compose(remap, out.canonical)
        out.iterations += 1
        out.history.append((out.classes, new[0].size, sum(m.shape[0] for m in matches)))
        current = new
        if still:
            break  # saturated: a further iteration finds the same matches and adds nothing new
    return out


def _saturate_device(be: Any, cols: Columns, parsed: list[Rule], iterations: int) -> Saturation:
    """The rounds with the compact e-graph resident (``vyre.lib.egraph_device``): the host reads
    match counts, the closure's overflow word, the compaction's counts and a changed flag."""
    current = egraph_device.first(be, cols, egraph_device.Bounds.of(parsed, cols[1], cols[3]))
    try:
        history = [(current.classes, current.n, 0)]
        iterations_run = 0
        for _ in range(iterations):
            with graph.ResidentSet(be) as res:
                slabs = match_slabs(be, res, [*current.cols, current.starts], current.n, parsed)
                if not any(size for _, size in slabs):
                    break  # no match at all: nothing can change
                new = egraph_device.rebuild(be, current, parsed, slabs)
            still = egraph_device.same(be, new, current)
            current.close()
            current = new
            iterations_run += 1
            history.append((current.classes, current.n, sum(size for _, size in slabs)))
            if still:
                break  # saturated: a further iteration finds the same matches and adds nothing new
        columns, canonical = current.read()
        return Saturation(current.classes, (columns[0], columns[1], columns[2], columns[3], columns[4]), canonical,
                          iterations_run, history)
    finally:
        current.close()


def saturate(cols: Sequence[object], rules: Sequence[str | Rule], iterations: int, *,
             signature: Signature | None = None, backend: object | None = None, device: bool = True) -> Saturation:
    """``iterations`` rounds of equality saturation of the e-graph ``cols`` (``EGraph.saturate``).
    ``device=False`` applies the matches and compacts on the host (numpy), as before the device
    path; both give the same result."""
    if not isinstance(iterations, int) or isinstance(iterations, bool) or iterations < 0:
        raise InvalidProgram(f"iterations must be a non-negative int, got {iterations!r}",
                             "pass the number of match-apply-rebuild rounds, e.g. 4.")
    parsed = parse_rules(rules, signature)
    be = graph.backend_or_default(backend)
    e, o, off, ln, ch = (graph.host_copy(graph.u32_array(name, c)) for name, c in
                         zip(("eclass", "op", "child_offsets", "child_lens", "children"), cols, strict=True))
    if e.size == 0:
        with egraph.EGraph(e, o, off, ln, ch, backend=be):  # checks the columns
            return Saturation(0, (e, o, off, ln, ch), np.zeros(0, np.uint32), 0, [(0, 0, 0)])
    run = _saturate_device if device else _saturate_host
    return run(be, (e, o, off, ln, ch), parsed, iterations)
