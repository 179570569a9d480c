"""Order-preserving u32 keys of U32, I32 and F32 bit patterns, as IR (used by sort and run-length encoding).

F32 keys give the total order of ``vyre.lib.sort``: -inf < ... < -0.0 < +0.0 < ... < +inf < NaN,
with every NaN mapped to one key (the largest), so NaNs sort last and compare equal.
"""

from __future__ import annotations

from vyre.ir import DataType, Expr

_SIGN, _ABS, _INF_BITS, _ALL = 0x80000000, 0x7FFFFFFF, 0x7F800000, 0xFFFFFFFF
KEY_TYPES = (DataType.U32, DataType.I32, DataType.F32)


def is_nan_bits(bits: Expr) -> Expr:
    return Expr.gt(Expr.bitand(bits, Expr.u32(_ABS)), Expr.u32(_INF_BITS))


def to_key(dtype: DataType, bits: Expr) -> Expr:
    """The u32 key of a value given as its raw 32 bits; unsigned order of keys = sort order."""
    if dtype is DataType.U32:
        return bits
    if dtype is DataType.I32:
        return Expr.bitxor(bits, Expr.u32(_SIGN))
    negative = Expr.ne(Expr.bitand(bits, Expr.u32(_SIGN)), Expr.u32(0))
    ordered = Expr.select(negative, Expr.bitnot(bits), Expr.bitor(bits, Expr.u32(_SIGN)))
    return Expr.select(is_nan_bits(bits), Expr.u32(_ALL), ordered)


def from_key(dtype: DataType, key: Expr) -> Expr:
    """Raw bits back from a key (every F32 NaN comes back as 0x7FFFFFFF)."""
    if dtype is DataType.U32:
        return key
    if dtype is DataType.I32:
        return Expr.bitxor(key, Expr.u32(_SIGN))
    positive = Expr.ne(Expr.bitand(key, Expr.u32(_SIGN)), Expr.u32(0))
    return Expr.select(positive, Expr.bitxor(key, Expr.u32(_SIGN)), Expr.bitnot(key))


def equality_key(dtype: DataType, bits: Expr) -> Expr:
    """Bits with every F32 NaN made one value: equal keys = the same run in run-length encoding."""
    if dtype is DataType.F32:
        return Expr.select(is_nan_bits(bits), Expr.u32(_ALL), bits)
    return bits
