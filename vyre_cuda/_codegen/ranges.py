"""Upper bounds of U32 values, so that a workgroup-memory access whose index is proven below the
buffer's (static) count is emitted without its bounds guard.

Every load, store and atomic on a buffer is guarded (``setp.lt.u32`` and a predicate) so that no
program can reach outside its buffers. For workgroup memory the count is a constant, and many
indices are built from values whose range is known: the local id (below the workgroup size the
kernel is emitted for, the only size it is launched with), the lane, literals, masks and shifts,
loop counters. Where the largest value such an index can take is below the count, the guard
cannot fail and is left out; every other access keeps it. The rules follow the IR's U32
semantics (``docs/semantics.md``): integers wrap, so a sum or product that could pass ``2**32 - 1`` gives no bound.
"""

from __future__ import annotations

from collections.abc import Callable

from vyre.ir.op import Op

U32_MAX = 0xFFFFFFFF


def _ones_to(x: int) -> int:
    """All bits up to ``x``'s highest set bit: a bound of ``a | b`` and ``a ^ b`` for ``a, b <= x``."""
    return (1 << x.bit_length()) - 1


def _capped(x: int) -> int:
    """``x`` if it fits 32 bits, else no bound (the U32 result may have wrapped)."""
    return x if x <= U32_MAX else U32_MAX


def _shr(a: int, b: int, k: int | None) -> int:
    return a >> (k & 31) if k is not None else a  # a logical shift right never grows its operand


def _shl(a: int, b: int, k: int | None) -> int:
    return _capped(a << (k & 31)) if k is not None else U32_MAX


def _div(a: int, b: int, k: int | None) -> int:
    return a // k if k else U32_MAX  # x / 0 is all ones


def _rem(a: int, b: int, k: int | None) -> int:
    return min(a, max(b - 1, 0))  # below the divisor; x % 0 is 0


#: ``(a, b, k) -> bound`` of a U32 binary op whose operands are at most ``a`` and ``b`` (``k``: the
#: second operand's value when it is a literal, else None)
BINARY: dict[Op, Callable[[int, int, int | None], int]] = {
    Op.ADD: lambda a, b, k: _capped(a + b),
    Op.MUL: lambda a, b, k: _capped(a * b),
    Op.DIV: _div,
    Op.REM: _rem,
    Op.BITAND: lambda a, b, k: min(a, b),
    Op.BITOR: lambda a, b, k: _ones_to(max(a, b)),
    Op.BITXOR: lambda a, b, k: _ones_to(max(a, b)),
    Op.SHL: _shl,
    Op.SHR: _shr,
    Op.MIN: lambda a, b, k: min(a, b),
    Op.MAX: lambda a, b, k: max(a, b),
    Op.ABS_DIFF: lambda a, b, k: max(a, b),
    Op.SATURATING_ADD: lambda a, b, k: _capped(a + b),
    Op.SATURATING_SUB: lambda a, b, k: a,
    Op.SATURATING_MUL: lambda a, b, k: _capped(a * b),
    Op.MUL_HIGH: lambda a, b, k: (a * b) >> 32,
}

#: bounds of U32 unary ops, whatever their operand
UNARY: dict[Op, int] = {Op.POPCOUNT: 32, Op.CLZ: 32, Op.CTZ: 32}


def binary_bound(op: Op, a: int, b: int, k: int | None) -> int:
    """The largest value of U32 ``op(x, y)`` for ``x <= a``, ``y <= b`` (``y == k`` when ``k`` is
    not None); ``U32_MAX`` where no rule applies."""
    rule = BINARY.get(op)
    return U32_MAX if rule is None else rule(a, b, k)


def unary_bound(op: Op) -> int:
    """The largest value of U32 ``op(x)``, whatever ``x``."""
    return UNARY.get(op, U32_MAX)
