"""The IR programs of a breadth-first search whose level loop runs on the device.

One level is two fixed steps (``level_program``: top-down, and bottom-up when the graph is
undirected, in one kernel; then ``decide``), so ``backend.dispatch_until`` can repeat it with no
host work between levels. What the host used to decide per level lives in a small control buffer
``ctl`` that ``decide`` writes and the steps read (read-only there, so every invocation sees the
same value):

- ``ctl[LEVEL]``: the level being expanded (its vertices are the frontier);
- ``ctl[MODE]``: ``TOP_DOWN`` or ``BOTTOM_UP`` (Beamer's rule, applied by ``decide``);
- ``ctl[SHIFT]``: log2 of the invocations sharing one frontier vertex's edges (top-down);
- ``ctl[UNVISITED]``: the edges of vertices not reached yet (for Beamer's rule);
- ``ctl[SIZE]``, ``ctl[EDGES]``: the frontier's vertices and the sum of their degrees.

The frontier list alternates between the two halves of one buffer of ``2 n`` words by the level's
parity, so the same bound steps serve every level. Both steps stride over a fixed grid of ``lanes``
invocations (as many as the device holds at once), so their grids do not depend on the frontier.
"""

from __future__ import annotations

from functools import cache

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program

U32, F32 = DataType.U32, DataType.F32
UNREACHED = 0xFFFFFFFF
WG = 256
V = Expr.var

LEVEL, MODE, SHIFT, UNVISITED, SIZE, EDGES = range(6)
CTL_WORDS = 6
TOP_DOWN, BOTTOM_UP = 0, 1
SHIFT_RANGE = (5, 15)  # 32 to 32768 invocations share one frontier vertex's edge list (a Kronecker hub of
# 21,052 edges alone in a frontier took 260 us over 1024, 21 edges each one after another)

STEP_BUFFERS = (
    BufferDecl.read("indptr", 0, U32), BufferDecl.read("indices", 1, U32),
    BufferDecl.read_write("levels", 2, U32), BufferDecl.read_write("frontiers", 3, U32),
    BufferDecl.read_write("next_stats", 4, U32, 2), BufferDecl.read("ctl", 5, U32, CTL_WORDS),
)


def ctl(word: int) -> Expr:
    return Expr.load("ctl", Expr.u32(word))


def degree(vertex: Expr) -> Expr:
    return Expr.load("indptr", vertex + 1) - Expr.load("indptr", vertex)


def strided_edges(v: Expr, lane: Expr, shift: Expr, body: list[Node]) -> list[Node]:
    """The edges of ``v`` that lane ``lane`` of ``2**shift`` owns: ``lane, lane + 2**shift, ...``.

    ``body`` sees ``e`` (the edge index) and runs once per owned edge.
    """
    return [
        Node.let("start", Expr.load("indptr", v)),
        Node.let("lane", lane),
        Node.let("deg", Expr.load("indptr", v + 1) - V("start")),
        Node.loop("k", Expr.u32(0), (V("deg") + ((Expr.u32(1) << shift) - 1) - V("lane")) >> shift, [
            Node.let("e", V("start") + V("lane") + (V("k") << shift)),
            *body,
        ]),
    ]


def _half(following: bool) -> Expr:
    """Where this level's (or, ``following``, the next level's) frontier list starts in ``frontiers``."""
    n = Expr.buf_len("levels")
    odd = Expr.ne(ctl(LEVEL) & 1, Expr.u32(0))
    return Expr.select(odd, Expr.u32(0), n) if following else Expr.select(odd, n, Expr.u32(0))


def strided(lanes: int, count: Expr, body: list[Node]) -> list[Node]:
    """Run ``body`` for each ``item < count`` this invocation owns (``gid, gid + lanes, ...``).

    The trip count is the same for every invocation (``count`` is uniform), so subgroup operations
    may sit in ``body``.
    """
    return [Node.loop("trip", Expr.u32(0), (count + (lanes - 1)) // lanes, [
        Node.let("item", V("trip") * lanes + Expr.invocation_id(0)),
        *body,
    ])]


@cache
def init_program() -> Program:
    """Levels all unreached but the source (``source[0]``, a word only the host writes); the source
    as the pending frontier (``frontiers[0]``).

    ``ctl[LEVEL]`` starts at ``-1`` and the source's stats wait in ``next_stats``, so one ``decide``
    makes level 0 exactly as it makes every later level.
    """
    v = Expr.invocation_id(0)
    source = Expr.load("source", Expr.u32(0))
    edges_total = Expr.load("indptr", Expr.buf_len("indptr") - 1)
    return Program(
        [BufferDecl.read("indptr", 0, U32), BufferDecl.read_write("levels", 1, U32),
         BufferDecl.read_write("frontiers", 2, U32), BufferDecl.read_write("next_stats", 3, U32, 2),
         BufferDecl.read_write("ctl", 4, U32, CTL_WORDS), BufferDecl.read("source", 5, U32, 1)],
        (WG, 1, 1),
        [Node.if_(Expr.lt(v, Expr.buf_len("levels")),
                  [Node.store("levels", v, Expr.select(Expr.eq(v, source), Expr.u32(0), Expr.u32(UNREACHED)))]),
         Node.if_(Expr.eq(v, Expr.u32(0)), [
             Node.store("frontiers", Expr.u32(0), source),
             Node.store("next_stats", Expr.u32(0), Expr.u32(1)),
             Node.store("next_stats", Expr.u32(1), degree(source)),
             *(Node.store("ctl", Expr.u32(w), Expr.u32(0)) for w in range(CTL_WORDS)),
             Node.store("ctl", Expr.u32(LEVEL), Expr.u32(UNREACHED)),
             Node.store("ctl", Expr.u32(UNVISITED), edges_total),
         ])],
        name="bfs_init",
    )


FOUND = "found_edges"  # each invocation's sum of the degrees it added to the next frontier


def _top_down(lanes: int) -> list[Node]:
    """Top-down (when ``ctl[MODE]`` says so): ``2**ctl[SHIFT]`` invocations share each frontier vertex's
    edges; an unreached neighbour is claimed (compare-exchange on its level) by one of them, which
    appends it to the next frontier (a counter add: ``cuda`` makes it once per subgroup, so a hub's
    thousands of new neighbours do not queue on one word) and adds its degree to ``FOUND``."""
    shift = ctl(SHIFT)
    total = Expr.select(Expr.eq(ctl(MODE), Expr.u32(TOP_DOWN)), ctl(SIZE) << shift, Expr.u32(0))
    claim = [
        Node.let("u", Expr.load("indices", V("e"))),
        Node.if_(Expr.and_(Expr.lt(V("u"), Expr.buf_len("levels")),
                           Expr.eq(Expr.load("levels", V("u")), Expr.u32(UNREACHED))), [
            Node.let("old", Expr.atomic(AtomicOp.COMPARE_EXCHANGE, "levels", V("u"), ctl(LEVEL) + 1,
                                        expected=Expr.u32(UNREACHED), relaxed=True)),
            Node.if_(Expr.eq(V("old"), Expr.u32(UNREACHED)), [
                Node.let("at", Expr.atomic(AtomicOp.ADD, "next_stats", Expr.u32(0), Expr.u32(1), relaxed=True)),
                Node.store("frontiers", _half(True) + V("at"), V("u")),
                Node.assign(FOUND, V(FOUND) + degree(V("u"))),
            ]),
        ]),
    ]
    return [
        Node.let("total", total),
        *strided(lanes, V("total"), [
            Node.if_(Expr.lt(V("item"), V("total")), [
                Node.let("v", Expr.load("frontiers", _half(False) + (V("item") >> shift))),
                *strided_edges(V("v"), V("item") & ((Expr.u32(1) << shift) - 1), shift, claim),
            ]),
        ]),
    ]


def _bottom_up(lanes: int) -> list[Node]:
    """Bottom-up (when ``ctl[MODE]`` says so; undirected graphs only): each unreached vertex looks for
    a neighbour in the current level. The vertices found are counted per subgroup (ballot, one atomic
    per subgroup) and appended to the next frontier in lane order, so a later top-down step can use it;
    their degrees go to ``FOUND``."""
    n = Expr.buf_len("levels")
    level = ctl(LEVEL)
    lane = Expr.subgroup_local_id()
    count = Expr.select(Expr.eq(ctl(MODE), Expr.u32(BOTTOM_UP)), n, Expr.u32(0))
    body = [
        Node.let("inside", Expr.lt(V("item"), n)),
        Node.let("at", Expr.select(V("inside"), V("item"), Expr.u32(0))),
        Node.let("active", Expr.and_(V("inside"), Expr.eq(Expr.load("levels", V("at")), Expr.u32(UNREACHED)))),
        Node.let("start", Expr.select(V("active"), Expr.load("indptr", V("at")), Expr.u32(0))),
        Node.let("end", Expr.select(V("active"), Expr.load("indptr", V("at") + 1), Expr.u32(0))),
        Node.let("found", Expr.bool(False)),
        Node.loop("e", V("start"), V("end"), [
            Node.if_(Expr.not_(V("found")), [
                Node.let("u", Expr.load("indices", V("e"))),
                Node.if_(Expr.and_(Expr.lt(V("u"), n), Expr.eq(Expr.load("levels", V("u")), level)),
                         [Node.assign("found", Expr.bool(True))]),
            ]),
        ]),
        Node.if_(V("found"), [Node.store("levels", V("item"), level + 1),
                              Node.assign(FOUND, V(FOUND) + (V("end") - V("start")))]),
        Node.let("ballot", Expr.subgroup_ballot(V("found"))),
        Node.let("base", Expr.u32(0)),
        Node.if_(Expr.and_(Expr.eq(lane, Expr.u32(0)), Expr.ne(V("ballot"), Expr.u32(0))), [
            Node.assign("base", Expr.atomic(AtomicOp.ADD, "next_stats", Expr.u32(0), Expr.popcount(V("ballot")),
                                            relaxed=True)),
        ]),
        Node.let("first", Expr.subgroup_shuffle(V("base"), Expr.u32(0))),
        Node.if_(V("found"), [
            Node.store("frontiers", _half(True) + V("first") + Expr.popcount(V("ballot") & ((Expr.u32(1) << lane) - 1)),
                       V("item")),
        ]),
    ]
    return strided(lanes, count, body)


@cache
def level_program(lanes: int, undirected: bool) -> Program:
    """One level in one kernel: the top-down step, then (undirected graphs) the bottom-up step, each
    doing nothing unless ``ctl[MODE]`` picks it; at the end each subgroup adds its degrees of the new
    frontier to ``next_stats[1]`` with one atomic."""
    steps = [Node.block(_top_down(lanes))]
    if undirected:
        steps.append(Node.block(_bottom_up(lanes)))
    return Program(
        STEP_BUFFERS, (WG, 1, 1),
        [Node.let(FOUND, Expr.u32(0)),
         *steps,
         Node.let("edges", Expr.subgroup_add(V(FOUND))),
         Node.if_(Expr.and_(Expr.eq(Expr.subgroup_local_id(), Expr.u32(0)), Expr.ne(V("edges"), Expr.u32(0))), [
             Node.let("added", Expr.atomic(AtomicOp.ADD, "next_stats", Expr.u32(1), V("edges"), relaxed=True)),
         ])],
        name=f"bfs_level_{'u' if undirected else 'd'}_g{lanes}",
    )


@cache
def decide_program(undirected: bool, alpha: float, beta: float) -> Program:
    """After a level (one invocation): take the next frontier's stats, step the level, pick the next
    direction (Beamer: bottom-up once the frontier's edges exceed 1/``alpha`` of the unvisited
    vertices' edges, top-down again once it holds fewer than 1/``beta`` of the vertices) and the
    top-down lanes per vertex; set the flag while the next frontier is not empty."""
    size, edges = V("size"), V("edges")
    n = Expr.buf_len("levels")

    def f32(x: Expr) -> Expr:
        return Expr.cast(F32, x)

    mode = ctl(MODE)
    if undirected:
        to_bottom_up = Expr.and_(Expr.eq(mode, Expr.u32(TOP_DOWN)),
                                 Expr.gt(f32(edges) * Expr.f32(alpha), f32(V("unvisited"))))
        to_top_down = Expr.and_(Expr.eq(mode, Expr.u32(BOTTOM_UP)), Expr.lt(f32(size) * Expr.f32(beta), f32(n)))
        mode = Expr.select(to_bottom_up, Expr.u32(BOTTOM_UP), Expr.select(to_top_down, Expr.u32(TOP_DOWN), mode))
    # 2**shift: about the frontier's average degree rounded up (``lanes_shift``), within SHIFT_RANGE and
    # with size << shift < 2**31, by comparisons (ceil(e / s) > 2**j exactly when (e - 1) // s >= 2**j)
    low, high = SHIFT_RANGE
    below = Expr.select(Expr.eq(edges, Expr.u32(0)), Expr.u32(0), (edges - 1) // size)

    def count(terms: list[Expr]) -> Expr:
        total = Expr.u32(0)
        for term in terms:
            total = total + Expr.select(term, Expr.u32(1), Expr.u32(0))
        return total

    wanted = count([Expr.ge(below, Expr.u32(1 << j)) for j in range(low, high)]) + low
    room = Expr.u32(high) - count([Expr.ge(size, Expr.u32(1 << j)) for j in range(31 - high, 31)])
    shift = Expr.min(wanted, room)

    def put(word: int, value: Expr) -> Node:
        return Node.store("ctl", Expr.u32(word), value)

    # directed graphs stay top-down: no direction or unvisited edges to keep (fewer statements matter
    # on the oracle, where this one-invocation step is pure per-statement overhead)
    beamer = [Node.let("unvisited", ctl(UNVISITED) - edges), put(MODE, mode), put(UNVISITED, V("unvisited"))]
    return Program(
        [BufferDecl.read("levels", 0, U32), BufferDecl.read_write("next_stats", 1, U32, 2),
         BufferDecl.read_write("ctl", 2, U32, CTL_WORDS), BufferDecl.read_write("flag", 3, U32, 1)],
        (1, 1, 1),
        [Node.let("size", Expr.load("next_stats", Expr.u32(0))),
         Node.let("edges", Expr.load("next_stats", Expr.u32(1))),
         Node.store("next_stats", Expr.u32(0), Expr.u32(0)), Node.store("next_stats", Expr.u32(1), Expr.u32(0)),
         *(beamer if undirected else []),
         put(LEVEL, ctl(LEVEL) + 1), put(SHIFT, shift), put(SIZE, size), put(EDGES, edges),
         Node.if_(Expr.ne(size, Expr.u32(0)), [Node.store("flag", Expr.u32(0), Expr.u32(1))])],
        name=f"bfs_decide_{'u' if undirected else 'd'}",
    )
