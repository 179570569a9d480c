"""Recursive rules over binary relations, evaluated semi-naively on the device.

A ``Relation`` is a set of ``(src, dst)`` u32 pairs held on one backend, sorted lexicographically
with no duplicates. ``Evaluator`` owns the operators every rule is built from; each iteration of a
fixed point is

1. *join* the new facts (the delta) with an edge relation in CSR form: one kernel counts each
   delta row's output, the library's scan turns the counts into offsets, a second kernel writes
   the joined pairs (``compose``: ``(a, b), (b, c) -> (a, c)``; ``expand``: ``(a, b), (a, x),
   (b, y) -> (x, y)``);
2. *sort* the joined pairs (two stable radix passes: by ``dst``, then by ``src``);
3. *deduplicate and subtract* the full relation: a pair is new if it differs from its predecessor
   and a binary search does not find it in the full relation; the library's scan places the new
   pairs, compacted in order - the next delta;
4. *merge* the delta into the full relation: every pair's output position is its own index plus
   its rank in the other (sorted) relation.

Steps 2-3 and the join's write run as one sequence, so an iteration costs two tiny readbacks (the
join size and the delta size). The loop stops when the delta is empty.

``Evaluator.fixpoint`` runs any rule written the same way (see docs/workloads.md), and
``transitive_closure`` and ``same_generation`` use these operators above 2**15 vertices (or with
``dense=False``); up to that size they run every round on the device over bit matrices
(``vyre.lib.datalog_dense``), with no host round trip per round.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from vyre.driver.errors import InvalidProgram
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.lib import datalog_dense
from vyre.lib import graph as graphs
from vyre.lib._scan.topology import scan
from vyre.lib._sort.topology import radix_sort
from vyre.lib.blocks import PARAM_WORDS, WG
from vyre.lib.monoid import COUNT
from vyre.lib.plan import Plan, capacity, ceil_div
from vyre.lib.scratch import scratch_for

U32 = DataType.U32
_SEARCH_STEPS = 32


def _param(word: int) -> Expr:
    return Expr.load("params", Expr.u32(word))


def _params(binding: int) -> BufferDecl:
    return BufferDecl.uniform("params", binding, U32, PARAM_WORDS)


def _row(n_word: int) -> tuple[Expr, Node]:
    """The invocation's row and the early return of invocations past ``params[n_word]``."""
    i = Expr.invocation_id(0)
    return i, Node.if_(Expr.ge(i, _param(n_word)), Node.return_())


def _degree(vertex: Expr) -> Expr:
    return Expr.sub(Expr.load("indptr", Expr.add(vertex, Expr.u32(1))), Expr.load("indptr", vertex))


def _less(s1: Expr, d1: Expr, s2: Expr, d2: Expr) -> Expr:
    return Expr.or_(Expr.lt(s1, s2), Expr.and_(Expr.eq(s1, s2), Expr.lt(d1, d2)))


def _lower_bound(buf_s: str, buf_d: str, n: Expr, s: Expr, d: Expr, tag: str) -> list[Node]:
    """Bind ``lo_<tag>``: the number of pairs of (sorted) ``buf_s, buf_d`` below ``(s, d)``."""
    lo, hi, mid = Expr.var(f"lo_{tag}"), Expr.var(f"hi_{tag}"), Expr.var(f"mid_{tag}")
    return [
        Node.let(f"lo_{tag}", Expr.u32(0)),
        Node.let(f"hi_{tag}", n),
        Node.loop(f"step_{tag}", Expr.u32(0), Expr.u32(_SEARCH_STEPS), [
            Node.if_(Expr.lt(lo, hi), [
                Node.let(f"mid_{tag}", Expr.add(lo, Expr.shr(Expr.sub(hi, lo), Expr.u32(1)))),
                Node.if_(_less(Expr.load(buf_s, mid), Expr.load(buf_d, mid), s, d),
                         [Node.assign(f"lo_{tag}", Expr.add(mid, Expr.u32(1)))],
                         [Node.assign(f"hi_{tag}", mid)]),
            ]),
        ]),
    ]


_JOIN_INPUTS = (BufferDecl.read("delta_s", 0, U32), BufferDecl.read("delta_d", 1, U32),
                BufferDecl.read("indptr", 2, U32))


@cache
def join_count_program(mode: str, n_word: int) -> Program:
    """``counts[i]``: how many pairs delta row ``i`` joins to (``compose``: deg(b); ``expand``: deg(a)*deg(b);
    ``siblings``: deg(a)*(deg(a)-1), the ordered pairs of distinct children of vertex ``a = i``)."""
    i, guard = _row(n_word)
    a, b = Expr.load("delta_s", i), Expr.load("delta_d", i)
    if mode == "compose":
        count = _degree(b)
    elif mode == "expand":
        count = Expr.mul(_degree(a), _degree(b))
    else:
        count = Expr.mul(_degree(i), Expr.sub(_degree(i), Expr.u32(1)))
    return Program([*_JOIN_INPUTS, BufferDecl.read_write("counts", 3, U32), _params(4)], (WG, 1, 1),
                   [guard, Node.store("counts", i, count)], name=f"datalog_join_count_{mode}")


@cache
def join_write_program(mode: str, n_word: int) -> Program:
    """Write delta row ``i``'s joined pairs from its offset ``ends[i] - counts[i]`` on."""
    i, guard = _row(n_word)
    at = Expr.var("at")

    def emit(s: Expr, d: Expr) -> list[Node]:
        return [Node.store("out_s", at, s), Node.store("out_d", at, d), Node.assign("at", Expr.add(at, Expr.u32(1)))]

    def children(vertex: Expr, var: str, body: list[Node]) -> Node:
        return Node.loop(var, Expr.load("indptr", vertex), Expr.load("indptr", Expr.add(vertex, Expr.u32(1))), body)

    a, b = Expr.var("a"), Expr.var("b")
    x, y = Expr.load("indices", Expr.var("e1")), Expr.load("indices", Expr.var("e2"))
    if mode == "compose":
        loops = children(b, "e2", emit(a, y))
    elif mode == "expand":
        loops = children(a, "e1", [children(b, "e2", emit(x, y))])
    else:
        loops = children(i, "e1", [children(i, "e2", [Node.if_(Expr.ne(Expr.var("e1"), Expr.var("e2")),
                                                              emit(x, y))])])
    body = [guard, Node.let("a", Expr.load("delta_s", i)), Node.let("b", Expr.load("delta_d", i)),
            Node.let("at", Expr.sub(Expr.load("ends", i), Expr.load("counts", i))), loops]
    return Program([*_JOIN_INPUTS, BufferDecl.read("indices", 3, U32), BufferDecl.read("counts", 4, U32),
                    BufferDecl.read("ends", 5, U32), BufferDecl.read_write("out_s", 6, U32),
                    BufferDecl.read_write("out_d", 7, U32), _params(8)], (WG, 1, 1), body,
                   name=f"datalog_join_write_{mode}")


@cache
def fresh_flags_program(n_word: int, full_word: int) -> Program:
    """``flags[i] = 1`` when sorted pair ``i`` differs from pair ``i-1`` and is not in the full relation."""
    i, guard = _row(n_word)
    s, d = Expr.var("s"), Expr.var("d")
    prev = Expr.sub(i, Expr.u32(1))
    first = Expr.or_(Expr.eq(i, Expr.u32(0)),
                     Expr.or_(Expr.ne(Expr.load("s", prev), s), Expr.ne(Expr.load("d", prev), d)))
    n_full, lo = _param(full_word), Expr.var("lo_f")
    found = Expr.and_(Expr.lt(lo, n_full),
                      Expr.and_(Expr.eq(Expr.load("full_s", lo), s), Expr.eq(Expr.load("full_d", lo), d)))
    body = [guard, Node.let("s", Expr.load("s", i)), Node.let("d", Expr.load("d", i)),
            *_lower_bound("full_s", "full_d", n_full, s, d, "f"),
            Node.store("flags", i, Expr.select(Expr.and_(first, Expr.not_(found)), Expr.u32(1), Expr.u32(0)))]
    return Program([BufferDecl.read("s", 0, U32), BufferDecl.read("d", 1, U32), BufferDecl.read("full_s", 2, U32),
                    BufferDecl.read("full_d", 3, U32), BufferDecl.read_write("flags", 4, U32), _params(5)],
                   (WG, 1, 1), body, name="datalog_fresh_flags")


@cache
def scatter_kept_program(n_word: int) -> Program:
    """Pair ``i`` with ``flags[i] = 1`` goes to ``ends[i] - 1`` (``ends``: inclusive scan of the flags)."""
    i, guard = _row(n_word)
    at = Expr.sub(Expr.load("ends", i), Expr.u32(1))
    body = [guard, Node.if_(Expr.ne(Expr.load("flags", i), Expr.u32(0)), [
        Node.store("out_s", at, Expr.load("s", i)), Node.store("out_d", at, Expr.load("d", i))])]
    return Program([BufferDecl.read("s", 0, U32), BufferDecl.read("d", 1, U32), BufferDecl.read("flags", 2, U32),
                    BufferDecl.read("ends", 3, U32), BufferDecl.read_write("out_s", 4, U32),
                    BufferDecl.read_write("out_d", 5, U32), _params(6)], (WG, 1, 1), body,
                   name="datalog_scatter_kept")


@cache
def merge_program(n_word: int, other_word: int) -> Program:
    """Pair ``i`` of relation A goes to ``i + rank in B`` (A and B sorted and disjoint)."""
    i, guard = _row(n_word)
    s, d = Expr.var("s"), Expr.var("d")
    body = [guard, Node.let("s", Expr.load("a_s", i)), Node.let("d", Expr.load("a_d", i)),
            *_lower_bound("b_s", "b_d", _param(other_word), s, d, "m"),
            Node.let("at", Expr.add(i, Expr.var("lo_m"))),
            Node.store("out_s", Expr.var("at"), s), Node.store("out_d", Expr.var("at"), d)]
    return Program([BufferDecl.read("a_s", 0, U32), BufferDecl.read("a_d", 1, U32), BufferDecl.read("b_s", 2, U32),
                    BufferDecl.read("b_d", 3, U32), BufferDecl.read_write("out_s", 4, U32),
                    BufferDecl.read_write("out_d", 5, U32), _params(6)], (WG, 1, 1), body, name="datalog_merge")


class Relation:
    """``size`` sorted, distinct ``(src, dst)`` pairs in two resident u32 columns (room for ``capacity``);
    ``close()`` frees them."""

    def __init__(self, backend: Any, size: int, capacity: int | None = None) -> None:
        self.backend, self.size = backend, size
        nbytes = 4 * max(size if capacity is None else capacity, 1)
        self.src: Any = backend.allocate_resident(nbytes)  # None once closed
        try:
            self.dst: Any = backend.allocate_resident(nbytes)
        except BaseException:
            backend.free_resident(self.src)
            raise

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Both columns as numpy arrays."""
        return graphs.read_u32(self.backend, self.src, self.size), graphs.read_u32(self.backend, self.dst, self.size)

    def close(self) -> None:
        """Free both columns (idempotent)."""
        if self.src is not None:
            self.backend.free_resident(self.src)
            self.backend.free_resident(self.dst)
        self.src = self.dst = None
        self.size = 0


def _groups(n: int) -> int:
    return ceil_div(capacity(n), WG)


class Evaluator:
    """The operators of semi-naive evaluation on one backend (see the module docstring).

    Hold ``evaluator.scratch.lock`` while using the operators from several threads; ``fixpoint``
    holds it for its whole run.
    """

    def __init__(self, backend: Any = None) -> None:
        self.backend = graphs.backend_or_default(backend)
        self.scratch = scratch_for(self.backend)
        self.iterations = 0

    def relation(self, src: object, dst: object) -> Relation:
        """The set of pairs ``(src[i], dst[i])`` (any order, duplicates allowed) as a ``Relation``."""
        s, d = graphs.u32_array("src", src), graphs.u32_array("dst", dst)
        if s.size != d.size:
            raise InvalidProgram(f"src has {s.size} elements and dst {d.size}", "pass columns of the same length.")
        with self.scratch.lock:
            plan = Plan(self.backend, self.scratch)
            h_s, h_d = plan.buffer("dl.in_s", s.size), plan.buffer("dl.in_d", d.size)
            if s.size:
                self.backend.upload_resident(h_s, s)
                self.backend.upload_resident(h_d, d)
            empty = Relation(self.backend, 0)
            try:
                return self.fresh(plan, h_s, h_d, s.size, empty)
            finally:
                empty.close()

    def join(self, mode: str, delta: Relation, edges: graphs.Graph) -> tuple[Plan, Any, Any, int]:
        """Join ``delta`` with the CSR relation ``edges``: ``compose`` gives ``(a, c)`` for ``(a, b)`` in
        delta and ``b -> c``; ``expand`` gives ``(x, y)`` for ``(a, b)`` in delta, ``a -> x`` and
        ``b -> y``; ``siblings`` (delta unused) gives ``(x, y)``, ``x != y``, for ``p -> x`` and ``p -> y``.

        Returns a plan holding the join's write (not yet run; ``fresh`` runs it) and the unsorted output.
        """
        rows = edges.n if mode == "siblings" else delta.size
        plan = Plan(self.backend, self.scratch)
        n_word = plan.word("dl.rows", rows)
        counts, ends = plan.buffer("dl.counts", rows), plan.buffer("dl.ends", rows)
        inputs = [delta.src, delta.dst, edges.indptr_handle]
        plan.step(join_count_program(mode, n_word), [*inputs, counts, plan.params], _groups(rows))
        scan(plan, COUNT, counts, ends, rows, capacity(rows), True, role="dl.scan")
        (last,) = plan.run([(ends, 4 * (rows - 1), 4)])
        total = int(last.view(np.uint32)[0])
        plan = Plan(self.backend, self.scratch)
        n_word = plan.word("dl.rows", rows)
        out_s, out_d = plan.buffer("dl.join_s", total), plan.buffer("dl.join_d", total)
        if total:
            plan.step(join_write_program(mode, n_word),
                      [*inputs, edges.indices_handle, counts, ends, out_s, out_d, plan.params], _groups(rows))
        return plan, out_s, out_d, total

    def fresh(self, plan: Plan, src: Any, dst: Any, n: int, full: Relation) -> Relation:
        """Run ``plan``, then sort its ``n`` pairs in ``src, dst``; keep each distinct pair not in ``full``."""
        if n == 0:
            if plan.steps:
                plan.run()
            return Relation(self.backend, 0)
        cap = capacity(n)
        by_d = (plan.buffer("dl.by_d_keys", n), plan.buffer("dl.by_d_vals", n))
        radix_sort(plan, U32, dst, src, "load", n, cap, final=by_d)       # stable by dst ...
        sorted_s, sorted_d = plan.buffer("dl.sorted_s", n), plan.buffer("dl.sorted_d", n)
        radix_sort(plan, U32, by_d[1], by_d[0], "load", n, cap, final=(sorted_s, sorted_d))  # ... then src
        n_word, full_word = plan.word("dl.n", n), plan.word("dl.full", full.size)
        flags, ends = plan.buffer("dl.flags", n), plan.buffer("dl.kept", n)
        plan.step(fresh_flags_program(n_word, full_word),
                  [sorted_s, sorted_d, full.src, full.dst, flags, plan.params], _groups(n))
        scan(plan, COUNT, flags, ends, n, cap, True, role="dl.scan")
        result = Relation(self.backend, 0, capacity=n)
        try:
            plan.step(scatter_kept_program(n_word),
                      [sorted_s, sorted_d, flags, ends, result.src, result.dst, plan.params], _groups(n))
            (last,) = plan.run([(ends, 4 * (n - 1), 4)])
        except BaseException:
            result.close()
            raise
        result.size = int(last.view(np.uint32)[0])
        return result

    def merge(self, full: Relation, delta: Relation) -> Relation:
        """The union of ``full`` and the disjoint ``delta``, sorted; closes ``full``, keeps ``delta``."""
        merged = Relation(self.backend, full.size + delta.size)
        plan = Plan(self.backend, self.scratch)
        a_word, b_word = plan.word("dl.a", full.size), plan.word("dl.b", delta.size)
        for a, b, word, other in ((full, delta, a_word, b_word), (delta, full, b_word, a_word)):
            if a.size:
                plan.step(merge_program(word, other), [a.src, a.dst, b.src, b.dst, merged.src, merged.dst,
                                                       plan.params], _groups(a.size))
        if plan.steps:
            plan.run()
        full.close()
        return merged

    def fixpoint(self, initial: Relation, step: Callable[[Relation], tuple[Plan, Any, Any, int]]) -> Relation:
        """Semi-naive evaluation from ``initial`` (consumed): ``delta = initial``, then repeat
        ``delta = fresh(step(delta), full)``, ``full = merge(full, delta)`` until ``delta`` is empty.

        ``step(delta)`` is a join (``join(mode, delta, edges)`` or any function returning the same).
        """
        with self.scratch.lock:
            empty = Relation(self.backend, 0)
            full, delta = self.merge(empty, initial), initial
            self.iterations = 0
            try:
                while delta.size:
                    self.iterations += 1
                    plan, s, d, total = step(delta)
                    new = self.fresh(plan, s, d, total, full)
                    delta.close()
                    delta = new
                    if delta.size:
                        full = self.merge(full, delta)
            except BaseException:
                full.close()
                raise
            finally:
                delta.close()
        return full


def edge_graph(n: int, src: object, dst: object, backend: Any) -> graphs.Graph:
    """The edge relation ``src[i] -> dst[i]`` as a resident CSR ``Graph`` (what ``Evaluator.join`` takes)."""
    indptr, indices = graphs.from_edges(n, src, dst, backend=backend)
    return graphs.Graph(indptr, indices, backend=backend)


def _use_bits(n: int, dense: bool | None) -> bool:
    """Bit-matrix rounds on the device (``datalog_dense``) by default up to its vertex bound."""
    if dense and n > datalog_dense.MAX_VERTICES:
        raise InvalidProgram(f"dense=True takes at most {datalog_dense.MAX_VERTICES:,} vertices, got n={n:,} "
                             "(three n x n bit matrices)", "pass dense=None (or False) to use sorted relations.")
    return n > 0 and (dense if dense is not None else n <= datalog_dense.MAX_VERTICES)


def transitive_closure(n: int, src: object, dst: object, *, backend: Any = None, dense: bool | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:
    """All pairs ``(a, c)`` with a path of one or more edges ``a -> ... -> c``; sorted, distinct.

    Rule: ``tc(a, c) :- edge(a, c).  tc(a, c) :- tc(a, b), edge(b, c).`` Up to 2**15 vertices the rounds
    run on the device over bit matrices (``dense``; ``False`` forces the sorted relations of ``Evaluator``).
    """
    ev = Evaluator(backend)
    with edge_graph(n, src, dst, ev.backend) as edges:
        if _use_bits(edges.n, dense):
            s, d, _ = datalog_dense.fixpoint(edges, "edges", "compose")
            return s, d
        closure = ev.fixpoint(ev.relation(src, dst), lambda delta: ev.join("compose", delta, edges))
    try:
        return closure.pairs()
    finally:
        closure.close()


def same_generation(n: int, parent_src: object, parent_dst: object, *, backend: Any = None,
                    dense: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Pairs ``(x, y)``, ``x != y``, of vertices at the same depth below a common ancestor; sorted, distinct.

    ``parent_src[i]`` is a parent of ``parent_dst[i]``. Rules (the classic ``sg`` benchmark):
    ``sg(x, y) :- parent(p, x), parent(p, y), x != y.  sg(x, y) :- parent(a, x), sg(a, b), parent(b, y).``
    ``dense`` as in ``transitive_closure``.
    """
    ev = Evaluator(backend)
    with edge_graph(n, parent_src, parent_dst, ev.backend) as edges:
        if _use_bits(edges.n, dense):
            s, d, _ = datalog_dense.fixpoint(edges, "siblings", "expand")
            return s, d
        with ev.scratch.lock:
            empty = Relation(ev.backend, 0)
            try:
                plan, s, d, total = ev.join("siblings", empty, edges)
                initial = ev.fresh(plan, s, d, total, empty)
            finally:
                empty.close()
            result = ev.fixpoint(initial, lambda delta: ev.join("expand", delta, edges))
    try:
        return result.pairs()
    finally:
        result.close()
