"""Exact float helpers of the oracle: single-rounded fma, min/max, round, sign, conversions, BF16.

Everything here works on numpy float32 or float64 lane arrays (or numpy scalars) and never goes
through an intermediate where that could round twice.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

#: float lane dtype -> the unsigned integer dtype of its bits
_BITS = {np.dtype(np.float32): np.dtype(np.uint32), np.dtype(np.float64): np.dtype(np.uint64)}
_FLOAT_OF = {v: k for k, v in _BITS.items()}


def bits(x: np.ndarray) -> np.ndarray:
    """The bit patterns of float32 (uint32) or float64 (uint64) lanes."""
    x = np.asarray(x)
    return x.view(_BITS[x.dtype])


def from_bits(b: np.ndarray) -> np.ndarray:
    """float32 or float64 lanes holding the given uint32 or uint64 bit patterns."""
    b = np.asarray(b)
    return b.view(_FLOAT_OF[b.dtype])


def _sign_bit(x: np.ndarray) -> np.ndarray:
    t = _BITS[np.asarray(x).dtype].type
    return t(1) << t(8 * np.asarray(x).dtype.itemsize - 1)


def _round_to_odd(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """float64 ``s`` rounded to odd given the exact remainder ``e`` (value = s + e): an inexact ``s``
    with an even last bit moves one ulp toward ``e``, so a later rounding to fewer bits is correct."""
    sb = s.view(np.int64)
    fix = np.isfinite(s) & (e != 0) & ((sb & 1) == 0)
    if fix.any():
        toward = np.where(np.signbit(e) == np.signbit(s), 1, -1)
        sb = np.where(fix, sb + toward, sb)
    return sb.view(np.float64)


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(s, e) with s = RN(a + b) and a + b == s + e exactly (Knuth)."""
    s = a + b
    bp = s - a
    return s, (a - (s - bp)) + (b - bp)


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a * b + c`` rounded once to float32 (round to nearest even).

    The product of two float32 values is exact in float64; the float64 sum may round, so its
    exact error is recovered with TwoSum and folded in as a sticky bit (round to odd), which
    makes the final float64 -> float32 rounding correct (53 >= 2 * 24 + 2).
    """
    a64, b64, c64 = (np.atleast_1d(np.asarray(v, np.float64)) for v in (a, b, c))
    s, e = _two_sum(a64 * b64, c64)  # p + c == s + e exactly
    out = _round_to_odd(s, e).astype(np.float32)
    return out if max(np.ndim(a), np.ndim(b), np.ndim(c)) else out[0]


#: |a| and |b| within [2**-_FMA_SAFE, 2**_FMA_SAFE] (and |c| below 2**1000): Dekker's product is exact
_FMA_SAFE = 450
_SPLIT = 134217729.0  # 2**27 + 1 (Veltkamp)


def _two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p, e) with p = RN(a * b) and a * b == p + e exactly (Dekker; needs no over/underflow)."""
    def split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        t = _SPLIT * x
        hi = t - (t - x)
        return hi, x - hi

    p = a * b
    ah, al = split(a)
    bh, bl = split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def fma_f64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a * b + c`` rounded once to float64 (round to nearest even).

    Boldo and Melquiond's emulation: with a * b = p + e and p + c = s + t exactly,
    the result is RN(s + RO(t + e)), RO rounding to odd. Lanes where the exact product could
    under- or overflow (and finite operands out of that range) take the exact rational path;
    a zero, infinite or NaN operand needs no care (``a * b`` is then exact or special).
    """
    a64, b64, c64 = (np.atleast_1d(np.asarray(v, np.float64)) for v in (a, b, c))
    a64, b64, c64 = np.broadcast_arrays(a64, b64, c64)
    lo, hi = 2.0 ** -_FMA_SAFE, 2.0 ** _FMA_SAFE
    plain = (a64 == 0) | (b64 == 0) | ~np.isfinite(a64) | ~np.isfinite(b64) | ~np.isfinite(c64)
    fast = ~plain & (np.abs(a64) >= lo) & (np.abs(a64) <= hi) & (np.abs(b64) >= lo) & (np.abs(b64) <= hi) \
        & (np.abs(c64) <= 2.0 ** 1000)
    p, e = _two_product(a64, b64)
    s, t = _two_sum(p, c64)
    v, w = _two_sum(t, e)
    out = s + _round_to_odd(v, w)
    # an infinite or NaN addend with a finite product is the result: the exact product never
    # overflows inside an fma, so a * b + c (which may overflow to -c) would be wrong there
    addend = np.isfinite(a64) & np.isfinite(b64) & ~np.isfinite(c64)
    out = np.where(plain, np.where(addend, c64, a64 * b64 + c64), out)
    for i in np.flatnonzero(~plain & ~fast):
        out[i] = _exact_fma(float(a64[i]), float(b64[i]), float(c64[i]))
    return out if max(np.ndim(a), np.ndim(b), np.ndim(c)) else out[0]


def _exact_fma(a: float, b: float, c: float) -> float:
    """fma of finite floats through exact rationals (Python's int division rounds correctly)."""
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        return 0.0  # a * b is not zero here, so an exact zero is a cancellation: +0 when rounding to nearest
    try:
        return exact.numerator / exact.denominator
    except OverflowError:
        return float("inf") if exact > 0 else float("-inf")


def min_float(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IEEE minimumNumber with ``-0.0 < +0.0``: a NaN operand (quiet or signaling) yields the other."""
    return _number_of(np.minimum(a, b), a, b, np.bitwise_or)


def max_float(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IEEE maximumNumber with ``-0.0 < +0.0``: a NaN operand (quiet or signaling) yields the other."""
    return _number_of(np.maximum(a, b), a, b, np.bitwise_and)


def _number_of(r: np.ndarray, a: np.ndarray, b: np.ndarray, zero_bits) -> np.ndarray:
    """Fix up ``np.minimum``/``np.maximum``: NaN operands are missing, and the sign of two zeros.

    numpy's fmin/fmax are not used: they treat signaling NaNs differently on scalar and SIMD paths.
    """
    r = np.where(np.isnan(a), b, np.where(np.isnan(b), a, r))
    both_zero = (a == 0) & (b == 0)
    if not np.any(both_zero):
        return r
    return np.where(both_zero, from_bits(zero_bits(bits(a), bits(b))), r)


def neg_float(a: np.ndarray) -> np.ndarray:
    """Flip the sign bit only (NaN payloads kept)."""
    return from_bits(bits(a) ^ _sign_bit(a))


def abs_float(a: np.ndarray) -> np.ndarray:
    """Clear the sign bit only."""
    return from_bits(bits(a) & ~_sign_bit(a))


def sign_float(a: np.ndarray) -> np.ndarray:
    """NaN -> NaN, positive -> 1.0, negative -> -1.0, ±0 -> itself."""
    one = a.dtype.type(1.0)
    return np.where(a > 0, one, np.where(a < 0, -one, a)).astype(a.dtype)


def round_float(a: np.ndarray) -> np.ndarray:
    """Round half away from zero; the sign of zero results follows the operand."""
    t = np.trunc(a)
    frac = a - t  # exact: the fraction of a float needs fewer bits than the float itself
    away = np.abs(frac) >= a.dtype.type(0.5)
    r = np.where(away, t + np.copysign(a.dtype.type(1.0), a), t)
    return np.copysign(r, a).astype(a.dtype)


def int_to_float(x: np.ndarray, to: np.dtype) -> np.ndarray:
    """Integer lanes -> float32/float64 ``to``, rounded once to nearest even.

    A 64-bit integer is ``hi * 2**32 + lo`` with both parts exact in float64, so their float64
    sum rounds once; for float32 that sum is rounded to odd first, which makes the final
    rounding to 24 bits correct.
    """
    x = np.asarray(x)
    if x.dtype.itemsize == 4:
        return x.astype(np.float64).astype(to)  # exact in float64, then one rounding
    hi = (x >> x.dtype.type(32)).astype(np.float64) * 4294967296.0
    lo = (x & x.dtype.type(0xFFFFFFFF)).astype(np.float64)
    s, e = _two_sum(hi, lo)
    if to == np.float64:
        return s
    out = _round_to_odd(np.atleast_1d(s), np.atleast_1d(e)).astype(to)
    return out if np.ndim(s) else out[0]


def float_to_int(x: np.ndarray, to: np.dtype, lo: int, hi: int) -> np.ndarray:
    """Float lanes -> integer ``to`` (range [lo, hi]): truncate toward zero, saturate, NaN -> 0."""
    t = np.trunc(np.asarray(x, np.float64))  # float32 -> float64 is exact
    over, under = t >= float(hi + 1), t <= float(lo)  # hi + 1 and lo are powers of two (or 0): exact
    mid = np.where(over | under | np.isnan(t), 0.0, t)
    wide = np.uint64 if lo == 0 else np.int64
    out = np.where(over, to.type(hi), np.where(under, to.type(lo), mid.astype(wide).astype(to)))
    return out.astype(to)


def float64_to_f32(x: np.ndarray) -> np.ndarray:
    """Round float64 lanes to float32 (nearest even); the float64 reference of transcendentals."""
    return np.asarray(x, np.float64).astype(np.float32)


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits (uint16): round to nearest even, NaN stays a (quiet) NaN."""
    b = bits(x).astype(np.uint32)
    rounded = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    nan = (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    quiet = (b >> np.uint32(16)) | np.uint32(0x0040)
    return np.where(nan, quiet, rounded).astype(np.uint16)


def bf16_to_f32(h: np.ndarray) -> np.ndarray:
    """bfloat16 bits (uint16) -> float32, exactly."""
    return from_bits(np.asarray(h, np.uint16).astype(np.uint32) << np.uint32(16))
