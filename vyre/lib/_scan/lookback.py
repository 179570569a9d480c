"""The single-pass scan (decoupled look-back): U32 and I32 scans of more than one workgroup's tile."""

from __future__ import annotations

from functools import cache

from vyre.ir import AtomicOp, BufferDecl, Expr, Node, Program
from vyre.lib._scan.kernels import scan_start, scan_tail_buffers, warp_rounds, warp_striped
from vyre.lib.blocks import U32, WARPS, WG, WG_SIZE, bounded_wait, fold_warp_totals, lane, lid, load_param, u, var, warp
from vyre.lib.monoid import Monoid

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
    warps scan their stretches of the tile (``warp_rounds``) and meet in workgroup memory;
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
        index = warp_striped(var("tb"), k, items)
        body.append(Node.let(f"v{k}", Expr.select(Expr.lt(index, n), Expr.load("x", index), m.pad())))
    nodes, outs, total = warp_rounds(m, items, True, [var(f"v{k}") for k in range(items)])
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
    body.append(Node.let("tile_start", scan_start(m, init_word, Expr.load("tile_prefix", u(0)))))
    body.append(Node.let("wbase", m.combine(var("tile_start"), var("wp"))))
    # exclusive: element i gets element i-1's inclusive result, so each one is stored one place on
    # (no shuffle to the next lane) and the tile's first element gets the tile's start
    end = n if inclusive else Expr.min(n, Expr.add(var("tb"), u(tile)))
    for k, value in enumerate(outs):
        index = warp_striped(var("tb"), k, items)
        if not inclusive:
            index = Expr.add(index, u(1))
        body.append(Node.if_(Expr.lt(index, end), Node.store("out", index, m.combine(var("wbase"), value))))
    if not inclusive:
        body.append(Node.if_(Expr.and_(Expr.eq(lid(), u(0)), Expr.lt(var("tb"), n)),
                             Node.store("out", var("tb"), var("tile_start"))))
    buffers = [BufferDecl.read("x", 0, m.dtype), BufferDecl.read_write("out", 1, m.dtype),
               BufferDecl.read_write("state", 2, U32)]
    buffers = scan_tail_buffers(m, buffers, init_word)
    buffers += [BufferDecl.workgroup("sums", WARPS, m.dtype), BufferDecl.workgroup("tile_id", 1, U32),
                BufferDecl.workgroup("tile_prefix", 1, m.dtype)]
    kind = "inclusive" if inclusive else "exclusive"
    return Program(buffers, WG_SIZE, body, name=f"lib_scan_lookback_{kind}_{m.op}_{m.dtype.value}")
