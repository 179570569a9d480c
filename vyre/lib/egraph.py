"""E-graph structural equivalence and congruence closure on any backend.

The e-graph is given in columns, one row per e-node: ``eclass[r]`` (its e-class), ``op[r]`` (its
operator id), ``child_offsets[r]`` and ``child_lens[r]`` (its slice of ``children``, which holds
e-class ids).

``structural_equivalence`` finds the pairs of e-classes that hold e-nodes with equal operators and
equal children:

1. a signature hash of every e-node (operator, arity, children) - one kernel;
2. bucket by signature: the library's radix sort of (signature, row), then its run-length encoding
   and a scan give each bucket's start and size;
3. one invocation per bucket compares its e-nodes pairwise *exactly* (hash collisions are never
   reported) and appends each pair of different e-classes, ``(min, max)``, through an atomic counter
   into a scratch slab;
4. only the counted prefix of the slab is used: the pairs are sorted and deduplicated on the device
   (``vyre.lib.datalog``'s operators) and read back.

``congruence_closure`` runs rounds of two steps on the device (``dispatch_until``): insert every
e-node into a hash table keyed by its operator and canonical children (read through a union-find),
hooking the classes of equal e-nodes (the larger root under the smaller); jump every id to its root
and empty the table; until a round changes nothing. It returns each e-class's canonical id (the
smallest id of its merged set). ``sorted_congruence_closure`` gets the same result from rounds of
``structural_equivalence`` (the fallback when the hash table clusters). Both take ``unions``, pairs
of e-classes merged before the closure starts.

``saturate`` (and ``EGraph.saturate``) runs rounds of equality saturation with rewrite rules of the
language of ``vyre.lib.egraph_rules`` (``Signature``, ``parse_rule``, ``term_columns``), e-matching
on the device (``vyre.lib.egraph_saturate``), and applies the rewrites and compacts the e-graph
on the device too (``vyre.lib.egraph_device``; ``device=False`` does those two on the host).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from vyre.driver.config import DispatchConfig
from vyre.driver.errors import InvalidProgram
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.lib import datalog, graph, graph_cc
from vyre.lib.egraph_rules import Rule, Signature, parse_rule, term_columns
from vyre.lib.io import ResidentArray
from vyre.lib.plan import Plan, capacity

if TYPE_CHECKING:
    from vyre.lib.egraph_saturate import Saturation

__all__ = ["EGraph", "Rule", "Signature", "congruence_closure", "parse_rule", "saturate", "structural_equivalence",
           "term_columns"]

U32 = DataType.U32
_WG = 256
V = Expr.var
_GOLDEN = 0x9E3779B1
_MERGE_PASSES = 1024  # hook-and-jump passes per device loop (a few usually finish)


def _mix(h: Expr, value: Expr) -> Expr:
    """One step of a multiplicative hash: ``(h ^ value) * golden`` then a rotate."""
    return Expr.rotate_left(Expr.mul(Expr.bitxor(h, value), Expr.u32(_GOLDEN)), Expr.u32(13))


COLUMNS = (BufferDecl.read("eclass", 0, U32), BufferDecl.read("op", 1, U32), BufferDecl.read("offsets", 2, U32),
            BufferDecl.read("lens", 3, U32), BufferDecl.read("children", 4, U32))


@cache
def signature_program() -> Program:
    """``sig[r]``: a hash of e-node ``r``'s operator, arity and children; ``rows[r] = r``."""
    r = Expr.invocation_id(0)
    h = Expr.var("h")
    return Program(
        [*COLUMNS, BufferDecl.read_write("sig", 5, U32), BufferDecl.read_write("rows", 6, U32)], (_WG, 1, 1),
        [Node.if_(Expr.lt(r, Expr.buf_len("op")), [
            Node.let("h", _mix(_mix(Expr.u32(0x811C9DC5), Expr.load("op", r)), Expr.load("lens", r))),
            Node.let("base", Expr.load("offsets", r)),
            Node.loop("k", Expr.u32(0), Expr.load("lens", r), [
                Node.assign("h", _mix(h, Expr.load("children", Expr.add(Expr.var("base"), Expr.var("k"))))),
            ]),
            Node.store("sig", r, h),
            Node.store("rows", r, r),
        ])],
        name="egraph_signature",
    )


@cache
def bucket_pairs_program() -> Program:
    """One invocation per bucket of equal signatures: exact pairwise comparison, pairs appended."""
    b = Expr.invocation_id(0)
    x, y = Expr.var("x"), Expr.var("y")
    rx, ry = Expr.var("rx"), Expr.var("ry")
    ca, cb = Expr.load("eclass", rx), Expr.load("eclass", ry)
    same_child = Expr.eq(Expr.load("children", Expr.add(Expr.load("offsets", rx), Expr.var("k"))),
                         Expr.load("children", Expr.add(Expr.load("offsets", ry), Expr.var("k"))))
    compare = [
        Node.let("ry", Expr.load("rows", Expr.add(Expr.var("start"), y))),
        Node.let("equal", Expr.and_(Expr.ne(ca, cb), Expr.and_(
            Expr.eq(Expr.load("op", rx), Expr.load("op", ry)), Expr.eq(Expr.load("lens", rx), Expr.load("lens", ry))))),
        Node.loop("k", Expr.u32(0), Expr.load("lens", rx), [
            Node.if_(Expr.var("equal"), [Node.assign("equal", same_child)]),
        ]),
        Node.if_(Expr.var("equal"), [
            Node.let("slot", Expr.atomic(AtomicOp.ADD, "count", Expr.u32(0), Expr.u32(1), relaxed=True)),
            Node.store("out_a", Expr.var("slot"), Expr.min(ca, cb)),   # stores past the slab's end do nothing
            Node.store("out_b", Expr.var("slot"), Expr.max(ca, cb)),
        ]),
    ]
    return Program(
        [*COLUMNS, BufferDecl.read("rows", 5, U32), BufferDecl.read("starts", 6, U32),
         BufferDecl.read("sizes", 7, U32), BufferDecl.read("buckets", 8, U32, 1),
         BufferDecl.read_write("out_a", 9, U32), BufferDecl.read_write("out_b", 10, U32),
         BufferDecl.read_write("count", 11, U32, 1)],
        (_WG, 1, 1),
        [Node.if_(Expr.lt(b, Expr.load("buckets", Expr.u32(0))), [
            Node.let("start", Expr.load("starts", b)),
            Node.let("size", Expr.load("sizes", b)),
            Node.loop("x", Expr.u32(0), Expr.var("size"), [
                Node.let("rx", Expr.load("rows", Expr.add(Expr.var("start"), x))),
                Node.loop("y", Expr.add(x, Expr.u32(1)), Expr.var("size"), compare),
            ]),
        ])],
        name="egraph_bucket_pairs",
    )


@cache
def canonical_program() -> Program:
    """``out[i] = parent[ids[i]]`` (ids outside the table are kept as they are)."""
    i = Expr.invocation_id(0)
    v = Expr.var("v")
    return Program(
        [BufferDecl.read("ids", 0, U32), BufferDecl.read("parent", 1, U32), BufferDecl.read_write("out", 2, U32)],
        (_WG, 1, 1),
        [Node.if_(Expr.lt(i, Expr.buf_len("ids")), [
            Node.let("v", Expr.load("ids", i)),
            Node.store("out", i, Expr.select(Expr.lt(v, Expr.buf_len("parent")), Expr.load("parent", v), v)),
        ])],
        name="egraph_canonical",
    )


@cache
def union_program() -> Program:
    """For each pair: hook the larger root of its two classes under the smaller (atomic min); flag it."""
    i = Expr.invocation_id(0)
    pa, pb = Expr.var("pa"), Expr.var("pb")
    return Program(
        [BufferDecl.read("a", 0, U32), BufferDecl.read("b", 1, U32), BufferDecl.read("pairs", 2, U32, 1),
         BufferDecl.read_write("parent", 3, U32), BufferDecl.read_write("flag", 4, U32, 1)],
        (_WG, 1, 1),
        [Node.if_(Expr.lt(i, Expr.load("pairs", Expr.u32(0))), [
            Node.let("pa", Expr.load("parent", Expr.load("a", i))),
            Node.let("pb", Expr.load("parent", Expr.load("b", i))),
            Node.if_(Expr.ne(pa, pb), [
                Node.let("old", Expr.atomic(AtomicOp.MIN, "parent", Expr.max(pa, pb), Expr.min(pa, pb), relaxed=True)),
                Node.store("flag", Expr.u32(0), Expr.u32(1)),
            ]),
        ])],
        name="egraph_union",
    )


EMPTY = 0xFFFFFFFF


_SLOTS_PER_NODE = 4  # hash-table slots per e-node: at load <= 1/4 the longest run of taken slots stays short
_MAX_PROBES = 64     # probes per e-node and round (2^20 e-nodes: runs of at most ~16); past them, the sorted path
_HOPS = 64           # parent hops per id and jump


def _finalise(h: Expr) -> Expr:
    """MurmurHash3's 32-bit finaliser: every input bit reaches the low bits the table mask keeps."""
    h = Expr.mul(Expr.bitxor(h, Expr.shr(h, Expr.u32(16))), Expr.u32(0x85EBCA6B))
    h = Expr.mul(Expr.bitxor(h, Expr.shr(h, Expr.u32(13))), Expr.u32(0xC2B2AE35))
    return Expr.bitxor(h, Expr.shr(h, Expr.u32(16)))


_CLOSURE_STATE = (BufferDecl.read_write("parent", 5, U32), BufferDecl.read_write("table", 6, U32),
                  BufferDecl.read_write("flag", 7, U32, 1), BufferDecl.read_write("overflow", 8, U32, 1))


@cache
def closure_init_program() -> Program:
    """``parent[i] = i``, every table slot empty, ``overflow = 0``: one invocation per id or slot."""
    i = Expr.invocation_id(0)
    return Program(
        [BufferDecl.read_write("parent", 0, U32), BufferDecl.read_write("table", 1, U32),
         BufferDecl.read_write("overflow", 2, U32, 1)], (_WG, 1, 1),
        [Node.if_(Expr.lt(i, Expr.buf_len("parent")), [Node.store("parent", i, i)]),
         Node.if_(Expr.lt(i, Expr.buf_len("table")), [Node.store("table", i, Expr.u32(EMPTY))]),
         Node.if_(Expr.eq(i, Expr.u32(0)), [Node.store("overflow", Expr.u32(0), Expr.u32(0))])],
        name="egraph_closure_init",
    )


@cache
def closure_insert_program() -> Program:
    """One invocation per e-node: insert it into the hash table keyed by its operator and canonical
    children (``parent`` of each child, read here), linear probing with a compare-exchange that claims
    an empty slot, and stop. An e-node that meets one with equal operator and canonical children in
    another class hooks the two classes (the larger root under the smaller, atomic min), raises the
    flag and stops; one that finds neither within ``_MAX_PROBES`` probes raises ``overflow``.

    Hooks of this round may change ``parent`` while others read it: equal canonical ids still mean
    equal classes (classes only merge), so every hook is sound; a meeting missed this way happens in
    a later round, and the last round (no hook, nothing moved) reads a ``parent`` that stays put.
    """
    r = Expr.invocation_id(0)
    mask = Expr.buf_len("table") - 1
    s, k = V("s"), V("k")
    kid = Expr.load("parent", Expr.load("children", Expr.load("offsets", r) + k))
    other_kid = Expr.load("parent", Expr.load("children", Expr.load("offsets", s) + k))
    pa, pb = V("pa"), V("pb")
    meet = [
        Node.let("same", Expr.and_(Expr.eq(Expr.load("op", s), Expr.load("op", r)),
                                   Expr.eq(Expr.load("lens", s), Expr.load("lens", r)))),
        Node.loop("k", Expr.u32(0), Expr.load("lens", r), [
            Node.if_(V("same"), [Node.assign("same", Expr.eq(other_kid, kid))]),
        ]),
        Node.if_(V("same"), [
            Node.let("pa", Expr.load("parent", Expr.load("parent", Expr.load("eclass", r)))),
            Node.let("pb", Expr.load("parent", Expr.load("parent", Expr.load("eclass", s)))),
            Node.if_(Expr.ne(pa, pb), [
                Node.let("old", Expr.atomic(AtomicOp.MIN, "parent", Expr.max(pa, pb), Expr.min(pa, pb),
                                            relaxed=True)),
                Node.store("flag", Expr.u32(0), Expr.u32(1)),
            ]),
            Node.return_(),
        ]),
        Node.assign("slot", (V("slot") + 1) & mask),
    ]
    return Program(
        [*COLUMNS, *_CLOSURE_STATE], (_WG, 1, 1),
        [Node.if_(Expr.lt(r, Expr.buf_len("op")), [
            Node.let("h", _mix(_mix(Expr.u32(0x811C9DC5), Expr.load("op", r)), Expr.load("lens", r))),
            Node.loop("k", Expr.u32(0), Expr.load("lens", r), [Node.assign("h", _mix(V("h"), kid))]),
            Node.let("slot", _finalise(V("h")) & mask),
            Node.loop("probe", Expr.u32(0), Expr.u32(_MAX_PROBES), [
                Node.let("s", Expr.atomic(AtomicOp.COMPARE_EXCHANGE, "table", V("slot"), r,
                                          expected=Expr.u32(EMPTY), relaxed=True)),
                Node.if_(Expr.eq(s, Expr.u32(EMPTY)), [Node.return_()], meet),
            ]),
            Node.store("overflow", Expr.u32(0), Expr.u32(1)),
        ])],
        name="egraph_closure_insert",
    )


@cache
def closure_jump_program() -> Program:
    """Every id follows parent pointers (up to ``_HOPS``) and stores where it got, raising the flag
    when it moved; every table slot is emptied for the next round. One invocation per id or slot."""
    i = Expr.invocation_id(0)
    p = V("p")
    return Program(
        [BufferDecl.read_write("parent", 0, U32), BufferDecl.read_write("table", 1, U32),
         BufferDecl.read_write("flag", 2, U32, 1)], (_WG, 1, 1),
        [Node.if_(Expr.lt(i, Expr.buf_len("table")), [Node.store("table", i, Expr.u32(EMPTY))]),
         Node.if_(Expr.lt(i, Expr.buf_len("parent")), [
             *graph_cc.climb(i, _HOPS),
             Node.if_(Expr.ne(p, V("start")), [
                 Node.store("parent", i, p),
                 Node.store("flag", Expr.u32(0), Expr.u32(1)),
             ]),
         ])],
        name="egraph_closure_jump",
    )


class EGraph(graph.DeviceArrays):
    """The columns of an e-graph resident on one backend; ``close()`` frees them."""

    def __init__(self, eclass: object, op: object, child_offsets: object, child_lens: object, children: object,
                 *, backend: Any = None) -> None:
        cols = [graph.u32_array(name, v) for name, v in (("eclass", eclass), ("op", op),
                                                          ("child_offsets", child_offsets),
                                                          ("child_lens", child_lens), ("children", children))]
        n = cols[0].size
        if any(c.size != n for c in cols[1:4]):
            raise InvalidProgram("eclass, op, child_offsets and child_lens must have one entry per e-node",
                                 "pass columns of equal length (one row per e-node).")
        ends = cols[2].astype(np.int64) + cols[3]
        if n and int(ends.max()) > cols[4].size:
            raise InvalidProgram("an e-node's children run past the end of children",
                                 "keep child_offsets[r] + child_lens[r] <= len(children) for every row.")
        self.n, self.n_children = n, cols[4].size
        self.classes = int(max(cols[0].max(initial=0), cols[4].max(initial=0))) + 1 if n else 0
        if self.classes > graph.MAX_IDS:
            raise InvalidProgram(f"the largest e-class id is {self.classes - 1}; e-graphs take ids below 2**30 "
                                 f"(one canonical id is kept for every id up to the largest)",
                                 "number e-classes densely from 0 (np.unique(ids, return_inverse=True) does it).")
        super().__init__(backend, cols)
        self.eclass, self.op, self.offsets, self.lens, self.children = self.handles
        self.path = ""  # which congruence_closure path ran last: "hash" or "sorted"
        self._state: tuple[Any, Any, Any, Any] | None = None  # the hash path's buffers, kept between calls
        self._lock = threading.Lock()  # one hash closure at a time uses them

    def close(self) -> None:
        """Free the columns and the hash path's buffers."""
        self._state = None
        super().close()

    def pairs(self, eclass: Any = None, children: Any = None) -> datalog.Relation:
        """The sorted, distinct pairs of e-classes with structurally equal e-nodes (a ``Relation``).

        ``eclass`` / ``children`` replace those columns (resident handles of the same length).
        """
        be, n = self.backend, self.n
        ev = datalog.Evaluator(be)
        eclass = self.eclass if eclass is None else eclass
        children = self.children if children is None else children
        columns = [eclass, self.op, self.offsets, self.lens, children]
        with graph.ResidentSet(be) as res:
            sig, rows = res.alloc(4 * n), res.alloc(4 * n)
            be.dispatch_sequence([(signature_program(), [*columns, sig, rows], DispatchConfig(elements=n))])
            from vyre import lib

            s_sig, s_rows = lib.sort(ResidentArray(sig, np.uint32, n), ResidentArray(rows, np.uint32, n), backend=be)
            res.adopt(s_sig.handle, s_rows.handle)
            values, sizes = lib.run_length_encode(s_sig, backend=be)
            res.adopt(values.handle, sizes.handle)
            starts = lib.exclusive_scan(sizes, backend=be)
            res.adopt(starts.handle)
            buckets = res.upload(np.array([sizes.n], dtype=np.uint32))
            capacity = max(n, 16)
            while True:
                out_a, out_b = res.alloc(4 * capacity), res.alloc(4 * capacity)
                count = res.upload(np.zeros(1, np.uint32))
                (word,) = be.dispatch_sequence(
                    [(bucket_pairs_program(), [*columns, s_rows.handle, starts.handle, sizes.handle, buckets, out_a,
                                               out_b, count], DispatchConfig(elements=max(sizes.n, 1)))],
                    reads=[(count, 0, 4)])
                found = int(np.asarray(word).view(np.uint32)[0])
                if found <= capacity:
                    break
                capacity = found  # the slab overflowed (its extra stores did nothing): run again with room
            with ev.scratch.lock:
                empty = datalog.Relation(be, 0)
                try:
                    return ev.fresh(Plan(be, ev.scratch), out_a, out_b, found, empty)
                finally:
                    empty.close()

    def congruence_closure(self, max_rounds: int | None = None, *, method: str = "hash",
                           unions: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """Canonical e-class of every e-class id (the smallest id of its congruence class), u32.

        ``unions = (a, b)``: e-class ids merged (``a[i]`` with ``b[i]``) before the closure starts,
        on the device (hook and jump until every pair shares a root), as a rewrite's union does.

        ``method="hash"``: rounds on the device (``dispatch_until``) of two steps, insert every
        e-node into a hash table of operator and canonical children (hooking the classes of equal
        e-nodes), then jump every id to its root and empty the table; until a round changes nothing.
        Its buffers are made on the first call and kept, so later calls replay the same device loop;
        the labels and the overflow word come back in one read. ``"sorted"``, ``max_rounds``, or an
        e-node that found no slot in the table (the overflow word) take the sorted path
        (``sorted_congruence_closure``).
        """
        if method not in ("hash", "sorted"):
            raise InvalidProgram(f"unknown congruence closure method {method!r}",
                                 'pass method="hash" (the default) or "sorted".')
        pairs = _union_pairs(unions, self.classes)
        if self.n == 0:
            return np.arange(self.classes, dtype=np.uint32)
        if max_rounds is not None or method == "sorted":
            return self.sorted_congruence_closure(max_rounds, unions=pairs)
        with self._lock:
            labels = self._hash_closure(pairs)
        if labels is None:
            return self.sorted_congruence_closure(None, unions=pairs)
        self.path = method
        return labels

    def _closure_state(self) -> tuple[Any, Any, Any, Any]:
        """``parent``, ``table``, ``flag`` and ``overflow``: made on the first call, freed by ``close``."""
        if self._state is None:
            slots = capacity(_SLOTS_PER_NODE * self.n)
            self._state = (self._res.alloc(4 * self.classes), self._res.alloc(4 * slots),
                           self._res.alloc(4), self._res.alloc(4))
        return self._state

    def _hash_rounds(self, merge: Callable[[Any, Any], None] | None) -> None:
        """The hash path's device work: reset, ``merge(parent, flag)`` (the unions), the rounds."""
        be, classes = self.backend, self.classes
        parent, table, flag, overflow = self._closure_state()
        slots = capacity(_SLOTS_PER_NODE * self.n)
        both = DispatchConfig(elements=max(classes, slots))
        be.dispatch_sequence([(closure_init_program(), [parent, table, overflow], both)])
        if merge is not None:
            merge(parent, flag)
        rounds = [(closure_insert_program(), [*self.handles, parent, table, flag, overflow],
                   DispatchConfig(elements=self.n)),
                  (closure_jump_program(), [parent, table, flag], both)]
        _loop_until_still(be, rounds, flag)

    def _hash_closure(self, unions: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray | None:
        """The labels of the hash path, or None when an e-node found no slot (overflow)."""
        be, classes = self.backend, self.classes
        self._hash_rounds(None if unions is None else lambda parent, flag: _merge_unions(
            be, parent, flag, classes, unions))
        parent, _, _, overflow = self._closure_state()
        word, labels = be.dispatch_sequence([], reads=[(overflow, 0, 4), (parent, 0, 4 * classes)])
        if int(np.asarray(word).view(np.uint32)[0]):
            return None
        return np.asarray(labels).view(np.uint32).copy()

    @classmethod
    def over(cls, backend: Any, handles: Sequence[Any], n: int, n_children: int, classes: int) -> EGraph:
        """An e-graph over resident columns the caller made and keeps (not checked, copied or freed
        here): ``n`` e-nodes, ``n_children`` child words, ids below ``classes``, every buffer but
        ``children`` exactly ``n`` words long. ``close()`` frees only the closure's buffers."""
        g = cls.__new__(cls)
        g.backend, g._res, g.shared, g.bound = backend, graph.ResidentSet(backend), None, ()
        g.handles = list(handles)
        g.eclass, g.op, g.offsets, g.lens, g.children = g.handles
        g.n, g.n_children, g.classes = n, n_children, classes
        g.path, g._state, g._lock = "", None, threading.Lock()
        return g

    def resident_closure(self, unions: tuple[Any, Any, int] | None = None) -> Any:
        """``congruence_closure`` (hash path) with its labels left on the device: a handle of
        ``classes`` u32 labels, valid until ``close()``. ``unions = (a, b, count)``: resident pair
        columns and their length. Only the overflow word is read; past an overflow the sorted path
        runs (its labels uploaded)."""
        be, classes = self.backend, self.classes
        pairs = None if unions is None or unions[2] == 0 else unions
        with graph.ResidentSet(be) as res, self._lock:
            merge = None
            if pairs is not None:
                a, b, size = pairs
                count = res.upload(np.array([size], np.uint32))
                merge = functools.partial(_merge_resident, be, classes, a, b, count, size)
            self._hash_rounds(merge)
            parent, _, _, overflow = self._closure_state()
            (word,) = be.dispatch_sequence([], reads=[(overflow, 0, 4)])
            if not int(np.asarray(word).view(np.uint32)[0]):
                self.path = "hash"
                return parent
        host = None if pairs is None else (graph.read_u32(be, pairs[0], pairs[2]).copy(),
                                           graph.read_u32(be, pairs[1], pairs[2]).copy())
        return self._res.upload(self.sorted_congruence_closure(None, unions=host))

    def saturate(self, rules: Sequence[str | Rule], iterations: int, *,
                 signature: Signature | None = None, device: bool = True) -> Saturation:
        """``iterations`` rounds of equality saturation (egglog's: match every rule, apply every
        match, rebuild), e-matching on the device (``vyre.lib.egraph_saturate``). ``rules`` are
        strings of the rule language (parsed against ``signature``) or ``Rule``s. Returns a
        ``Saturation``: the e-class count, the new columns and each input id's new class; this
        e-graph's columns stay as they are. ``device=False``: apply and compaction on the host
        (numpy), the same result."""
        from vyre.lib import egraph_saturate

        sizes = (self.n, self.n, self.n, self.n, self.n_children)
        words = self.backend.dispatch_sequence([], reads=[(h, 0, 4 * k) for h, k in zip(self.handles, sizes,
                                                                                     strict=True) if k])
        host = iter(np.asarray(w).view(np.uint32).copy() for w in words)
        cols = [next(host) if k else np.zeros(0, np.uint32) for k in sizes]
        return egraph_saturate.saturate(cols, rules, iterations, signature=signature, backend=self.backend,
                                        device=device)

    def sorted_congruence_closure(self, max_rounds: int | None = None, *,
                                  unions: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """``congruence_closure`` by rounds of sorted structural equivalence (``pairs``) and unions, each
        round's pairs found through the host; ``max_rounds`` caps the rounds."""
        be, n, classes = self.backend, self.n, self.classes
        self.path = "sorted"
        pairs = _union_pairs(unions, classes)
        if n == 0:
            return np.arange(classes, dtype=np.uint32)
        rounds = max_rounds if max_rounds is not None else classes + 1
        with graph.ResidentSet(be) as res:
            parent = res.upload(np.arange(classes, dtype=np.uint32))
            flag = res.alloc(4)
            if pairs is not None:
                _merge_unions(be, parent, flag, classes, pairs)
            kids = self.n_children
            canon_eclass, canon_children = res.alloc(4 * n), res.alloc(4 * max(kids, 1))
            for _ in range(rounds):
                be.dispatch_sequence([
                    (canonical_program(), [self.eclass, parent, canon_eclass], DispatchConfig(elements=n)),
                    (canonical_program(), [self.children, parent, canon_children],
                     DispatchConfig(elements=max(kids, 1))),
                ])
                rel = self.pairs(canon_eclass, canon_children if kids else None)
                try:
                    if rel.size == 0:
                        break
                    count = res.upload(np.array([rel.size], dtype=np.uint32))
                    _merge(be, parent, flag, classes, rel.src, rel.dst, count, rel.size)
                finally:
                    rel.close()
            return graph.read_u32(be, parent, classes)


def _loop_until_still(be: Any, steps: list, flag: Any) -> None:
    """``dispatch_until(steps, flag)`` until the flag stays clear; the flag is read only if a whole
    batch of passes ran out (every flagged pass lowers some parent id)."""
    while be.dispatch_until(steps, flag, _MERGE_PASSES) == _MERGE_PASSES:
        (word,) = be.dispatch_sequence([], reads=[(flag, 0, 4)])
        if int(np.asarray(word).view(np.uint32)[0]) == 0:
            break


def _merge(be: Any, parent: Any, flag: Any, classes: int, a: Any, b: Any, count: Any, size: int) -> None:
    """Hook and jump until every pair ``(a[i], b[i])``, ``i < size``, shares a root, on the device."""
    _loop_until_still(be, [(union_program(), [a, b, count, parent, flag], DispatchConfig(elements=size)),
                           (graph.jump_program(), [parent, flag], DispatchConfig(elements=classes))], flag)


def _merge_resident(be: Any, classes: int, a: Any, b: Any, count: Any, size: int, parent: Any, flag: Any) -> None:
    """``_merge`` with the pairs first (``functools.partial`` of the resident unions)."""
    _merge(be, parent, flag, classes, a, b, count, size)


def _union_pairs(unions: tuple[np.ndarray, np.ndarray] | None, classes: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``unions`` as two checked u32 arrays of ids below ``classes``, or None when there are none."""
    if unions is None:
        return None
    a, b = graph.u32_array("unions[0]", unions[0]), graph.u32_array("unions[1]", unions[1])
    if a.size != b.size:
        raise InvalidProgram(f"unions has {a.size} left ids but {b.size} right ids", "pass two arrays of equal length.")
    if a.size and int(max(a.max(), b.max())) >= classes:
        raise InvalidProgram(f"a union names e-class {int(max(a.max(), b.max()))}, but the e-graph's ids end "
                             f"below {classes}", "union only e-classes that the columns hold.")
    return (a, b) if a.size else None


def _merge_unions(be: Any, parent: Any, flag: Any, classes: int, unions: tuple[np.ndarray, np.ndarray]) -> None:
    """Merge the pairs of ``unions`` into ``parent`` (roots made by the loop)."""
    with graph.ResidentSet(be) as res:
        a, b = res.upload(unions[0]), res.upload(unions[1])
        count = res.upload(np.array([unions[0].size], dtype=np.uint32))
        _merge(be, parent, flag, classes, a, b, count, unions[0].size)


def structural_equivalence(eclass: object, op: object, child_offsets: object, child_lens: object,
                           children: object, *, backend: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct ``(a, b)``, ``a < b``, of e-classes holding e-nodes with equal ``op`` and children."""
    with EGraph(eclass, op, child_offsets, child_lens, children, backend=backend) as g:
        if g.n == 0:
            return np.zeros(0, np.uint32), np.zeros(0, np.uint32)
        rel = g.pairs()
        try:
            return rel.pairs()
        finally:
            rel.close()


def congruence_closure(eclass: object, op: object, child_offsets: object, child_lens: object, children: object,
                       *, backend: Any = None) -> np.ndarray:
    """Canonical e-class id of every e-class id ``0 .. max id`` after congruence closure (u32)."""
    with EGraph(eclass, op, child_offsets, child_lens, children, backend=backend) as g:
        return g.congruence_closure()


def saturate(eclass: object, op: object, child_offsets: object, child_lens: object, children: object,
             rules: Sequence[str | Rule], iterations: int, *, signature: Signature | None = None,
             backend: Any = None, device: bool = True) -> Saturation:
    """``EGraph.saturate`` of the e-graph of these columns (see ``vyre.lib.egraph_saturate``)."""
    from vyre.lib import egraph_saturate

    return egraph_saturate.saturate((eclass, op, child_offsets, child_lens, children), rules, iterations,
                                    signature=signature, backend=backend, device=device)
