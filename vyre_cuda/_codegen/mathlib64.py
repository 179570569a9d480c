"""Transcendental F64 functions in binary64 only: reduction, series, specials, written once.

Each algorithm is a function of an ``Arith`` (the binary64 operations it may use) and its
operand. ``PtxArith`` emits PTX for them; the tests' numpy model (``tests/codegen/f64_model.py``)
implements the same operations on numpy arrays with an exact fma, so the emitted instruction
sequence and the model evaluated on the CPU are one algorithm with one table of constants
(``mathlib64_consts``). Error bounds are in docs/semantics.md.

- exp/exp2: x = n ln2 + r (Cody-Waite, ln2 in two parts; exp2 splits f ln2 exactly with an fma),
  e^r from the rational form ``1 + 2r / (R(r) - r)`` of fdlibm with R's Taylor (Bernoulli)
  coefficients, scaled by 2^n in two steps (one rounding when the result is subnormal).
- log/log2: x = 2^k (1 + f), log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)), s = f / (2 + f);
  subnormals are scaled by 2^54 first; log2 carries the result as a double-double.
- sin/cos/tan: |x| = k pi/2 + r with pi/2 in three parts (fma; accurate for |x| < 2^50), r kept
  as a double-double, quadrant polynomials. Finite |x| >= 2^50 gives NaN (documented).
- atan: fdlibm's breakpoints 7/16, 11/16, 19/16, 39/16 and a Taylor series on |t| <= 7/16;
  asin/acos: the series on |x| < 1/2, ``pi/2 - 2 asin(sqrt((1 - |x|) / 2))`` above, with the
  sqrt's residual carried.
- sinh/cosh/tanh: Taylor series near 0, e^|x| / 2 (scaled without overflow) above.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

from vyre_cuda._codegen import mathlib64_consts as C
from vyre_cuda._codegen.builder import Builder
from vyre_cuda._codegen.types import f64_imm

V = TypeVar("V")
P = TypeVar("P")


class Arith(Protocol[V, P]):
    """The binary64 operations the algorithms use: ``V`` a value, ``P`` a predicate."""

    def num(self, x: float) -> V: ...
    def add(self, x: V, y: V) -> V: ...
    def sub(self, x: V, y: V) -> V: ...
    def mul(self, x: V, y: V) -> V: ...
    def div(self, x: V, y: V) -> V: ...
    def fma(self, x: V, y: V, z: V) -> V: ...
    def sqrt(self, x: V) -> V: ...
    def neg(self, x: V) -> V: ...
    def abs(self, x: V) -> V: ...
    def rint(self, x: V) -> V: ...
    def trunc(self, x: V) -> V: ...
    def min(self, x: V, y: V) -> V: ...
    def max(self, x: V, y: V) -> V: ...
    def copysign(self, x: V, sign: V) -> V: ...
    def pow2(self, n: V) -> V: ...
    def frexp(self, x: V) -> tuple[V, V]: ...
    def lt(self, x: V, y: V) -> P: ...
    def le(self, x: V, y: V) -> P: ...
    def eq(self, x: V, y: V) -> P: ...
    def isnan(self, x: V) -> P: ...
    def or_(self, p: P, q: P) -> P: ...
    def select(self, p: P, t: V, f: V) -> V: ...


class _Ops(Generic[V, P]):
    """Compound steps shared by the algorithms."""

    def __init__(self, m: Arith[V, P]) -> None:
        self.m = m

    def poly(self, x: V, coefs: Sequence[float]) -> V:
        """Horner evaluation of sum coefs[k] x^k."""
        m = self.m
        acc = m.fma(x, m.num(coefs[-1]), m.num(coefs[-2]))
        for c in reversed(coefs[:-2]):
            acc = m.fma(acc, x, m.num(c))
        return acc

    def two_sum(self, a: V, b: V) -> tuple[V, V]:
        """(s, e) with s = RN(a + b) and s + e = a + b exactly (Knuth)."""
        m = self.m
        s = m.add(a, b)
        bb = m.sub(s, a)
        return s, m.add(m.sub(a, m.sub(s, bb)), m.sub(b, bb))

    def scale(self, p: V, n: V) -> V:
        """p * 2^n for integral n in [-1080, 1030]: two exact steps, the last rounds once."""
        m = self.m
        half = m.trunc(m.mul(n, m.num(0.5)))
        return m.mul(m.mul(p, m.pow2(half)), m.pow2(m.sub(n, half)))

    def exp_parts(self, v: V) -> tuple[V, V]:
        """(t, n) with e^v = (1 + t) * 2^n, |t| <= 0.42, for |v| <= 746."""
        m = self.m
        n = m.rint(m.mul(v, m.num(C.LOG2E)))
        hi = m.fma(n, m.num(-C.LN2_HI), v)  # exact: n LN2_HI has 32 + 11 bits, Sterbenz
        return self.exp_tail(hi, m.mul(n, m.num(C.LN2_LO))), n

    def exp_tail(self, hi: V, lo: V) -> V:
        """e^(hi - lo) - 1 for |hi - lo| <= ln2/2 + tiny: -((lo - r c / (2 - c)) - hi)."""
        m = self.m
        r = m.sub(hi, lo)
        z = m.mul(r, r)
        c = m.sub(r, m.mul(z, self.poly(z, C.EXP_P)))
        q = m.div(m.mul(r, c), m.sub(m.num(2.0), c))
        return m.neg(m.sub(m.sub(lo, q), hi))

    def exp(self, v: V) -> V:
        """e^v for v in [-746, 710] (rounded once, also when subnormal or overflowing)."""
        t, n = self.exp_parts(v)
        return self.scale(self.m.add(self.m.num(1.0), t), n)

    def nan_through(self, x: V, y: V) -> V:
        return self.m.select(self.m.isnan(x), x, y)


# ---- exponentials and logarithms ------------------------------------------------------------------
def exp(m: Arith[V, P], x: V) -> V:
    o = _Ops(m)
    return o.nan_through(x, o.exp(m.max(m.min(x, m.num(710.0)), m.num(-746.0))))


def exp2(m: Arith[V, P], x: V) -> V:
    o = _Ops(m)
    v = m.max(m.min(x, m.num(1030.0)), m.num(-1080.0))
    n = m.rint(v)
    f = m.sub(v, n)  # exact, |f| <= 1/2
    hi = m.mul(f, m.num(C.LN2_D))
    lo = m.neg(m.fma(f, m.num(C.LN2_D_LO), m.fma(f, m.num(C.LN2_D), m.neg(hi))))  # f ln2 = hi - lo
    return o.nan_through(x, o.scale(m.add(m.num(1.0), o.exp_tail(hi, lo)), n))


def _log_parts(m: Arith[V, P], x: V) -> tuple[V, V, V]:
    """(k, hi, lo): log x = k ln2 + hi + lo for positive finite x, |lo| << |hi|."""
    o = _Ops(m)
    tiny = m.lt(x, m.num(2.0 ** -1022))
    v = m.select(tiny, m.mul(x, m.num(2.0 ** 54)), x)
    mant, e = m.frexp(v)  # v = mant 2^e, mant in [1, 2)
    big = m.lt(m.num(C.SQRT_HALF * 2), mant)
    mant = m.select(big, m.mul(mant, m.num(0.5)), mant)
    k = m.sub(m.add(e, m.select(big, m.num(1.0), m.num(0.0))), m.select(tiny, m.num(54.0), m.num(0.0)))
    f = m.sub(mant, m.num(1.0))  # exact: mant in [sqrt(1/2), sqrt(2))
    hfsq = m.mul(m.mul(f, f), m.num(0.5))
    s = m.div(f, m.add(m.num(2.0), f))
    z = m.mul(s, s)
    r = m.mul(z, o.poly(z, C.LOG_L))
    hi = m.sub(f, hfsq)
    lo = m.add(m.sub(m.neg(hfsq), m.sub(hi, f)), m.mul(s, m.add(hfsq, r)))  # fast two-sum: |f| >= hfsq
    return k, hi, lo


def _log_specials(m: Arith[V, P], x: V, y: V) -> V:
    """NaN for x < 0 (and NaN), -inf at ±0, +inf at +inf."""
    y = m.select(m.eq(x, m.num(float("inf"))), x, y)
    y = m.select(m.eq(x, m.num(0.0)), m.num(float("-inf")), y)
    return m.select(m.or_(m.lt(x, m.num(0.0)), m.isnan(x)), m.num(float("nan")), y)


def log(m: Arith[V, P], x: V) -> V:
    k, hi, lo = _log_parts(m, x)
    tail = m.add(hi, m.fma(k, m.num(C.LN2_LO), lo))
    return _log_specials(m, x, m.fma(k, m.num(C.LN2_HI), tail))


def log2(m: Arith[V, P], x: V) -> V:
    o = _Ops(m)
    k, hi, lo = _log_parts(m, x)
    vh = m.mul(hi, m.num(C.LOG2E_D))
    vl = m.fma(hi, m.num(C.LOG2E_D), m.neg(vh))
    vl = m.fma(lo, m.num(C.LOG2E_D), m.fma(hi, m.num(C.LOG2E_D_LO), vl))
    w, e = o.two_sum(k, vh)
    return _log_specials(m, x, m.add(w, m.add(e, vl)))


# ---- trigonometric ---------------------------------------------------------------------------------
def _reduce(m: Arith[V, P], a: V) -> tuple[V, V, V]:
    """(k, rh, rl): a = k pi/2 + rh + rl for 0 <= a < 2^50, |rh| <= pi/4 + tiny."""
    o = _Ops(m)
    k = m.rint(m.mul(a, m.num(C.TWO_OVER_PI)))
    r1 = m.fma(m.neg(k), m.num(C.PIO2_1), a)  # exact: a multiple of 2^-53 below 1 in magnitude
    p = m.mul(k, m.num(C.PIO2_2))
    pe = m.fma(k, m.num(C.PIO2_2), m.neg(p))  # k PIO2_2 = p + pe exactly
    rh, e = o.two_sum(r1, m.neg(p))
    rl = m.fma(m.neg(k), m.num(C.PIO2_3), m.sub(e, pe))
    rh, rl = o.two_sum(rh, rl)
    return k, rh, rl


def _sin_cos(m: Arith[V, P], rh: V, rl: V) -> tuple[tuple[V, V], tuple[V, V]]:
    """sin and cos of rh + rl as (head, tail) pairs whose sum is the value (|rh| <= pi/4 + tiny)."""
    o = _Ops(m)
    z = m.mul(rh, rh)
    ze = m.fma(rh, rh, m.neg(z))  # rh^2 = z + ze exactly
    # sin(rh + rl) = rh + (rh z S(z) + rl (1 - z/2))
    s_tail = m.fma(m.mul(rh, z), o.poly(z, C.SIN_S), m.fma(m.mul(rl, m.num(-0.5)), z, rl))
    # cos(rh + rl) = w + (((1 - w) - hz) + (z^2 C(z) - ze/2 - rh rl)), w = 1 - hz, hz = z/2
    hz = m.mul(z, m.num(0.5))
    w = m.sub(m.num(1.0), hz)
    corr = m.sub(m.mul(m.mul(z, z), o.poly(z, C.COS_C)), m.fma(rh, rl, m.mul(ze, m.num(0.5))))
    c_tail = m.add(m.sub(m.sub(m.num(1.0), w), hz), corr)
    return (rh, s_tail), (w, c_tail)


def _quadrant(m: Arith[V, P], k: V, bit: float) -> P:
    """Whether bit ``bit`` (1 or 2) of the non-negative integer k is set."""
    r = m.sub(k, m.mul(m.trunc(m.mul(k, m.num(0.5 / bit))), m.num(2.0 * bit)))  # k mod 2 bit, exact
    return m.le(m.num(bit), r)


def _trig(m: Arith[V, P], x: V, which: str) -> V:
    """sin/cos/tan: NaN for NaN, ±inf and finite |x| >= 2^50; sin/tan keep the sign of ±0."""
    a = m.abs(x)
    k, rh, rl = _reduce(m, m.min(a, m.num(C.TRIG_LIMIT)))
    (sh, sl), (ch, cl) = _sin_cos(m, rh, rl)
    odd = _quadrant(m, k, 1.0)
    if which == "tan":  # sin/cos, or -cos/sin in odd quadrants, as a double-double quotient
        num_h, num_l = m.select(odd, ch, sh), m.select(odd, cl, sl)
        den_h, den_l = m.select(odd, sh, ch), m.select(odd, sl, cl)
        den = m.add(den_h, den_l)
        t = m.div(m.add(num_h, num_l), den)
        res = m.add(m.fma(m.neg(t), den_h, num_h), m.fma(m.neg(t), den_l, num_l))
        t = m.add(t, m.div(res, den))  # one correction step of the quotient
        y = m.select(odd, m.neg(t), t)
    else:
        cos = which == "cos"
        h = m.select(odd, sh, ch) if cos else m.select(odd, ch, sh)
        tail = m.select(odd, sl, cl) if cos else m.select(odd, cl, sl)
        y = m.add(h, tail)
        y = m.select(_quadrant(m, m.add(k, m.num(1.0)) if cos else k, 2.0), m.neg(y), y)
    if which != "cos":  # odd: f(x) = -f(|x|) for x < 0, and f(±0) = ±0
        y = m.select(m.eq(x, m.num(0.0)), x, m.select(m.lt(x, m.num(0.0)), m.neg(y), y))
    out = m.select(m.le(m.num(C.TRIG_LIMIT), a), m.num(float("nan")), y)
    return _Ops(m).nan_through(x, out)


def _atan_abs(m: Arith[V, P], a: V) -> V:
    """atan(a) for a >= 0 (+inf gives pi/2): the breakpoint reduction, then the series."""
    o = _Ops(m)
    one, two = m.num(1.0), m.num(2.0)
    b0, b1, b2, b3 = (m.lt(a, m.num(c)) for c in C.ATAN_BREAKS)
    # t for each interval: a; (2a - 1)/(2 + a); (a - 1)/(a + 1); (a - 1.5)/(1 + 1.5a); -1/a
    num = m.select(b1, m.sub(m.add(a, a), one), m.select(b2, m.sub(a, one),
                   m.select(b3, m.sub(a, m.num(1.5)), m.num(-1.0))))
    den = m.select(b1, m.add(two, a), m.select(b2, m.add(a, one), m.select(b3, m.fma(a, m.num(1.5), one), a)))
    t = m.select(b0, a, m.div(num, den))
    hi = m.select(b1, m.num(C.ATAN_HALF[0]), m.select(b2, m.num(C.ATAN_ONE[0]),
                  m.select(b3, m.num(C.ATAN_THREE_HALVES[0]), m.num(C.PIO2[0]))))
    lo = m.select(b1, m.num(C.ATAN_HALF[1]), m.select(b2, m.num(C.ATAN_ONE[1]),
                  m.select(b3, m.num(C.ATAN_THREE_HALVES[1]), m.num(C.PIO2[1]))))
    w = m.mul(t, t)
    tail = m.mul(m.mul(t, w), o.poly(w, C.ATAN_A))  # atan t = t + tail
    near = m.add(t, tail)
    far = m.add(hi, m.add(t, m.add(tail, lo)))
    return m.select(b0, near, far)


def atan(m: Arith[V, P], x: V) -> V:
    return _Ops(m).nan_through(x, m.copysign(_atan_abs(m, m.abs(x)), x))


def _asin_parts(m: Arith[V, P], a: V) -> tuple[V, V]:
    """(s, tail): asin(s + tail) = asin(a) for a < 1/2 (s = a), and
    asin(s + tail) = asin(sqrt((1 - a) / 2)) for 1/2 <= a <= 1 (s = RN(sqrt))."""
    o = _Ops(m)
    small = m.lt(a, m.num(0.5))
    z = m.select(small, m.mul(a, a), m.mul(m.sub(m.num(1.0), a), m.num(0.5)))  # exact for a >= 1/2
    root = m.sqrt(z)
    s = m.select(small, a, root)
    exact = m.or_(small, m.eq(z, m.num(0.0)))  # the sqrt's residual / (2 sqrt), 0 at |x| = 1
    ds = m.select(exact, m.num(0.0), m.div(m.fma(m.neg(root), root, z), m.add(root, root)))
    zz = m.select(small, z, m.mul(s, s))
    tail = m.fma(m.mul(s, zz), o.poly(zz, C.ASIN_P), ds)
    return s, tail


def _minus_twice(m: Arith[V, P], c: Sequence[float], s: V, tail: V) -> V:
    """c - 2 (s + tail) for the double-double constant c, with the leading difference exact."""
    h, e = _Ops(m).two_sum(m.num(c[0]), m.neg(m.add(s, s)))
    return m.add(h, m.add(e, m.sub(m.num(c[1]), m.add(tail, tail))))


def asin(m: Arith[V, P], x: V) -> V:
    a = m.abs(x)
    s, tail = _asin_parts(m, a)
    near = m.add(s, tail)
    far = _minus_twice(m, C.PIO2, s, tail)  # asin a = pi/2 - 2 asin(s) above 1/2
    y = m.select(m.lt(a, m.num(0.5)), near, far)
    y = m.select(m.lt(m.num(1.0), a), m.num(float("nan")), y)
    return _Ops(m).nan_through(x, m.copysign(y, x))


def acos(m: Arith[V, P], x: V) -> V:
    a = m.abs(x)
    s, tail = _asin_parts(m, a)
    neg = m.lt(x, m.num(0.0))
    small = m.lt(a, m.num(0.5))
    # |x| < 1/2: pi/2 -+ asin|x|; x >= 1/2: 2 asin(s); x <= -1/2: pi - 2 asin(s)
    sign = m.select(neg, m.num(1.0), m.num(-1.0))
    h, e = _Ops(m).two_sum(m.num(C.PIO2[0]), m.mul(sign, s))  # the leading sum exact
    near = m.add(h, m.add(e, m.fma(sign, tail, m.num(C.PIO2[1]))))
    twice = m.add(m.add(s, s), m.add(tail, tail))
    far_neg = _minus_twice(m, C.PI_D, s, tail)
    y = m.select(small, near, m.select(neg, far_neg, twice))
    y = m.select(m.lt(m.num(1.0), a), m.num(float("nan")), y)
    return _Ops(m).nan_through(x, y)


# ---- hyperbolic -------------------------------------------------------------------------------------
def _cosh_sinh(m: Arith[V, P], v: V, sign: float) -> V:
    """(e^v + sign e^-v) / 2 for v >= 0 (+inf above ~710.5): with e^v / 4 = g + gt, g a power
    of two, it is 2 (g + (gt + sign / (16 (g + gt)))), one rounding on the small part and one at
    the end (doubling is exact or overflows)."""
    o = _Ops(m)
    t, n = o.exp_parts(m.min(v, m.num(711.0)))
    quarter = m.sub(n, m.num(2.0))
    g, gt = o.scale(m.num(1.0), quarter), o.scale(t, quarter)
    small = m.mul(m.num(sign), m.div(m.num(0.0625), m.add(g, gt)))
    return m.mul(m.num(2.0), m.add(g, m.add(gt, small)))


def sinh(m: Arith[V, P], x: V) -> V:
    o = _Ops(m)
    v = m.abs(x)
    z = m.mul(v, v)
    series = m.fma(m.mul(v, z), o.poly(z, C.SINH_H), v)
    y = m.select(m.lt(v, m.num(1.0)), series, _cosh_sinh(m, v, -1.0))
    return o.nan_through(x, m.copysign(y, x))


def cosh(m: Arith[V, P], x: V) -> V:
    return _Ops(m).nan_through(x, _cosh_sinh(m, m.abs(x), 1.0))


def tanh(m: Arith[V, P], x: V) -> V:
    o = _Ops(m)
    v = m.abs(x)
    z = m.mul(v, v)
    series = m.fma(m.mul(v, z), o.poly(z, C.TANH_T), v)
    t, n = o.exp_parts(m.min(m.add(v, v), m.num(2 * C.TANH_ONE)))  # e^2v = 2^n (1 + t), n >= 2
    g = o.scale(m.num(1.0), n)
    den = m.add(m.add(g, m.num(1.0)), o.scale(t, n))  # e^2v + 1, rounded once (g + 1 exact for n <= 52)
    big = m.sub(m.num(1.0), m.div(m.num(2.0), den))  # 1 - 2/(e^2v + 1)
    y = m.select(m.lt(v, m.num(C.TANH_SERIES)), series, m.select(m.lt(v, m.num(C.TANH_ONE)), big, m.num(1.0)))
    return o.nan_through(x, m.copysign(y, x))


ALGORITHMS: dict[str, Callable[..., object]] = {
    "exp": exp, "exp2": exp2, "log": log, "log2": log2,
    "sin": lambda m, x: _trig(m, x, "sin"), "cos": lambda m, x: _trig(m, x, "cos"),
    "tan": lambda m, x: _trig(m, x, "tan"),
    "asin": asin, "acos": acos, "atan": atan, "sinh": sinh, "cosh": cosh, "tanh": tanh,
}


# ---- PTX ---------------------------------------------------------------------------------------------
class PtxArith:
    """``Arith`` emitting binary64 PTX into a ``Builder`` (values in ``rd``, predicates in ``p``)."""

    def __init__(self, b: Builder) -> None:
        self.b = b

    def _f(self, opcode: str, *srcs: str) -> str:
        return self.b.op(opcode, "rd", *srcs)

    def _p(self, opcode: str, *srcs: str) -> str:
        return self.b.op(opcode, "p", *srcs)

    def num(self, x: float) -> str:
        return self._f("mov.f64", f64_imm(x))

    def add(self, x: str, y: str) -> str:
        return self._f("add.rn.f64", x, y)

    def sub(self, x: str, y: str) -> str:
        return self._f("sub.rn.f64", x, y)

    def mul(self, x: str, y: str) -> str:
        return self._f("mul.rn.f64", x, y)

    def div(self, x: str, y: str) -> str:
        return self._f("div.rn.f64", x, y)

    def fma(self, x: str, y: str, z: str) -> str:
        return self._f("fma.rn.f64", x, y, z)

    def sqrt(self, x: str) -> str:
        return self._f("sqrt.rn.f64", x)

    def neg(self, x: str) -> str:
        return self._f("neg.f64", x)

    def abs(self, x: str) -> str:
        return self._f("abs.f64", x)

    def rint(self, x: str) -> str:
        return self._f("cvt.rni.f64.f64", x)

    def trunc(self, x: str) -> str:
        return self._f("cvt.rzi.f64.f64", x)

    def min(self, x: str, y: str) -> str:
        return self._f("min.f64", x, y)

    def max(self, x: str, y: str) -> str:
        return self._f("max.f64", x, y)

    def copysign(self, x: str, sign: str) -> str:
        s = self._f("and.b64", sign, "0x8000000000000000")
        return self._f("or.b64", self._f("and.b64", x, "0x7FFFFFFFFFFFFFFF"), s)

    def pow2(self, n: str) -> str:
        """2^n for integral n in [-1022, 1023]: the exponent field built directly."""
        b = self.b
        e = b.op("add.s32", "r", b.op("cvt.rzi.s32.f64", "r", n), "1023")
        return self._f("mov.b64", f"{{{b.op('mov.b32', 'r', '0')}, {b.op('shl.b32', 'r', e, '20')}}}")

    def frexp(self, x: str) -> tuple[str, str]:
        """(mantissa in [1, 2), exponent) of a positive normal x."""
        b = self.b
        lo, hi = b.regs.new("r"), b.regs.new("r")
        b.ins(f"mov.b64 {{{lo}, {hi}}}, {x}")
        e = b.op("add.s32", "r", b.op("shr.u32", "r", hi, "20"), "-1023")
        top = b.op("or.b32", "r", b.op("and.b32", "r", hi, "0x000FFFFF"), "0x3FF00000")
        return self._f("mov.b64", f"{{{lo}, {top}}}"), self._f("cvt.rn.f64.s32", e)

    def lt(self, x: str, y: str) -> str:
        return self._p("setp.lt.f64", x, y)

    def le(self, x: str, y: str) -> str:
        return self._p("setp.le.f64", x, y)

    def eq(self, x: str, y: str) -> str:
        return self._p("setp.eq.f64", x, y)

    def isnan(self, x: str) -> str:
        return self._p("testp.notanumber.f64", x)

    def or_(self, p: str, q: str) -> str:
        return self._p("or.pred", p, q)

    def select(self, p: str, t: str, f: str) -> str:
        return self._f("selp.b64", t, f, p)


def _lowering(op: str, algorithm: Callable[..., object]) -> Callable[[Builder, str], str]:
    def lower(b: Builder, x: str) -> str:
        b.comment(f"f64 {op}")
        return str(algorithm(PtxArith(b), x))

    return lower


#: op -> PTX lowering of the F64 function (``fn(builder, operand_reg) -> result_reg``)
FUNCTIONS: dict[str, Callable[[Builder, str], str]] = {op: _lowering(op, fn) for op, fn in ALGORITHMS.items()}
