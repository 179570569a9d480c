"""Equality saturation's apply and compaction on the device (``saturate(..., device=True)``): the
compact e-graph stays resident between rounds and the host reads only counts.

- *order*: a stable LSD sort of row indices by key columns, least significant first (a key
  program gathers one column through the current order, ``vyre.lib.sort`` carries the order
  along), so rows come out in lexicographic order, as ``np.lexsort`` / ``np.unique`` give them.
- *grow*: the compact columns copied into grown ones, then one program per rule
  (``apply_program``, generated from the right-hand side) with one invocation per match, in the
  matches' lexicographic order, writing the new e-nodes and union pairs where the host's
  ``_Growth`` puts them.
- *compact*: canonical ids (the closure's labels) numbered densely (a mark per used id and an
  exclusive scan), rows ordered by (class, operator, arity, children; packed into u32/u64 sort keys),
  the first row of each run of equal rows kept (head flags and scans give each kept row its
  place and its children's offset), the e-class index ``starts`` and the new canonical ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from vyre import lib
from vyre.driver.config import DispatchConfig
from vyre.driver.errors import InvalidProgram
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.lib import egraph, graph
from vyre.lib.egraph_rules import App, Pattern, Rule, Var
from vyre.lib.io import ResidentArray

U32 = DataType.U32
V = Expr.var
EMPTY = egraph.EMPTY
_WG = 256


def _u(value: int) -> Expr:
    return Expr.u32(value)


def _param(k: int) -> Expr:
    return Expr.load("params", _u(k))


def _run(be: Any, steps: Sequence[tuple[Program, list[Any], int]]) -> None:
    """``steps`` as ``(program, handles, invocations)`` in one ``dispatch_sequence`` (empty ones left out)."""
    work = [(p, h, DispatchConfig(elements=n)) for p, h, n in steps if n > 0]
    if work:
        be.dispatch_sequence(work)


def _words(be: Any, reads: Sequence[tuple[Any, int]]) -> list[int]:
    """The u32 word at index ``k`` of each ``(handle, k)``, in one read."""
    got = be.dispatch_sequence([], reads=[(h, 4 * k, 4) for h, k in reads])
    return [int(np.asarray(w).view(np.uint32)[0]) for w in got]


def _scan(be: Any, res: graph.ResidentSet, handle: Any, n: int) -> Any:
    """The exclusive sum of ``n`` u32 words, resident (freed with ``res``)."""
    out = lib.exclusive_scan(ResidentArray(handle, np.uint32, n), backend=be)
    res.adopt(out.handle)
    return out.handle


# ---- small programs --------------------------------------------------------------------------------

@cache
def iota_program() -> Program:
    """``out[i] = i``."""
    i = Expr.invocation_id(0)
    return Program([BufferDecl.read_write("out", 0, U32)], (_WG, 1, 1),
                   [Node.if_(Expr.lt(i, Expr.buf_len("out")), [Node.store("out", i, i)])], name="egraph_iota")


_ROWS = (BufferDecl.read("ce", 0, U32), BufferDecl.read("op", 1, U32), BufferDecl.read("offsets", 2, U32),
         BufferDecl.read("lens", 3, U32), BufferDecl.read("cc", 4, U32))  # renamed columns (compaction)


def bits(largest: int) -> int:
    """Bits of a key field whose values are at most ``largest``."""
    return max(1, int(largest).bit_length())


_ID_BITS = (8, 16, 21, 32)  # e-class id fields take one of these widths: 3 fit a u64 up to 2**21 classes


def id_bits(classes: int) -> int:
    """Bits of a key field holding e-class ids below ``classes``, rounded up to one of a few widths
    (so the key programs, compiled per packing, stay the same while the e-graph grows)."""
    need = bits(classes - 1)
    return next(b for b in _ID_BITS if b >= need)


Key = tuple[tuple[int, int], ...]  # a sort key's fields, most significant first: (field, shift)


def pack(widths: Sequence[int]) -> list[Key]:
    """Key fields (most significant first, each its width in bits) packed into sort keys of at
    most 64 bits, most significant key first (greedy from the least significant field, so the
    fields stay whole and in order)."""
    keys: list[list[tuple[int, int]]] = []
    used = 64
    for f in reversed(range(len(widths))):
        if used + widths[f] > 64:
            keys.append([])
            used = 0
        keys[-1].append((f, used))
        used += widths[f]
    return [tuple(reversed(k)) for k in reversed(keys)]


def is_wide(key: Key, widths: Sequence[int]) -> bool:
    """Whether ``key`` needs a u64 (its fields take more than 32 bits)."""
    return max(shift + widths[f] for f, shift in key) > 32


@cache
def key_program(source: str, width: int, key: Key, wide: bool) -> Program:
    """``key[i]``: the fields ``(field, shift)`` of row ``order[i]`` packed (``field << shift``, a
    u64 when ``wide``). ``source="matches"``: field ``f`` is word ``f`` of the ``width``-word match
    row; ``"rows"``: the e-node rows' class, operator, arity, then child ``f - 3`` (0 past the
    arity: rows of equal arity have children in the same fields)."""
    i = Expr.invocation_id(0)
    r = V("r")
    kind = DataType.U64 if wide else U32

    def field(f: int) -> Expr:
        if source == "matches":
            return Expr.load("matches", r * _u(width) + _u(f))
        if f < 3:
            return Expr.load(("ce", "op", "lens")[f], r)
        child = Expr.load("cc", Expr.load("offsets", r) + _u(f - 3))  # a load past the end reads 0
        return Expr.select(Expr.lt(_u(f - 3), Expr.load("lens", r)), child, _u(0))

    packed: Expr | None = None
    for f, shift in key:
        term = Expr.cast(kind, field(f)) if wide else field(f)
        term = Expr.shl(term, _u(shift)) if shift else term
        packed = term if packed is None else Expr.bitor(packed, term)
    assert packed is not None
    inputs = [BufferDecl.read("matches", 0, U32)] if source == "matches" else list(_ROWS)
    return Program(
        [*inputs, BufferDecl.read("order", len(inputs), U32), BufferDecl.read_write("key", len(inputs) + 1, kind)],
        (_WG, 1, 1),
        [Node.if_(Expr.lt(i, Expr.buf_len("key")), [Node.let("r", Expr.load("order", i)),
                                                      Node.store("key", i, packed)])],
        name="egraph_sort_key",
    )


_COPY_NAMES = ("eclass", "op", "offsets", "lens")


@cache
def copy_program() -> Program:
    """The ``params = [n, n_children]`` rows and child words of the source columns into the head of
    the destination columns."""
    i = Expr.invocation_id(0)
    src = [BufferDecl.read(f"s_{c}", k, U32) for k, c in enumerate((*_COPY_NAMES, "children"))]
    dst = [BufferDecl.read_write(f"d_{c}", 6 + k, U32) for k, c in enumerate((*_COPY_NAMES, "children"))]
    return Program(
        [*src, BufferDecl.read("params", 5, U32), *dst], (_WG, 1, 1),
        [Node.if_(Expr.lt(i, _param(0)), [Node.store(f"d_{c}", i, Expr.load(f"s_{c}", i)) for c in _COPY_NAMES]),
         Node.if_(Expr.lt(i, _param(1)), [Node.store("d_children", i, Expr.load("s_children", i))])],
        name="egraph_copy",
    )


@dataclass(frozen=True)
class Shape:
    """A right-hand side's e-nodes in the host's order (post-order, the top last): per node its
    operator and children (an ``int``: the index of a node; a ``str``: a variable)."""

    nodes: tuple[tuple[int, tuple[int | str, ...]], ...]

    @staticmethod
    def of(rhs: Pattern) -> Shape:
        nodes: list[tuple[int, tuple[int | str, ...]]] = []

        def walk(p: App) -> int:
            refs = tuple(walk(c) if isinstance(c, App) else c.name for c in p.children)
            nodes.append((p.op, refs))
            return len(nodes) - 1

        if isinstance(rhs, App):
            walk(rhs)
        return Shape(tuple(nodes))

    @property
    def rows(self) -> int:
        """E-nodes added per match."""
        return len(self.nodes)

    @property
    def words(self) -> int:
        """Child words added per match."""
        return sum(len(refs) for _, refs in self.nodes)

    @property
    def fresh(self) -> int:
        """Fresh e-classes per match (every node but the top)."""
        return max(len(self.nodes) - 1, 0)


@cache
def apply_program(rhs: Pattern, variables: tuple[str, ...]) -> Program:
    """One invocation per match ``i < m`` (the ``order[i]``-th row of ``matches``, ``1 + variables``
    words): the right-hand side's e-nodes, node ``j`` (post-order) at row ``row_base + j*m + i`` with
    its children at ``child_base + (arities before j)*m + arity_j*i``, inner node ``j`` in the fresh
    class ``class_base + j*m + i`` and the top in the match's root class (``_Growth``'s numbering);
    a bare-variable right-hand side writes the union pair (root, variable) at ``union_base + i``.
    ``params = [m, row_base, class_base, child_base, union_base]``."""
    i = Expr.invocation_id(0)
    m = V("m")
    width = 1 + len(variables)
    bound = {name: V(f"v{k}") for k, name in enumerate(variables)}
    body: list[Node] = [Node.let("m", _param(0)), Node.let("at", Expr.load("order", i) * _u(width)),
                        Node.let("root", Expr.load("matches", V("at")))]
    body += [Node.let(f"v{k}", Expr.load("matches", V("at") + _u(1 + k))) for k in range(len(variables))]
    if isinstance(rhs, Var):
        slot = _param(4) + i
        body += [Node.store("union_a", slot, V("root")), Node.store("union_b", slot, bound[rhs.name])]
    shape = Shape.of(rhs)
    top = shape.rows - 1

    def cls(j: int) -> Expr:
        return V("root") if j == top else _param(2) + _u(j) * m + i

    before = 0
    for j, (op, refs) in enumerate(shape.nodes):
        row = _param(1) + _u(j) * m + i
        body += [Node.let(f"o{j}", _param(3) + _u(before) * m + _u(len(refs)) * i),
                 Node.store("eclass", row, cls(j)), Node.store("op", row, _u(op)),
                 Node.store("lens", row, _u(len(refs))), Node.store("offsets", row, V(f"o{j}"))]
        body += [Node.store("children", V(f"o{j}") + _u(q), bound[ref] if isinstance(ref, str) else cls(ref))
                 for q, ref in enumerate(refs)]
        before += len(refs)
    return Program(
        [BufferDecl.read("matches", 0, U32), BufferDecl.read("order", 1, U32), BufferDecl.read("params", 2, U32),
         *(BufferDecl.read_write(c, 3 + k, U32) for k, c in enumerate((*_COPY_NAMES, "children"))),
         BufferDecl.read_write("union_a", 8, U32), BufferDecl.read_write("union_b", 9, U32)], (_WG, 1, 1),
        [Node.if_(Expr.lt(i, _param(0)), body)],
        name="egraph_apply",
    )


@cache
def canon_program() -> Program:
    """``ce[r] = labels[eclass[r]]`` (``r < params[0]``), ``cc[j] = labels[children[j]]``
    (``j < params[1]``), and a mark at every canonical id met."""
    i = Expr.invocation_id(0)

    def one(src: str, dst: str, count: Expr) -> Node:
        label = V(f"l_{dst}")
        return Node.if_(Expr.lt(i, count), [Node.let(f"l_{dst}", Expr.load("labels", Expr.load(src, i))),
                                            Node.store(dst, i, label), Node.store("mark", label, _u(1))])

    return Program(
        [BufferDecl.read("eclass", 0, U32), BufferDecl.read("children", 1, U32), BufferDecl.read("labels", 2, U32),
         BufferDecl.read("params", 3, U32), BufferDecl.read_write("ce", 4, U32), BufferDecl.read_write("cc", 5, U32),
         BufferDecl.read_write("mark", 6, U32)], (_WG, 1, 1),
        [one("eclass", "ce", _param(0)), one("children", "cc", _param(1))],
        name="egraph_canon",
    )


@cache
def rename_program() -> Program:
    """``ce`` and ``cc`` through ``rank`` (canonical id -> dense id), in place."""
    i = Expr.invocation_id(0)
    return Program(
        [BufferDecl.read("rank", 0, U32), BufferDecl.read("params", 1, U32), BufferDecl.read_write("ce", 2, U32),
         BufferDecl.read_write("cc", 3, U32)], (_WG, 1, 1),
        [Node.if_(Expr.lt(i, _param(0)), [Node.store("ce", i, Expr.load("rank", Expr.load("ce", i)))]),
         Node.if_(Expr.lt(i, _param(1)), [Node.store("cc", i, Expr.load("rank", Expr.load("cc", i)))])],
        name="egraph_rename",
    )


@cache
def compose_program() -> Program:
    """``out[i]``: the dense id of ``labels[ids[i]]``, ``EMPTY`` for an id past ``labels``, ``EMPTY``
    itself, or a canonical id no row uses (as ``compact``'s ``remap[labels]`` composed on the host)."""
    i = Expr.invocation_id(0)
    c, label = V("c"), V("l")
    return Program(
        [BufferDecl.read("labels", 0, U32), BufferDecl.read("mark", 1, U32), BufferDecl.read("rank", 2, U32),
         BufferDecl.read("ids", 3, U32), BufferDecl.read_write("out", 4, U32)], (_WG, 1, 1),
        [Node.if_(Expr.lt(i, Expr.buf_len("out")), [
            Node.let("c", Expr.load("ids", i)), Node.let("v", _u(EMPTY)),
            Node.if_(Expr.lt(c, Expr.buf_len("labels")), [
                Node.let("l", Expr.load("labels", c)),
                Node.if_(Expr.ne(Expr.load("mark", label), _u(0)), [Node.assign("v", Expr.load("rank", label))]),
            ]),
            Node.store("out", i, V("v"))])],
        name="egraph_compose",
    )


@cache
def heads_program() -> Program:
    """``head[i] = 1`` where sorted row ``order[i]`` differs from row ``order[i - 1]`` (class,
    operator, arity or a child), ``hl[i]`` its arity there (0 elsewhere); ``i < params[0]``."""
    i = Expr.invocation_id(0)
    r, q, k = V("r"), V("q"), V("k")
    same_child = Expr.eq(Expr.load("cc", Expr.load("offsets", r) + k), Expr.load("cc", Expr.load("offsets", q) + k))
    compare = [
        Node.let("q", Expr.load("order", i - _u(1))),
        Node.let("same", Expr.and_(Expr.eq(Expr.load("ce", r), Expr.load("ce", q)), Expr.and_(
            Expr.eq(Expr.load("op", r), Expr.load("op", q)), Expr.eq(Expr.load("lens", r), Expr.load("lens", q))))),
        Node.loop("k", _u(0), Expr.load("lens", r), [Node.if_(V("same"), [Node.assign("same", same_child)])]),
        Node.assign("head", Expr.not_(V("same"))),
    ]
    return Program(
        [*_ROWS, BufferDecl.read("order", 5, U32), BufferDecl.read("params", 6, U32),
         BufferDecl.read_write("head", 7, U32), BufferDecl.read_write("hl", 8, U32)], (_WG, 1, 1),
        [Node.if_(Expr.lt(i, _param(0)), [
            Node.let("r", Expr.load("order", i)), Node.let("head", Expr.bool(True)),
            Node.if_(Expr.gt(i, _u(0)), compare),
            Node.store("head", i, Expr.select(V("head"), _u(1), _u(0))),
            Node.store("hl", i, Expr.select(V("head"), Expr.load("lens", r), _u(0)))])],
        name="egraph_heads",
    )


@cache
def keep_program() -> Program:
    """Each head row ``order[i]`` to its place ``pos[i]`` in the new columns, its children copied
    to ``cpos[i]`` on; ``i < params[0]``."""
    i = Expr.invocation_id(0)
    r, k = V("r"), V("k")
    new = ("n_eclass", "n_op", "n_offsets", "n_lens", "n_children")
    return Program(
        [*_ROWS, BufferDecl.read("order", 5, U32), BufferDecl.read("head", 6, U32), BufferDecl.read("pos", 7, U32),
         BufferDecl.read("cpos", 8, U32), BufferDecl.read("params", 9, U32),
         *(BufferDecl.read_write(c, 10 + j, U32) for j, c in enumerate(new))], (_WG, 1, 1),
        [Node.if_(Expr.lt(i, _param(0)), [Node.if_(Expr.ne(Expr.load("head", i), _u(0)), [
            Node.let("r", Expr.load("order", i)), Node.let("u", Expr.load("pos", i)),
            Node.let("c0", Expr.load("cpos", i)),
            Node.store("n_eclass", V("u"), Expr.load("ce", r)), Node.store("n_op", V("u"), Expr.load("op", r)),
            Node.store("n_lens", V("u"), Expr.load("lens", r)), Node.store("n_offsets", V("u"), V("c0")),
            Node.loop("k", _u(0), Expr.load("lens", r), [
                Node.store("n_children", V("c0") + k, Expr.load("cc", Expr.load("offsets", r) + k))]),
        ])])],
        name="egraph_keep",
    )


@cache
def starts_program() -> Program:
    """``starts[c]``: the first row of class ``c`` in the sorted ``eclass`` (``params = [rows,
    classes]``; an empty class starts where the next begins). One invocation per row and one more."""
    u = Expr.invocation_id(0)
    return Program(
        [BufferDecl.read("eclass", 0, U32), BufferDecl.read("params", 1, U32), BufferDecl.read_write("starts", 2, U32)],
        (_WG, 1, 1),
        [Node.if_(Expr.le(u, _param(0)), [
            Node.let("lo", _u(0)),
            Node.if_(Expr.gt(u, _u(0)), [Node.assign("lo", Expr.load("eclass", u - _u(1)) + _u(1))]),
            Node.let("hi", _param(1)),
            Node.if_(Expr.lt(u, _param(0)), [Node.assign("hi", Expr.load("eclass", u))]),
            Node.loop("c", V("lo"), V("hi") + _u(1), [Node.store("starts", V("c"), u)])])],
        name="egraph_starts",
    )


@cache
def differ_program() -> Program:
    """``flag = 1`` where two e-graphs' columns differ (``params = [n, n_children]``, both that size)."""
    i = Expr.invocation_id(0)
    names = (*_COPY_NAMES, "children")
    differ = [Expr.ne(Expr.load(f"a_{c}", i), Expr.load(f"b_{c}", i)) for c in _COPY_NAMES]
    any_row = Expr.or_(Expr.or_(differ[0], differ[1]), Expr.or_(differ[2], differ[3]))
    return Program(
        [*(BufferDecl.read(f"a_{c}", k, U32) for k, c in enumerate(names)),
         *(BufferDecl.read(f"b_{c}", 5 + k, U32) for k, c in enumerate(names)),
         BufferDecl.read("params", 10, U32), BufferDecl.read_write("flag", 11, U32, 1)], (_WG, 1, 1),
        [Node.if_(Expr.and_(Expr.lt(i, _param(0)), any_row), [Node.store("flag", _u(0), _u(1))]),
         Node.if_(Expr.and_(Expr.lt(i, _param(1)), Expr.ne(Expr.load("a_children", i), Expr.load("b_children", i))),
                  [Node.store("flag", _u(0), _u(1))])],
        name="egraph_differ",
    )


# ---- the resident compact e-graph ----------------------------------------------------------------

@dataclass
class Compact:
    """A compact e-graph on the device (``egraph_saturate``'s form): ``cols`` (eclass, op, offsets,
    lens: ``n`` words each; children: ``n_children`` words, at least one allocated), ``starts``
    (``classes + 1`` words) and ``canonical`` (each input id's class); ``close()`` frees them."""

    backend: Any
    res: graph.ResidentSet
    cols: list[Any]
    starts: Any
    canonical: Any
    n: int
    n_children: int
    classes: int
    canon_size: int
    bounds: Bounds

    def close(self) -> None:
        self.res.close()

    def read(self) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
        """The columns and the canonical ids, on the host (one read)."""
        sizes = [self.n] * 4 + [self.n_children, self.canon_size]
        handles = [*self.cols, self.canonical]
        wanted = [(h, 0, 4 * k) for h, k in zip(handles, sizes, strict=True) if k]
        words = iter(self.backend.dispatch_sequence([], reads=wanted))
        out = [np.asarray(next(words)).view(np.uint32).copy() if k else np.zeros(0, np.uint32) for k in sizes]
        return tuple(out[:5]), out[5]


def order(be: Any, res: graph.ResidentSet, n: int, source: str, inputs: list[Any], widths: Sequence[int],
          width: int = 0) -> Any:
    """The order of ``n`` rows of ``source`` (``key_program``) sorted by their fields (``widths``
    bits each, most significant first): LSD, the fields packed into keys of up to 64 bits, one
    stable ``lib.sort`` of (key, order) per key from the least significant."""
    perm = res.alloc(4 * n)
    _run(be, [(iota_program(), [perm], n)])
    for key in reversed(pack(widths)):
        wide = is_wide(key, widths)
        dtype = np.dtype(np.uint64 if wide else np.uint32)
        packed = res.alloc(dtype.itemsize * n)
        _run(be, [(key_program(source, width, key, wide), [*inputs, perm, packed], n)])
        sorted_keys, sorted_perm = lib.sort(ResidentArray(packed, dtype, n), ResidentArray(perm, np.uint32, n),
                                            backend=be)
        res.adopt(sorted_keys.handle, sorted_perm.handle)
        perm = sorted_perm.handle
    return perm


def grow(be: Any, res: graph.ResidentSet, cur: Compact, rules: Sequence[Rule],
         slabs: Sequence[tuple[Any, int]]) -> tuple[egraph.EGraph, tuple[Any, Any, int] | None]:
    """The grown e-graph (``cur`` then every match's new e-nodes, buffers in ``res``) and the union
    pairs (None: no bare-variable right-hand side matched)."""
    shapes = [Shape.of(rule.rhs) for rule in rules]
    m = [size for _, size in slabs]
    n = cur.n + sum(s.rows * k for s, k in zip(shapes, m, strict=True))
    kids = cur.n_children + sum(s.words * k for s, k in zip(shapes, m, strict=True))
    classes = cur.classes + sum(s.fresh * k for s, k in zip(shapes, m, strict=True))
    pairs = sum(k for rule, k in zip(rules, m, strict=True) if isinstance(rule.rhs, Var))
    if classes > graph.MAX_IDS:
        raise InvalidProgram(f"saturation grew the e-graph to {classes} e-classes; e-graphs take ids below 2**30",
                             "run fewer iterations or rules that add fewer e-nodes.")
    cols = [res.alloc(4 * n) for _ in range(4)] + [res.alloc(4 * max(kids, 1))]
    union_a, union_b = res.alloc(4 * max(pairs, 1)), res.alloc(4 * max(pairs, 1))
    steps = [(copy_program(), [*cur.cols, res.upload(np.array([cur.n, cur.n_children], np.uint32)), *cols],
              max(cur.n, cur.n_children))]
    row, child, fresh, union = cur.n, cur.n_children, cur.classes, 0
    for rule, shape, (slab, size) in zip(rules, shapes, slabs, strict=True):
        if size == 0:
            continue
        width = 1 + len(rule.variables)
        perm = order(be, res, size, "matches", [slab], [id_bits(cur.classes)] * width, width)
        params = res.upload(np.array([size, row, fresh, child, union], np.uint32))
        steps.append((apply_program(rule.rhs, rule.variables), [slab, perm, params, *cols, union_a, union_b], size))
        row, child, fresh = row + shape.rows * size, child + shape.words * size, fresh + shape.fresh * size
        union += size if isinstance(rule.rhs, Var) else 0
    _run(be, steps)
    return egraph.EGraph.over(be, cols, n, kids, classes), ((union_a, union_b, pairs) if pairs else None)


def compact(be: Any, g: egraph.EGraph, labels: Any, canonical: Any, canon_size: int, bounds: Bounds) -> Compact:
    """``egraph_saturate.compact`` of ``g``'s columns with ``labels`` (resident, ``g.classes`` words),
    on the device; ``canonical`` (``canon_size`` ids) composed with the new numbering."""
    n, kids, classes = g.n, g.n_children, g.classes
    with graph.ResidentSet(be) as tmp:
        ce, cc, mark = tmp.alloc(4 * n), tmp.alloc(4 * max(kids, 1)), tmp.alloc(4 * classes)
        sizes = tmp.upload(np.array([n, kids], np.uint32))
        _run(be, [(graph.zero_program(), [mark], classes),
                  (canon_program(), [g.eclass, g.children, labels, sizes, ce, cc, mark], max(n, kids))])
        rank = _scan(be, tmp, mark, classes)
        _run(be, [(rename_program(), [rank, sizes, ce, cc], max(n, kids))])
        rows = [ce, g.op, g.offsets, g.lens, cc]
        ids = id_bits(classes)
        perm = order(be, tmp, n, "rows", rows, [ids, bits(bounds.op), bits(bounds.arity)] + [ids] * bounds.arity)
        head, hl = tmp.alloc(4 * n), tmp.alloc(4 * n)
        _run(be, [(heads_program(), [*rows, perm, sizes, head, hl], n)])
        pos, cpos = _scan(be, tmp, head, n), _scan(be, tmp, hl, n)
        last_rank, last_mark, last_pos, last_head, last_cpos, last_hl = _words(
            be, [(rank, classes - 1), (mark, classes - 1), (pos, n - 1), (head, n - 1), (cpos, n - 1), (hl, n - 1)])
        used, unique, words = last_rank + last_mark, last_pos + last_head, last_cpos + last_hl
        res = graph.ResidentSet(be)
        try:
            cols = [res.alloc(4 * unique) for _ in range(4)] + [res.alloc(4 * max(words, 1))]
            starts, canon = res.alloc(4 * (used + 1)), res.alloc(4 * max(canon_size, 1))
            counts = res.upload(np.array([unique, used], np.uint32))
            _run(be, [(keep_program(), [*rows, perm, head, pos, cpos, sizes, *cols], n),
                      (starts_program(), [cols[0], counts, starts], unique + 1),
                      (compose_program(), [labels, mark, rank, canonical, canon], canon_size)])
        except BaseException:
            res.close()
            raise
    return Compact(be, res, cols, starts, canon, unique, words, used, canon_size, bounds)


def same(be: Any, a: Compact, b: Compact) -> bool:
    """Whether two compact e-graphs have equal columns (sizes read on the host, values compared on the device)."""
    if (a.n, a.n_children, a.classes) != (b.n, b.n_children, b.classes):
        return False
    with graph.ResidentSet(be) as res:
        flag = res.upload(np.zeros(1, np.uint32))
        params = res.upload(np.array([a.n, a.n_children], np.uint32))
        _run(be, [(differ_program(), [*a.cols, *b.cols, params, flag], max(a.n, a.n_children))])
        return _words(be, [(flag, 0)])[0] == 0


def first(be: Any, cols: Sequence[np.ndarray], bounds: Bounds) -> Compact:
    """The input e-graph rebuilt (closure, compaction) on the device; ``canonical`` of every input id."""
    with egraph.EGraph(*cols, backend=be) as g, graph.ResidentSet(be) as res:
        ids = res.alloc(4 * g.classes)
        _run(be, [(iota_program(), [ids], g.classes)])
        return compact(be, g, g.resident_closure(), ids, g.classes, bounds)


def rebuild(be: Any, cur: Compact, rules: Sequence[Rule], slabs: Sequence[tuple[Any, int]]) -> Compact:
    """One round's apply and rebuild on the device: ``cur`` grown by the matches in ``slabs``,
    closed (with the unions) and compacted."""
    with graph.ResidentSet(be) as res:
        grown, unions = grow(be, res, cur, rules, slabs)
        with grown:
            return compact(be, grown, grown.resident_closure(unions), cur.canonical, cur.canon_size, cur.bounds)


@dataclass(frozen=True)
class Bounds:
    """The largest arity and operator id any e-node of a saturation can have (the widths of the
    compaction's sort fields)."""

    arity: int
    op: int

    @staticmethod
    def of(rules: Sequence[Rule], op: np.ndarray, lens: np.ndarray) -> Bounds:
        """The input's and the right-hand sides' bounds."""
        nodes = [node for rule in rules for node in Shape.of(rule.rhs).nodes]
        return Bounds(max([int(lens.max(initial=0)), *(len(refs) for _, refs in nodes)]),
                      max([int(op.max(initial=0)), *(o for o, _ in nodes)]))
