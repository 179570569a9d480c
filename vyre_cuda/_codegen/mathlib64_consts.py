"""Exact constants of the F64 math functions: pi, arctangents and series coefficients.

Everything is derived here from integers and ``Fraction`` (no tables copied from elsewhere), and
every float is the correctly rounded value of its exact rational (``float(Fraction)`` rounds to
nearest even). ``mathlib64`` emits these numbers as PTX immediates and the numpy model of the
tests evaluates the same numbers, so both see one table.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

#: bits of the fixed-point computations: far below every double's last bit
_BITS = 400


def _atan_inv_fixed(n: int) -> int:
    """atan(1/n) * 2^_BITS, truncated (Gregory series on integers)."""
    one = 1 << (_BITS + 16)
    total, power, k = 0, one // n, 0
    while power:
        total += (-1) ** k * (power // (2 * k + 1))
        power //= n * n
        k += 1
    return total >> 16


#: pi to ~400 bits (Machin: pi = 16 atan(1/5) - 4 atan(1/239))
PI = Fraction(16 * _atan_inv_fixed(5) - 4 * _atan_inv_fixed(239), 1 << _BITS)


def atan_exact(q: Fraction) -> Fraction:
    """atan(q) for 0 <= q <= 1 to ~400 bits (Euler's accelerated series)."""
    # atan(q) = sum 2^(2k) (k!)^2 / (2k+1)! * q^(2k+1) / (1+q^2)^(k+1)
    y = q * q / (1 + q * q)
    term = q / (1 + q * q)
    total, k = Fraction(0), 0
    while abs(term) > Fraction(1, 1 << _BITS):
        total += term
        k += 1
        term = term * y * Fraction(2 * k, 2 * k + 1)
    return total


def split(value: Fraction, parts: int) -> tuple[float, ...]:
    """``value`` as ``parts`` doubles, each the rounded remainder of the ones before."""
    out: list[float] = []
    rest = value
    for _ in range(parts):
        out.append(float(rest))
        rest -= Fraction(out[-1])
    return tuple(out)


def bernoulli(n: int) -> Fraction:
    """The Bernoulli number B_n (B_1 = +1/2 convention; only even n are used)."""
    a = [Fraction(0)] * (n + 1)
    for m in range(n + 1):
        a[m] = Fraction(1, m + 1)
        for j in range(m, 0, -1):
            a[j - 1] = j * (a[j - 1] - a[j])
    return a[0]


def series(terms: int, coef: Callable[[int], Fraction]) -> tuple[float, ...]:
    """``coef(0), ..., coef(terms - 1)`` rounded to doubles (polynomial coefficients, lowest first)."""
    return tuple(float(coef(k)) for k in range(terms))


LN2 = Fraction(0)  # filled below from a fast series: ln2 = 2 atanh(1/3)
_term, _k = Fraction(2, 3), 0
while _term > Fraction(1, 1 << _BITS):
    LN2 += _term / (2 * _k + 1)
    _term /= 9
    _k += 1

# ---- exp: x = n ln2 + r, |r| <= ln2/2 ---------------------------------------------------------------
LOG2E = float(1 / LN2)
#: ln2 rounded to 32 significant bits (n * LN2_HI is exact for |n| < 2^21), and the rest
LN2_HI = math.ldexp(math.floor(math.ldexp(float(LN2), 31)), -31)
LN2_LO = float(LN2 - Fraction(LN2_HI))
#: ln2 as a double and the rest (a double-double; exp2 multiplies by it)
LN2_D, LN2_D_LO = split(LN2, 2)
#: r coth(r/2) = 2 + sum P_k r^(2k): P_k = 2 B_2k / (2k)! (the rational form of e^r), k = 1..
EXP_P = series(8, lambda k: 2 * bernoulli(2 * k + 2) / math.factorial(2 * k + 2))

# ---- log: log(1+f) = f - f^2/2 + s (f^2/2 + R(s^2)), s = f / (2 + f) -----------------------------------
#: R(z) = z * sum L_k z^k, L_k = 2 / (2k + 3): |s| <= 0.1716, z <= 0.0295
LOG_L = series(12, lambda k: Fraction(2, 2 * k + 3))
LOG2E_D, LOG2E_D_LO = split(1 / LN2, 2)
SQRT_HALF = math.sqrt(0.5)

# ---- sin, cos, tan: x = k pi/2 + r, |r| <= pi/4 (+ rounding) ---------------------------------------
TWO_OVER_PI = float(2 / PI)
PIO2_1, PIO2_2, PIO2_3 = split(PI / 2, 3)
#: sin r = r + r z S(z), S_j = (-1)^(j+1) / (2j+3)!
SIN_S = series(12, lambda j: Fraction((-1) ** (j + 1), math.factorial(2 * j + 3)))
#: cos r = 1 - z/2 + z^2 C(z), C_j = (-1)^j / (2j+4)!
COS_C = series(12, lambda j: Fraction((-1) ** j, math.factorial(2 * j + 4)))
#: below this |x| the three-part reduction is accurate (k and every partial product exact)
TRIG_LIMIT = 2.0 ** 50

# ---- atan, asin, acos ---------------------------------------------------------------------------------
#: atan t = t + t w A(w), A_j = (-1)^(j+1) / (2j+3), |t| <= 7/16
ATAN_A = series(26, lambda j: Fraction((-1) ** (j + 1), 2 * j + 3))
#: breakpoints c of atan(x) = atan(c) + atan((x - c) / (1 + x c)), and atan(c) as hi + lo
ATAN_BREAKS = (7 / 16, 11 / 16, 19 / 16, 39 / 16)
ATAN_HALF = split(atan_exact(Fraction(1, 2)), 2)
ATAN_ONE = split(PI / 4, 2)
ATAN_THREE_HALVES = split(PI / 2 - atan_exact(Fraction(2, 3)), 2)
PIO2 = split(PI / 2, 2)
PI_D = split(PI, 2)
#: asin s = s + s z P(z), P_j = (2j+2)! / (4^(j+1) ((j+1)!)^2 (2j+3)), |s| <= 1/2
ASIN_P = series(28, lambda j: Fraction(math.factorial(2 * j + 2),
                                      4 ** (j + 1) * math.factorial(j + 1) ** 2 * (2 * j + 3)))

# ---- sinh, cosh, tanh ---------------------------------------------------------------------------------
#: sinh v = v + v z H(z), H_j = 1 / (2j+3)!, |v| < 1
SINH_H = series(10, lambda j: Fraction(1, math.factorial(2 * j + 3)))
#: tanh v = v + v z T(z), T_j = 2^(2n) (2^(2n) - 1) B_2n / (2n)! with n = j + 2, |v| < TANH_SERIES
TANH_T = series(30, lambda j: Fraction(2 ** (2 * j + 4) * (2 ** (2 * j + 4) - 1)) * bernoulli(2 * j + 4)
                / math.factorial(2 * j + 4))
TANH_SERIES = 0.75
#: tanh v rounds to 1 above this (2 / (e^(2v) + 1) < 2^-60)
TANH_ONE = 22.0
