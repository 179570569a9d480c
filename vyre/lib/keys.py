"""Order-preserving unsigned keys of integer and float bit patterns (used by sort and run-length
encoding): u32 keys of U32, I32 and F32, u64 keys of U64, I64 and F64, as ``@vk.func`` helpers
(``key_of``, ``raw_of``); the equality keys of run-length encoding as IR (``equality_key``).

Float keys give the total order of ``vyre.lib.sort``: -inf < ... < -0.0 < +0.0 < ... < +inf < NaN,
with every NaN mapped to one key (the largest), so NaNs sort last and compare equal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from vyre.frontend import lang as vk
from vyre.frontend.annotations import BY_EXPRESSION
from vyre.ir import DataType, Expr

KEY_TYPES = (DataType.U32, DataType.I32, DataType.F32)
WIDE_KEY_TYPES = (DataType.U64, DataType.I64, DataType.F64)
_FLOATS = (DataType.F32, DataType.F64)


def _bits(dtype: DataType) -> tuple[int, Callable[[int], Expr]]:
    """The width in bits of ``dtype``'s keys and the literal of that unsigned type."""
    return (64, Expr.u64) if dtype.size == 8 else (32, Expr.u32)


def raw_type(dtype: DataType) -> DataType:
    """The unsigned type that moves ``dtype``'s raw bits (U64 for 8-byte types, else U32)."""
    return DataType.U64 if dtype.size == 8 else DataType.U32


def _constants(dtype: DataType) -> tuple[Callable[[int], Expr], int, int, int, int]:
    """literal, sign bit, magnitude mask, infinity's bits, all ones at the width of ``dtype``."""
    width, lit = _bits(dtype)
    sign = 1 << (width - 1)
    inf = 0x7F800000 if width == 32 else 0x7FF0000000000000
    return lit, sign, sign - 1, inf, (1 << width) - 1


@dataclass(frozen=True)
class KeyBits:
    """The constants of ``equality_key`` at one width, as numbers a ``@vk.kernel`` reads (``b.inf``)."""

    magnitude: int
    inf: int
    ones: int
    sign: int


def key_bits(dtype: DataType) -> KeyBits:
    _, sign, magnitude, inf, ones = _constants(dtype)
    return KeyBits(magnitude, inf, ones, sign)


def is_nan_bits(bits: Expr, dtype: DataType = DataType.F32) -> Expr:
    lit, _, magnitude, inf, _ = _constants(dtype)
    return Expr.gt(Expr.bitand(bits, lit(magnitude)), lit(inf))


def equality_key(dtype: DataType, bits: Expr) -> Expr:
    """Bits with every float NaN made one value: equal keys = the same run in run-length encoding."""
    if dtype in _FLOATS:
        lit, _, _, _, ones = _constants(dtype)
        return Expr.select(is_nan_bits(bits, dtype), lit(ones), bits)
    return bits


# ---- the same, as @vk.func helpers: a key kind (a Const) and the KeyBits of its width ----
KEY_UNSIGNED, KEY_SIGNED, KEY_FLOAT = 0, 1, 2


def key_kind(dtype: DataType | None) -> int:
    """``dtype``'s kind of key (``KEY_UNSIGNED`` for None: bits that are keys already)."""
    if dtype in (DataType.I32, DataType.I64):
        return KEY_SIGNED
    return KEY_FLOAT if dtype in _FLOATS else KEY_UNSIGNED


def transformed(dtype: DataType | None) -> DataType | None:
    """``dtype`` where its keys differ from its raw bits, else None (unsigned types): one kernel
    factory argument per distinct kernel, so each kernel has one specialisation cache key."""
    return None if key_kind(dtype) == KEY_UNSIGNED else dtype


@vk.func
def key_of(bits: Annotated[Any, BY_EXPRESSION], kind: Annotated[int, vk.Const[int]], b: Any):
    """The key of a value given as its raw bits ``bits`` (``b``: their KeyBits); unsigned order of
    keys = sort order. ``bits`` is passed by expression: written at each use."""
    return (bits if kind == KEY_UNSIGNED else bits ^ b.sign if kind == KEY_SIGNED else
            vk.select((bits & b.magnitude) > b.inf, b.ones, vk.select((bits & b.sign) != 0, ~bits, bits | b.sign)))


@vk.func
def raw_of(key: Annotated[Any, BY_EXPRESSION], kind: Annotated[int, vk.Const[int]], b: Any):
    """Raw bits back from a key (every float NaN comes back as 0x7FFFFFFF, or 0x7FFFFFFFFFFFFFFF for F64)."""
    return (key if kind == KEY_UNSIGNED else key ^ b.sign if kind == KEY_SIGNED else
            vk.select((key & b.sign) != 0, key ^ b.sign, ~key))
