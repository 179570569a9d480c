"""Transcendental F32 functions, evaluated in binary64 and rounded once to F32.

Each function widens its F32 operand exactly to F64, reduces the argument (Cody-Waite with a
two-part constant: exact in F64 for every F32 input in the checked domains), evaluates a Taylor
polynomial whose truncation error is below 2^-45, and rounds the F64 result to F32 with
``cvt.rn.f32.f64``. The F64 error is ~2^-45 relative, so results are within ~0.5 ULP of the
correctly rounded value, well inside docs/semantics.md's bounds. Specials (NaN, ±inf, ±0) are
selected explicitly per C99 Annex F. Costs a few dozen FP64 instructions per call, which is
cheap on data-centre GPUs (sm_80/sm_90 run FP64 at half the FP32 rate).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

from vyre_cuda._codegen.builder import Builder
from vyre_cuda._codegen.types import ABS_MASK, F32_NAN, F32_NEG_INF, SIGN_BIT, f32_imm, f64_imm

LOG2E = f64_imm(1 / math.log(2))
LN2 = f64_imm(math.log(2))
# Cody-Waite pairs, negated for fma(n, -C, v): n * LN2_HI is exact for |n| < 2^11 (0x3FE62E42FEE00000)
NEG_LN2_HI = f64_imm(-6.93147180369123816490e-01)
NEG_LN2_LO = f64_imm(-1.90821492927058770002e-10)
TWO_OVER_PI = f64_imm(2 / math.pi)
PIO2_HI = f64_imm(1.5707963267948966)  # pi/2 rounded to F64
NEG_PIO2_HI = f64_imm(-1.5707963267948966)
NEG_PIO2_LO = f64_imm(-6.123233995736766e-17)  # -(pi/2 - PIO2_HI)
SQRT2 = f64_imm(math.sqrt(2))
ONE, HALF, TWO = f64_imm(1.0), f64_imm(0.5), f64_imm(2.0)


def _series(terms: int, coef: Callable[[int], Fraction]) -> list[str]:
    return [f64_imm(float(coef(k))) for k in range(terms)]


#: e^r = sum r^k / k!, |r| <= ln2/2: 13 terms leave < 2^-50
EXP_COEFS = _series(13, lambda k: Fraction(1, math.factorial(k)))
#: sin r / r and cos r in z = r^2, |r| <= pi/4 (+ tiny)
SIN_COEFS = _series(9, lambda k: Fraction((-1) ** k, math.factorial(2 * k + 1)))
COS_COEFS = _series(10, lambda k: Fraction((-1) ** k, math.factorial(2 * k)))
#: sinh r / r in z = r^2 for |r| < 1
SINH_COEFS = _series(9, lambda k: Fraction(1, math.factorial(2 * k + 1)))
#: atanh-series of log: log(1+f) = 2s * sum z^k/(2k+1), s = f/(2+f), z = s^2 <= 0.0295
LOG_COEFS = _series(10, lambda k: Fraction(1, 2 * k + 1))
#: atan w / w in z = w^2, |w| <= tan(pi/8)
ATAN_COEFS = _series(18, lambda k: Fraction((-1) ** k, 2 * k + 1))


class F64:
    """Binary64 arithmetic on ``rd`` registers of a ``Builder``."""

    def __init__(self, b: Builder) -> None:
        self.b = b

    def op(self, opcode: str, *srcs: str) -> str:
        return self.b.op(opcode, "rd", *srcs)

    def add(self, x: str, y: str) -> str:
        return self.op("add.rn.f64", x, y)

    def sub(self, x: str, y: str) -> str:
        return self.op("sub.rn.f64", x, y)

    def mul(self, x: str, y: str) -> str:
        return self.op("mul.rn.f64", x, y)

    def fma(self, x: str, y: str, z: str) -> str:
        return self.op("fma.rn.f64", x, y, z)

    def div(self, x: str, y: str) -> str:
        return self.op("div.rn.f64", x, y)

    def const(self, imm: str) -> str:
        return self.op("mov.b64", imm)

    def select(self, t: str, f: str, p: str) -> str:
        return self.op("selp.b64", t, f, p)

    def poly(self, x: str, coefs: Sequence[str]) -> str:
        """Horner evaluation of sum coefs[k] * x^k."""
        acc = self.fma(x, coefs[-1], coefs[-2])
        for c in reversed(coefs[:-2]):
            acc = self.fma(acc, x, c)
        return acc

    def widen(self, x32: str) -> str:
        return self.op("cvt.f64.f32", x32)

    def narrow(self, x: str) -> str:
        return self.b.op("cvt.rn.f32.f64", "r", x)

    def pow2(self, n: str) -> str:
        """2^n for an integral F64 ``n`` in the normal exponent range."""
        b = self.b
        hi = b.op("shl.b32", "r", b.op("add.s32", "r", b.op("cvt.rzi.s32.f64", "r", n), "1023"), "20")
        return self.op("mov.b64", f"{{{b.op('mov.b32', 'r', '0')}, {hi}}}")


# ---- shared cores ---------------------------------------------------------------------------------
def _exp_core(m: F64, v: str) -> str:
    """e^v for |v| <= ~700 with n = rint(v / ln2) in the normal exponent range."""
    n = m.op("cvt.rni.f64.f64", m.mul(v, LOG2E))
    r = m.fma(n, NEG_LN2_LO, m.fma(n, NEG_LN2_HI, v))
    return m.mul(m.poly(r, EXP_COEFS), m.pow2(n))


def _atan_nonneg(m: F64, t: str) -> str:
    """atan(t) for t >= 0 (or +inf/NaN): 1/t above 1, then one half-angle step, then a series."""
    inv = m.b.op("setp.gt.f64", "p", t, ONE)
    u = m.select(m.div(m.const(ONE), t), t, inv)
    w = m.div(u, m.add(m.op("sqrt.rn.f64", m.fma(u, u, ONE)), ONE))  # tan(atan(u) / 2)
    a = m.mul(m.mul(w, m.poly(m.mul(w, w), ATAN_COEFS)), TWO)
    return m.select(m.sub(m.const(PIO2_HI), a), a, inv)


def _with_sign(b: Builder, result: str, x: str) -> str:
    """``result`` (non-negative F32) with the sign of ``x``: odd functions computed on |x|."""
    return b.op("xor.b32", "r", result, b.op("and.b32", "r", x, SIGN_BIT))


def _nan_passthrough(b: Builder, result: str, x: str) -> str:
    return b.op("selp.b32", "r", x, result, b.op("testp.notanumber.f32", "p", x))


def _clamped(b: Builder, x: str, lo: float, hi: float) -> str:
    return b.op("max.f32", "r", b.op("min.f32", "r", x, f32_imm(hi)), f32_imm(lo))


# ---- exponentials and logarithms ------------------------------------------------------------------
def exp(b: Builder, x: str) -> str:
    m = F64(b)
    y = m.narrow(_exp_core(m, m.widen(_clamped(b, x, -104.0, 89.0))))
    return _nan_passthrough(b, y, x)


def exp2(b: Builder, x: str) -> str:
    m = F64(b)
    v = m.widen(_clamped(b, x, -152.0, 129.0))
    n = m.op("cvt.rni.f64.f64", v)
    p = m.poly(m.mul(m.sub(v, n), LN2), EXP_COEFS)  # v - n is exact
    return _nan_passthrough(b, m.narrow(m.mul(p, m.pow2(n))), x)


def _log(b: Builder, x: str, base2: bool) -> str:
    m = F64(b)
    v = m.widen(x)
    lo, hi = b.regs.new("r"), b.regs.new("r")
    b.ins(f"mov.b64 {{{lo}, {hi}}}, {v}")
    e = b.op("add.s32", "r", b.op("shr.u32", "r", hi, "20"), "-1023")
    mant = m.op("mov.b64", f"{{{lo}, {b.op('or.b32', 'r', b.op('and.b32', 'r', hi, '0x000FFFFF'), '0x3FF00000')}}}")
    big = b.op("setp.gt.f64", "p", mant, SQRT2)  # mant in [sqrt(1/2), sqrt(2))
    mant = m.select(m.mul(mant, HALF), mant, big)
    e = b.op("add.s32", "r", e, b.op("selp.s32", "r", "1", "0", big))
    f = m.sub(mant, ONE)
    s = m.div(f, m.add(f, TWO))
    log1p = m.mul(m.mul(s, TWO), m.poly(m.mul(s, s), LOG_COEFS))
    ef = m.op("cvt.rn.f64.s32", e)
    y = m.narrow(m.fma(log1p, LOG2E, ef) if base2 else m.fma(ef, LN2, log1p))
    y = b.op("selp.b32", "r", x, y, b.op("testp.infinite.f32", "p", x))
    y = _nan_passthrough(b, y, x)
    y = b.op("selp.b32", "r", F32_NAN, y, b.op("setp.lt.f32", "p", x, "0f00000000"))
    return b.op("selp.b32", "r", F32_NEG_INF, y, b.op("setp.eq.f32", "p", x, "0f00000000"))


# ---- trigonometric ---------------------------------------------------------------------------------
#: 2/pi as a binary fraction, 32 bits a word (enough for every finite F32 exponent)
TWO_OVER_PI_WORDS = (0xA2F9836E, 0x4E441529, 0xFC2757D1, 0xF534DDC0, 0xDB629599, 0x3C439041, 0xFE5163AB)
PH_SCALE = f64_imm(math.ldexp(math.pi / 2, -64))
PH_THRESHOLD = "0x4E800000"  # 2^30: below it one Cody-Waite step is exact


def _payne_hanek(b: Builder, a: str) -> tuple[str, str]:
    """(r, q) with |x| = (4n + q + r / (pi/2)) * pi/2 for finite |x| >= 2^30 (bits ``a``).

    |x| = M * 2^s; only the 96 bits of 2/pi from bit s-1 on matter modulo 4, so M times that
    window (a 120-bit integer product) holds the quadrant (bits 94..95) and the fraction.
    """
    m = F64(b)
    mant = b.op("or.b32", "r", b.op("and.b32", "r", a, "0x007FFFFF"), "0x00800000")
    pos = b.op("add.s32", "r", b.op("shr.u32", "r", a, "23"), "-152")  # s - 2
    wi, off = b.op("shr.u32", "r", pos, "5"), b.op("and.b32", "r", pos, "31")
    is_ = [b.op("setp.eq.u32", "p", wi, str(w)) for w in (1, 2, 3)]

    def word(j: int) -> str:  # TWO_OVER_PI_WORDS[wi + j]
        v = b.op("mov.b32", "r", f"0x{TWO_OVER_PI_WORDS[j]:08X}")
        for w, p in zip((1, 2, 3), is_):
            v = b.op("selp.b32", "r", f"0x{TWO_OVER_PI_WORDS[w + j]:08X}", v, p)
        return v

    t = [word(j) for j in range(4)]
    w2, w1, w0 = (b.op("shf.l.clamp.b32", "r", t[j + 1], t[j], off) for j in range(3))
    lo = b.op("mul.wide.u32", "rd", mant, w0)
    mid = b.op("mad.wide.u32", "rd", mant, w1, b.op("shr.u64", "rd", lo, "32"))
    hi = b.op("mad.wide.u32", "rd", mant, w2, b.op("shr.u64", "rd", mid, "32"))
    low64 = b.op("or.b64", "rd", b.op("shl.b64", "rd", mid, "32"), b.op("and.b64", "rd", lo, "0xFFFFFFFF"))
    frac = b.op("or.b64", "rd", b.op("shl.b64", "rd", hi, "34"), b.op("shr.u64", "rd", low64, "30"))
    q = b.op("add.u32", "r", b.op("cvt.u32.u64", "r", b.op("shr.u64", "rd", hi, "30")),
             b.op("cvt.u32.u64", "r", b.op("shr.u64", "rd", frac, "63")))  # a fraction >= 1/2 rounds up
    return m.mul(m.op("cvt.rn.f64.s64", frac), PH_SCALE), q


def _trig(b: Builder, x: str, which: str) -> str:
    """sin/cos/tan: reduce |x| by multiples of pi/2, pick the quadrant's polynomial.

    Below 2^30 one Cody-Waite step in F64 is exact; larger finite inputs branch to a
    Payne-Hanek reduction, so every finite input is reduced accurately.
    """
    m = F64(b)
    a = b.op("and.b32", "r", x, ABS_MASK)
    v = m.widen(a)
    k = m.op("cvt.rni.f64.f64", m.mul(v, TWO_OVER_PI))
    r = m.op("mov.b64", m.fma(k, NEG_PIO2_LO, m.fma(k, NEG_PIO2_HI, v)))
    q = b.op("cvt.u32.u64", "r", b.op("cvt.rzi.u64.f64", "rd", k))
    big = b.op("and.pred", "p", b.op("setp.ge.u32", "p", a, PH_THRESHOLD), b.op("setp.lt.u32", "p", a, "0x7F800000"))
    done = b.new_label()
    b.ins(f"bra {done}", f"!{big}")
    r_big, q_big = _payne_hanek(b, a)
    b.ins(f"mov.b64 {r}, {r_big}")
    b.ins(f"mov.b32 {q}, {q_big}")
    b.place(done)
    z = m.mul(r, r)
    s, c = m.mul(r, m.poly(z, SIN_COEFS)), m.poly(z, COS_COEFS)
    odd = b.op("setp.ne.u32", "p", b.op("and.b32", "r", q, "1"), "0")
    if which == "tan":
        t = m.div(m.select(c, s, odd), m.select(s, c, odd))
        return _with_sign(b, m.narrow(m.select(m.op("neg.f64", t), t, odd)), x)
    if which == "sin":
        val, flip = m.select(c, s, odd), q
    else:
        val, flip = m.select(s, c, odd), b.op("add.u32", "r", q, "1")
    neg = b.op("setp.ne.u32", "p", b.op("and.b32", "r", flip, "2"), "0")
    y = m.narrow(m.select(m.op("neg.f64", val), val, neg))
    return _with_sign(b, y, x) if which == "sin" else y


def _asin_abs(m: F64, x: str) -> str:
    """asin(|x|) in F64 as atan(|x| / sqrt(1 - x^2)); NaN for |x| > 1."""
    v = m.widen(m.b.op("and.b32", "r", x, ABS_MASK))
    return _atan_nonneg(m, m.div(v, m.op("sqrt.rn.f64", m.fma(m.op("neg.f64", v), v, ONE))))


def asin(b: Builder, x: str) -> str:
    m = F64(b)
    return _with_sign(b, m.narrow(_asin_abs(m, x)), x)


def acos(b: Builder, x: str) -> str:
    m = F64(b)
    a = _asin_abs(m, x)
    a = m.select(m.op("neg.f64", a), a, b.op("setp.lt.f32", "p", x, "0f00000000"))
    return m.narrow(m.sub(m.const(PIO2_HI), a))


def atan(b: Builder, x: str) -> str:
    m = F64(b)
    return _with_sign(b, m.narrow(_atan_nonneg(m, m.widen(b.op("and.b32", "r", x, ABS_MASK)))), x)


# ---- hyperbolic -------------------------------------------------------------------------------------
def _hyperbolic(b: Builder, x: str, which: str) -> str:
    """sinh/cosh/tanh of |x| (clamped to 100: every result is then exact or out of F32 range)."""
    m = F64(b)
    v = m.widen(b.op("min.f32", "r", b.op("and.b32", "r", x, ABS_MASK), f32_imm(100.0)))
    e = _exp_core(m, v)
    ei = m.div(m.const(ONE), e)
    cosh = m.mul(m.add(e, ei), HALF)
    if which == "cosh":
        return _nan_passthrough(b, m.narrow(cosh), x)
    small = b.op("setp.lt.f64", "p", v, ONE)  # e - 1/e cancels for small |x|: use the series
    sinh = m.select(m.mul(v, m.poly(m.mul(v, v), SINH_COEFS)), m.mul(m.sub(e, ei), HALF), small)
    y = m.narrow(m.div(sinh, cosh) if which == "tanh" else sinh)
    return _nan_passthrough(b, _with_sign(b, y, x), x)


FUNCTIONS: dict[str, Callable[[Builder, str], str]] = {
    "exp": exp, "exp2": exp2,
    "log": lambda b, x: _log(b, x, base2=False), "log2": lambda b, x: _log(b, x, base2=True),
    "sin": lambda b, x: _trig(b, x, "sin"), "cos": lambda b, x: _trig(b, x, "cos"),
    "tan": lambda b, x: _trig(b, x, "tan"),
    "asin": asin, "acos": acos, "atan": atan,
    "sinh": lambda b, x: _hyperbolic(b, x, "sinh"), "cosh": lambda b, x: _hyperbolic(b, x, "cosh"),
    "tanh": lambda b, x: _hyperbolic(b, x, "tanh"),
}
