"""The radix tile shared by both sort plans: digits, keys past ``n``, peer masks, and the ranking,
placing and writing of a tile (``radix_tiles``) with its buffers (``radix_buffers``).

``raw``: the unsigned type of the sorted keys' bits (U32, or U64 for 64-bit keys: eight passes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from vyre.frontend import lang as vk
from vyre.frontend.annotations import BY_EXPRESSION
from vyre.ir import BufferDecl, DataType, Expr, Node
from vyre.lib.blocks import U32, WARPS, WG, block_scan, exclusive_block_scan, lane, lid, params, u, var, warp
from vyre.lib.keys import from_key, key_of, raw_of, to_key
from vyre.lib.monoid import COUNT

SORT_ROUNDS = 4     # rounds per loop iteration of the radix scatter (written out)
RADIX_BITS = 8
RADIX_PASSES = 32 // RADIX_BITS
RADIX = 1 << RADIX_BITS
RADIX_MASK = RADIX - 1
COUNTERS = WARPS * RADIX  # one half of a tile's digit counters: every warp's, of every digit


def _literal(raw: DataType) -> Callable[[int], Expr]:
    return u if raw is U32 else Expr.u64


def digit_of(key: Expr, shift: int, raw: DataType = U32) -> Expr:
    """The 8-bit digit of ``key`` (of type ``raw``) at ``shift``, as U32."""
    if raw is U32:
        return Expr.bitand(Expr.shr(key, u(shift)), u((1 << RADIX_BITS) - 1))
    return Expr.bitand(Expr.cast(U32, Expr.shr(key, u(shift))), u((1 << RADIX_BITS) - 1))


@vk.func
def digit(key: Annotated[Any, BY_EXPRESSION], shift: Annotated[int, vk.Const[int]],
          wide: Annotated[bool, vk.Const[bool]]):
    """``digit_of`` in a kernel: the 8-bit digit of ``key`` (64 bits when ``wide``) at ``shift``, as U32."""
    return (vk.u32(key >> shift) if wide else key >> shift) & RADIX_MASK


def past_bits(key_type: DataType | None, raw: DataType = U32) -> int:
    """The raw bits ``tile_bits`` gives an element at or past ``n``: their sort key is all ones."""
    ones = (1 << 8 * raw.size) - 1
    return ones if key_type in (None, U32, DataType.U64) else ones >> 1  # signed max; a float NaN


@vk.func
def bits_or_past(keys: Any, i: Annotated[Any, BY_EXPRESSION], n: Annotated[Any, BY_EXPRESSION],
                 limit: Annotated[Any, BY_EXPRESSION], past: Any):
    """``tile_bits``' element in a kernel: the raw bits of ``keys[i]``, or ``past`` at or past ``n``
    (not read at or past ``limit``)."""
    return vk.select(i < n, keys[vk.select(i < limit, i, 0xFFFFFFFF)], past)


@vk.func
def peers_of(d: Any, bits: Annotated[int, vk.Const[int]], bound: Annotated[bool, vk.Const[bool]]):
    """``peer_mask`` in a kernel: the lanes of this subgroup whose digit ``d`` is the same (one
    ballot per digit bit, of ``bits``; ``bound``: each bit's test and ballot bound once)."""
    m = 0xFFFFFFFF
    for bit in range(bits):
        if bound:
            has = (d & (1 << bit)) != 0
            votes = vk.subgroup_ballot(has)
            m = m & vk.select(has, votes, ~votes)
        else:
            m = m & vk.select((d & (1 << bit)) != 0, vk.subgroup_ballot((d & (1 << bit)) != 0),
                              ~vk.subgroup_ballot((d & (1 << bit)) != 0))
    return m


@vk.func
def element_at(base: Annotated[Any, BY_EXPRESSION], j: Annotated[Any, BY_EXPRESSION],
               items: Annotated[int, vk.Const[int]]):
    """``tile_element`` in a kernel: round ``j`` of this invocation in the tile at ``base``."""
    return base + ((vk.lid() >> 5) * (32 * items) + (j * 32 + vk.subgroup_local_id()))


@vk.func
def round_slot(h: Any, r: Annotated[int, vk.Const[int]], rounds: Annotated[int, vk.Const[int]]):
    """The tile slot of round ``r`` of loop iteration ``h`` (``rounds`` per iteration) of this invocation."""
    return (h * rounds + r) * WG + vk.lid()


@vk.func
def rank_of(counts: Any, key: Annotated[Any, BY_EXPRESSION], shift: Annotated[int, vk.Const[int]],
            half: Annotated[Any, BY_EXPRESSION], wide: Annotated[bool, vk.Const[bool]],
            bound: Annotated[bool, vk.Const[bool]]):
    """``rank_key`` in a kernel: count the warp's lanes whose digit of ``key`` is this one's in the
    warp's counter of that digit (from ``half``); the key's rank among them."""
    d = digit(key, shift, wide)
    peers = peers_of(d, RADIX_BITS, bound)
    old = counts[half + ((vk.lid() >> 5) * RADIX + d)]
    counts[half + ((vk.lid() >> 5) * RADIX + d)] = old + vk.popcount(peers)
    return old + vk.popcount(peers & ((1 << vk.subgroup_local_id()) - 1))


@vk.func
def tile_count(counts: Any, half: Annotated[Any, BY_EXPRESSION], halves: Annotated[bool, vk.Const[bool]],
               warps: Annotated[int, vk.Const[int]]):
    """Step 2's count of digit ``t`` in the tile: the ``warps`` warps' counters in the current half
    of ``counts`` (from ``half``); with ``halves``, the other half's counters zeroed."""
    total = 0
    for v in range(warps):
        total = total + counts[half + (v * RADIX + vk.lid())]
        if halves:
            counts[COUNTERS - half + (v * RADIX + vk.lid())] = 0
    return total


@vk.func
def tile_slots(counts: Any, shifts: Any, sums: Any, w: Any, run: Any, total: Any,
               half: Annotated[Any, BY_EXPRESSION], running: Annotated[bool, vk.Const[bool]],
               warps: Annotated[int, vk.Const[int]]):
    """The rest of step 2 (``digit_slots``): a workgroup scan over digits gives where digit ``t``
    starts in the tile; ``shifts[t]`` moves a tile slot to its output position (from ``run[0]``,
    which goes on by ``total`` when ``running``); each warp's counter becomes its first slot."""
    start = exclusive_block_scan(total, sums, w, COUNT)
    slot = start
    shifts[vk.lid()] = run[0] - slot
    if running:
        run[0] = run[0] + total
    for v in range(warps):  # read again rather than held in registers across the scan
        c = counts[half + (v * RADIX + vk.lid())]
        counts[half + (v * RADIX + vk.lid())] = slot
        slot = slot + c
    vk.barrier()


@vk.func
def write_key(sorted_keys: Any, shifts: Any, keys_out: Any, o: Any, pos: Any, h: Any,
              r: Annotated[int, vk.Const[int]], rounds: Annotated[int, vk.Const[int]], valid: Any,
              checked: Annotated[bool, vk.Const[bool]], shift: Annotated[int, vk.Const[int]],
              wide: Annotated[bool, vk.Const[bool]], kind: Annotated[int, vk.Const[int]], b: Any):
    """Step 4 for round ``r``: read slot ``round_slot(h, r)`` of the placed tile into ``o[r]`` and
    write it (its raw bits: ``kind``, ``b``) to ``slot + shifts[digit]``, ``pos[r]``; ``checked``:
    not at or past ``valid``."""
    o[r] = sorted_keys[round_slot(h, r, rounds)]
    if checked:
        pos[r] = vk.select(round_slot(h, r, rounds) < valid,
                           round_slot(h, r, rounds) + shifts[digit(o[r], shift, wide)], 0xFFFFFFFF)
    else:
        pos[r] = round_slot(h, r, rounds) + shifts[digit(o[r], shift, wide)]
    keys_out[pos[r]] = raw_of(o[r], kind, b)


@vk.func
def load_group(keys: Any, dst: Any, seg_base: Any, q: Annotated[Any, BY_EXPRESSION], n: Any, limit: Any,
               whole: Annotated[Any, BY_EXPRESSION], past: Any, items: Annotated[int, vk.Const[int]],
               rounds: Annotated[int, vk.Const[int]], one_tile: Annotated[bool, vk.Const[bool]],
               declare: Annotated[bool, vk.Const[bool]]):
    """``dst[r]``: the raw bits of round ``r`` of loop iteration ``q`` (``bits_or_past``). Over a
    segment (``seg_base``, ``items // rounds`` iterations per tile), or with ``one_tile`` the tile
    at ``seg_base``, whose iterations past it (loaded ahead) are not read, and which a ``whole``
    tile reads without tests (then ``declare``: the registers are declared first)."""
    if one_tile:
        if declare:
            for r in range(rounds):
                dst[r] = past
        if whole and q < items // rounds:
            for r in range(rounds):
                dst[r] = keys[element_at(seg_base, q * rounds + r, items)]
        else:
            for r in range(rounds):
                dst[r] = bits_or_past(keys, element_at(seg_base, q * rounds + r, items), n,
                                      vk.select(q < items // rounds, limit, 0), past)
    else:
        for r in range(rounds):
            dst[r] = bits_or_past(keys, element_at(seg_base + q // (items // rounds) * (WG * items),
                                                   q % (items // rounds) * rounds + r, items), n, limit, past)


@vk.func
def rank_tile(keys: Any, counts: Any, ranks: Any, a: Any, b: Any, cur: Any, seg_base: Any, t: Any, n: Any,
              limit: Any, whole: Annotated[Any, BY_EXPRESSION], past: Any, half: Any,
              kind: Annotated[int, vk.Const[int]], bk: Any, shift: Annotated[int, vk.Const[int]],
              wide: Annotated[bool, vk.Const[bool]], items: Annotated[int, vk.Const[int]],
              rounds: Annotated[int, vk.Const[int]], one_tile: Annotated[bool, vk.Const[bool]]):
    """Step 1 of tile ``t``: rank its keys (sort keys of kind ``kind``, ``bk``), ``rounds`` per loop
    iteration, the ranks into ``ranks``; the raw bits of the next two iterations wait in ``a`` and
    ``b`` (``load_group``), so loads run two iterations ahead."""
    for g in range(vk.u32(items // rounds)):
        for r in range(rounds):
            cur[r] = a[r]
        for r in range(rounds):
            a[r] = b[r]
        load_group(keys, b, seg_base, t * (items // rounds) + g + 2, n, limit, whole, past, items, rounds, one_tile,
                   False)
        for r in range(rounds):
            ranks[round_slot(g, r, rounds)] = rank_of(counts, key_of(cur[r], kind, bk), shift, half, wide, False)
    vk.barrier()


@vk.func
def place_tile(keys: Any, vals: Any, counts: Any, ranks: Any, sorted_keys: Any, sorted_vals: Any, p: Any, pv: Any,
               tb: Any, n: Any, past: Any, half: Any, kind: Annotated[int, vk.Const[int]], bk: Any,
               shift: Annotated[int, vk.Const[int]], wide: Annotated[bool, vk.Const[bool]],
               items: Annotated[int, vk.Const[int]],
               rounds: Annotated[int, vk.Const[int]], loads: Annotated[bool, vk.Const[bool]],
               moves: Annotated[bool, vk.Const[bool]]):
    """Step 3 of the tile at ``tb``: its keys read again (just read, so from cache) and values
    (loaded, or the index) stored at their tile slots, ``rounds`` per loop iteration."""
    for h in range(vk.u32(items // rounds)):
        for r in range(rounds):  # a whole-tile branch here measured slower
            p[r] = bits_or_past(keys, element_at(tb, h * rounds + r, items), n, n, past)
        if loads:
            for r in range(rounds):
                pv[r] = vals[element_at(tb, h * rounds + r, items)]
        for r in range(rounds):
            k = key_of(p[r], kind, bk)
            s = counts[half + ((vk.lid() >> 5) * RADIX + digit(k, shift, wide))] + ranks[round_slot(h, r, rounds)]
            sorted_keys[s] = k
            if moves:
                sorted_vals[s] = pv[r] if loads else element_at(tb, h * rounds + r, items)
    vk.barrier()


@vk.func
def write_rounds(sorted_keys: Any, sorted_vals: Any, shifts: Any, keys_out: Any, vals_out: Any, o: Any, pos: Any,
                 h: Any, valid: Any, checked: Annotated[bool, vk.Const[bool]], shift: Annotated[int, vk.Const[int]],
                 wide: Annotated[bool, vk.Const[bool]], kind: Annotated[int, vk.Const[int]], b: Any,
                 rounds: Annotated[int, vk.Const[int]], moves: Annotated[bool, vk.Const[bool]]):
    """Step 4 for loop iteration ``h``: ``write_key`` of each round, and its value."""
    for r in range(rounds):
        write_key(sorted_keys, shifts, keys_out, o, pos, h, r, rounds, valid, checked, shift, wide, kind, b)
        if moves:
            vals_out[pos[r]] = sorted_vals[round_slot(h, r, rounds)]


@vk.func
def write_out(sorted_keys: Any, sorted_vals: Any, shifts: Any, keys_out: Any, vals_out: Any, o: Any, pos: Any,
               valid: Any, whole: Annotated[Any, BY_EXPRESSION], one_tile: Annotated[bool, vk.Const[bool]],
               shift: Annotated[int, vk.Const[int]], wide: Annotated[bool, vk.Const[bool]],
               kind: Annotated[int, vk.Const[int]], b: Any, items: Annotated[int, vk.Const[int]],
               rounds: Annotated[int, vk.Const[int]], moves: Annotated[bool, vk.Const[bool]]):
    """Step 4: invocation ``t`` writes slots ``j*WG + t`` of the placed tile to ``slot + shifts[digit]``
    (values too), none at or past ``valid``; with ``one_tile``, a ``whole`` tile without that test."""
    for h in range(vk.u32(items // rounds)):
        for r in range(rounds):
            o[r] = 0
            pos[r] = 0
        if one_tile:
            if whole:
                write_rounds(sorted_keys, sorted_vals, shifts, keys_out, vals_out, o, pos, h, valid, False, shift,
                             wide, kind, b, rounds, moves)
            else:
                write_rounds(sorted_keys, sorted_vals, shifts, keys_out, vals_out, o, pos, h, valid, True, shift,
                             wide, kind, b, rounds, moves)
        else:
            write_rounds(sorted_keys, sorted_vals, shifts, keys_out, vals_out, o, pos, h, valid, True, shift, wide,
                         kind, b, rounds, moves)


def sort_key(dtype: DataType | None, bits: Expr) -> Expr:
    """Pass 0 reads the caller's raw keys (``dtype``); later passes read keys already transformed."""
    return bits if dtype is None else to_key(dtype, bits)


def tile_bits(key_type: DataType | None, items: int, n: Expr, limit: Expr, prefix: str,
               index: Callable[[int], Expr], whole: Expr | None = None, declare: bool = True,
               raw: DataType = U32) -> list[Node]:
    """Bind ``{prefix}{k}`` to the raw bits (``raw``) of element ``index(k)``; at or past ``n``, to
    bits whose sort key is all ones (digit 255 in every pass). Elements at or past ``limit`` are not read.

    ``whole``: a condition, the same for the whole workgroup, under which every element is below
    ``n`` and ``limit``; then the elements are read without those two tests per element (a radix
    tile is whole but for the last one). ``declare=False`` assigns variables declared already."""
    past, lit = past_bits(key_type, raw), _literal(raw)
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


def peer_mask(digit: Expr, prefix: str, bound: bool = False) -> tuple[list[Node], Expr]:
    """Lanes of this subgroup holding the same digit: a u32 lane mask, from one ballot per digit bit.
    ``bound``: each bit's test and ballot bound once (PTX of one ballot per bit, not three tests
    and two ballots, which ptxas merges: the same machine code in fewer PTX instructions)."""
    nodes = [Node.let(f"{prefix}m", u(0xFFFFFFFF))]
    for bit in range(RADIX_BITS):
        has = Expr.ne(Expr.bitand(digit, u(1 << bit)), u(0))
        if bound:
            nodes.append(Node.let(f"{prefix}h{bit}", has))
            has = var(f"{prefix}h{bit}")
        votes = Expr.subgroup_ballot(has)
        if bound:
            nodes.append(Node.let(f"{prefix}v{bit}", votes))
            votes = var(f"{prefix}v{bit}")
        same = Expr.select(has, votes, Expr.bitnot(votes))
        nodes.append(Node.assign(f"{prefix}m", Expr.bitand(var(f"{prefix}m"), same)))
    return nodes, var(f"{prefix}m")


def radix_passes(raw: DataType) -> int:
    """The 8-bit digit passes of keys whose bits are ``raw`` (4 for U32, 8 for U64)."""
    return 8 * raw.size // RADIX_BITS


def digit_slots(radix: int, half: int, lookback: list[Node] | None) -> list[Node]:
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
    nodes, (start,) = block_scan(COUNT, [var("total")], u(0), False, "sums", "s")
    step += nodes
    step += [Node.let("slot", start), Node.store("shift", lid(), Expr.sub(var("run"), var("slot")))]
    if lookback is None:
        step.append(Node.assign("run", Expr.add(var("run"), var("total"))))
    for v in range(WARPS):  # read again rather than held in registers across the scan
        step += [Node.let(f"c{v}", Expr.load("counts", counter(v))), Node.store("counts", counter(v), var("slot")),
                 Node.assign("slot", Expr.add(var("slot"), var(f"c{v}")))]
    return [*step, Node.barrier()]


def check_rounds(items: int) -> None:
    """Refuse ``items`` keys per invocation that ``SORT_ROUNDS`` (the rounds written out per loop
    iteration of the place and write steps) does not divide."""
    if items % SORT_ROUNDS:
        raise ValueError(f"a radix tile's items ({items}) must be a multiple of SORT_ROUNDS ({SORT_ROUNDS})")


def tile_element(base: Expr, j: Expr, items: int) -> Expr:
    """Round ``j`` of this invocation in the tile at ``base``: warp ``v`` owns the ``32 * items``
    elements from ``v * 32 * items`` and takes them 32 at a time, so element order is warp, round, lane."""
    return Expr.add(base, Expr.add(Expr.mul(warp(), u(32 * items)), Expr.add(Expr.mul(j, u(32)), lane())))


def _counter(half: Expr, digit: Expr) -> Expr:
    """This warp's counter of ``digit`` in the ``counts`` half from ``half``."""
    return Expr.add(half, Expr.add(Expr.mul(warp(), u(1 << RADIX_BITS)), digit))


def rank_key(p: str, key: Expr, shift: int, half: Expr, raw: DataType = U32, bound: bool = False
             ) -> tuple[list[Node], Expr]:
    """Step 1 for one round: the warp's lanes holding the sort key ``key``'s digit at ``shift`` find
    each other (8 ballots; ``bound``: see ``peer_mask``) and add their number to the warp's counter
    of that digit; returns the nodes (binding names from ``p``) and the key's rank among the warp's
    equal digits."""
    lower_lanes = Expr.sub(Expr.shl(u(1), lane()), u(1))
    nodes = [Node.let(f"{p}d", digit_of(key, shift, raw))]
    peer_nodes, peers = peer_mask(var(f"{p}d"), p, bound)
    cell = _counter(half, var(f"{p}d"))
    nodes += peer_nodes
    nodes += [Node.let(f"{p}old", Expr.load("counts", cell)),
              Node.store("counts", cell, Expr.add(var(f"{p}old"), Expr.popcount(peers)))]
    return nodes, Expr.add(var(f"{p}old"), Expr.popcount(Expr.bitand(peers, lower_lanes)))


def place_key(tag: str, key: Expr, rank: Expr, value: Expr | None, shift: int, half: Expr,
              raw: DataType = U32) -> list[Node]:
    """Step 3 for one key: store the sort key ``key`` (and ``value``) at its tile slot, the warp's
    slot of its digit (step 2) plus ``rank`` (binds ``pk{tag}``, ``ps{tag}``)."""
    cell = _counter(half, digit_of(var(f"pk{tag}"), shift, raw))
    nodes = [Node.let(f"pk{tag}", key), Node.let(f"ps{tag}", Expr.add(Expr.load("counts", cell), rank)),
             Node.store("sorted_keys", var(f"ps{tag}"), var(f"pk{tag}"))]
    if value is not None:
        nodes.append(Node.store("sorted_vals", var(f"ps{tag}"), value))
    return nodes


def write_tile(shift: int, key_out: DataType | None, moves_values: bool, items: int, whole: bool,
               raw: DataType = U32) -> Node:
    """Step 4: invocation ``t`` reads slots ``j*WG + t`` of the placed tile and writes each to
    ``slot + shift[digit]`` (values too); slots at or past ``valid`` are not written. ``whole``:
    in a whole tile (``var("whole")``) without that test per slot."""
    def write(checked: bool) -> list[Node]:
        nodes: list[Node] = []
        for r in range(SORT_ROUNDS):
            slot = Expr.add(Expr.mul(_round_of("h", r), u(WG)), lid())
            pos = Expr.add(slot, Expr.load("shift", digit_of(var(f"o{r}"), shift, raw)))
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
    written += [Node.if_(var("whole"), write(False), write(True))] if whole else write(True)
    return Node.loop("h", u(0), u(items // SORT_ROUNDS), written)


def _round_of(loop_var: str, r: int) -> Expr:
    """Round ``r`` of loop iteration ``loop_var`` (``SORT_ROUNDS`` rounds per iteration)."""
    return Expr.add(Expr.mul(var(loop_var), u(SORT_ROUNDS)), u(r))


def radix_tiles(shift: int, key_in: DataType | None, key_out: DataType | None, values: str, items: int,
                 tiles: Expr, lookback: list[Node] | None, raw: DataType = U32) -> list[Node]:
    """Steps 1-4 of ``radix_scatter`` over ``tiles`` tiles from ``seg_base``. The caller binds
    ``n``, ``seg_base``, ``limit`` (no key at or past it is read) and, without ``lookback``,
    ``run``. With ``lookback`` (see ``digit_slots``) the workgroup ranks one tile, so its
    counters have one half. ``raw``: the keys' bits (U32 or U64)."""
    check_rounds(items)
    radix, tile, loops = 1 << RADIX_BITS, WG * items, items // SORT_ROUNDS
    half = WARPS * radix if lookback is None else 0
    moves_values = values != "none"
    n = var("n")

    def element(base: Expr, j: Expr) -> Expr:  # round j of this invocation in the tile at base
        return tile_element(base, j, items)

    def group(q: Expr, prefix: str, declare: bool = True) -> list[Node]:  # loop iteration q of the segment
        if lookback is None:
            base, j0 = (Expr.add(var("seg_base"), Expr.mul(Expr.div(q, u(loops)), u(tile))),
                        Expr.mul(Expr.rem(q, u(loops)), u(SORT_ROUNDS)))
            limit, whole = var("limit"), None
        else:  # one tile: the groups the last iterations load ahead are past it, so not read
            base, j0, inside = var("seg_base"), Expr.mul(q, u(SORT_ROUNDS)), Expr.lt(q, u(loops))
            limit, whole = Expr.select(inside, var("limit"), u(0)), Expr.and_(var("whole"), inside)
        return tile_bits(key_in, SORT_ROUNDS, n, limit, prefix, lambda r: element(base, Expr.add(j0, u(r))),
                          whole, declare, raw)

    body = group(u(0), "a") + group(u(1), "b")
    # step 1: rank, loop iteration g of tile t being group q of the segment; loads run two groups ahead
    q = Expr.add(Expr.mul(var("t"), u(loops)), var("g"))
    rank: list[Node] = [Node.let(f"cur{r}", var(f"a{r}")) for r in range(SORT_ROUNDS)]
    rank += [Node.assign(f"a{r}", var(f"b{r}")) for r in range(SORT_ROUNDS)]
    rank += group(Expr.add(q, u(2)), "b", declare=False)
    for r in range(SORT_ROUNDS):
        nodes, ranked = rank_key(f"r{r}", sort_key(key_in, var(f"cur{r}")), shift, var("half"), raw)
        rank += [*nodes, Node.store("ranks", Expr.add(Expr.mul(_round_of("g", r), u(WG)), lid()), ranked)]
    step: list[Node] = [Node.let("tb", Expr.add(var("seg_base"), Expr.mul(var("t"), u(tile)))),
                        Node.let("valid", Expr.sub(Expr.min(n, Expr.add(var("tb"), u(tile))), Expr.min(n, var("tb")))),
                        Node.let("half", Expr.mul(Expr.bitand(var("t"), u(1)), u(half))),
                        Node.loop("g", u(0), u(loops), rank), Node.barrier()]
    step += digit_slots(radix, half, lookback)
    # step 3: keys read again (they were just read, so from cache) and placed at their slots, values too
    def placed(r: int) -> Expr:  # the element of round r of loop iteration h
        return element(var("tb"), _round_of("h", r))

    place = tile_bits(key_in, SORT_ROUNDS, n, n, "p", placed, raw=raw)  # a whole-tile branch here measured slower
    if values == "load":
        place += [Node.let(f"pv{r}", Expr.load("vals", placed(r))) for r in range(SORT_ROUNDS)]
    for r in range(SORT_ROUNDS):
        value = (var(f"pv{r}") if values == "load" else placed(r)) if moves_values else None
        place += place_key(f"{r}", sort_key(key_in, var(f"p{r}")),
                           Expr.load("ranks", Expr.add(Expr.mul(_round_of("h", r), u(WG)), lid())), value, shift,
                           var("half"), raw)
    step += [Node.loop("h", u(0), u(loops), place), Node.barrier()]
    step.append(write_tile(shift, key_out, moves_values, items, lookback is not None, raw))
    return [*body, Node.loop("t", u(0), tiles, step)]


def radix_buffers(second: BufferDecl, values: str, items: int, halves: int, more: tuple[str, ...] = (),
                   raw: DataType = U32, value_raw: DataType = U32, ranks: bool = True) -> list[BufferDecl]:
    """The buffers of a radix scatter: keys, ``second`` (binding 1), keys_out, values, params, the
    u32 ``read_write`` buffers named in ``more``, then workgroup memory. ``raw``/``value_raw``:
    the bits of keys and of loaded values (U32 or U64); ``ranks=False``: no ``ranks`` buffer (the
    ranks stay in registers)."""
    radix, tile = 1 << RADIX_BITS, WG * items
    value_raw = value_raw if values == "load" else U32  # "iota": u32 indices
    buffers = [BufferDecl.read("keys", 0, raw), second, BufferDecl.read_write("keys_out", 2, raw)]
    if values == "load":
        buffers.append(BufferDecl.read("vals", len(buffers), value_raw))
    if values != "none":
        buffers.append(BufferDecl.read_write("vals_out", len(buffers), value_raw))
    buffers.append(params(len(buffers)))
    buffers += [BufferDecl.read_write(name, len(buffers) + j, U32) for j, name in enumerate(more)]
    buffers += [BufferDecl.workgroup("counts", halves * WARPS * radix, DataType.U16),
                BufferDecl.workgroup("shift", radix, U32), BufferDecl.workgroup("sums", WARPS, U32),
                *([BufferDecl.workgroup("ranks", tile, DataType.U16)] if ranks else []),
                BufferDecl.workgroup("sorted_keys", tile, raw)]
    if values != "none":
        buffers.append(BufferDecl.workgroup("sorted_vals", tile, value_raw))
    return buffers
