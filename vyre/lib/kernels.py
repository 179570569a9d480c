"""The programs of ``vyre.lib``, built once per variant with the public IR builder.

Each builder is cached, so the same variant is the same ``Program`` (and on ``cuda`` the same
module and graph). Every kernel with run-time sizes declares a ``params`` uniform buffer of
``PARAM_WORDS`` u32 words: they live there, so one program and one captured graph serve every
size of a capacity class. Word numbers are compile-time constants chosen by the plan (``vyre.lib.plan``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.lib.blocks import (
    WARPS,
    WG,
    block_reduce,
    block_scan,
    bounded_wait,
    fold_warp_totals,
    lane,
    lid,
    load_param,
    u,
    var,
    warp,
    warp_inclusive_scan,
    warp_reduce,
    wid,
)
from vyre.lib.keys import equality_key, from_key, raw_type, to_key
from vyre.lib.monoid import Monoid

PARAM_WORDS = 32
U32 = DataType.U32
SCAN_ITEMS = 8      # elements per invocation in the scans' downsweep (tile 2048)
COMPACT_ITEMS = 8   # elements per invocation in compaction's downsweep (tile 2048)
REDUCE_ITEMS = 16   # elements per invocation in reductions and upsweeps (tile 4096)
SORT_ITEMS = 24     # elements per invocation in the radix scatter of keys alone (tile 6144; 46 KB workgroup memory)
SORT_VALUE_ITEMS = 12  # the same when values move (tile 3072; 40 KB)
SORT_ROUNDS = 4     # rounds per loop iteration of the radix scatter (written out)
COUNT_ITEMS = 8     # elements per invocation in the radix digit counts (tile 2048, all loaded first)
RADIX_BITS = 8
WG_SIZE = (WG, 1, 1)


def _params(binding: int) -> BufferDecl:
    return BufferDecl.uniform("params", binding, U32, PARAM_WORDS)


def _typed_params(name: str, binding: int, dtype: DataType) -> BufferDecl:
    """A typed view of the parameter words (``Plan.typed_word`` values): 8-byte types see half as many."""
    return BufferDecl.uniform(name, binding, dtype, PARAM_WORDS * 4 // dtype.size)


def _exit_past(base: Expr, n: Expr) -> Node:
    """Workgroups whose tile starts at or past ``n`` have nothing to do (a uniform early return)."""
    return Node.if_(Expr.ge(base, n), Node.return_())


@cache
def reduce_tiles(m: Monoid, items: int, n_word: int) -> Program:
    """``partial[w] = x[w*T] op ... op x[w*T + T - 1]`` for each tile of ``T = WG*items`` elements."""
    n, base = load_param(n_word), Expr.mul(wid(), u(WG * items))
    body: list[Node] = [_exit_past(base, n), Node.let("acc", m.pad())]
    for k in range(items):
        index = Expr.add(base, Expr.add(u(k * WG), lid()))
        value = Expr.select(Expr.lt(index, n), Expr.load("x", index), m.pad())
        body.append(Node.assign("acc", m.combine(var("acc"), value)))
    nodes, total = block_reduce(m, var("acc"), "sums", "b")
    body += nodes
    body.append(Node.if_(Expr.eq(lid(), u(0)), Node.store("partial", wid(), total)))
    buffers = [BufferDecl.read("x", 0, m.dtype), BufferDecl.read_write("partial", 1, m.dtype), _params(2),
               BufferDecl.workgroup("sums", WARPS, m.dtype)]
    return Program(buffers, WG_SIZE, body, name=f"lib_reduce_{m.op}_{m.dtype.value}")


def segment(n: Expr, span_word: int, tile: int) -> list[Node]:
    """Bind ``seg_base`` (workgroup ``w`` owns elements ``w*span ... w*span + span - 1``, params
    ``span_word``) and ``seg_tiles`` (its tiles of ``tile`` elements below ``n``); workgroups
    whose segment starts at or past ``n`` return."""
    span = load_param(span_word)
    size = Expr.min(span, Expr.sub(n, var("seg_base")))
    return [Node.let("seg_base", Expr.mul(wid(), span)), _exit_past(var("seg_base"), n),
            Node.let("seg_tiles", Expr.div(Expr.add(size, u(tile - 1)), u(tile)))]


def fold_segment(m: Monoid, items: int, n: Expr, span_word: int, value: Callable[[Expr], Expr]) -> list[Node]:
    """Bind ``acc``: this invocation's fold of ``value(i)`` over element ``k*WG + t`` of every tile of
    its workgroup's segment (coalesced), in order; the caller reduces ``acc`` over the workgroup."""
    tile = WG * items
    body = segment(n, span_word, tile) + [Node.let("acc", m.pad())]
    step: list[Node] = [Node.let("tb", Expr.add(var("seg_base"), Expr.mul(var("t"), u(tile))))]
    for k in range(items):
        step.append(Node.assign("acc", m.combine(var("acc"), value(Expr.add(var("tb"), Expr.add(u(k * WG), lid()))))))
    body.append(Node.loop("t", u(0), var("seg_tiles"), step))
    return body


def _partial_of_segment(m: Monoid, body: list[Node]) -> list[Node]:
    nodes, total = block_reduce(m, var("acc"), "sums", "b")
    return body + nodes + [Node.if_(Expr.eq(lid(), u(0)), Node.store("partial", wid(), total))]


@cache
def reduce_segments(m: Monoid, items: int, n_word: int, span_word: int) -> Program:
    """``partial[w]`` = the combination of workgroup ``w``'s segment (the scans' upsweep)."""
    n = load_param(n_word)

    def value(index: Expr) -> Expr:
        return Expr.select(Expr.lt(index, n), Expr.load("x", index), m.pad())

    body = _partial_of_segment(m, fold_segment(m, items, n, span_word, value))
    buffers = [BufferDecl.read("x", 0, m.dtype), BufferDecl.read_write("partial", 1, m.dtype), _params(2),
               BufferDecl.workgroup("sums", WARPS, m.dtype)]
    return Program(buffers, WG_SIZE, body, name=f"lib_reduce_segments_{m.op}_{m.dtype.value}")


def _warp_striped(base: Expr, k: int, items: int) -> Expr:
    """Element ``k`` of this invocation in a tile at ``base``: warp ``v`` owns the ``32*items``
    consecutive elements from ``v*32*items``, round ``k`` its 32 elements from ``k*32``."""
    return Expr.add(base, Expr.add(Expr.mul(warp(), u(32 * items)), Expr.add(u(k * 32), lane())))


def _warp_rounds(m: Monoid, items: int, inclusive: bool, values: list[Expr]) -> tuple[list[Node], list[Expr], Expr]:
    """Scan a warp's ``32*items`` consecutive elements (``values[k]``: lane ``l``'s element
    ``k*32 + l``) round by round: a shuffle scan each, with the warp's running total.

    Returns the nodes, each element's result inside the warp (inclusive, or exclusive: the
    inclusive one of the previous lane, so no op needs an inverse) and the warp's total.
    """
    nodes: list[Node] = []
    before = m.pad()  # the warp's rounds before round k
    outs: list[Expr] = []
    for k, value in enumerate(values):
        scan_nodes, scanned = warp_inclusive_scan(m, value, f"s{k}_")
        nodes += scan_nodes
        nodes.append(Node.let(f"r{k}", m.combine(before, scanned) if k else scanned))
        if not inclusive:
            earlier = Expr.subgroup_shuffle(var(f"r{k}"), Expr.sub(lane(), u(1)))
            nodes.append(Node.let(f"e{k}", Expr.select(Expr.eq(lane(), u(0)), before, earlier)))
        nodes.append(Node.let(f"h{k}", Expr.subgroup_shuffle(var(f"r{k}"), u(31))))
        before = var(f"h{k}")
        outs.append(var(f"r{k}") if inclusive else var(f"e{k}"))
    return nodes, outs, before


def _start(m: Monoid, init_word: int | None, carry: Expr) -> Expr:
    """``init op carry`` (``init``: word ``init_word`` of the ``init`` uniform buffer), or ``carry``."""
    return carry if init_word is None else m.combine(Expr.load("init", u(init_word)), carry)


def _scan_tail_buffers(m: Monoid, buffers: list[BufferDecl], init_word: int | None) -> list[BufferDecl]:
    buffers.append(_params(len(buffers)))
    if init_word is not None:
        buffers.append(_typed_params("init", len(buffers), m.dtype))
    return buffers


@cache
def scan_segments(m: Monoid, items: int, inclusive: bool, has_carry: bool, n_word: int, span_word: int,
                  init_word: int | None) -> Program:
    """Scan workgroup ``w``'s segment of ``x`` into ``out``, starting from ``init op carry[w]`` (the downsweep).

    The workgroup walks its tiles in order with a running carry. Each warp owns a contiguous
    stretch of the tile and scans it round by round (``_warp_rounds``); one barrier passes the
    warp totals through workgroup memory (two halves by tile parity, so the next tile needs no
    second barrier). The next tile's loads are issued before the current tile is scanned, so
    they are in flight while it is scanned and written.
    """
    n, tile = load_param(n_word), WG * items

    def loaded(base: Expr, k: int) -> Expr:
        index = _warp_striped(base, k, items)
        return Expr.select(Expr.lt(index, n), Expr.load("x", index), m.pad())

    carry = _start(m, init_word, Expr.load("carry", wid()) if has_carry else m.pad())
    body = segment(n, span_word, tile) + [Node.let("carry_in", carry)]
    body += [Node.let(f"next{k}", loaded(var("seg_base"), k)) for k in range(items)]
    step: list[Node] = [Node.let("tb", Expr.add(var("seg_base"), Expr.mul(var("t"), u(tile)))),
                        Node.let("par", Expr.mul(Expr.bitand(var("t"), u(1)), u(WARPS)))]
    step += [Node.let(f"v{k}", var(f"next{k}")) for k in range(items)]
    step += [Node.assign(f"next{k}", loaded(Expr.add(var("tb"), u(tile)), k)) for k in range(items)]
    nodes, outs, total = _warp_rounds(m, items, inclusive, [var(f"v{k}") for k in range(items)])
    step += nodes
    step.append(Node.if_(Expr.eq(lane(), u(0)), Node.store("sums", Expr.add(var("par"), warp()), total)))
    step.append(Node.barrier())
    step += fold_warp_totals(m, "sums", warp(), "wp", "wt", var("par"))
    step.append(Node.let("wbase", m.combine(var("carry_in"), var("wp"))))
    for k, value in enumerate(outs):
        index = _warp_striped(var("tb"), k, items)
        step.append(Node.if_(Expr.lt(index, n), Node.store("out", index, m.combine(var("wbase"), value))))
    step.append(Node.assign("carry_in", m.combine(var("carry_in"), var("wt"))))
    body.append(Node.loop("t", u(0), var("seg_tiles"), step))
    buffers = [BufferDecl.read("x", 0, m.dtype), BufferDecl.read_write("out", 1, m.dtype)]
    if has_carry:
        buffers.append(BufferDecl.read("carry", len(buffers), m.dtype))
    buffers = _scan_tail_buffers(m, buffers, init_word)
    buffers.append(BufferDecl.workgroup("sums", 2 * WARPS, m.dtype))
    kind = "inclusive" if inclusive else "exclusive"
    return Program(buffers, WG_SIZE, body, name=f"lib_scan_{kind}_{m.op}_{m.dtype.value}")


# ---- single-pass scan (decoupled look-back) --------------------------------------------------------
# The ``state`` buffer of ``scan_lookback``: word 0 hands out tile numbers; tile ``t``'s 32-bit
# total lives in words ``2 + 2t`` (low half) and ``3 + 2t`` (high half), each ``flag << 16 | half``,
# so each word carries its own flag and relaxed atomics suffice. Word 1 counts waits that ran out.
SCAN_STATE_HEAD = 2
SCAN_AGGREGATE, SCAN_PREFIX = 1, 2  # the flag of a tile's own total / of the total of it and every lower tile
SCAN_SPIN = (6, 16)  # the look-back's wait: at most 16**6 trips, then it folds the input below instead
SCAN_LOOKBACK_ITEMS = 32  # elements per invocation of the single-pass scan (tile 8192; 8 and 16 measured slower)
SCAN_LOOKBACK_WIDTH = 4  # tiles whose totals one look-back trip reads together


def _state_word(tile: Expr, half: int) -> Expr:
    return Expr.add(u(SCAN_STATE_HEAD + half), Expr.mul(tile, u(2)))


def _publish_total(m: Monoid, flag: Expr, value: Expr, name: str) -> list[Node]:
    """Publish ``value`` as tile ``tile``'s total with ``flag``: two relaxed exchanges, low half first."""
    bits = value if m.dtype is U32 else Expr.cast(U32, value)
    halves = (Expr.bitand(bits, u(0xFFFF)), Expr.shr(bits, u(16)))
    return [Node.let(f"{name}{h}", Expr.atomic(AtomicOp.EXCHANGE, "state", _state_word(var("tile"), h),
                                                   Expr.bitor(Expr.shl(flag, u(16)), halves[h]), relaxed=True))
            for h in (0, 1)]


def _scan_look_back(m: Monoid, n: Expr, items: int, spin: tuple[int, int], width: int) -> list[Node]:
    """Bind ``prefix``: the combination of every tile below ``tile`` (one invocation; commutative ops only).

    ``below`` is the nearest tile not yet taken. Each trip reads the totals of ``below`` and
    the ``width - 1`` tiles under it at once (one memory latency) and takes them nearest first,
    up to the first one not published yet (read again next trip: a word of the other half
    or flag, torn by a later publish, counts as not published) or holding an inclusive prefix
    (done). If the wait runs out, the invocation folds the input of tiles ``0 .. below``
    itself (and counts it in ``state[1]``), so the result never depends on another workgroup.
    """
    step: list[Node] = [Node.let("go", Expr.bool(True))]
    for k in range(width):
        at = Expr.select(Expr.ge(var("below"), u(k)), Expr.sub(var("below"), u(k)), u(0))
        step += [Node.let(f"lo{k}", Expr.atomic(AtomicOp.OR, "state", _state_word(at, 0), u(0), relaxed=True)),
                 Node.let(f"hi{k}", Expr.atomic(AtomicOp.OR, "state", _state_word(at, 1), u(0), relaxed=True))]
    for k in range(width):
        flag = Expr.shr(var(f"lo{k}"), u(16))
        value = Expr.bitor(Expr.bitand(var(f"lo{k}"), u(0xFFFF)), Expr.shl(var(f"hi{k}"), u(16)))
        typed = value if m.dtype is U32 else Expr.cast(m.dtype, value)
        ready = Expr.and_(Expr.ne(flag, u(0)), Expr.eq(flag, Expr.shr(var(f"hi{k}"), u(16))))
        step += [Node.let(f"took{k}", Expr.and_(var("go"), ready)),
                 Node.let(f"last{k}", Expr.eq(flag, u(SCAN_PREFIX))),
                 Node.if_(var(f"took{k}"), [Node.assign("prefix", m.combine(typed, var("prefix"))),
                                             Node.assign("below", Expr.sub(var("below"), u(1))),
                                             Node.assign("done", var(f"last{k}"))]),
                 Node.assign("go", Expr.and_(var(f"took{k}"), Expr.not_(var(f"last{k}"))))]
    fold = Expr.load("x", var("j"))
    nothing_below = Expr.or_(Expr.eq(var("tile"), u(0)), Expr.ge(var("tb"), n))  # tiles past n need no prefix
    return [Node.let("done", nothing_below),
            Node.let("prefix", m.pad()), Node.let("below", Expr.sub(var("tile"), u(1))),
            bounded_wait("done", *spin, step, "spin"),
            Node.if_(Expr.not_(var("done")), [
                Node.loop("j", u(0), Expr.mul(Expr.add(var("below"), u(1)), u(WG * items)),
                          [Node.assign("prefix", m.combine(fold, var("prefix")))]),
                Node.let("gave_up", Expr.atomic(AtomicOp.ADD, "state", u(1), u(1), relaxed=True))])]


@cache
def scan_lookback(m: Monoid, items: int, inclusive: bool, n_word: int, init_word: int | None,
                  spin: tuple[int, int] = SCAN_SPIN, width: int = SCAN_LOOKBACK_WIDTH) -> Program:
    """Single-pass scan of ``x`` into ``out`` with decoupled look-back, one tile per workgroup
    (commutative ops of integer types: the order in which tile totals meet may vary).

    Invocation 0 takes the tile number from ``state[0]``, so every lower tile has started. The
    warps scan their stretches of the tile (``_warp_rounds``) and meet in workgroup memory;
    invocation 0 publishes the tile's total (tile 0: as an inclusive prefix), looks back for
    the combination of every lower tile (``_scan_look_back``) and publishes the tile's
    inclusive prefix; after a barrier every element gets ``init op prefix op`` its place in the
    tile (exclusive: each inclusive result is stored one place on, and the tile's first
    element gets ``init op prefix``). ``state`` starts zeroed.
    """
    n, tile = load_param(n_word), WG * items
    body: list[Node] = [
        Node.if_(Expr.eq(lid(), u(0)), Node.store("tile_id", u(0), Expr.atomic(AtomicOp.ADD, "state", u(0), u(1),
                                                                                 relaxed=True))),
        Node.barrier(), Node.let("tile", Expr.load("tile_id", u(0))), Node.let("tb", Expr.mul(var("tile"), u(tile)))]
    for k in range(items):
        index = _warp_striped(var("tb"), k, items)
        body.append(Node.let(f"v{k}", Expr.select(Expr.lt(index, n), Expr.load("x", index), m.pad())))
    nodes, outs, total = _warp_rounds(m, items, True, [var(f"v{k}") for k in range(items)])
    body += nodes
    body.append(Node.if_(Expr.eq(lane(), u(0)), Node.store("sums", warp(), total)))
    body.append(Node.barrier())
    body += fold_warp_totals(m, "sums", warp(), "wp", "wt")
    first = Expr.eq(var("tile"), u(0))
    body.append(Node.if_(Expr.eq(lid(), u(0)), [
        *_publish_total(m, Expr.select(first, u(SCAN_PREFIX), u(SCAN_AGGREGATE)), var("wt"), "aggregate"),
        *_scan_look_back(m, n, items, spin, width),
        Node.if_(Expr.not_(first), _publish_total(m, u(SCAN_PREFIX), m.combine(var("prefix"), var("wt")), "inclusive")),
        Node.store("tile_prefix", u(0), var("prefix"))]))
    body.append(Node.barrier())
    body.append(Node.let("tile_start", _start(m, init_word, Expr.load("tile_prefix", u(0)))))
    body.append(Node.let("wbase", m.combine(var("tile_start"), var("wp"))))
    # exclusive: element i gets element i-1's inclusive result, so each one is stored one place on
    # (no shuffle to the next lane) and the tile's first element gets the tile's start
    end = n if inclusive else Expr.min(n, Expr.add(var("tb"), u(tile)))
    for k, value in enumerate(outs):
        index = _warp_striped(var("tb"), k, items)
        if not inclusive:
            index = Expr.add(index, u(1))
        body.append(Node.if_(Expr.lt(index, end), Node.store("out", index, m.combine(var("wbase"), value))))
    if not inclusive:
        body.append(Node.if_(Expr.and_(Expr.eq(lid(), u(0)), Expr.lt(var("tb"), n)),
                             Node.store("out", var("tb"), var("tile_start"))))
    buffers = [BufferDecl.read("x", 0, m.dtype), BufferDecl.read_write("out", 1, m.dtype),
               BufferDecl.read_write("state", 2, U32)]
    buffers = _scan_tail_buffers(m, buffers, init_word)
    buffers += [BufferDecl.workgroup("sums", WARPS, m.dtype), BufferDecl.workgroup("tile_id", 1, U32),
                BufferDecl.workgroup("tile_prefix", 1, m.dtype)]
    kind = "inclusive" if inclusive else "exclusive"
    return Program(buffers, WG_SIZE, body, name=f"lib_scan_lookback_{kind}_{m.op}_{m.dtype.value}")


# ---- predicates of compaction --------------------------------------------------------------------
_ZERO = {DataType.F32: Expr.f32(0.0), DataType.I32: Expr.i32(0), U32: u(0), DataType.F64: Expr.f64(0.0),
         DataType.I64: Expr.i64(0), DataType.U64: Expr.u64(0)}


@dataclass(frozen=True)
class Predicate:
    """Which elements a compaction keeps.

    ``kind``: ``"flags"`` (``flags[i] != 0``, flags of ``flag_type``), ``"range"`` (``lo <= x < hi``
    with ``lo``/``hi`` in params words ``lo_word``/``lo_word + 1``) or ``"run_start"`` (``i == 0`` or
    ``x[i]`` differs from ``x[i-1]``; F32 NaNs count as equal). ``dtype`` is the element type.
    """

    kind: str
    dtype: DataType
    flag_type: DataType = U32
    lo_word: int = 0

    def value_type(self) -> DataType:
        """Range tests compare typed values; the other kinds move raw 32- or 64-bit words."""
        return self.dtype if self.kind == "range" else raw_type(self.dtype)

    def name(self) -> str:
        """The kind, with ``_64`` for 8-byte elements (their programs differ)."""
        return self.kind + ("_64" if self.dtype.size == 8 else "")

    def buffers(self, first: int) -> list[BufferDecl]:
        decls = [BufferDecl.read("x", first, self.value_type())]
        if self.kind == "flags":
            decls.append(BufferDecl.read("flags", first + 1, self.flag_type))
        return decls

    def extra_uniforms(self, first: int) -> list[BufferDecl]:
        return [_typed_params("bounds", first, self.dtype)] if self.kind == "range" else []

    def keep(self, index: Expr, x: Expr | None = None) -> Expr:
        """BOOL: is element ``index`` kept (callers also check ``index < n``); ``x``: its value if loaded."""
        if self.kind == "flags":
            return Expr.ne(Expr.load("flags", index), _ZERO[self.flag_type.arith])
        x = Expr.load("x", index) if x is None else x
        if self.kind == "range":
            lo, hi = Expr.load("bounds", u(self.lo_word)), Expr.load("bounds", u(self.lo_word + 1))
            return Expr.and_(Expr.le(lo, x), Expr.lt(x, hi))
        previous = Expr.load("x", Expr.sub(index, u(1)))
        differs = Expr.ne(equality_key(self.dtype, x), equality_key(self.dtype, previous))
        return Expr.or_(Expr.eq(index, u(0)), differs)


def _flag(pred: Predicate, index: Expr, n: Expr, x: Expr | None = None) -> Expr:
    return Expr.cast(U32, Expr.and_(Expr.lt(index, n), pred.keep(index, x)))


_COUNT = Monoid("add", U32)


@cache
def count_segments(pred: Predicate, items: int, n_word: int, span_word: int) -> Program:
    """``partial[w]`` = how many elements of workgroup ``w``'s segment the predicate keeps (the upsweep)."""
    n = load_param(n_word)
    body = _partial_of_segment(_COUNT, fold_segment(_COUNT, items, n, span_word, lambda i: _flag(pred, i, n)))
    buffers = pred.buffers(0)
    buffers += [BufferDecl.read_write("partial", len(buffers), U32), _params(len(buffers) + 1)]
    buffers += pred.extra_uniforms(len(buffers))
    buffers.append(BufferDecl.workgroup("sums", WARPS, U32))
    return Program(buffers, WG_SIZE, body, name=f"lib_count_{pred.name()}")


def _pick(values: list[Expr], which: Expr) -> Expr:
    """``values[which]`` for a small list (a chain of selects)."""
    out = values[0]
    for j in range(1, len(values)):
        out = Expr.select(Expr.eq(which, u(j)), values[j], out)
    return out


def _tile_prefixes(counts: str, entries: int, prefix: str) -> tuple[list[Node], Expr, Callable[[int], Expr]]:
    """Exclusive prefixes of the ``entries`` per-(round, warp) counts in workgroup buffer ``counts``.

    Every warp scans all of them (lane ``l`` holds entries ``l*c ... l*c + c - 1``, ``c = entries/32``)
    and fetches the prefix of entry ``k*WARPS + warp`` with shuffles, so no second barrier is needed.
    Returns the nodes, the tile's total and ``prefix_of(k)``.
    """
    c = entries // 32
    nodes: list[Node] = []
    own = []
    for j in range(c):
        nodes.append(Node.let(f"{prefix}c{j}", Expr.load(counts, Expr.add(Expr.mul(lane(), u(c)), u(j)))))
        own.append(var(f"{prefix}c{j}"))
    total = own[0]
    for value in own[1:]:
        total = Expr.add(total, value)
    nodes.append(Node.let(f"{prefix}sum", total))
    scan_nodes, inclusive = warp_inclusive_scan(_COUNT, var(f"{prefix}sum"), f"{prefix}s")
    nodes += scan_nodes
    nodes.append(Node.let(f"{prefix}ex", Expr.sub(inclusive, var(f"{prefix}sum"))))
    running = var(f"{prefix}ex")
    excl = []
    for j in range(c):
        nodes.append(Node.let(f"{prefix}e{j}", running))
        excl.append(var(f"{prefix}e{j}"))
        running = Expr.add(var(f"{prefix}e{j}"), own[j])
    nodes.append(Node.let(f"{prefix}total", Expr.subgroup_shuffle(inclusive, u(31))))

    def prefix_of(k: int) -> Expr:
        entry = Expr.add(u(k * WARPS), warp())
        source = Expr.div(entry, u(c))
        fetched = [Expr.subgroup_shuffle(e, source) for e in excl]
        return _pick(fetched, Expr.rem(entry, u(c))) if c > 1 else fetched[0]

    return nodes, var(f"{prefix}total"), prefix_of


@cache
def compact_segments(pred: Predicate, items: int, has_carry: bool, with_index: bool, n_word: int, span_word: int
                     ) -> Program:
    """Stable compaction of workgroup ``w``'s segment: kept ``x[i]`` (and ``i``) go to ``out[carry[w] + rank]``.

    The workgroup walks its tiles in order with a running count. In a tile, element ``k*WG + t``
    (coalesced) is ranked by a ballot of its warp (kept lanes below it) plus the kept elements of
    earlier (round, warp) pairs; the workgroup holding the last element writes the total into ``count[0]``.
    """
    n, tile = load_param(n_word), WG * items
    entries = items * WARPS
    lower_lanes = Expr.sub(Expr.shl(u(1), lane()), u(1))
    body = segment(n, span_word, tile)
    body.append(Node.let("carry_in", Expr.load("carry", wid()) if has_carry else u(0)))
    step: list[Node] = [Node.let("tb", Expr.add(var("seg_base"), Expr.mul(var("t"), u(tile))))]
    for k in range(items):
        index = Expr.add(var("tb"), Expr.add(u(k * WG), lid()))
        step += [Node.let(f"i{k}", index), Node.let(f"x{k}", Expr.load("x", var(f"i{k}"))),
                 Node.let(f"f{k}", Expr.ne(_flag(pred, var(f"i{k}"), n, var(f"x{k}")), u(0))),
                 Node.let(f"v{k}", Expr.subgroup_ballot(var(f"f{k}")))]
        step.append(Node.if_(Expr.eq(lane(), u(0)),
                             Node.store("counts", u(k * WARPS) + warp(), Expr.popcount(var(f"v{k}")))))
    step.append(Node.barrier())
    nodes, total, prefix_of = _tile_prefixes("counts", entries, "p")
    step += nodes
    for k in range(items):
        rank = Expr.add(Expr.add(var("carry_in"), prefix_of(k)),
                        Expr.popcount(Expr.bitand(var(f"v{k}"), lower_lanes)))
        moves = [Node.store("out", var(f"r{k}"), var(f"x{k}"))]
        if with_index:
            moves.append(Node.store("out_index", var(f"r{k}"), var(f"i{k}")))
        step += [Node.let(f"r{k}", rank), Node.if_(var(f"f{k}"), moves)]
    step += [Node.assign("carry_in", Expr.add(var("carry_in"), total)), Node.barrier()]
    body.append(Node.loop("t", u(0), var("seg_tiles"), step))
    holds_last = Expr.ge(Expr.add(var("seg_base"), load_param(span_word)), n)
    body.append(Node.if_(Expr.and_(holds_last, Expr.eq(lid(), u(0))), Node.store("count", u(0), var("carry_in"))))
    buffers = pred.buffers(0)
    buffers.append(BufferDecl.read_write("out", len(buffers), pred.value_type()))
    if with_index:
        buffers.append(BufferDecl.read_write("out_index", len(buffers), U32))
    buffers.append(BufferDecl.read_write("count", len(buffers), U32))
    if has_carry:
        buffers.append(BufferDecl.read("carry", len(buffers), U32))
    buffers.append(_params(len(buffers)))
    buffers += pred.extra_uniforms(len(buffers))
    buffers.append(BufferDecl.workgroup("counts", entries, U32))
    return Program(buffers, WG_SIZE, body, name=f"lib_compact_{pred.name()}")


@cache
def run_lengths(n_word: int) -> Program:
    """``lengths[j] = starts[j+1] - starts[j]`` (the last run ends at ``n``), for ``j < count[0]``."""
    j, runs, n = Expr.invocation_id(0), Expr.load("count", u(0)), load_param(n_word)
    end = Expr.select(Expr.lt(Expr.add(j, u(1)), runs), Expr.load("starts", Expr.add(j, u(1))), n)
    body = [Node.if_(Expr.lt(j, runs), Node.store("lengths", j, Expr.sub(end, Expr.load("starts", j))))]
    buffers = [BufferDecl.read("starts", 0, U32), BufferDecl.read("count", 1, U32),
               BufferDecl.read_write("lengths", 2, U32), _params(3)]
    return Program(buffers, WG_SIZE, body, name="lib_run_lengths")


@cache
def zero_fill(n_word: int) -> Program:
    """``out[i] = 0`` for ``i < n`` (scratch that accumulates atomically starts from zero)."""
    i = Expr.invocation_id(0)
    body = [Node.if_(Expr.lt(i, load_param(n_word)), Node.store("out", i, u(0)))]
    return Program([BufferDecl.read_write("out", 0, U32), _params(1)], WG_SIZE, body, name="lib_zero_fill")


# ---- histogram ----------------------------------------------------------------------------------------
def _merge_bins(target: str, offset: int, rounds: Expr, count_type: DataType = U32) -> list[Node]:
    """Add the workgroup's bins ``local[q*WG + t]`` (``q < rounds``) into ``target[offset + bin]``:
    one global atomic per non-zero bin (of ``count_type``, U32 or U64)."""
    index = var("b") if offset == 0 else Expr.add(u(offset), var("b"))
    count = var("c") if count_type is U32 else Expr.cast(count_type, var("c"))
    merge = Node.if_(Expr.ne(var("c"), u(0)), Node.let("old2", Expr.atomic(AtomicOp.ADD, target, index, count,
                                                                                          relaxed=True)))
    return [Node.loop("q", u(0), rounds, [Node.let("b", Expr.add(Expr.mul(var("q"), u(WG)), lid())),
                                          Node.let("c", Expr.load("local", var("b"))), merge])]


@cache
def histogram_kernel(dtype: DataType, shared_bins: int, n_word: int, bins_word: int, blocks_word: int,
                     count_type: DataType = U32) -> Program:
    """Count values in ``[0, bins)`` into ``count_type`` (U32 or U64) counts: workgroup-private
    bins (when ``shared_bins``; U32, as a workgroup sees fewer than 2^32 elements), merged once.

    Workgroup ``w`` of ``B`` (params ``blocks_word``) handles elements ``(r*B + w)*WG + t``.
    With ``shared_bins == 0`` every element goes straight to a global atomic. A 64-bit value
    is tested against ``bins`` at 64 bits (as unsigned: negative ones are ignored).
    """
    n, bins, blocks = load_param(n_word), load_param(bins_word), load_param(blocks_word)
    rounds = Expr.div(Expr.add(n, Expr.sub(Expr.mul(blocks, u(WG)), u(1))), Expr.mul(blocks, u(WG)))
    target = "local" if shared_bins else "counts"
    index = Expr.add(Expr.mul(Expr.add(Expr.mul(var("r"), blocks), wid()), u(WG)), lid())
    one = u(1) if shared_bins or count_type is U32 else Expr.u64(1)
    if dtype.size == 8:
        wide = Expr.cast(DataType.U64, Expr.load("x", var("i")))
        load = [Node.let("i", index), Node.let("w", wide), Node.let("v", Expr.cast(U32, var("w")))]
        inside = Expr.lt(var("w"), Expr.cast(DataType.U64, bins))
    else:
        load = [Node.let("i", index), Node.let("v", Expr.cast(U32, Expr.load("x", var("i"))))]
        inside = Expr.lt(var("v"), bins)
    count_one = Node.if_(Expr.and_(Expr.lt(var("i"), n), inside),
                         Node.let("old", Expr.atomic(AtomicOp.ADD, target, var("v"), one, relaxed=True)))
    body: list[Node] = [Node.loop("r", u(0), rounds, [*load, count_one])]
    if shared_bins:
        body += [Node.barrier(), *_merge_bins("counts", 0, Expr.div(Expr.add(bins, u(WG - 1)), u(WG)), count_type)]
    buffers = [BufferDecl.read("x", 0, dtype), BufferDecl.read_write("counts", 1, count_type), _params(2)]
    if shared_bins:
        buffers.append(BufferDecl.workgroup("local", shared_bins, U32))
    suffix = "" if count_type is U32 else "_counts64"
    return Program(buffers, WG_SIZE, body, name=f"lib_histogram_{dtype.value}{suffix}")


# ---- radix sort -------------------------------------------------------------------------------------
# ``raw``: the unsigned type of the sorted keys' bits (U32, or U64 for 64-bit keys: eight passes).
def _literal(raw: DataType) -> Callable[[int], Expr]:
    return u if raw is U32 else Expr.u64


def _digit(key: Expr, shift: int, raw: DataType = U32) -> Expr:
    """The 8-bit digit of ``key`` (of type ``raw``) at ``shift``, as U32."""
    if raw is U32:
        return Expr.bitand(Expr.shr(key, u(shift)), u((1 << RADIX_BITS) - 1))
    return Expr.bitand(Expr.cast(U32, Expr.shr(key, u(shift))), u((1 << RADIX_BITS) - 1))


def _sort_key(dtype: DataType | None, bits: Expr) -> Expr:
    """Pass 0 reads the caller's raw keys (``dtype``); later passes read keys already transformed."""
    return bits if dtype is None else to_key(dtype, bits)


def _tile_bits(key_type: DataType | None, items: int, n: Expr, limit: Expr, prefix: str,
               index: Callable[[int], Expr], whole: Expr | None = None, declare: bool = True,
               raw: DataType = U32) -> list[Node]:
    """Bind ``{prefix}{k}`` to the raw bits (``raw``) of element ``index(k)``; at or past ``n``, to
    bits whose sort key is all ones (digit 255 in every pass). Elements at or past ``limit`` are not read.

    ``whole``: a condition, the same for the whole workgroup, under which every element is below
    ``n`` and ``limit``; then the elements are read without those two tests per element (a radix
    tile is whole but for the last one). ``declare=False`` assigns variables declared already."""
    ones, lit = (1 << 8 * raw.size) - 1, _literal(raw)
    past = ones if key_type in (None, U32, DataType.U64) else ones >> 1  # signed max; a float NaN
    bind = Node.let if declare and whole is None else Node.assign
    checked = []
    for k in range(items):
        i = index(k)
        loaded = Expr.load("keys", Expr.select(Expr.lt(i, limit), i, u(0xFFFFFFFF)))
        checked.append(bind(f"{prefix}{k}", Expr.select(Expr.lt(i, n), loaded, lit(past))))
    if whole is None:
        return checked
    nodes = [Node.let(f"{prefix}{k}", lit(past)) for k in range(items)] if declare else []
    plain = [Node.assign(f"{prefix}{k}", Expr.load("keys", index(k))) for k in range(items)]
    return [*nodes, Node.if_(whole, plain, checked)]


def _peers(digit: Expr, prefix: str) -> tuple[list[Node], Expr]:
    """Lanes of this subgroup holding the same digit: a u32 lane mask, from one ballot per digit bit."""
    nodes = [Node.let(f"{prefix}m", u(0xFFFFFFFF))]
    for bit in range(RADIX_BITS):
        has = Expr.ne(Expr.bitand(digit, u(1 << bit)), u(0))
        votes = Expr.subgroup_ballot(has)
        same = Expr.select(has, votes, Expr.bitnot(votes))
        nodes.append(Node.assign(f"{prefix}m", Expr.bitand(var(f"{prefix}m"), same)))
    return nodes, var(f"{prefix}m")


@cache
def radix_counts(shift: int, key_type: DataType | None, items: int, n_word: int, span_word: int, groups_word: int
                 ) -> Program:
    """Digit counts of workgroup ``w``'s segment, digit-major: ``hist[d * groups + w]`` (the upsweep).

    A tile's ``items`` keys per invocation are all loaded (in flight together), then each warp
    counts their digits in its own counters in workgroup memory with ballots, like the
    scatter's ranking (no atomics). Keys past ``n`` count as digit 255 and are taken off at the
    end. A workgroup whose segment is empty writes zeros, so one scan of ``hist`` gives every offset.
    """
    radix, tile, span = 1 << RADIX_BITS, WG * items, load_param(span_word)
    n, base0 = var("n"), Expr.mul(wid(), span)
    body: list[Node] = [Node.let("n", load_param(n_word)),
                        Node.let("size", Expr.select(Expr.lt(base0, n), Expr.min(span, Expr.sub(n, base0)), u(0))),
                        Node.let("tiles", Expr.div(Expr.add(var("size"), u(tile - 1)), u(tile)))]
    step = [Node.let("tb", Expr.add(base0, Expr.mul(var("t"), u(tile))))]
    step += _tile_bits(key_type, items, n, n, "bits", lambda k: Expr.add(var("tb"), Expr.add(u(k * WG), lid())))
    for k in range(items):
        step.append(Node.let(f"d{k}", _digit(_sort_key(key_type, var(f"bits{k}")), shift)))
        nodes, peers = _peers(var(f"d{k}"), f"k{k}")
        cell = Expr.add(Expr.mul(warp(), u(radix)), var(f"d{k}"))
        step += nodes + [Node.let(f"k{k}old", Expr.load("local", cell)),
                         Node.store("local", cell, Expr.add(var(f"k{k}old"), Expr.popcount(peers)))]
    past = Expr.sub(Expr.mul(var("tiles"), u(tile)), var("size"))  # keys past n, counted as digit 255
    body += [Node.loop("t", u(0), var("tiles"), step), Node.barrier(),
             Node.let("total", Expr.select(Expr.eq(lid(), u(radix - 1)), Expr.sub(u(0), past), u(0)))]
    for v in range(WARPS):
        body.append(Node.assign("total", Expr.add(var("total"), Expr.load("local", u(v * radix) + lid()))))
    body.append(Node.store("hist", Expr.add(Expr.mul(lid(), load_param(groups_word)), wid()), var("total")))
    buffers = [BufferDecl.read("keys", 0, U32), BufferDecl.read_write("hist", 1, U32), _params(2),
               BufferDecl.workgroup("local", WARPS * radix, U32)]
    return Program(buffers, WG_SIZE, body, name=f"lib_radix_counts_{shift}")


def _digit_slots(radix: int, half: int, lookback: list[Node] | None) -> list[Node]:
    """Step 2 of a radix tile: invocation ``t`` turns the warps' counters of digit ``t`` (in the
    current half of ``counts``; ``half`` words per half, 0 when there is one) into the tile slots
    where each warp's keys of digit ``t`` start and stores ``shift[t]`` (tile slot to output
    position ``run``), zeroing the other half. ``lookback`` (nodes binding ``run`` from the tile's
    count ``total``) runs right after the count; without it ``run`` is a running position."""
    other = Expr.sub(u(half), var("half"))

    def counter(v: int, which: Expr | None = None) -> Expr:
        return Expr.add(var("half") if which is None else which, u(v * radix) + lid())

    step = [Node.let("total", u(0))]
    for v in range(WARPS):
        step.append(Node.assign("total", Expr.add(var("total"), Expr.load("counts", counter(v)))))
        if half:
            step.append(Node.store("counts", counter(v, other), u(0)))
    step += lookback or []
    nodes, (start,) = block_scan(_COUNT, [var("total")], u(0), False, "sums", "s")
    step += nodes
    step += [Node.let("slot", start), Node.store("shift", lid(), Expr.sub(var("run"), var("slot")))]
    if lookback is None:
        step.append(Node.assign("run", Expr.add(var("run"), var("total"))))
    for v in range(WARPS):  # read again rather than held in registers across the scan
        step += [Node.let(f"c{v}", Expr.load("counts", counter(v))), Node.store("counts", counter(v), var("slot")),
                 Node.assign("slot", Expr.add(var("slot"), var(f"c{v}")))]
    return [*step, Node.barrier()]


def _radix_tiles(shift: int, key_in: DataType | None, key_out: DataType | None, values: str, items: int,
                 tiles: Expr, lookback: list[Node] | None, raw: DataType = U32) -> list[Node]:
    """Steps 1-4 of ``radix_scatter`` over ``tiles`` tiles from ``seg_base``. The caller binds
    ``n``, ``seg_base``, ``limit`` (no key at or past it is read) and, without ``lookback``,
    ``run``. With ``lookback`` (see ``_digit_slots``) the workgroup ranks one tile, so its
    counters have one half. ``raw``: the keys' bits (U32 or U64)."""
    if items % SORT_ROUNDS:
        raise ValueError(f"a radix tile's items ({items}) must be a multiple of SORT_ROUNDS ({SORT_ROUNDS})")
    radix, tile, loops = 1 << RADIX_BITS, WG * items, items // SORT_ROUNDS
    half = WARPS * radix if lookback is None else 0
    moves_values = values != "none"
    n = var("n")
    lower_lanes = Expr.sub(Expr.shl(u(1), lane()), u(1))

    def element(base: Expr, j: Expr) -> Expr:  # round j of this invocation in the tile at base
        return Expr.add(base, Expr.add(Expr.mul(warp(), u(32 * items)), Expr.add(Expr.mul(j, u(32)), lane())))

    def round_of(loop_var: str, r: int) -> Expr:  # round r of loop iteration loop_var
        return Expr.add(Expr.mul(var(loop_var), u(SORT_ROUNDS)), u(r))

    def group(q: Expr, prefix: str, declare: bool = True) -> list[Node]:  # loop iteration q of the segment
        if lookback is None:
            base, j0 = (Expr.add(var("seg_base"), Expr.mul(Expr.div(q, u(loops)), u(tile))),
                        Expr.mul(Expr.rem(q, u(loops)), u(SORT_ROUNDS)))
            limit, whole = var("limit"), None
        else:  # one tile: the groups the last iterations load ahead are past it, so not read
            base, j0, inside = var("seg_base"), Expr.mul(q, u(SORT_ROUNDS)), Expr.lt(q, u(loops))
            limit, whole = Expr.select(inside, var("limit"), u(0)), Expr.and_(var("whole"), inside)
        return _tile_bits(key_in, SORT_ROUNDS, n, limit, prefix, lambda r: element(base, Expr.add(j0, u(r))),
                          whole, declare, raw)

    body = group(u(0), "a") + group(u(1), "b")
    # step 1: rank, loop iteration g of tile t being group q of the segment; loads run two groups ahead
    q = Expr.add(Expr.mul(var("t"), u(loops)), var("g"))
    rank: list[Node] = [Node.let(f"cur{r}", var(f"a{r}")) for r in range(SORT_ROUNDS)]
    rank += [Node.assign(f"a{r}", var(f"b{r}")) for r in range(SORT_ROUNDS)]
    rank += group(Expr.add(q, u(2)), "b", declare=False)
    for r in range(SORT_ROUNDS):
        p = f"r{r}"
        rank.append(Node.let(f"{p}d", _digit(_sort_key(key_in, var(f"cur{r}")), shift, raw)))
        peer_nodes, peers = _peers(var(f"{p}d"), p)
        cell = Expr.add(var("half"), Expr.add(Expr.mul(warp(), u(radix)), var(f"{p}d")))
        rank += peer_nodes
        rank += [Node.let(f"{p}old", Expr.load("counts", cell)),
                 Node.store("counts", cell, Expr.add(var(f"{p}old"), Expr.popcount(peers))),
                 Node.store("ranks", Expr.add(Expr.mul(round_of("g", r), u(WG)), lid()),
                            Expr.add(var(f"{p}old"), Expr.popcount(Expr.bitand(peers, lower_lanes))))]
    step: list[Node] = [Node.let("tb", Expr.add(var("seg_base"), Expr.mul(var("t"), u(tile)))),
                        Node.let("valid", Expr.sub(Expr.min(n, Expr.add(var("tb"), u(tile))), Expr.min(n, var("tb")))),
                        Node.let("half", Expr.mul(Expr.bitand(var("t"), u(1)), u(half))),
                        Node.loop("g", u(0), u(loops), rank), Node.barrier()]
    step += _digit_slots(radix, half, lookback)
    # step 3: keys read again (they were just read, so from cache) and placed at their slots, values too
    def placed(r: int) -> Expr:  # the element of round r of loop iteration h
        return element(var("tb"), round_of("h", r))

    place = _tile_bits(key_in, SORT_ROUNDS, n, n, "p", placed, raw=raw)  # a whole-tile branch here measured slower
    if values == "load":
        place += [Node.let(f"pv{r}", Expr.load("vals", placed(r))) for r in range(SORT_ROUNDS)]
    for r in range(SORT_ROUNDS):
        key = _sort_key(key_in, var(f"p{r}"))
        cell = Expr.add(var("half"), Expr.add(Expr.mul(warp(), u(radix)), _digit(var(f"pk{r}"), shift, raw)))
        place += [Node.let(f"pk{r}", key),
                  Node.let(f"ps{r}", Expr.add(Expr.load("counts", cell),
                                              Expr.load("ranks", Expr.add(Expr.mul(round_of("h", r), u(WG)), lid())))),
                  Node.store("sorted_keys", var(f"ps{r}"), var(f"pk{r}"))]
        if moves_values:
            value = var(f"pv{r}") if values == "load" else placed(r)
            place.append(Node.store("sorted_vals", var(f"ps{r}"), value))
    step += [Node.loop("h", u(0), u(loops), place), Node.barrier()]
    def write(checked: bool) -> list[Node]:  # step 4; unchecked only in a whole tile
        nodes: list[Node] = []
        for r in range(SORT_ROUNDS):
            slot = Expr.add(Expr.mul(round_of("h", r), u(WG)), lid())
            pos = Expr.add(slot, Expr.load("shift", _digit(var(f"o{r}"), shift, raw)))
            if checked:
                pos = Expr.select(Expr.lt(slot, var("valid")), pos, u(0xFFFFFFFF))
            nodes += [Node.assign(f"o{r}", Expr.load("sorted_keys", slot)), Node.assign(f"pos{r}", pos),
                      Node.store("keys_out", var(f"pos{r}"),
                                 var(f"o{r}") if key_out is None else from_key(key_out, var(f"o{r}")))]
            if moves_values:
                nodes.append(Node.store("vals_out", var(f"pos{r}"), Expr.load("sorted_vals", slot)))
        return nodes

    written = [Node.let(f"{v}{r}", _literal(raw)(0) if v == "o" else u(0)) for r in range(SORT_ROUNDS)
               for v in ("o", "pos")]
    written += write(True) if lookback is None else [Node.if_(var("whole"), write(False), write(True))]
    step.append(Node.loop("h", u(0), u(loops), written))
    return [*body, Node.loop("t", u(0), tiles, step)]


def _radix_buffers(second: BufferDecl, values: str, items: int, halves: int, more: tuple[str, ...] = (),
                   raw: DataType = U32, value_raw: DataType = U32) -> list[BufferDecl]:
    """The buffers of a radix scatter: keys, ``second`` (binding 1), keys_out, values, params, the
    u32 ``read_write`` buffers named in ``more``, then workgroup memory. ``raw``/``value_raw``:
    the bits of keys and of loaded values (U32 or U64)."""
    radix, tile = 1 << RADIX_BITS, WG * items
    value_raw = value_raw if values == "load" else U32  # "iota": u32 indices
    buffers = [BufferDecl.read("keys", 0, raw), second, BufferDecl.read_write("keys_out", 2, raw)]
    if values == "load":
        buffers.append(BufferDecl.read("vals", len(buffers), value_raw))
    if values != "none":
        buffers.append(BufferDecl.read_write("vals_out", len(buffers), value_raw))
    buffers.append(_params(len(buffers)))
    buffers += [BufferDecl.read_write(name, len(buffers) + j, U32) for j, name in enumerate(more)]
    buffers += [BufferDecl.workgroup("counts", halves * WARPS * radix, DataType.U16),
                BufferDecl.workgroup("shift", radix, U32), BufferDecl.workgroup("sums", WARPS, U32),
                BufferDecl.workgroup("ranks", tile, DataType.U16), BufferDecl.workgroup("sorted_keys", tile, raw)]
    if values != "none":
        buffers.append(BufferDecl.workgroup("sorted_vals", tile, value_raw))
    return buffers


@cache
def radix_scatter(shift: int, key_in: DataType | None, key_out: DataType | None, values: str, items: int,
                  n_word: int, span_word: int, groups_word: int) -> Program:
    """One stable pass of LSD radix sort over workgroup ``w``'s segment (the downsweep).

    Invocation ``t`` owns digit ``t`` and keeps its running output position, starting at
    ``offsets[t * groups + w]`` (the scanned digit counts). The workgroup walks its tiles of
    ``WG * items`` elements in order; warp ``v`` owns the tile's ``32 * items`` elements from
    ``v * 32 * items`` and takes them 32 at a time (round ``j``: ``j*32 + lane``), so element
    order is warp, round, lane. ``items`` is a multiple of ``SORT_ROUNDS``: the rounds are
    loops of ``SORT_ROUNDS`` written out. Per tile:

    1. rank: each round, a warp finds the lanes with equal digits (8 ballots) and counts them
       in its counter of that digit (workgroup memory, u16); every lane of a peer group reads
       the same counter and stores the same new value (no leader, branch or atomic). Each
       key's rank among the warp's equal digits goes to workgroup memory (u16). Keys are
       loaded two loop iterations ahead, across tiles, so loads are in flight meanwhile;
    2. invocation ``t`` turns the warps' counters of digit ``t`` into tile slots (a workgroup
       scan over digits gives where digit ``t`` starts in the tile-sorted order);
    3. place: keys are read again (from cache: just read), values (if any) read, and both
       stored to their slots in workgroup memory, so the tile is sorted by digit and stable;
    4. invocation ``t`` reads slots ``j*WG + t`` and writes each to ``slot + shift[digit]``:
       consecutive invocations write consecutive addresses within each digit's run.

    Elements past ``n`` get key ``0xFFFFFFFF``: they rank last in the last tile, past its valid
    slots, and are not written. Counters alternate between two halves by tile parity, so the
    next tile needs no extra barrier. ``values``: ``"none"``, ``"load"`` (move ``vals``) or
    ``"iota"`` (the value is the index: argsort); ``key_in``/``key_out`` transform raw keys on
    the first pass and back on the last.
    """
    n = var("n")
    body = [Node.let("n", load_param(n_word)), *segment(n, span_word, WG * items)]
    body += [Node.let("run", Expr.load("offsets", Expr.add(Expr.mul(lid(), load_param(groups_word)), wid()))),
             Node.let("limit", Expr.min(n, Expr.add(var("seg_base"), load_param(span_word))))]
    body += _radix_tiles(shift, key_in, key_out, values, items, var("seg_tiles"), None)
    buffers = _radix_buffers(BufferDecl.read("offsets", 1, U32), values, items, 2)
    return Program(buffers, WG_SIZE, body, name=f"lib_radix_scatter_{shift}")


# ---- single-pass radix sort (Onesweep) ------------------------------------------------------------------
# The ``lookback`` buffer: words 0-3 count the tiles taken in each pass, words LOOKBACK_STARTS +
# 256*p + d hold the digit counts of pass p (then, scanned, digit d's first output slot), and from
# LOOKBACK_HEAD come two regions of 256 words per tile (``params`` word ``region_word``: their
# size), used by the passes alternately. ``status[0]`` counts the digits whose look-back gave up.
# 64-bit keys take eight passes: the same layout with eight counters and eight passes' starts
# (``lookback_starts``, ``lookback_head``).
RADIX_PASSES = 32 // RADIX_BITS
LOOKBACK_STARTS = RADIX_PASSES
LOOKBACK_HEAD = LOOKBACK_STARTS + RADIX_PASSES * (1 << RADIX_BITS)
FLAG_A = 1 << 30    # a tile's own count of the digit (an aggregate)
FLAG_P = 1 << 31    # the count of the digit in this and every lower tile (an inclusive prefix)
SPIN = (6, 16)      # the look-back's wait: 6 nested loops of 16 trips, at most 16**6 trips
LOOKBACK_WIDTH = 2  # tiles whose words one look-back trip reads together (1 measured the same, 3, 4, 8 slower)
ONESWEEP_ITEMS = SORT_ITEMS
ONESWEEP_VALUE_ITEMS = 16  # with values (tile 4096; 47 KB of workgroup memory, 4 workgroups per SM on an H100)
ONESWEEP_WIDE_ITEMS = 16  # 64-bit keys alone (tile 4096; 46 KB of workgroup memory)
ONESWEEP_WIDE_VALUE_ITEMS = 8  # 64-bit keys with values or indices (tile 2048; 34 KB, 42 KB with 8-byte values)
HISTOGRAM_ITEMS = 8  # keys per invocation and round of the digit histograms (all loaded first)


def radix_passes(raw: DataType) -> int:
    """The 8-bit digit passes of keys whose bits are ``raw`` (4 for U32, 8 for U64)."""
    return 8 * raw.size // RADIX_BITS


def lookback_starts(passes: int) -> int:
    """The first word of the digit counts (then starts) in the ``lookback`` buffer of ``passes`` passes."""
    return passes


def lookback_head(passes: int) -> int:
    """The first word of the look-back regions in the ``lookback`` buffer of ``passes`` passes."""
    return lookback_starts(passes) + passes * (1 << RADIX_BITS)


def onesweep_items(raw: DataType, values: str) -> int:
    """Keys per invocation of a single-pass radix tile, by key bits and ``values`` mode."""
    if raw is U32:
        return ONESWEEP_ITEMS if values == "none" else ONESWEEP_VALUE_ITEMS
    return ONESWEEP_WIDE_ITEMS if values == "none" else ONESWEEP_WIDE_VALUE_ITEMS


@cache
def radix_histograms(key_type: DataType, items: int, n_word: int, blocks_word: int) -> Program:
    """The digit counts of all passes at once, into ``lookback[starts + 256*p + d]`` (zeroed;
    ``starts`` is ``lookback_starts`` of the passes of ``key_type``: four, or eight for 64-bit keys).

    Workgroup ``w`` of ``B`` (params ``blocks_word``) takes tiles ``w, w + B, ...`` of ``WG * items``
    keys (coalesced, all loaded before they are counted) and counts each key's digits in workgroup
    memory with workgroup atomics, then merges with one global atomic per non-zero bin. A tile
    wholly below ``n`` counts its keys without a test per key.
    """
    radix, tile, raw = 1 << RADIX_BITS, WG * items, raw_type(key_type)
    passes = radix_passes(raw)
    n, blocks = load_param(n_word), load_param(blocks_word)
    rounds = Expr.div(Expr.add(n, Expr.sub(Expr.mul(blocks, u(tile)), u(1))), Expr.mul(blocks, u(tile)))
    step: list[Node] = [Node.let("tb", Expr.mul(Expr.add(Expr.mul(var("r"), blocks), wid()), u(tile)))]
    for k in range(items):
        step += [Node.let(f"i{k}", Expr.add(var("tb"), Expr.add(u(k * WG), lid()))),
                 Node.let(f"key{k}", to_key(key_type, Expr.load("keys", var(f"i{k}"))))]
    def counted(k: int, tag: str) -> list[Node]:
        return [Node.let(f"c{k}_{p}{tag}", Expr.atomic(AtomicOp.ADD, "local",
                                                        u(p * radix) + _digit(var(f"key{k}"), p * RADIX_BITS, raw),
                                                        u(1), relaxed=True))
                for p in range(passes)]

    whole = Expr.lt(var("tb"), Expr.sub(n, Expr.min(n, u(tile - 1))))  # tb + tile <= n, without overflow
    step.append(Node.if_(whole, [node for k in range(items) for node in counted(k, "w")],
                         [Node.if_(Expr.lt(var(f"i{k}"), n), counted(k, "")) for k in range(items)]))
    body = [Node.loop("r", u(0), rounds, step), Node.barrier(),
            *_merge_bins("lookback", lookback_starts(passes), u(passes * radix // WG))]
    buffers = [BufferDecl.read("keys", 0, raw), BufferDecl.read_write("lookback", 1, U32), _params(2),
               BufferDecl.workgroup("local", passes * radix, U32)]
    return Program(buffers, WG_SIZE, body, name=f"lib_radix_histograms_{key_type.value}")


@cache
def radix_digit_starts(passes: int = RADIX_PASSES) -> Program:
    """Workgroup ``p`` scans pass ``p``'s digit counts in place (exclusive): each digit's first
    output slot (one workgroup per pass, of ``passes``)."""
    at = Expr.add(u(lookback_starts(passes)), Expr.add(Expr.mul(wid(), u(1 << RADIX_BITS)), lid()))
    nodes, (start,) = block_scan(_COUNT, [var("count")], u(0), False, "sums", "s")
    body = [Node.let("at", at), Node.let("count", Expr.load("lookback", var("at"))), *nodes,
            Node.store("lookback", var("at"), start)]
    buffers = [BufferDecl.read_write("lookback", 0, U32), BufferDecl.workgroup("sums", WARPS, U32)]
    suffix = "" if passes == RADIX_PASSES else f"_{passes}"
    return Program(buffers, WG_SIZE, body, name=f"lib_radix_digit_starts{suffix}")


EARLY_BATCH = 4  # keys loaded together by the early digit counts


def _early_counts(key_in: DataType | None, shift: int, items: int, raw: DataType = U32) -> list[Node]:
    """The tile's count of each digit before it is ranked, binding ``own`` (invocation ``t``: the
    count of digit ``t``): its keys below ``limit`` are read (coalesced, ``EARLY_BATCH`` in flight)
    and counted with relaxed workgroup atomics into ``hist`` (without a test per key in a whole
    tile). Publishing these counts first, not after the long ranking step, is what keeps later
    tiles' look-backs from waiting."""
    def index(k: int) -> Expr:
        key = Expr.add(Expr.mul(var("eb"), u(EARLY_BATCH)), u(k))
        return Expr.add(var("seg_base"), Expr.add(Expr.mul(key, u(WG)), lid()))

    def counted(k: int) -> Node:
        return Node.let(f"eo{k}", Expr.atomic(AtomicOp.ADD, "hist", digits[k], u(1), relaxed=True))

    # n = limit: none past it counts
    batch = _tile_bits(key_in, EARLY_BATCH, var("limit"), var("limit"), "e", index, var("whole"), raw=raw)
    digits = [_digit(_sort_key(key_in, var(f"e{k}")), shift, raw) for k in range(EARLY_BATCH)]
    batch.append(Node.if_(var("whole"), [counted(k) for k in range(EARLY_BATCH)],
                          [Node.if_(Expr.lt(index(k), var("limit")), counted(k)) for k in range(EARLY_BATCH)]))
    return [Node.loop("eb", u(0), u(-(-items // EARLY_BATCH)), batch), Node.barrier(),  # past the tile: past limit
            Node.let("own", Expr.load("hist", lid()))]


def _lookback_word(t: Expr) -> Expr:
    """Digit ``lid()``'s word of tile ``t`` in this pass's region (``region`` bound by ``_publish``)."""
    return Expr.add(var("region"), Expr.add(Expr.mul(t, u(1 << RADIX_BITS)), lid()))


def _publish(pass_: int, region_word: int, head: int = LOOKBACK_HEAD) -> list[Node]:
    """Invocation ``t`` publishes the tile's count of digit ``t`` (``own``): ``own | FLAG_A``, or
    ``own | FLAG_P`` for tile 0, whose count is already an inclusive prefix."""
    flag = Expr.select(Expr.eq(var("tile"), u(0)), u(FLAG_P), u(FLAG_A))
    return [Node.let("region", Expr.add(u(head), Expr.mul(u(pass_ % 2), load_param(region_word)))),
            Node.let("aggregate", Expr.atomic(AtomicOp.EXCHANGE, "lookback", _lookback_word(var("tile")),
                                              Expr.bitor(var("own"), flag), relaxed=True))]


def _look_back(pass_: int, spin: tuple[int, int], width: int, starts: int = LOOKBACK_STARTS) -> list[Node]:
    """Invocation ``t``'s look-back for digit ``t`` (the ``lookback`` nodes of ``_digit_slots``),
    after ``_publish``: binds ``run``. ``word`` is digit ``t``'s word of the nearest tile not yet
    taken; each trip reads it and the words of the ``width - 1`` tiles below at once (one memory
    latency, not ``width``) and takes them nearest first, up to the first one not yet published
    (read again next trip) or holding an inclusive prefix (done). Near tile 0 a trip also reads
    words below tile 0's (inside the buffer's head): never taken, since tile 0 holds ``FLAG_P``."""
    first = Expr.eq(var("tile"), u(0))
    radix = 1 << RADIX_BITS
    step: list[Node] = [Node.let("go", Expr.bool(True)), Node.let("at", var("word"))]
    for k in range(width):
        step.append(Node.let(f"seen{k}", Expr.atomic(AtomicOp.OR, "lookback", Expr.sub(var("at"), u(k * radix)),
                                                     u(0), relaxed=True)))  # an atomic read
    for k in range(width):
        seen = var(f"seen{k}")
        step += [Node.let(f"took{k}", Expr.and_(var("go"), Expr.ne(Expr.bitand(seen, u(FLAG_A | FLAG_P)), u(0)))),
                 Node.let(f"last{k}", Expr.ne(Expr.bitand(seen, u(FLAG_P)), u(0))),
                 Node.assign("prefix", Expr.add(var("prefix"), Expr.select(var(f"took{k}"),
                                                                           Expr.bitand(seen, u(FLAG_A - 1)), u(0)))),
                 Node.assign("word", Expr.select(var(f"took{k}"), Expr.sub(var("word"), u(radix)), var("word"))),
                 Node.assign("done", Expr.or_(var("done"), Expr.and_(var(f"took{k}"), var(f"last{k}")))),
                 Node.assign("go", Expr.and_(var(f"took{k}"), Expr.not_(var(f"last{k}"))))]
    inclusive = Expr.bitor(Expr.add(var("prefix"), var("own")), u(FLAG_P))
    start = Expr.load("lookback", Expr.add(u(starts + pass_ * (1 << RADIX_BITS)), lid()))
    return [Node.let("done", first), Node.let("prefix", u(0)),
            Node.let("word", Expr.sub(_lookback_word(var("tile")), u(radix))),
            bounded_wait("done", *spin, step, "spin"),
            Node.if_(var("done"),
                     Node.if_(Expr.not_(first), Node.let("published", Expr.atomic(AtomicOp.EXCHANGE, "lookback",
                                                                                   _lookback_word(var("tile")),
                                                                                   inclusive, relaxed=True))),
                     Node.let("gave_up", Expr.atomic(AtomicOp.ADD, "status", u(0), u(1), relaxed=True))),
            Node.let("run", Expr.select(var("done"), Expr.add(start, var("prefix")), u(1 << 31)))]


@cache
def radix_onesweep(shift: int, key_in: DataType | None, key_out: DataType | None, values: str, items: int,
                   n_word: int, region_word: int, spin: tuple[int, int] = SPIN,
                   width: int = LOOKBACK_WIDTH, raw: DataType = U32, value_raw: DataType = U32) -> Program:
    """One stable pass of LSD radix sort, one tile per workgroup, with decoupled look-back (Onesweep).

    Invocation 0 takes the tile id from pass ``p``'s counter ``lookback[p]``, so every lower tile
    has started. First the tile's digits are counted (``_early_counts``) and invocation ``t``
    publishes the tile's count of digit ``t`` as ``count | FLAG_A`` (tile 0: ``count | FLAG_P``)
    with an atomic exchange. The tile is then ranked, placed and written as in ``radix_scatter``;
    between ranking and placing, invocation ``t`` looks back over lower tiles, last first, adding
    their counts until one holds an inclusive prefix (``FLAG_P``); a word still 0 (not published
    yet) is read again. It then publishes ``(prefix + count) | FLAG_P`` and the
    tile's keys of digit ``t`` go to ``starts[t] + prefix + rank in tile``. The wait is
    ``spin = (levels, trips)`` nested loops, at most ``trips**levels`` trips; if it runs out the
    digit's keys are not written (their positions are past 2^31) and ``status[0]`` counts the
    digit. Counts carry two flag bits, so ``n < 2^30``. Each workgroup zeroes its
    tile's words of the other region, which the next pass uses. A whole tile (``whole``: every
    tile but the last) reads and writes its keys without per-key tests, except in the place step.

    ``raw``: the keys' bits, U32 or U64 (64-bit keys: eight passes, shifts 0 to 56, and the
    ``lookback`` head of eight passes); ``value_raw``: the bits of loaded values (U32 or U64).
    """
    pass_, tile = shift // RADIX_BITS, WG * items
    passes = radix_passes(raw)
    n = var("n")
    other = Expr.add(u(lookback_head(passes)), Expr.mul(u((pass_ + 1) % 2), load_param(region_word)))
    body = [Node.let("n", load_param(n_word)),
            Node.if_(Expr.eq(lid(), u(0)), Node.store("tile_id", u(0), Expr.atomic(AtomicOp.ADD, "lookback",
                                                                                     u(pass_), u(1), relaxed=True))),
            Node.barrier(), Node.let("tile", Expr.load("tile_id", u(0))),
            Node.let("seg_base", Expr.mul(var("tile"), u(tile))),
            Node.let("limit", Expr.min(n, Expr.add(var("seg_base"), u(tile)))),
            Node.let("whole", Expr.eq(var("limit"), Expr.add(var("seg_base"), u(tile)))),  # all but the last tile
            Node.store("lookback", Expr.add(other, Expr.add(Expr.mul(var("tile"), u(1 << RADIX_BITS)), lid())), u(0))]
    body += [*_early_counts(key_in, shift, items, raw), *_publish(pass_, region_word, lookback_head(passes))]
    body += _radix_tiles(shift, key_in, key_out, values, items, u(1),
                         _look_back(pass_, spin, width, lookback_starts(passes)), raw)
    buffers = _radix_buffers(BufferDecl.read_write("lookback", 1, U32), values, items, 1, ("status",), raw,
                             value_raw)
    buffers += [BufferDecl.workgroup("tile_id", 1, U32), BufferDecl.workgroup("hist", 1 << RADIX_BITS, U32)]
    wide = "" if raw is U32 else f"{8 * raw.size}"
    return Program(buffers, WG_SIZE, body, name=f"lib_radix_onesweep{wide}_{shift}")


# ---- segmented reduction ------------------------------------------------------------------------------
@cache
def segmented_reduce_kernel(m: Monoid, n_word: int, segments_word: int) -> Program:
    """One subgroup per segment ``s``: ``out[s] = x[offsets[s]] op ... op x[offsets[s+1] - 1]``.

    Offsets are clamped to ``[0, n]`` and an end below its start makes the segment empty, which
    gives the op's empty value. Lanes fold strided elements in order, then a butterfly combines
    the 32 lanes: a fixed order, so F32 results are the same on every backend.
    """
    n, segments = load_param(n_word), load_param(segments_word)
    s = Expr.add(Expr.mul(wid(), u(WARPS)), warp())
    ok = Expr.lt(var("s"), segments)
    begin = Expr.select(ok, Expr.min(Expr.load("offsets", var("s")), n), u(0))
    end = Expr.select(ok, Expr.min(Expr.max(Expr.load("offsets", Expr.add(var("s"), u(1))), var("begin")), n), u(0))
    steps = Expr.div(Expr.add(Expr.sub(var("end"), var("begin")), u(31)), u(32))
    index = Expr.add(Expr.add(var("begin"), Expr.mul(var("j"), u(32))), lane())
    body: list[Node] = [
        Node.let("s", s), Node.let("begin", begin), Node.let("end", end), Node.let("acc", m.pad()),
        Node.loop("j", u(0), steps, [Node.let("i", index), Node.if_(
            Expr.lt(var("i"), var("end")), Node.assign("acc", m.combine(var("acc"), Expr.load("x", var("i")))))]),
    ]
    nodes, total = warp_reduce(m, var("acc"), "w")
    body += nodes
    result = Expr.select(Expr.lt(var("begin"), var("end")), total, m.literal(m.empty_value()))
    body.append(Node.if_(Expr.and_(ok, Expr.eq(lane(), u(0))), Node.store("out", var("s"), result)))
    buffers = [BufferDecl.read("x", 0, m.dtype), BufferDecl.read("offsets", 1, U32),
               BufferDecl.read_write("out", 2, m.dtype), _params(3)]
    return Program(buffers, WG_SIZE, body, name=f"lib_segmented_reduce_{m.op}_{m.dtype.value}")


# ---- 64-bit keys and 8-byte values: two 32-bit sorts and gathers --------------------------------------
@cache
def split_keys(key_type: DataType, n_word: int) -> Program:
    """``lo[i]``, ``hi[i]``: the low and high 32 bits of the u64 sort key of ``keys[i]`` (``i < n``)."""
    i = Expr.invocation_id(0)
    key = to_key(key_type, Expr.load("keys", var("i")))
    body = [Node.let("i", i), Node.if_(Expr.lt(var("i"), load_param(n_word)), [
        Node.let("key", key),
        Node.store("lo", var("i"), Expr.cast(U32, var("key"))),
        Node.store("hi", var("i"), Expr.cast(U32, Expr.shr(var("key"), u(32))))])]
    buffers = [BufferDecl.read("keys", 0, DataType.U64), BufferDecl.read_write("lo", 1, U32),
               BufferDecl.read_write("hi", 2, U32), _params(3)]
    return Program(buffers, WG_SIZE, body, name=f"lib_split_keys_{key_type.value}")


@cache
def gather(element: DataType, key_type: DataType | None, n_word: int) -> Program:
    """``out[i] = src[perm[i]]`` for ``i < n`` (``element``: U32 or U64 raw bits); with ``key_type``
    (a 64-bit key type) the value goes through its sort key and back, so every NaN comes out as
    the one NaN the sort returns."""
    value = Expr.load("src", Expr.load("perm", var("i")))
    if key_type is not None:
        value = from_key(key_type, to_key(key_type, value))
    body = [Node.let("i", Expr.invocation_id(0)),
            Node.if_(Expr.lt(var("i"), load_param(n_word)), Node.store("out", var("i"), value))]
    buffers = [BufferDecl.read("src", 0, element), BufferDecl.read("perm", 1, U32),
               BufferDecl.read_write("out", 2, element), _params(3)]
    suffix = "" if key_type is None else f"_{key_type.value}"
    return Program(buffers, WG_SIZE, body, name=f"lib_gather_{element.value}{suffix}")
