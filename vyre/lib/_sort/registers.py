"""The single-pass radix tile with its keys in registers: each key of the tile is read from global
memory once, into ``k[0] .. k[items-1]``, and the early counts, the ranking and the place step
all take it from there (``onesweep.ONESWEEP_KEYS_IN_REGISTERS``); ``@vk.func`` helpers of
``onesweep``'s kernel.

Key ``j`` of an invocation is element ``kbase + 32*j`` of the tile (warp, round, lane: the order
the ranking needs for a stable sort). Registers cannot be indexed at run time, so the loads and
counts are written out for every key, and the ranking and place steps either are too or take
``rounds`` keys per loop iteration and rotate the registers (``rotate``).
"""

from __future__ import annotations

from typing import Annotated, Any

from vyre.frontend import lang as vk
from vyre.frontend.annotations import BY_EXPRESSION
from vyre.lib._sort.tiles import RADIX, SORT_ROUNDS, bits_or_past, check_rounds, digit, rank_of
from vyre.lib.blocks import WG
from vyre.lib.keys import key_of


def check_register_rounds(items: int, rounds: int) -> None:
    """Refuse a register tile whose ``rounds`` keys per loop iteration do not divide its ``items``
    or are not a multiple of ``SORT_ROUNDS`` (the keys placed together)."""
    check_rounds(items)
    if items % rounds or rounds % SORT_ROUNDS:
        raise ValueError(f"a register tile's rounds ({rounds}) must divide its items ({items}) and be a "
                         f"multiple of SORT_ROUNDS ({SORT_ROUNDS})")


@vk.func
def load_keys(keys: Any, k: Any, kbase: Any, n: Any, limit: Any, whole: Any, past: Any,
              kind: Annotated[int, vk.Const[int]], b: Any, items: Annotated[int, vk.Const[int]],
              first: Annotated[bool, vk.Const[bool]]):
    """``k[j]``: the raw bits of element ``kbase + 32*j`` (``j < items``), all loads in flight
    together; at or past ``n`` the bits of the all-ones key (digit 255 in every pass), not read.
    A ``whole`` tile reads without a test per key; on the ``first`` pass the raw bits become sort
    keys (of ``kind``, ``b``), once."""
    for j in range(items):
        k[j] = past
    if whole:
        for j in range(items):
            k[j] = keys[kbase + j * 32]
    else:
        for j in range(items):
            k[j] = bits_or_past(keys, kbase + j * 32, n, limit, past)
    if first:
        for j in range(items):
            k[j] = key_of(k[j], kind, b)


@vk.func
def rotate(regs: Any, saved: Any, items: Annotated[int, vk.Const[int]], rounds: Annotated[int, vk.Const[int]]):
    """Move each of the registers ``regs[0] .. regs[items-1]`` ``rounds`` places down, the first
    ``rounds`` (kept in ``saved``) to the end: after ``items / rounds`` such moves every register
    holds its own again."""
    for r in range(rounds):
        saved[r] = regs[r]
    for j in range(items - rounds):
        regs[j] = regs[j + rounds]
    for r in range(rounds):
        regs[items - rounds + r] = saved[r]


@vk.func
def rank_keys(counts: Any, ranks: Any, k: Any, rk: Any, j0: Annotated[Any, BY_EXPRESSION],
              shift: Annotated[int, vk.Const[int]], wide: Annotated[bool, vk.Const[bool]],
              rounds: Annotated[int, vk.Const[int]], in_registers: Annotated[bool, vk.Const[bool]]):
    """Step 1 for keys ``j0 .. j0 + rounds - 1`` (in ``k[0] ..``): their ranks into ``rk[r]``
    (``in_registers``) or the ``ranks`` workgroup buffer (ballots bound; one tile: one half of counters)."""
    for r in range(rounds):
        if in_registers:
            rk[r] = rank_of(counts, k[r], shift, vk.u32(0), wide, True)
        else:
            ranks[(j0 + r) * WG + vk.lid()] = rank_of(counts, k[r], shift, vk.u32(0), wide, True)


@vk.func
def place_keys(vals: Any, counts: Any, ranks: Any, sorted_keys: Any, sorted_vals: Any, k: Any, rk: Any, pv: Any,
               kbase: Any, j0: Annotated[Any, BY_EXPRESSION], shift: Annotated[int, vk.Const[int]],
               wide: Annotated[bool, vk.Const[bool]], rounds: Annotated[int, vk.Const[int]],
               sort_rounds: Annotated[int, vk.Const[int]], loads: Annotated[bool, vk.Const[bool]],
               moves: Annotated[bool, vk.Const[bool]], in_registers: Annotated[bool, vk.Const[bool]]):
    """Step 3 for keys ``j0 .. j0 + rounds - 1``: each key (and value: loaded, ``sort_rounds`` in
    flight, or the index) stored at its tile slot, the warp's slot of its digit plus its rank."""
    for q in range(rounds // sort_rounds):
        if loads:
            for i in range(sort_rounds):
                pv[q * sort_rounds + i] = vals[kbase + (j0 + (q * sort_rounds + i)) * 32]
        for i in range(sort_rounds):
            key = k[q * sort_rounds + i]
            s = counts[0 + ((vk.lid() >> 5) * RADIX + digit(key, shift, wide))] + (
                rk[q * sort_rounds + i] if in_registers else ranks[(j0 + (q * sort_rounds + i)) * WG + vk.lid()])
            sorted_keys[s] = key
            if moves:
                sorted_vals[s] = pv[q * sort_rounds + i] if loads else kbase + (j0 + (q * sort_rounds + i)) * 32
