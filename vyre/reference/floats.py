"""Exact binary32 helpers of the oracle: single-rounded fma, min/max, round, sign, BF16 rounding.

Everything here works on numpy float32 lane arrays (or numpy scalars) and never goes through a
float64 intermediate where that could round twice.
"""

from __future__ import annotations

import numpy as np

F32_SIGN = np.uint32(0x80000000)


def bits(x: np.ndarray) -> np.ndarray:
    """The uint32 bit patterns of float32 lanes."""
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def from_bits(b: np.ndarray) -> np.ndarray:
    """float32 lanes holding the given uint32 bit patterns."""
    return np.asarray(b, dtype=np.uint32).view(np.float32)


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a * b + c`` rounded once to float32 (round to nearest even).

    The product of two float32 values is exact in float64; the float64 sum may round, so its
    exact error is recovered with TwoSum and folded in as a sticky bit (round to odd), which
    makes the final float64 -> float32 rounding correct (53 >= 2 * 24 + 2).
    """
    a64, b64, c64 = (np.atleast_1d(np.asarray(v, np.float64)) for v in (a, b, c))
    p = a64 * b64
    s = p + c64
    bp = s - c64
    e = (p - bp) + (c64 - (s - bp))  # TwoSum: p + c == s + e exactly
    sb = s.view(np.int64)
    fix = np.isfinite(s) & (e != 0) & ((sb & 1) == 0)
    if fix.any():
        toward = np.where(np.signbit(e) == np.signbit(s), 1, -1)
        sb = np.where(fix, sb + toward, sb)
    out = sb.view(np.float64).astype(np.float32)
    return out if max(np.ndim(a), np.ndim(b), np.ndim(c)) else out[0]


def min_f32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IEEE minimumNumber with ``-0.0 < +0.0``: a NaN operand (quiet or signaling) yields the other."""
    return _number_of(np.minimum(a, b), a, b, np.bitwise_or)


def max_f32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
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


def neg_f32(a: np.ndarray) -> np.ndarray:
    """Flip the sign bit only (NaN payloads kept)."""
    return from_bits(bits(a) ^ F32_SIGN)


def abs_f32(a: np.ndarray) -> np.ndarray:
    """Clear the sign bit only."""
    return from_bits(bits(a) & np.uint32(0x7FFFFFFF))


def sign_f32(a: np.ndarray) -> np.ndarray:
    """NaN -> NaN, positive -> 1.0, negative -> -1.0, ±0 -> itself."""
    one = np.float32(1.0)
    return np.where(a > 0, one, np.where(a < 0, -one, a)).astype(np.float32)


def round_f32(a: np.ndarray) -> np.ndarray:
    """Round half away from zero; the sign of zero results follows the operand."""
    t = np.trunc(a)
    frac = a - t  # exact: the fraction of a float32 needs fewer bits than the float32 itself
    away = np.abs(frac) >= np.float32(0.5)
    r = np.where(away, t + np.copysign(np.float32(1.0), a), t)
    return np.copysign(r, a).astype(np.float32)


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
