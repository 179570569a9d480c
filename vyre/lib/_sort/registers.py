"""The single-pass radix tile with its keys in registers: each key of the tile is read from global
memory once, into ``k0 .. k{items-1}``, and the early counts, the ranking and the place step all
take it from there (``onesweep.ONESWEEP_KEYS_IN_REGISTERS``).

Key ``j`` of an invocation is element ``tiles.tile_element(seg_base, j, items)`` (warp, round, lane:
the order the ranking needs for a stable sort). Registers cannot be indexed, so the loads and
counts are written out for every key, and the ranking and place steps either are too or take
``rounds`` keys per loop iteration and rotate the registers (``_over_keys``).
"""

from __future__ import annotations

from collections.abc import Callable

from vyre.ir import DataType, Expr, Node
from vyre.lib._sort.tiles import (
    RADIX_BITS,
    SORT_ROUNDS,
    check_rounds,
    digit_of,
    digit_slots,
    place_key,
    rank_key,
    sort_key,
    tile_bits,
    tile_element,
    write_tile,
)
from vyre.lib.blocks import U32, WG, lid, u, var


def key_index(j: int | Expr) -> Expr:
    """The element of the tile that key ``k{j}`` of this invocation holds (``kbase``: ``load_keys``)."""
    return Expr.add(var("kbase"), u(32 * j) if isinstance(j, int) else Expr.mul(j, u(32)))


def load_keys(key_in: DataType | None, items: int, raw: DataType = U32) -> list[Node]:
    """Bind ``k{j}`` (``j < items``) to the sort key of element ``key_index(j)``, all loads in
    flight together; an element at or past ``n`` gets the all-ones key (digit 255 in every pass)
    and is not read. The caller binds ``n``, ``seg_base``, ``limit`` and ``whole`` (a whole tile
    reads without a test per key); binds ``kbase`` (key 0's element) and ``valid`` (the tile's
    elements below ``n``)."""
    check_rounds(items)
    n, tile = var("n"), WG * items
    nodes = [Node.let("kbase", tile_element(var("seg_base"), u(0), items)),
             Node.let("valid", Expr.sub(Expr.min(n, Expr.add(var("seg_base"), u(tile))), Expr.min(n, var("seg_base"))))]
    nodes += tile_bits(key_in, items, var("n"), var("limit"), "k", key_index, var("whole"), raw=raw)
    if key_in is not None:  # the first pass: raw bits to sort keys, once
        nodes += [Node.assign(f"k{j}", sort_key(key_in, var(f"k{j}"))) for j in range(items)]
    return nodes


def _rotated(names: list[str], items: int, rounds: int) -> list[Node]:
    """Move each of the registers ``{name}0 .. {name}{items-1}`` ``rounds`` places down, the first
    ``rounds`` to the end: after ``items / rounds`` such moves every register holds its own again."""
    nodes: list[Node] = []
    for name in names:
        nodes += [Node.let(f"{name}c{r}", var(f"{name}{r}")) for r in range(rounds)]
        nodes += [Node.assign(f"{name}{j}", var(f"{name}{j + rounds}")) for j in range(items - rounds)]
        nodes += [Node.assign(f"{name}{items - rounds + r}", var(f"{name}c{r}")) for r in range(rounds)]
    return nodes


def _over_keys(loop_var: str, items: int, rounds: int, body: Callable[[Expr], list[Node]],
               names: list[str]) -> list[Node]:
    """``body(j0)`` for the keys ``j0 .. j0 + rounds - 1`` of every group of ``rounds``, reading
    keys ``{name}0 .. {name}{rounds-1}`` of each of ``names``: written out once when ``rounds`` is
    ``items``, else a loop of ``items / rounds`` iterations that rotates the registers
    (``_rotated``), so the PTX holds ``rounds`` keys' code, not ``items``'."""
    if rounds == items:
        return body(u(0))
    j0 = Expr.mul(var(loop_var), u(rounds))
    return [Node.loop(loop_var, u(0), u(items // rounds), [*body(j0), *_rotated(names, items, rounds)])]


def radix_tile(shift: int, key_out: DataType | None, values: str, items: int, lookback: list[Node],
               rounds: int, ranks_in_registers: bool, raw: DataType = U32) -> list[Node]:
    """Steps 1-4 of ``tiles.radix_tiles`` for one tile whose sort keys are ``k0 ..`` (after ``load_keys``):
    rank them (the ranks in registers ``rk{j}``, or in the ``ranks`` workgroup buffer), turn the
    warps' counters into slots with ``lookback`` (``digit_slots``), place keys and values (loaded
    or indices) and write the tile out. Ranking and placing take ``rounds`` keys at a time
    (``_over_keys``; ``rounds`` divides ``items`` and ``SORT_ROUNDS`` divides ``rounds``)."""
    check_rounds(items)
    if items % rounds or rounds % SORT_ROUNDS:
        raise ValueError(f"a register tile's rounds ({rounds}) must divide its items ({items}) and be a "
                         f"multiple of SORT_ROUNDS ({SORT_ROUNDS})")
    zero, keys = u(0), ["k", "rk"] if ranks_in_registers else ["k"]

    def ranks_at(j: Expr) -> Expr:
        return Expr.add(Expr.mul(j, u(WG)), lid())

    def rank(j0: Expr) -> list[Node]:
        nodes: list[Node] = []
        for r in range(rounds):
            ranked_nodes, ranked = rank_key(f"r{r}", var(f"k{r}"), shift, zero, raw, bound=True)
            nodes += ranked_nodes
            nodes.append(Node.assign(f"rk{r}", ranked) if ranks_in_registers
                         else Node.store("ranks", ranks_at(Expr.add(j0, u(r))), ranked))
        return nodes

    def place(j0: Expr) -> list[Node]:
        nodes: list[Node] = []
        for g in range(0, rounds, SORT_ROUNDS):  # SORT_ROUNDS values in flight
            group = range(g, g + SORT_ROUNDS)
            if values == "load":
                nodes += [Node.let(f"pv{r}", Expr.load("vals", key_index(Expr.add(j0, u(r))))) for r in group]
            for r in group:
                value = (var(f"pv{r}") if values == "load" else key_index(Expr.add(j0, u(r))) if values == "iota"
                         else None)
                rank = var(f"rk{r}") if ranks_in_registers else Expr.load("ranks", ranks_at(Expr.add(j0, u(r))))
                nodes += place_key(f"{r}", var(f"k{r}"), rank, value, shift, zero, raw)
        return nodes

    nodes: list[Node] = [Node.let("half", zero)]  # one tile: one half of counters (``digit_slots``)
    if ranks_in_registers:
        nodes += [Node.let(f"rk{j}", zero) for j in range(items)]
    nodes += _over_keys("g", items, rounds, rank, keys)
    nodes += [Node.barrier(), *digit_slots(1 << RADIX_BITS, 0, lookback)]
    nodes += _over_keys("h", items, rounds, place, keys)
    return [*nodes, Node.barrier(), write_tile(shift, key_out, values != "none", items, True, raw)]


def key_digits(shift: int, items: int, raw: DataType = U32) -> list[Expr]:
    """The digit at ``shift`` of each key ``k{j}``."""
    return [digit_of(var(f"k{j}"), shift, raw) for j in range(items)]
