"""The programs of ``vyre.lib``, built once per variant with the public IR builder.

Each builder is cached, so the same variant is the same ``Program`` (and on ``cuda`` the same
module and graph). Every kernel declares a ``params`` uniform buffer of ``PARAM_WORDS`` u32
words: run-time sizes live there, so one program and one captured graph serve every size of a
capacity class. Word numbers are compile-time constants chosen by the plan (``vyre.lib.plan``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.lib.blocks import (
    WARPS,
    WG,
    block_reduce,
    block_scan,
    blocked,
    lane,
    lid,
    load_param,
    stage_in,
    stage_out,
    u,
    var,
    warp,
    warp_reduce,
    wid,
)
from vyre.lib.keys import equality_key, from_key, to_key
from vyre.lib.monoid import Monoid

PARAM_WORDS = 32
U32 = DataType.U32
SCAN_ITEMS = 4      # elements per invocation in scans and compaction (tile 1024)
REDUCE_ITEMS = 16   # elements per invocation in reductions (tile 4096)
SORT_ITEMS = 4      # elements per invocation in radix passes (tile 1024)
RADIX_BITS = 8
WG_SIZE = (WG, 1, 1)


def _params(binding: int) -> BufferDecl:
    return BufferDecl.uniform("params", binding, U32, PARAM_WORDS)


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


@cache
def scan_tiles(m: Monoid, items: int, inclusive: bool, has_carry: bool, n_word: int, init_word: int | None
               ) -> Program:
    """Scan each tile of ``x`` into ``out``, starting from ``init op carry[w]`` (the downsweep)."""
    n, base = load_param(n_word), Expr.mul(wid(), u(WG * items))
    carry = Expr.load("carry", wid()) if has_carry else m.pad()
    if init_word is not None:
        carry = m.combine(Expr.load("init", u(init_word)), carry)
    body: list[Node] = [_exit_past(base, n), Node.let("carry_in", carry)]
    body += stage_in("x", "tile", base, n, items, m.pad())
    nodes, outs = block_scan(m, [blocked("tile", k, items) for k in range(items)], var("carry_in"), inclusive,
                             "sums", "b")
    body += nodes
    body += stage_out("tile", "out", base, n, outs)
    buffers = [BufferDecl.read("x", 0, m.dtype), BufferDecl.read_write("out", 1, m.dtype)]
    if has_carry:
        buffers.append(BufferDecl.read("carry", len(buffers), m.dtype))
    buffers.append(_params(len(buffers)))
    if init_word is not None:
        buffers.append(BufferDecl.uniform("init", len(buffers), m.dtype, PARAM_WORDS))
    buffers += [BufferDecl.workgroup("tile", WG * items, m.dtype), BufferDecl.workgroup("sums", WARPS, m.dtype)]
    kind = "inclusive" if inclusive else "exclusive"
    return Program(buffers, WG_SIZE, body, name=f"lib_scan_{kind}_{m.op}_{m.dtype.value}")


# ---- predicates of compaction --------------------------------------------------------------------
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
        """Range tests compare typed values; the other kinds move raw 32-bit words."""
        return self.dtype if self.kind == "range" else U32

    def buffers(self, first: int) -> list[BufferDecl]:
        decls = [BufferDecl.read("x", first, self.value_type())]
        if self.kind == "flags":
            decls.append(BufferDecl.read("flags", first + 1, self.flag_type))
        return decls

    def extra_uniforms(self, first: int) -> list[BufferDecl]:
        return [BufferDecl.uniform("bounds", first, self.dtype, PARAM_WORDS)] if self.kind == "range" else []

    def keep(self, index: Expr) -> Expr:
        """BOOL: is element ``index`` kept (callers also check ``index < n``)."""
        if self.kind == "flags":
            zero = Expr.f32(0.0) if self.flag_type.arith is DataType.F32 else (
                Expr.i32(0) if self.flag_type.arith is DataType.I32 else u(0))
            return Expr.ne(Expr.load("flags", index), zero)
        x = Expr.load("x", index)
        if self.kind == "range":
            lo, hi = Expr.load("bounds", u(self.lo_word)), Expr.load("bounds", u(self.lo_word + 1))
            return Expr.and_(Expr.le(lo, x), Expr.lt(x, hi))
        previous = Expr.load("x", Expr.sub(index, u(1)))
        differs = Expr.ne(equality_key(self.dtype, x), equality_key(self.dtype, previous))
        return Expr.or_(Expr.eq(index, u(0)), differs)


def _flag(pred: Predicate, index: Expr, n: Expr) -> Expr:
    return Expr.cast(U32, Expr.and_(Expr.lt(index, n), pred.keep(index)))


_COUNT = Monoid("add", U32)


@cache
def count_tiles(pred: Predicate, items: int, n_word: int) -> Program:
    """``partial[w]`` = how many elements of tile ``w`` the predicate keeps (compaction's upsweep)."""
    n, base = load_param(n_word), Expr.mul(wid(), u(WG * items))
    body: list[Node] = [_exit_past(base, n), Node.let("acc", u(0))]
    for k in range(items):
        index = Expr.add(base, Expr.add(u(k * WG), lid()))
        body.append(Node.assign("acc", Expr.add(var("acc"), _flag(pred, index, n))))
    nodes, total = block_reduce(_COUNT, var("acc"), "sums", "b")
    body += nodes
    body.append(Node.if_(Expr.eq(lid(), u(0)), Node.store("partial", wid(), total)))
    buffers = pred.buffers(0)
    buffers += [BufferDecl.read_write("partial", len(buffers), U32), _params(len(buffers) + 1)]
    buffers += pred.extra_uniforms(len(buffers))
    buffers.append(BufferDecl.workgroup("sums", WARPS, U32))
    return Program(buffers, WG_SIZE, body, name=f"lib_count_{pred.kind}")


@cache
def compact_tiles(pred: Predicate, items: int, has_carry: bool, with_index: bool, n_word: int) -> Program:
    """Stable compaction of one tile: kept ``x[i]`` (and ``i``) go to ``out[carry[w] + rank]``.

    The workgroup holding the last element writes the total kept into ``count[0]``.
    """
    n, base = load_param(n_word), Expr.mul(wid(), u(WG * items))
    body: list[Node] = [_exit_past(base, n)]
    flags, indices = [], []
    for k in range(items):
        index = Expr.add(base, Expr.add(Expr.mul(lid(), u(items)), u(k)))
        body += [Node.let(f"i{k}", index), Node.let(f"f{k}", _flag(pred, var(f"i{k}"), n))]
        flags.append(var(f"f{k}"))
        indices.append(var(f"i{k}"))
    carry = Expr.load("carry", wid()) if has_carry else u(0)
    nodes, ranks = block_scan(_COUNT, flags, carry, False, "sums", "b")
    body += nodes
    for k in range(items):
        moves = [Node.store("out", ranks[k], Expr.load("x", indices[k]))]
        if with_index:
            moves.append(Node.store("out_index", ranks[k], indices[k]))
        body.append(Node.if_(Expr.ne(flags[k], u(0)), moves))
    last = Expr.and_(Expr.eq(wid(), Expr.div(Expr.sub(n, u(1)), u(WG * items))), Expr.eq(lid(), u(WG - 1)))
    body.append(Node.if_(last, Node.store("count", u(0), Expr.add(ranks[-1], flags[-1]))))
    buffers = pred.buffers(0)
    buffers.append(BufferDecl.read_write("out", len(buffers), pred.value_type()))
    if with_index:
        buffers.append(BufferDecl.read_write("out_index", len(buffers), U32))
    buffers.append(BufferDecl.read_write("count", len(buffers), U32))
    if has_carry:
        buffers.append(BufferDecl.read("carry", len(buffers), U32))
    buffers.append(_params(len(buffers)))
    buffers += pred.extra_uniforms(len(buffers))
    buffers.append(BufferDecl.workgroup("sums", WARPS, U32))
    return Program(buffers, WG_SIZE, body, name=f"lib_compact_{pred.kind}")


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


# ---- histogram ------------------------------------------------------------------------------------
@cache
def histogram_kernel(dtype: DataType, shared_bins: int, n_word: int, bins_word: int, blocks_word: int) -> Program:
    """Count values in ``[0, bins)``: workgroup-private bins (when ``shared_bins``), merged once.

    Workgroup ``w`` of ``B`` (params ``blocks_word``) handles elements ``(r*B + w)*WG + t``.
    With ``shared_bins == 0`` every element goes straight to a global atomic.
    """
    n, bins, blocks = load_param(n_word), load_param(bins_word), load_param(blocks_word)
    rounds = Expr.div(Expr.add(n, Expr.sub(Expr.mul(blocks, u(WG)), u(1))), Expr.mul(blocks, u(WG)))
    target = "local" if shared_bins else "counts"
    index = Expr.add(Expr.mul(Expr.add(Expr.mul(var("r"), blocks), wid()), u(WG)), lid())
    value = Expr.cast(U32, Expr.load("x", var("i")))
    count_one = Node.if_(Expr.and_(Expr.lt(var("i"), n), Expr.lt(var("v"), bins)),
                         Node.let("old", Expr.atomic(AtomicOp.ADD, target, var("v"), u(1))))
    body: list[Node] = [Node.loop("r", u(0), rounds, [Node.let("i", index), Node.let("v", value), count_one])]
    if shared_bins:
        add_count = Expr.atomic(AtomicOp.ADD, "counts", var("b"), var("c"))
        merge = Node.if_(Expr.ne(var("c"), u(0)), Node.let("old2", add_count))
        rounds_b = Expr.div(Expr.add(bins, u(WG - 1)), u(WG))
        body += [Node.barrier(),
                 Node.loop("q", u(0), rounds_b, [Node.let("b", Expr.add(Expr.mul(var("q"), u(WG)), lid())),
                                                 Node.let("c", Expr.load("local", var("b"))), merge])]
    buffers = [BufferDecl.read("x", 0, dtype), BufferDecl.read_write("counts", 1, U32), _params(2)]
    if shared_bins:
        buffers.append(BufferDecl.workgroup("local", shared_bins, U32))
    return Program(buffers, WG_SIZE, body, name=f"lib_histogram_{dtype.value}")


# ---- radix sort -------------------------------------------------------------------------------------
def _digit(key: Expr, shift: int) -> Expr:
    return Expr.bitand(Expr.shr(key, u(shift)), u((1 << RADIX_BITS) - 1))


def _sort_key(dtype: DataType | None, bits: Expr) -> Expr:
    """Pass 0 reads the caller's raw keys (``dtype``); later passes read keys already transformed."""
    return bits if dtype is None else to_key(dtype, bits)


@cache
def radix_histogram(shift: int, key_type: DataType | None, items: int, n_word: int, tiles_word: int) -> Program:
    """Per-tile digit counts, digit-major: ``hist[d * tiles + w]`` (so one scan gives scatter offsets)."""
    n, base, tiles = load_param(n_word), Expr.mul(wid(), u(WG * items)), load_param(tiles_word)
    body: list[Node] = []
    for k in range(items):
        index = Expr.add(base, Expr.add(u(k * WG), lid()))
        digit = _digit(_sort_key(key_type, Expr.load("keys", index)), shift)
        body.append(Node.if_(Expr.lt(index, n), Node.let(f"old{k}", Expr.atomic(AtomicOp.ADD, "local", digit, u(1)))))
    body += [Node.barrier(),
             Node.store("hist", Expr.add(Expr.mul(lid(), tiles), wid()), Expr.load("local", lid()))]
    buffers = [BufferDecl.read("keys", 0, U32), BufferDecl.read_write("hist", 1, U32), _params(2),
               BufferDecl.workgroup("local", 1 << RADIX_BITS, U32)]
    return Program(buffers, WG_SIZE, body, name=f"lib_radix_histogram_{shift}")


def _peers(digit: Expr, valid: Expr, prefix: str) -> tuple[list[Node], Expr]:
    """Lanes of this subgroup holding the same digit (and validity): a u32 lane mask, from ballots."""
    tag = Expr.select(valid, digit, u(1 << RADIX_BITS))
    nodes = [Node.let(f"{prefix}m", u(0xFFFFFFFF))]
    for bit in range(RADIX_BITS + 1):
        has = Expr.ne(Expr.bitand(tag, u(1 << bit)), u(0))
        votes = Expr.subgroup_ballot(has)
        same = Expr.select(has, votes, Expr.bitnot(votes))
        nodes.append(Node.assign(f"{prefix}m", Expr.bitand(var(f"{prefix}m"), same)))
    return nodes, var(f"{prefix}m")


@cache
def radix_scatter(shift: int, key_in: DataType | None, key_out: DataType | None, values: str, items: int,
                  n_word: int, tiles_word: int) -> Program:
    """One stable pass of LSD radix sort: move each key (and value) to its digit's next free slot.

    ``offsets[d * tiles + w]`` (the scanned per-tile histogram) is where tile ``w``'s keys with
    digit ``d`` start. Inside a tile, element order is round ``k`` then warp then lane; each
    warp ranks equal digits with ballots, and ``counts[(k*WARPS + warp) * 256 + d]`` turns into
    the number of earlier elements of the tile with digit ``d``. ``values``: ``"none"``,
    ``"load"`` (move ``vals``) or ``"iota"`` (the value is the element's index: argsort).
    ``key_in``/``key_out`` transform raw keys on the first pass and back on the last.
    """
    radix = 1 << RADIX_BITS
    n, base, tiles = load_param(n_word), Expr.mul(wid(), u(WG * items)), load_param(tiles_word)
    lower_lanes = Expr.sub(Expr.shl(u(1), lane()), u(1))
    body: list[Node] = []
    for k in range(items):
        p = f"k{k}"
        body += [Node.let(f"{p}i", Expr.add(base, Expr.add(u(k * WG), lid()))),
                 Node.let(f"{p}ok", Expr.lt(var(f"{p}i"), n)),
                 Node.let(f"{p}key", _sort_key(key_in, Expr.load("keys", var(f"{p}i")))),
                 Node.let(f"{p}d", _digit(var(f"{p}key"), shift))]
        nodes, peers = _peers(var(f"{p}d"), var(f"{p}ok"), p)
        body += nodes
        body.append(Node.let(f"{p}rank", Expr.popcount(Expr.bitand(peers, lower_lanes))))
        slot = Expr.add(Expr.mul(Expr.add(u(k * WARPS), warp()), u(radix)), var(f"{p}d"))
        is_last_peer = Expr.and_(var(f"{p}ok"), Expr.eq(Expr.shr(peers, lane()), u(1)))
        body.append(Node.if_(is_last_peer, Node.store("counts", slot, Expr.popcount(peers))))
    body.append(Node.barrier())
    # invocation t owns digit t: turn its column of counts into exclusive prefixes, in place
    body.append(Node.let("running", u(0)))
    for j in range(items * WARPS):
        cell = Expr.add(u(j * radix), lid())
        body += [Node.let(f"c{j}", Expr.load("counts", cell)), Node.store("counts", cell, var("running")),
                 Node.assign("running", Expr.add(var("running"), var(f"c{j}")))]
    body.append(Node.barrier())
    for k in range(items):
        p = f"k{k}"
        slot = Expr.add(Expr.mul(Expr.add(u(k * WARPS), warp()), u(radix)), var(f"{p}d"))
        start = Expr.load("offsets", Expr.add(Expr.mul(var(f"{p}d"), tiles), wid()))
        position = Expr.add(Expr.add(start, Expr.load("counts", slot)), var(f"{p}rank"))
        key = var(f"{p}key") if key_out is None else from_key(key_out, var(f"{p}key"))
        moves = [Node.store("keys_out", var("pos" + p), key)]
        if values == "load":
            moves.append(Node.store("vals_out", var("pos" + p), Expr.load("vals", var(f"{p}i"))))
        elif values == "iota":
            moves.append(Node.store("vals_out", var("pos" + p), var(f"{p}i")))
        body.append(Node.if_(var(f"{p}ok"), [Node.let("pos" + p, position), *moves]))
    buffers = [BufferDecl.read("keys", 0, U32), BufferDecl.read("offsets", 1, U32),
               BufferDecl.read_write("keys_out", 2, U32)]
    if values == "load":
        buffers.append(BufferDecl.read("vals", len(buffers), U32))
    if values != "none":
        buffers.append(BufferDecl.read_write("vals_out", len(buffers), U32))
    buffers += [_params(len(buffers)), BufferDecl.workgroup("counts", items * WARPS * radix, U32)]
    return Program(buffers, WG_SIZE, body, name=f"lib_radix_scatter_{shift}")


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
