"""The IR programs of connected components: union-find over ``parent`` (``parent[x] <= x`` always).

Two methods share the pieces here (``_find``, ``_hook``, ``_link``):

- ``sweep`` (ECL-CC style): ``cc_init`` (each vertex under its first neighbour when that is
  smaller), then ``cc_hook`` unions the ends of every edge and ``cc_jump`` compresses, looped.
- ``afforest`` (Sutton et al., IPDPS 2018): ``afforest_init``, then for ``r < SAMPLE_ROUNDS``
  ``afforest_link(r)`` unions each vertex with its ``r``-th neighbour and ``afforest_compress``
  flattens the trees; ``afforest_count`` finds the most frequent root among ``SAMPLES`` vertices
  (the giant component, most likely); then ``afforest_finish`` links the remaining neighbours of
  every vertex outside it (a vertex with many hands them to ``afforest_finish_big``, which spreads
  each over ``2**BIG_SHIFT`` invocations), and a last compress; the last three loop. Skipping the
  giant component's vertices is only valid when every edge is stored both ways (its other end
  links it); one-way graphs run the full ``cc_hook`` after the sampling instead.

Hooks always put the larger root under the smaller, so each component ends labelled by its
smallest vertex id, whatever order the invocations ran in.
"""

from __future__ import annotations

from functools import cache

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.lib import graph_kernels as kernels

U32 = DataType.U32
V = Expr.var
_WG = 256
_FIND_HOPS = 32
_HOOK_TRIES = 16
_JUMP_HOPS = 64

SAMPLE_ROUNDS = 2  # neighbours each vertex links before the giant component is guessed
SAMPLES = 1024  # vertices whose roots vote for the giant component
TABLE_SLOTS = 2048  # open-addressing slots of the vote (twice the samples: never full)
_SLOT_BITS = 11
_PROBES = 16  # a vote that finds no slot in this many probes is dropped (it only guides skipping)
_HASH = 0x9E3779B1  # Fibonacci hashing
EMPTY = 0xFFFFFFFF
BEST, REDO, BIG_COUNT = 2 * TABLE_SLOTS, 2 * TABLE_SLOTS + 1, 2 * TABLE_SLOTS + 2
TABLE_WORDS = 2 * TABLE_SLOTS + 3  # keys, counts, best (count << 11 | slot), redo flag, big-vertex count
SMALL = 16  # a vertex with more neighbours left than this goes to ``afforest_finish_big``
BIG_SHIFT = 6  # log2 of the invocations sharing one such vertex's neighbours
_COMPRESS_HALVINGS = 32


def _n() -> Expr:
    return Expr.buf_len("parent")


def _first_link() -> list[Node]:
    """``parent[v]`` = the smaller of ``v`` (``v``: a declared vertex) and its first neighbour."""
    v = V("v")
    return [
        Node.let("start", Expr.load("indptr", v)),
        Node.let("first", v),
        Node.if_(Expr.lt(V("start"), Expr.load("indptr", v + 1)),
                 [Node.assign("first", Expr.min(v, Expr.load("indices", V("start"))))]),
        Node.store("parent", v, V("first")),
    ]


@cache
def cc_init_program() -> Program:
    """``parent[v]`` = the smaller of ``v`` and its first neighbour (Afforest/ECL-CC's cheap first link)."""
    v = Expr.invocation_id(0)
    return Program(
        [BufferDecl.read("indptr", 0, U32), BufferDecl.read("indices", 1, U32),
         BufferDecl.read_write("parent", 2, U32)],
        (_WG, 1, 1),
        [Node.if_(Expr.lt(v, _n()), [Node.let("v", v), *_first_link()])],
        name="cc_init",
    )


def _climb(name: str, prev: str, hops: int) -> list[Node]:
    """Up to ``hops`` steps from ``name`` towards its root, each nested in the last (so it stops early)."""
    if hops == 0:
        return []
    up = f"{name}_up{hops}"
    return [
        Node.let(up, Expr.load("parent", V(name))),
        Node.if_(Expr.lt(V(up), V(name)), [
            Node.store("parent", V(prev), V(up)),
            Node.assign(prev, V(name)), Node.assign(name, V(up)),
            *_climb(name, prev, hops - 1),
        ]),
    ]


def _find(name: str, vertex: Expr) -> list[Node]:
    """``name`` = the root above ``vertex`` (or an ancestor, after ``_FIND_HOPS`` hops), halving the path.

    Every vertex passed links its child to its grandparent: ``parent[x] <= x`` always, so a plain
    store of an ancestor is safe next to the hooks, which only ever change roots.
    """
    return [Node.let(name, Expr.load("parent", vertex)), Node.let(f"{name}_prev", vertex),
            *_climb(name, f"{name}_prev", _FIND_HOPS)]


def _hook(tries: int, failed: Node) -> list[Node]:
    """Hook the larger of the roots ``a``, ``b`` under the smaller (compare-exchange); when another
    hook got there first, climb to what it found and try again, nested up to ``tries`` times; run
    ``failed`` if the ends are still apart then."""
    if tries == 0:
        return [failed]
    hi, lo, old = f"hi{tries}", f"lo{tries}", f"old{tries}"
    return [
        Node.let(hi, Expr.max(V("a"), V("b"))),
        Node.let(lo, Expr.min(V("a"), V("b"))),
        Node.let(old, Expr.atomic(AtomicOp.COMPARE_EXCHANGE, "parent", V(hi), V(lo), expected=V(hi), relaxed=True)),
        Node.if_(Expr.ne(V(old), V(hi)), [
            Node.assign("a", V(old)), Node.assign("b", V(lo)),
            Node.if_(Expr.ne(V("a"), V("b")), _hook(tries - 1, failed)),
        ]),
    ]


def _raise_flag() -> Node:
    return Node.store("flag", Expr.u32(0), Expr.u32(1))


def _union(v: Expr, u: Expr, failed: Node) -> list[Node]:
    """Find the roots ``a`` of ``v`` and ``b`` of ``u`` and hook the larger under the smaller."""
    return [*_find("a", v), *_find("b", u), Node.if_(Expr.ne(V("a"), V("b")), _hook(_HOOK_TRIES, failed))]


def _link(v: Expr, neighbour: Expr, failed: Node) -> list[Node]:
    """Union ``v`` with ``neighbour`` unless that is ``v`` itself or an ignored id (``>= n``)."""
    return [Node.let("u", neighbour),
            Node.if_(Expr.and_(Expr.lt(V("u"), _n()), Expr.ne(V("u"), v)), _union(v, V("u"), failed))]


@cache
def cc_hook_program(once: bool) -> Program:
    """Union the two ends of every edge (ECL-CC): find both roots, then hook the larger under the smaller.

    Up to ``_HOOK_TRIES`` compare-exchanges; an edge whose ends are still apart then sets the flag
    (a later sweep finishes it). ``once``: each edge is stored both ways, so only ``v < u`` runs.
    """
    e = Expr.invocation_id(0)
    wanted = Expr.lt(V("u"), _n())
    if once:
        wanted = Expr.and_(wanted, Expr.lt(V("v"), V("u")))
    return Program(
        [BufferDecl.read("sources", 0, U32), BufferDecl.read("indices", 1, U32),
         BufferDecl.read_write("parent", 2, U32), BufferDecl.read_write("flag", 3, U32, 1)],
        (_WG, 1, 1),
        [Node.if_(Expr.lt(e, Expr.buf_len("indices")), [
            Node.let("v", Expr.load("sources", e)),
            Node.let("u", Expr.load("indices", e)),
            Node.if_(wanted, _union(V("v"), V("u"), _raise_flag())),
        ])],
        name="cc_hook_once" if once else "cc_hook",
    )


def climb(index: Expr, hops: int) -> list[Node]:
    """Bind ``start`` = ``parent[index]``, then follow parent pointers from it for up to ``hops``
    hops: ``p`` is where the climb stopped and ``done`` whether that is a root."""
    p = V("p")
    return [
        Node.let("start", Expr.load("parent", index)),
        Node.let("p", V("start")),
        Node.let("done", Expr.bool(False)),
        Node.loop("hop", Expr.u32(0), Expr.u32(hops), [
            Node.if_(Expr.not_(V("done")), [
                Node.let("pp", Expr.load("parent", p)),
                Node.if_(Expr.eq(V("pp"), p), [Node.assign("done", Expr.bool(True))], [Node.assign("p", V("pp"))]),
            ]),
        ]),
    ]


@cache
def jump_program(flag_unfinished_only: bool = False) -> Program:
    """Every vertex follows parent pointers (up to ``_JUMP_HOPS`` hops) and stores what it reached.

    The flag is set when a vertex moved (default: iterate until nothing moves) or, with
    ``flag_unfinished_only``, only when one did not reach its root within the hops.
    """
    v = Expr.invocation_id(0)
    p = V("p")
    flagged = Expr.not_(V("done")) if flag_unfinished_only else Expr.ne(p, V("start"))
    return Program(
        [BufferDecl.read_write("parent", 0, U32), BufferDecl.read_write("flag", 1, U32, 1)],
        (_WG, 1, 1),
        [Node.if_(Expr.lt(v, _n()), [
            *climb(v, _JUMP_HOPS),
            Node.if_(Expr.ne(p, V("start")), [Node.store("parent", v, p)]),
            Node.if_(flagged, [Node.store("flag", Expr.u32(0), Expr.u32(1))]),
        ])],
        name="cc_compress" if flag_unfinished_only else "cc_jump",
    )


# ---- Afforest ------------------------------------------------------------------------------------
def _table(word: int) -> Expr:
    return Expr.load("table", Expr.u32(word))


def _raise_redo() -> Node:
    """A sampled link that gave up: the finish then links every neighbour, the sampled ones too."""
    return Node.store("table", Expr.u32(REDO), Expr.u32(1))


@cache
def afforest_init_program() -> Program:
    """``cc_init``'s first link for ``v < n``, and the vote table cleared (``i < TABLE_WORDS``:
    keys empty, counts, best, redo and the big-vertex count zero). Grid: ``max(n, TABLE_WORDS)``."""
    i = Expr.invocation_id(0)
    return Program(
        [BufferDecl.read("indptr", 0, U32), BufferDecl.read("indices", 1, U32),
         BufferDecl.read_write("parent", 2, U32), BufferDecl.read_write("table", 3, U32, TABLE_WORDS)],
        (_WG, 1, 1),
        [Node.if_(Expr.lt(i, _n()), [Node.let("v", i), *_first_link()]),
         Node.if_(Expr.lt(i, Expr.u32(TABLE_WORDS)),
                  [Node.store("table", i, Expr.select(Expr.lt(i, Expr.u32(TABLE_SLOTS)), Expr.u32(EMPTY),
                                                      Expr.u32(0)))])],
        name="afforest_init",
    )


@cache
def afforest_link_program(r: int) -> Program:
    """Union every vertex with its ``r``-th neighbour (if it has one); a union that gives up sets
    the table's redo word."""
    v = Expr.invocation_id(0)
    return Program(
        [BufferDecl.read("indptr", 0, U32), BufferDecl.read("indices", 1, U32),
         BufferDecl.read_write("parent", 2, U32), BufferDecl.read_write("table", 3, U32, TABLE_WORDS)],
        (_WG, 1, 1),
        [Node.if_(Expr.lt(v, _n()), [
            Node.let("v", v),
            Node.let("at", Expr.load("indptr", V("v")) + r),
            Node.if_(Expr.lt(V("at"), Expr.load("indptr", V("v") + 1)),
                     _link(V("v"), Expr.load("indices", V("at")), _raise_redo())),
        ])],
        name=f"afforest_link{r}",
    )


def _halve(hops: int) -> list[Node]:
    """Up to ``hops`` path-halving steps from ``x``: ``parent[x]`` becomes its grandparent and ``x``
    moves there, each step nested in the last (so it stops at the root)."""
    if hops == 0:
        return []
    up, top = f"up{hops}", f"top{hops}"
    return [
        Node.let(up, Expr.load("parent", V("x"))),
        Node.if_(Expr.lt(V(up), V("x")), [
            Node.let(top, Expr.load("parent", V(up))),
            Node.if_(Expr.lt(V(top), V(up)), [Node.store("parent", V("x"), V(top))]),
            Node.assign("x", V(top)),
            *_halve(hops - 1),
        ]),
    ]


@cache
def afforest_compress_program(reset: bool) -> Program:
    """Every vertex climbs to its root halving the path (``_COMPRESS_HALVINGS`` steps of two levels;
    all invocations halve at once, so deep trees flatten fast) and points at what it reached; the
    flag is set when that is not a root yet. ``reset``: also zero the table's big-vertex count
    (the finish steps of the next loop iteration append afresh)."""
    v = Expr.invocation_id(0)
    buffers = [BufferDecl.read_write("parent", 0, U32), BufferDecl.read_write("flag", 1, U32, 1)]
    body = [Node.if_(Expr.lt(v, _n()), [
        Node.let("x", v),
        *_halve(_COMPRESS_HALVINGS),
        Node.if_(Expr.ne(V("x"), v), [Node.store("parent", v, V("x"))]),
        Node.if_(Expr.ne(Expr.load("parent", V("x")), V("x")), [_raise_flag()]),
    ])]
    if reset:
        buffers.append(BufferDecl.read_write("table", 2, U32, TABLE_WORDS))
        body.append(Node.if_(Expr.eq(v, Expr.u32(0)), [Node.store("table", Expr.u32(BIG_COUNT), Expr.u32(0))]))
    return Program(buffers, (_WG, 1, 1), body, name="afforest_compress_reset" if reset else "afforest_compress")


@cache
def afforest_count_program() -> Program:
    """``SAMPLES`` invocations: each takes a vertex by hashing its id, and votes for that vertex's
    root (``_find``) in an open-addressing table (compare-exchange on the key, then an atomic
    count); the word ``BEST`` keeps the largest ``count << 11 | slot`` (atomic max), so
    ``table[BEST & (TABLE_SLOTS - 1)]`` is the most frequent root of the sample."""
    s = Expr.invocation_id(0)
    return Program(
        [BufferDecl.read_write("parent", 0, U32), BufferDecl.read_write("table", 1, U32, TABLE_WORDS)],
        (_WG, 1, 1),
        [Node.if_(Expr.lt(s, Expr.u32(SAMPLES)), [
            Node.let("v", (s * _HASH) % _n()),
            *_find("label", V("v")),
            Node.let("slot", (V("label") * _HASH) >> (32 - _SLOT_BITS)),
            Node.let("placed", Expr.bool(False)),
            Node.loop("probe", Expr.u32(0), Expr.u32(_PROBES), [
                Node.if_(Expr.not_(V("placed")), [
                    Node.let("key", Expr.atomic(AtomicOp.COMPARE_EXCHANGE, "table", V("slot"), V("label"),
                                                expected=Expr.u32(EMPTY), relaxed=True)),
                    Node.if_(Expr.or_(Expr.eq(V("key"), Expr.u32(EMPTY)), Expr.eq(V("key"), V("label"))), [
                        Node.let("count", Expr.atomic(AtomicOp.ADD, "table", V("slot") + TABLE_SLOTS, Expr.u32(1),
                                                      relaxed=True) + 1),
                        Node.let("best", Expr.atomic(AtomicOp.MAX, "table", Expr.u32(BEST),
                                                     (V("count") << _SLOT_BITS) | V("slot"), relaxed=True)),
                        Node.assign("placed", Expr.bool(True)),
                    ], [Node.assign("slot", (V("slot") + 1) & (TABLE_SLOTS - 1))]),
                ]),
            ]),
        ])],
        name="afforest_count",
    )


def _in_giant(v: Expr) -> list[Node]:
    """``giant``: whether ``v`` is in the voted root ``c``'s set, found by climbing from ``v`` to
    ``r`` (its root, or an ancestor after ``_FIND_HOPS``): ``r`` is ``c`` or ``c``'s parent (an
    ancestor never leaves its set; ``c`` may have been hooked under a smaller root since the vote).
    """
    return [
        Node.let("c", Expr.load("table", _table(BEST) & (TABLE_SLOTS - 1))),  # EMPTY when nothing voted
        Node.let("cc", Expr.load("parent", Expr.min(V("c"), _n() - 1))),
        *_find("r", v),
        Node.let("giant", Expr.and_(Expr.lt(V("c"), _n()),
                                    Expr.or_(Expr.eq(V("r"), V("c")), Expr.eq(V("r"), V("cc"))))),
    ]


def _skipped() -> Node:
    """``skipped``: the neighbours each vertex already linked (``SAMPLE_ROUNDS``, or none after a
    sampled link gave up)."""
    return Node.let("skipped", Expr.select(Expr.eq(_table(REDO), Expr.u32(0)), Expr.u32(SAMPLE_ROUNDS),
                                           Expr.u32(0)))


FINISH_BUFFERS = (
    BufferDecl.read("indptr", 0, U32), BufferDecl.read("indices", 1, U32), BufferDecl.read_write("parent", 2, U32),
    BufferDecl.read_write("table", 3, U32, TABLE_WORDS), BufferDecl.read_write("big", 4, U32),
    BufferDecl.read_write("flag", 5, U32, 1),
)


@cache
def afforest_finish_program() -> Program:
    """Each vertex outside the voted root's set links its neighbours from ``skipped`` on: up to
    ``SMALL`` of them itself; more, and it appends itself to ``big`` (``table[BIG_COUNT]`` counts)
    for ``afforest_finish_big``. A union that gives up sets the flag. Every edge must be stored
    both ways: an edge of two skipped vertices joins one set, and any other edge has an end that
    links it (here, or in the sampling)."""
    v = Expr.invocation_id(0)
    return Program(
        FINISH_BUFFERS, (_WG, 1, 1),
        [Node.if_(Expr.lt(v, _n()), [
            Node.let("v", v),
            *_in_giant(V("v")),
            _skipped(),
            Node.if_(Expr.not_(V("giant")), [
                Node.let("end", Expr.load("indptr", V("v") + 1)),
                Node.let("begin", Expr.min(Expr.load("indptr", V("v")) + V("skipped"), V("end"))),
                Node.if_(Expr.le(V("end") - V("begin"), Expr.u32(SMALL)), [
                    Node.loop("e", V("begin"), V("end"), _link(V("v"), Expr.load("indices", V("e")), _raise_flag())),
                ], [
                    Node.let("slot", Expr.atomic(AtomicOp.ADD, "table", Expr.u32(BIG_COUNT), Expr.u32(1),
                                                 relaxed=True)),
                    Node.store("big", V("slot"), V("v")),
                ]),
            ]),
        ])],
        name="afforest_finish",
    )


@cache
def afforest_finish_big_program(lanes: int) -> Program:
    """The vertices ``afforest_finish`` listed in ``big``: ``2**BIG_SHIFT`` invocations share each
    one's neighbours from ``skipped`` on (a fixed grid of ``lanes`` invocations strides over them)."""
    shift = Expr.u32(BIG_SHIFT)
    return Program(
        FINISH_BUFFERS, (_WG, 1, 1),
        [Node.let("total", _table(BIG_COUNT) << BIG_SHIFT),
         *kernels.strided(lanes, V("total"), [
             Node.if_(Expr.lt(V("item"), V("total")), [
                 Node.let("v", Expr.load("big", V("item") >> BIG_SHIFT)),
                 _skipped(),
                 *kernels.strided_edges(V("v"), V("item") & ((1 << BIG_SHIFT) - 1), shift, [
                     Node.if_(Expr.ge(V("e") - V("start"), V("skipped")),
                              _link(V("v"), Expr.load("indices", V("e")), _raise_flag())),
                 ]),
             ]),
         ])],
        name=f"afforest_finish_big_g{lanes}",
    )
