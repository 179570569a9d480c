"""Lowering tables for the pure operators: one entry per (op, operand type).

A plain string is the opcode of a single instruction ``opcode d, a[, b]``; a function
``fn(b, *operand_regs) -> result_reg`` emits a short sequence where PTX alone would not match
docs/semantics.md (division by zero, 5-bit shift masks, -0.0 in min/max, ...).
"""

from __future__ import annotations

from collections.abc import Callable

from vyre.ir.types import DataType
from vyre_cuda.codegen import mathlib
from vyre_cuda.codegen.builder import Builder
from vyre_cuda.codegen.types import ABS_MASK, F32_ONE, SIGN_BIT, f32_imm

U32, I32, F32, BOOL = DataType.U32, DataType.I32, DataType.F32, DataType.BOOL
Lowering = str | Callable[..., str]
ALL_ONES = "0xFFFFFFFF"


def _selp(b: Builder, t: str, f: str, p: str) -> str:
    return b.op("selp.b32", "r", t, f, p)


# ---- integer division: PTX leaves x/0 and MIN/-1 undefined, so divide by a safe divisor -------
def _div_u32(b: Builder, x: str, y: str, rem: bool = False) -> str:
    zero = b.op("setp.eq.u32", "p", y, "0")
    r = b.op("rem.u32" if rem else "div.u32", "r", x, _selp(b, "1", y, zero))
    return _selp(b, "0" if rem else ALL_ONES, r, zero)


def _div_s32(b: Builder, x: str, y: str, rem: bool = False) -> str:
    zero = b.op("setp.eq.s32", "p", y, "0")
    minus1 = b.op("setp.eq.s32", "p", y, "-1")
    bad = b.op("or.pred", "p", zero, minus1)
    r = b.op("rem.s32" if rem else "div.s32", "r", x, _selp(b, "1", y, bad))
    if rem:
        return _selp(b, "0", r, bad)
    r = _selp(b, b.op("neg.s32", "r", x), r, minus1)  # MIN / -1 wraps to MIN
    return _selp(b, ALL_ONES, r, zero)


def _shift(opcode: str) -> Callable[..., str]:
    def lower(b: Builder, x: str, y: str) -> str:
        return b.op(opcode, "r", x, b.op("and.b32", "r", y, "31"))

    return lower


def _rotate(direction: str) -> Callable[..., str]:
    def lower(b: Builder, x: str, y: str) -> str:
        return b.op(f"shf.{direction}.wrap.b32", "r", x, x, y)  # .wrap masks the amount to 5 bits

    return lower


def _fminmax(opcode: str, zeros: str) -> Callable[..., str]:
    """min.f32/max.f32 return the non-NaN operand; equal operands (±0) resolve by sign bits."""

    def lower(b: Builder, x: str, y: str) -> str:
        m = b.op(opcode, "r", x, y)
        same = b.op("setp.eq.f32", "p", x, y)
        return _selp(b, b.op(zeros, "r", x, y), m, same)

    return lower


def _abs_diff_int(t: str) -> Callable[..., str]:
    def lower(b: Builder, x: str, y: str) -> str:
        return b.op("sub.u32", "r", b.op(f"max.{t}", "r", x, y), b.op(f"min.{t}", "r", x, y))

    return lower


def _abs_diff_f32(b: Builder, x: str, y: str) -> str:
    return b.op("and.b32", "r", b.op("sub.rn.f32", "r", x, y), ABS_MASK)


def _sat_add_u32(b: Builder, x: str, y: str) -> str:
    s = b.op("add.u32", "r", x, y)
    return _selp(b, ALL_ONES, s, b.op("setp.lt.u32", "p", s, x))


def _sat_sub_u32(b: Builder, x: str, y: str) -> str:
    return b.op("sub.u32", "r", b.op("max.u32", "r", x, y), y)


def _sat_mul_u32(b: Builder, x: str, y: str) -> str:
    over = b.op("setp.ne.u32", "p", b.op("mul.hi.u32", "r", x, y), "0")
    return _selp(b, ALL_ONES, b.op("mul.lo.u32", "r", x, y), over)


def _clamp_s64_to_s32(b: Builder, w: str) -> str:
    w = b.op("max.s64", "rd", w, "-2147483648")
    w = b.op("min.s64", "rd", w, "2147483647")
    return b.op("cvt.u32.u64", "r", w)


def _sat_mul_s32(b: Builder, x: str, y: str) -> str:
    return _clamp_s64_to_s32(b, b.op("mul.wide.s32", "rd", x, y))


def _sat_addsub_s32(opcode: str) -> Callable[..., str]:
    """Exact 64-bit add/sub, then clamp: the JIT for sm_90 folds ``add.sat.s32`` fed by a
    ``mad.lo`` into a plain wrapping IMAD (found by the fuzzer), so ``.sat`` is not used."""

    def lower(b: Builder, x: str, y: str) -> str:
        wide = b.op(opcode, "rd", b.op("cvt.s64.s32", "rd", x), b.op("cvt.s64.s32", "rd", y))
        return _clamp_s64_to_s32(b, wide)

    return lower


def _bool_eq(b: Builder, x: str, y: str) -> str:
    return b.op("not.pred", "p", b.op("xor.pred", "p", x, y))


_CMP = {"eq": "eq", "ne": "ne", "lt": "lt", "gt": "gt", "le": "le", "ge": "ge"}

BINARY: dict[tuple[str, DataType], Lowering] = {
    ("add", U32): "add.u32", ("add", I32): "add.s32", ("add", F32): "add.rn.f32",
    ("sub", U32): "sub.u32", ("sub", I32): "sub.s32", ("sub", F32): "sub.rn.f32",
    ("mul", U32): "mul.lo.u32", ("mul", I32): "mul.lo.s32", ("mul", F32): "mul.rn.f32",
    ("div", U32): _div_u32, ("div", I32): _div_s32, ("div", F32): "div.rn.f32",
    ("rem", U32): lambda b, x, y: _div_u32(b, x, y, rem=True),
    ("rem", I32): lambda b, x, y: _div_s32(b, x, y, rem=True),
    ("shl", U32): _shift("shl.b32"), ("shl", I32): _shift("shl.b32"),
    ("shr", U32): _shift("shr.u32"), ("shr", I32): _shift("shr.s32"),
    ("rotate_left", U32): _rotate("l"), ("rotate_left", I32): _rotate("l"),
    ("rotate_right", U32): _rotate("r"), ("rotate_right", I32): _rotate("r"),
    ("min", U32): "min.u32", ("min", I32): "min.s32", ("min", F32): _fminmax("min.f32", "or.b32"),
    ("max", U32): "max.u32", ("max", I32): "max.s32", ("max", F32): _fminmax("max.f32", "and.b32"),
    ("abs_diff", U32): _abs_diff_int("u32"), ("abs_diff", I32): _abs_diff_int("s32"),
    ("abs_diff", F32): _abs_diff_f32,
    ("saturating_add", U32): _sat_add_u32, ("saturating_add", I32): _sat_addsub_s32("add.s64"),
    ("saturating_sub", U32): _sat_sub_u32, ("saturating_sub", I32): _sat_addsub_s32("sub.s64"),
    ("saturating_mul", U32): _sat_mul_u32, ("saturating_mul", I32): _sat_mul_s32,
    ("mul_high", U32): "mul.hi.u32", ("mul_high", I32): "mul.hi.s32",
    ("and_", BOOL): "and.pred", ("or_", BOOL): "or.pred",
    ("eq", BOOL): _bool_eq, ("ne", BOOL): "xor.pred",
    **{(f"bit{op}", t): f"{op}.{'pred' if t is BOOL else 'b32'}" for op in ("and", "or", "xor")
       for t in (U32, I32, BOOL)},
    **{(op, t): f"setp.{_CMP[op]}.{s}" for op in _CMP for t, s in ((U32, "u32"), (I32, "s32"))},
    **{(op, F32): f"setp.{'neu' if op == 'ne' else op}.f32" for op in _CMP},
}

# ---- unary ------------------------------------------------------------------------------------------
def _abs_s32(b: Builder, x: str) -> str:
    # (x ^ m) + (m & 1) with m = x >> 31 (arithmetic), an unsigned add: abs(MIN) = MIN, as the oracle
    # says. Not abs.s32, nor the (x ^ m) - m idiom ptxas recognises as abs: ptxas takes an abs to be
    # non-negative, so rem(abs(MIN), d) lost its sign, abs(MIN) < 0 folded to false and
    # abs(MIN) >> 31 to 0 (found by the generated-program tests; seen in ptxas 13.0's sm_90 code).
    # Not max(x, -x): on sm_90 the JIT fuses that max with a following max into one 3-input
    # VIMNMX3 and drops the negation (found by the fuzzer).
    mask = b.op("shr.s32", "r", x, "31")
    return b.op("add.u32", "r", b.op("xor.b32", "r", x, mask), b.op("and.b32", "r", mask, "1"))


def _sign_s32(b: Builder, x: str) -> str:
    pos = _selp(b, "1", "0", b.op("setp.gt.s32", "p", x, "0"))
    return _selp(b, ALL_ONES, pos, b.op("setp.lt.s32", "p", x, "0"))


def _sign_f32(b: Builder, x: str) -> str:
    r = _selp(b, F32_ONE, x, b.op("setp.gt.f32", "p", x, "0f00000000"))  # NaN and ±0 keep x
    return _selp(b, f32_imm(-1.0), r, b.op("setp.lt.f32", "p", x, "0f00000000"))


def _round_f32(b: Builder, x: str) -> str:
    """Half away from zero: t = trunc(x); t + copysign(1, x) when |x - t| >= 0.5 (all exact)."""
    t = b.op("cvt.rzi.f32.f32", "r", x)
    frac = b.op("and.b32", "r", b.op("sub.rn.f32", "r", x, t), ABS_MASK)
    one = b.op("or.b32", "r", b.op("and.b32", "r", x, SIGN_BIT), F32_ONE)
    up = b.op("setp.ge.f32", "p", frac, f32_imm(0.5))
    return _selp(b, b.op("add.rn.f32", "r", t, one), t, up)


def _inverse_sqrt(b: Builder, x: str) -> str:
    """1 / sqrt(x) from two correctly rounded steps: at most ~1 ULP, exact specials."""
    return b.op("rcp.rn.f32", "r", b.op("sqrt.rn.f32", "r", x))


UNARY: dict[tuple[str, DataType], Lowering] = {
    ("neg", U32): "neg.s32", ("neg", I32): "neg.s32",
    ("neg", F32): lambda b, x: b.op("xor.b32", "r", x, SIGN_BIT),
    ("abs", U32): lambda b, x: x, ("abs", I32): _abs_s32,
    ("abs", F32): lambda b, x: b.op("and.b32", "r", x, ABS_MASK),
    ("sign", U32): lambda b, x: _selp(b, "1", "0", b.op("setp.ne.u32", "p", x, "0")),
    ("sign", I32): _sign_s32, ("sign", F32): _sign_f32,
    ("not_", BOOL): "not.pred",
    **{(op, t): code for t in (U32, I32) for op, code in (
        ("bitnot", "not.b32"), ("popcount", "popc.b32"), ("clz", "clz.b32"), ("reverse_bits", "brev.b32"),
        ("ctz", lambda b, x: b.op("clz.b32", "r", b.op("brev.b32", "r", x))))},
    ("sqrt", F32): "sqrt.rn.f32", ("reciprocal", F32): "rcp.rn.f32",
    ("inverse_sqrt", F32): _inverse_sqrt,
    ("floor", F32): "cvt.rmi.f32.f32", ("ceil", F32): "cvt.rpi.f32.f32", ("trunc", F32): "cvt.rzi.f32.f32",
    ("round", F32): _round_f32,
    ("is_nan", F32): "testp.notanumber.f32", ("is_inf", F32): "testp.infinite.f32",
    ("is_finite", F32): "testp.finite.f32",
    **{(op, F32): fn for op, fn in mathlib.FUNCTIONS.items()},
}


def apply(table: dict[tuple[str, DataType], Lowering], key: tuple[str, DataType], b: Builder,
          kind: str, *regs: str) -> str:
    """Emit the lowering of ``key`` on operand registers ``regs``; returns the result register."""
    low = table[key]
    if isinstance(low, str):
        return b.op(low, kind, *regs)
    return low(b, *regs)
