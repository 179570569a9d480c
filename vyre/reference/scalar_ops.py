"""Lane-wise semantics of every binary and unary op, and of casts (docs/semantics.md).

Lane values are numpy arrays (or numpy scalars for uniform values) of ``uint32`` (U32),
``int32`` (I32), ``float32`` (F32) or ``bool_`` (BOOL); the numpy dtype is the IR type.
Callers run these under ``np.errstate(all="ignore")``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from vyre.ir.types import DataType
from vyre.reference import floats as f

U32, I32, F32, BOOL = np.dtype(np.uint32), np.dtype(np.int32), np.dtype(np.float32), np.dtype(np.bool_)
LANE_DTYPE: dict[DataType, np.dtype] = {DataType.U32: U32, DataType.I32: I32, DataType.F32: F32, DataType.BOOL: BOOL}
_LIMITS = {U32: (0, 0xFFFFFFFF), I32: (-(2**31), 2**31 - 1)}
_M1, _M2, _M4 = np.uint32(0x55555555), np.uint32(0x33333333), np.uint32(0x0F0F0F0F)

Lanes = np.ndarray
BinaryFn = Callable[[Lanes, Lanes], Lanes]
UnaryFn = Callable[[Lanes], Lanes]


#: most lanes for which ``spread`` copies a uniform value (a copy is faster to make than a broadcast view)
_SPREAD_COPY = 1 << 16


def spread(x: Lanes, lanes: int) -> np.ndarray:
    """``x`` with one value per lane: a lane array as it is, a uniform scalar repeated (read it only)."""
    if isinstance(x, np.ndarray) and x.shape == (lanes,):
        return x
    if lanes <= _SPREAD_COPY:
        return np.full(lanes, x)
    return np.broadcast_to(x, (lanes,))


def _u(x: Lanes) -> Lanes:
    """The 32 bits of an integer lane value as uint32."""
    return x.view(np.uint32) if x.dtype == I32 else x


def _back(x: Lanes, dtype: np.dtype) -> Lanes:
    """Reinterpret uint32 bits as ``dtype`` (U32 or I32)."""
    return x.view(dtype) if dtype == I32 else x


def _wide(x: Lanes) -> Lanes:
    return x.astype(np.int64)


def _clamp_to(x: Lanes, dtype: np.dtype) -> Lanes:
    lo, hi = _LIMITS[dtype]
    return np.clip(x, lo, hi).astype(dtype)


# ---- integers -----------------------------------------------------------------------------------
def _div(a: Lanes, b: Lanes) -> Lanes:
    if a.dtype == F32:
        return a / b
    zero = b == 0
    if a.dtype == U32:
        return np.where(zero, np.uint32(0xFFFFFFFF), a // np.where(zero, np.uint32(1), b)).astype(U32)
    q = _trunc_div(_wide(a), _wide(np.where(zero, np.int32(1), b)))
    return np.where(zero, np.int64(-1), q).astype(I32)  # MIN / -1 = 2**31 wraps to MIN


def _trunc_div(a: Lanes, b: Lanes) -> Lanes:
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def _rem(a: Lanes, b: Lanes) -> Lanes:
    zero = b == 0
    if a.dtype == U32:
        return np.where(zero, np.uint32(0), a % np.where(zero, np.uint32(1), b)).astype(U32)
    a64, b64 = _wide(a), _wide(np.where(zero, np.int32(1), b))
    r = a64 - _trunc_div(a64, b64) * b64
    return np.where(zero, np.int64(0), r).astype(I32)


def _amount(b: Lanes) -> Lanes:
    return b & np.uint32(31)


def _shl(a: Lanes, b: Lanes) -> Lanes:
    return _back(_u(a) << _amount(b), a.dtype)


def _shr(a: Lanes, b: Lanes) -> Lanes:
    return a >> _amount(b).astype(a.dtype)


def _rotl(a: Lanes, b: Lanes) -> Lanes:
    x, s = _u(a), _amount(b)
    return _back((x << s) | (x >> ((np.uint32(32) - s) & np.uint32(31))), a.dtype)


def _rotr(a: Lanes, b: Lanes) -> Lanes:
    return _rotl(a, (np.uint32(32) - _amount(b)) & np.uint32(31))


def _abs_diff(a: Lanes, b: Lanes) -> Lanes:
    if a.dtype == F32:
        return np.abs(a - b)
    if a.dtype == U32:
        return np.maximum(a, b) - np.minimum(a, b)
    return np.abs(_wide(a) - _wide(b)).astype(I32)


def _saturating(op: Callable[[Lanes, Lanes], Lanes]) -> BinaryFn:
    def run(a: Lanes, b: Lanes) -> Lanes:
        wide = np.uint64 if (a.dtype == U32 and op is np.multiply) else np.int64
        return _clamp_to(op(a.astype(wide), b.astype(wide)), a.dtype)

    return run


def _mul_high(a: Lanes, b: Lanes) -> Lanes:
    if a.dtype == U32:
        return ((a.astype(np.uint64) * b.astype(np.uint64)) >> np.uint64(32)).astype(U32)
    return ((_wide(a) * _wide(b)) >> np.int64(32)).astype(I32)


def _min(a: Lanes, b: Lanes) -> Lanes:
    return f.min_f32(a, b) if a.dtype == F32 else np.minimum(a, b)


def _max(a: Lanes, b: Lanes) -> Lanes:
    return f.max_f32(a, b) if a.dtype == F32 else np.maximum(a, b)


def _neg(a: Lanes) -> Lanes:
    if a.dtype == F32:
        return f.neg_f32(a)
    return _back(np.uint32(0) - _u(a), a.dtype)


def _abs(a: Lanes) -> Lanes:
    if a.dtype == F32:
        return f.abs_f32(a)
    return np.abs(a) if a.dtype == I32 else a  # numpy's abs(int32 MIN) wraps to MIN


def _sign(a: Lanes) -> Lanes:
    if a.dtype == F32:
        return f.sign_f32(a)
    if a.dtype == U32:
        return (a != 0).astype(U32)
    return np.sign(a).astype(I32)


def _popcount_u32(x: Lanes) -> Lanes:
    x = x - ((x >> np.uint32(1)) & _M1)
    x = (x & _M2) + ((x >> np.uint32(2)) & _M2)
    x = (x + (x >> np.uint32(4))) & _M4
    return (x * np.uint32(0x01010101)) >> np.uint32(24)


def _bit_length(x: Lanes) -> Lanes:
    """Number of significant bits of uint32 lanes (0 for 0), exact through float64's exponent."""
    return np.frexp(x.astype(np.float64))[1].astype(np.uint32)


def _popcount(a: Lanes) -> Lanes:
    return _popcount_u32(_u(a)).astype(a.dtype)


def _clz(a: Lanes) -> Lanes:
    return (np.uint32(32) - _bit_length(_u(a))).astype(a.dtype)


def _ctz(a: Lanes) -> Lanes:
    x = _u(a)
    low = x & (np.uint32(0) - x)
    return np.where(x == 0, np.uint32(32), _bit_length(low) - np.uint32(1)).astype(a.dtype)


def _reverse_bits(a: Lanes) -> Lanes:
    x = _u(a)
    for shift, mask in ((1, 0x55555555), (2, 0x33333333), (4, 0x0F0F0F0F), (8, 0x00FF00FF)):
        s, m = np.uint32(shift), np.uint32(mask)
        x = ((x >> s) & m) | ((x & m) << s)
    x = (x >> np.uint32(16)) | (x << np.uint32(16))
    return _back(x, a.dtype)


def _bitnot(a: Lanes) -> Lanes:
    return np.invert(a)


def _via_float64(fn: Callable[[Lanes], Lanes]) -> UnaryFn:
    """A transcendental: evaluated in float64, rounded once to float32."""
    return lambda a: f.float64_to_f32(fn(np.asarray(a, np.float64)))


def _inverse_sqrt(x: Lanes) -> Lanes:
    return 1.0 / np.sqrt(x)


BINARY: dict[str, BinaryFn] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": _div, "rem": _rem,
    "bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor,
    "shl": _shl, "shr": _shr, "rotate_left": _rotl, "rotate_right": _rotr,
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "gt": np.greater, "le": np.less_equal,
    "ge": np.greater_equal, "and_": np.logical_and, "or_": np.logical_or, "min": _min, "max": _max,
    "abs_diff": _abs_diff, "saturating_add": _saturating(np.add), "saturating_sub": _saturating(np.subtract),
    "saturating_mul": _saturating(np.multiply), "mul_high": _mul_high,
}

UNARY: dict[str, UnaryFn] = {
    "neg": _neg, "bitnot": _bitnot, "not_": np.logical_not, "popcount": _popcount, "clz": _clz,
    "ctz": _ctz, "reverse_bits": _reverse_bits, "abs": _abs, "sign": _sign,
    "sqrt": np.sqrt, "reciprocal": lambda a: np.float32(1.0) / a, "floor": np.floor, "ceil": np.ceil,
    "trunc": np.trunc, "round": f.round_f32, "inverse_sqrt": _via_float64(_inverse_sqrt),
    "exp": _via_float64(np.exp), "exp2": _via_float64(np.exp2), "log": _via_float64(np.log),
    "log2": _via_float64(np.log2), "sin": _via_float64(np.sin), "cos": _via_float64(np.cos),
    "tan": _via_float64(np.tan), "asin": _via_float64(np.arcsin), "acos": _via_float64(np.arccos),
    "atan": _via_float64(np.arctan), "sinh": _via_float64(np.sinh), "cosh": _via_float64(np.cosh),
    "tanh": _via_float64(np.tanh), "is_nan": np.isnan, "is_inf": np.isinf, "is_finite": np.isfinite,
}


def fma(a: Lanes, b: Lanes, c: Lanes) -> Lanes:
    """``a * b + c``: single rounding for F32, wrapping for integers."""
    if a.dtype == F32:
        return f.fma_f32(a, b, c)
    return a * b + c


def cast(target: DataType, x: Lanes) -> Lanes:
    """Convert lanes to ``target`` (U32, I32, F32 or BOOL) following docs/semantics.md."""
    to = LANE_DTYPE[target]
    src = x.dtype
    if src == to:
        return x
    if to == BOOL:
        return x != 0
    if src == BOOL:
        return x.astype(to)
    if to == F32:
        return x.astype(np.float64).astype(F32)  # exact int in float64, then one rounding
    if src == F32:
        lo, hi = _LIMITS[to]
        t = np.clip(np.trunc(x.astype(np.float64)), lo, hi)
        return np.where(np.isnan(t), 0.0, t).astype(np.int64).astype(to)
    return x.view(to)
