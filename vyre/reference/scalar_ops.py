"""Lane-wise semantics of every binary and unary op, and of casts (docs/semantics.md).

Lane values are numpy arrays (or numpy scalars for uniform values) of ``uint32`` (U32),
``int32`` (I32), ``float32`` (F32), ``bool_`` (BOOL), ``uint64`` (U64), ``int64`` (I64) or
``float64`` (F64); the numpy dtype is the IR type.
Callers run these under ``np.errstate(all="ignore")``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from vyre.ir.op import Op
from vyre.ir.types import DataType
from vyre.reference import floats as f

U32, I32, F32, BOOL = np.dtype(np.uint32), np.dtype(np.int32), np.dtype(np.float32), np.dtype(np.bool_)
U64, I64, F64 = np.dtype(np.uint64), np.dtype(np.int64), np.dtype(np.float64)
LANE_DTYPE: dict[DataType, np.dtype] = {DataType.U32: U32, DataType.I32: I32, DataType.F32: F32, DataType.BOOL: BOOL,
                                        DataType.U64: U64, DataType.I64: I64, DataType.F64: F64}
FLOATS = (F32, F64)
#: integer lane dtype -> its unsigned twin (the bits), and the value range
_UNSIGNED = {U32: U32, I32: U32, U64: U64, I64: U64}
_LIMITS = {U32: (0, 0xFFFFFFFF), I32: (-(2**31), 2**31 - 1), U64: (0, 2**64 - 1), I64: (-(2**63), 2**63 - 1)}
_M1, _M2, _M4 = np.uint32(0x55555555), np.uint32(0x33333333), np.uint32(0x0F0F0F0F)

Lanes = Any  # one value per lane: an ndarray, or a numpy scalar (or bool) that every lane shares
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
    """The bits of an integer lane value as the unsigned type of its width."""
    return x.view(_UNSIGNED[x.dtype]) if x.dtype in (I32, I64) else x


def _back(x: Lanes, dtype: np.dtype) -> Lanes:
    """Reinterpret unsigned bits as ``dtype`` (an integer type of the same width)."""
    return x.view(dtype) if dtype in (I32, I64) else x


def _width(x: Lanes) -> int:
    return x.dtype.itemsize * 8


def _const(x: Lanes, v: int) -> Lanes:
    """``v`` as a scalar of ``x``'s unsigned type."""
    return _UNSIGNED[x.dtype].type(v)


def _clamp_to(x: Lanes, dtype: np.dtype) -> Lanes:
    lo, hi = _LIMITS[dtype]
    return np.clip(x, lo, hi).astype(dtype)


def _magnitude(x: Lanes) -> Lanes:
    """|x| of signed lanes as unsigned bits (exact for MIN, whose magnitude only the unsigned type holds)."""
    return _u(np.where(x < 0, x.dtype.type(0) - x, x).astype(x.dtype))


# ---- integers -----------------------------------------------------------------------------------
def _div(a: Lanes, b: Lanes) -> Lanes:
    if a.dtype in FLOATS:
        return a / b
    return _int_div(a, b, rem=False)


def _rem(a: Lanes, b: Lanes) -> Lanes:
    return _int_div(a, b, rem=True)


def _int_div(a: Lanes, b: Lanes, rem: bool) -> Lanes:
    """Truncating division; ``x / 0`` is all ones and ``x % 0`` is 0. Signed lanes divide their
    magnitudes, so MIN / -1 = 2**(w-1) wraps to MIN and MIN % -1 = MIN - MIN = 0."""
    zero = b == 0
    dtype = a.dtype
    safe = np.where(zero, dtype.type(1), b).astype(dtype)
    if dtype in (U32, U64):
        r = a % safe if rem else a // safe
        return np.where(zero, _const(a, 0 if rem else _LIMITS[dtype][1]), r).astype(dtype)
    uq = _magnitude(a) // _magnitude(safe)
    q = _back(np.where((a < 0) != (safe < 0), _const(a, 0) - uq, uq).astype(_UNSIGNED[dtype]), dtype)
    r = _back(_u(np.asarray(a)) - _u(np.asarray(q * safe, dtype=dtype)), dtype)
    return np.where(zero, dtype.type(0) if rem else dtype.type(-1), r if rem else q).astype(dtype)


def _amount(a: Lanes, b: Lanes) -> Lanes:
    """The shift amount ``b`` masked to ``a``'s width (5 bits at 32, 6 bits at 64), in ``a``'s unsigned type."""
    return (b & np.uint32(_width(a) - 1)).astype(_UNSIGNED[a.dtype])


def _shl(a: Lanes, b: Lanes) -> Lanes:
    return _back(_u(a) << _amount(a, b), a.dtype)


def _shr(a: Lanes, b: Lanes) -> Lanes:
    return a >> _amount(a, b).astype(a.dtype)


def _rotl(a: Lanes, b: Lanes) -> Lanes:
    x, s, w = _u(a), _amount(a, b), _width(a)
    return _back((x << s) | (x >> ((_const(a, w) - s) & _const(a, w - 1))), a.dtype)


def _rotr(a: Lanes, b: Lanes) -> Lanes:
    w = _width(a)
    return _rotl(a, (np.uint32(w) - (b & np.uint32(w - 1))) & np.uint32(w - 1))


def _abs_diff(a: Lanes, b: Lanes) -> Lanes:
    if a.dtype in FLOATS:
        return np.abs(a - b)
    if a.dtype in (U32, U64):
        return np.maximum(a, b) - np.minimum(a, b)
    ua, ub = _u(np.asarray(a)), _u(np.asarray(b))  # the exact difference, wrapped to the width
    return _back(np.where(a >= b, ua - ub, ub - ua).astype(ua.dtype), a.dtype)


def _mul_wide(a: Lanes, b: Lanes) -> tuple[Lanes, Lanes]:
    """(high, low) halves of the double-width product of integer lanes, each in ``a``'s type."""
    dtype, w = a.dtype, _width(a)
    if w == 32:
        wide = np.uint64 if dtype == U32 else np.int64
        p = a.astype(wide) * b.astype(wide)
        return (p >> wide(32)).astype(dtype), p.astype(dtype)
    ua, ub = _u(np.asarray(a)), _u(np.asarray(b))
    m, s = np.uint64(0xFFFFFFFF), np.uint64(32)
    al, ah, bl, bh = ua & m, ua >> s, ub & m, ub >> s
    ll, lh, hl, hh = al * bl, al * bh, ah * bl, ah * bh
    mid = (ll >> s) + (lh & m) + (hl & m)
    hi = hh + (lh >> s) + (hl >> s) + (mid >> s)
    if dtype == I64:  # signed high half: subtract b when a < 0 and a when b < 0 (mod 2**64)
        hi = hi - np.where(a < 0, ub, np.uint64(0)) - np.where(b < 0, ua, np.uint64(0))
    return _back(np.asarray(hi, U64), dtype), _back(np.asarray(ua * ub, U64), dtype)


def _mul_high(a: Lanes, b: Lanes) -> Lanes:
    return _mul_wide(a, b)[0]


def _sat_result(a: Lanes, over: Lanes, negative: Lanes, value: Lanes) -> Lanes:
    lo, hi = _LIMITS[a.dtype]
    t = a.dtype.type
    return np.where(over, np.where(negative, t(lo), t(hi)), value).astype(a.dtype)


def _saturating_add(a: Lanes, b: Lanes) -> Lanes:
    s = a + b
    if a.dtype in (U32, U64):
        return _sat_result(a, s < a, False, s)
    return _sat_result(a, ((a ^ s) & (b ^ s)) < 0, a < 0, s)


def _saturating_sub(a: Lanes, b: Lanes) -> Lanes:
    s = a - b
    if a.dtype in (U32, U64):
        return _sat_result(a, a < b, True, s)
    return _sat_result(a, ((a ^ b) & (a ^ s)) < 0, a < 0, s)


def _saturating_mul(a: Lanes, b: Lanes) -> Lanes:
    hi, lo = _mul_wide(a, b)
    if a.dtype in (U32, U64):
        return _sat_result(a, hi != 0, False, lo)
    over = hi != (lo >> a.dtype.type(_width(a) - 1))  # the high half must repeat the low half's sign
    return _sat_result(a, over, hi < 0, lo)


def _min(a: Lanes, b: Lanes) -> Lanes:
    return f.min_float(a, b) if a.dtype in FLOATS else np.minimum(a, b)


def _max(a: Lanes, b: Lanes) -> Lanes:
    return f.max_float(a, b) if a.dtype in FLOATS else np.maximum(a, b)


def _neg(a: Lanes) -> Lanes:
    if a.dtype in FLOATS:
        return f.neg_float(a)
    return _back(_const(a, 0) - _u(a), a.dtype)


def _abs(a: Lanes) -> Lanes:
    if a.dtype in FLOATS:
        return f.abs_float(a)
    return np.abs(a) if a.dtype in (I32, I64) else a  # numpy's abs(MIN) wraps to MIN


def _sign(a: Lanes) -> Lanes:
    if a.dtype in FLOATS:
        return f.sign_float(a)
    if a.dtype in (U32, U64):
        return (a != 0).astype(a.dtype)
    return np.sign(a).astype(a.dtype)


def _halves(x: Lanes) -> tuple[Lanes, Lanes]:
    """(low, high) 32-bit halves of uint64 lanes, as uint32."""
    return (x & np.uint64(0xFFFFFFFF)).astype(U32), (x >> np.uint64(32)).astype(U32)


def _popcount_u32(x: Lanes) -> Lanes:
    x = x - ((x >> np.uint32(1)) & _M1)
    x = (x & _M2) + ((x >> np.uint32(2)) & _M2)
    x = (x + (x >> np.uint32(4))) & _M4
    return (x * np.uint32(0x01010101)) >> np.uint32(24)


def _bit_length_u32(x: Lanes) -> Lanes:
    """Number of significant bits of uint32 lanes (0 for 0), exact through float64's exponent."""
    return np.frexp(x.astype(np.float64))[1].astype(np.uint32)


def _bit_length(x: Lanes) -> Lanes:
    """Number of significant bits of unsigned lanes (0 for 0); 64-bit lanes a half at a time."""
    if x.dtype == U32:
        return _bit_length_u32(x)
    lo, hi = _halves(x)
    return np.where(hi != 0, _bit_length_u32(hi) + np.uint32(32), _bit_length_u32(lo))


def _popcount(a: Lanes) -> Lanes:
    x = _u(a)
    if x.dtype == U64:
        lo, hi = _halves(x)
        return (_popcount_u32(lo) + _popcount_u32(hi)).astype(a.dtype)
    return _popcount_u32(x).astype(a.dtype)


def _clz(a: Lanes) -> Lanes:
    return (np.uint32(_width(a)) - _bit_length(_u(a))).astype(a.dtype)


def _ctz(a: Lanes) -> Lanes:
    x = _u(a)
    low = x & (_const(a, 0) - x)
    return np.where(x == 0, np.uint32(_width(a)), _bit_length(low) - np.uint32(1)).astype(a.dtype)


def _reverse_u32(x: Lanes) -> Lanes:
    for shift, mask in ((1, 0x55555555), (2, 0x33333333), (4, 0x0F0F0F0F), (8, 0x00FF00FF)):
        s, m = np.uint32(shift), np.uint32(mask)
        x = ((x >> s) & m) | ((x & m) << s)
    return (x >> np.uint32(16)) | (x << np.uint32(16))


def _reverse_bits(a: Lanes) -> Lanes:
    x = _u(a)
    if x.dtype == U64:  # reverse each half, then swap them
        lo, hi = _halves(x)
        x = (_reverse_u32(lo).astype(U64) << np.uint64(32)) | _reverse_u32(hi).astype(U64)
        return _back(x, a.dtype)
    return _back(_reverse_u32(x), a.dtype)


def _bitnot(a: Lanes) -> Lanes:
    return np.invert(a)


def _via_float64(fn: Callable[[Lanes], Lanes]) -> UnaryFn:
    """A transcendental: evaluated in float64 (numpy's, within ~1 ULP), then rounded once to float32
    for F32 lanes; F64 lanes keep the float64 result (docs/semantics.md bounds the backends' error)."""
    return lambda a: fn(a) if a.dtype == F64 else f.float64_to_f32(fn(np.asarray(a, np.float64)))


def _inverse_sqrt(a: Lanes) -> Lanes:
    """F32: 1 / sqrt(a) in float64, rounded once; F64: correctly rounded sqrt, then correctly rounded 1 / that."""
    if a.dtype == F64:
        return np.float64(1.0) / np.sqrt(a)
    return f.float64_to_f32(1.0 / np.sqrt(np.asarray(a, np.float64)))


def _reciprocal(a: Lanes) -> Lanes:
    return a.dtype.type(1.0) / a


BINARY: dict[Op, BinaryFn] = {
    Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.DIV: _div, Op.REM: _rem,
    Op.BITAND: np.bitwise_and, Op.BITOR: np.bitwise_or, Op.BITXOR: np.bitwise_xor,
    Op.SHL: _shl, Op.SHR: _shr, Op.ROTATE_LEFT: _rotl, Op.ROTATE_RIGHT: _rotr,
    Op.EQ: np.equal, Op.NE: np.not_equal, Op.LT: np.less, Op.GT: np.greater, Op.LE: np.less_equal,
    Op.GE: np.greater_equal, Op.AND_: np.logical_and, Op.OR_: np.logical_or, Op.MIN: _min, Op.MAX: _max,
    Op.ABS_DIFF: _abs_diff, Op.SATURATING_ADD: _saturating_add, Op.SATURATING_SUB: _saturating_sub,
    Op.SATURATING_MUL: _saturating_mul, Op.MUL_HIGH: _mul_high,
}

UNARY: dict[Op, UnaryFn] = {
    Op.NEG: _neg, Op.BITNOT: _bitnot, Op.NOT_: np.logical_not, Op.POPCOUNT: _popcount, Op.CLZ: _clz,
    Op.CTZ: _ctz, Op.REVERSE_BITS: _reverse_bits, Op.ABS: _abs, Op.SIGN: _sign,
    Op.SQRT: np.sqrt, Op.RECIPROCAL: _reciprocal, Op.FLOOR: np.floor, Op.CEIL: np.ceil,
    Op.TRUNC: np.trunc, Op.ROUND: f.round_float, Op.INVERSE_SQRT: _inverse_sqrt,
    Op.EXP: _via_float64(np.exp), Op.EXP2: _via_float64(np.exp2), Op.LOG: _via_float64(np.log),
    Op.LOG2: _via_float64(np.log2), Op.SIN: _via_float64(np.sin), Op.COS: _via_float64(np.cos),
    Op.TAN: _via_float64(np.tan), Op.ASIN: _via_float64(np.arcsin), Op.ACOS: _via_float64(np.arccos),
    Op.ATAN: _via_float64(np.arctan), Op.SINH: _via_float64(np.sinh), Op.COSH: _via_float64(np.cosh),
    Op.TANH: _via_float64(np.tanh), Op.IS_NAN: np.isnan, Op.IS_INF: np.isinf, Op.IS_FINITE: np.isfinite,
}


def fma(a: Lanes, b: Lanes, c: Lanes) -> Lanes:
    """``a * b + c``: single rounding for F32 and F64, wrapping for integers."""
    if a.dtype == F32:
        return f.fma_f32(a, b, c)
    if a.dtype == F64:
        return f.fma_f64(a, b, c)
    return a * b + c


def cast(target: DataType, x: Lanes) -> Lanes:
    """Convert lanes to the arithmetic type ``target`` following docs/semantics.md (Casts).

    Integers of the same width reinterpret bits; integer widening sign- or zero-extends after the
    source's signedness and narrowing keeps the low bits (numpy's integer ``astype`` does both);
    int -> float rounds once to nearest even; float -> int truncates toward zero and saturates
    (NaN -> 0); F32 -> F64 is exact and F64 -> F32 rounds to nearest even.
    """
    to = LANE_DTYPE[target]
    src = x.dtype
    if src == to:
        return x
    if to == BOOL:
        return x != 0
    if src == BOOL:
        return x.astype(to)
    if to in FLOATS:
        return f.int_to_float(x, to) if src not in FLOATS else x.astype(to)
    if src in FLOATS:
        return f.float_to_int(x, to, *_LIMITS[to])
    if src.itemsize == to.itemsize:
        return x.view(to)
    return x.astype(to)
