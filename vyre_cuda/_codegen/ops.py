"""Lowering tables for the pure operators: one entry per (op, operand type).

A plain string is the opcode of a single instruction ``opcode d, a[, b]``; a function
``fn(b, *operand_regs) -> result_reg`` emits a short sequence where PTX alone would not match
docs/semantics.md (division by zero, shift masks, -0.0 in min/max, ...). The 32-bit and 64-bit
entries come from the same lowerings, spelled for the width by a ``Width``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vyre.ir.op import Op
from vyre.ir.types import DataType
from vyre_cuda._codegen import mathlib, mathlib64
from vyre_cuda._codegen.builder import Builder
from vyre_cuda._codegen.types import f32_imm, f64_imm

U32, I32, F32, BOOL = DataType.U32, DataType.I32, DataType.F32, DataType.BOOL
U64, I64, F64 = DataType.U64, DataType.I64, DataType.F64
Lowering = str | Callable[..., str]
ALL_ONES = "0xFFFFFFFF"


@dataclass(frozen=True)
class Width:
    """PTX spellings of one register width: type suffixes, register class and constants."""

    bits: int
    u: str  # unsigned suffix
    s: str  # signed suffix
    f: str  # float suffix
    b: str  # untyped bits suffix
    kind: str  # register class
    ones: str  # all ones
    sign: str  # the sign bit
    magnitude: str  # every bit but the sign bit
    one: str  # float 1.0
    zero: str  # float +0.0

    def imm(self, x: float) -> str:
        """``x`` as a float immediate of this width."""
        return f64_imm(x) if self.bits == 64 else f32_imm(x)


W32 = Width(32, "u32", "s32", "f32", "b32", "r", ALL_ONES, "0x80000000", "0x7FFFFFFF", f32_imm(1.0), "0f00000000")
W64 = Width(64, "u64", "s64", "f64", "b64", "rd", "0xFFFFFFFFFFFFFFFF", "0x8000000000000000",
            "0x7FFFFFFFFFFFFFFF", f64_imm(1.0), "0d0000000000000000")
#: (unsigned, signed, float) type of each width
TYPES = ((W32, U32, I32, F32), (W64, U64, I64, F64))


def width_of(dtype: DataType) -> Width:
    return W64 if dtype.is_wide else W32


def _selp(b: Builder, t: str, f: str, p: str, w: Width = W32) -> str:
    return b.op(f"selp.{w.b}", w.kind, t, f, p)


# ---- integer division: PTX leaves x/0 and MIN/-1 undefined, so divide by a safe divisor -------
def _div_u(w: Width, rem: bool) -> Callable[..., str]:
    def lower(b: Builder, x: str, y: str) -> str:
        zero = b.op(f"setp.eq.{w.u}", "p", y, "0")
        r = b.op(f"{'rem' if rem else 'div'}.{w.u}", w.kind, x, _selp(b, "1", y, zero, w))
        return _selp(b, "0" if rem else w.ones, r, zero, w)

    return lower


def _div_s(w: Width, rem: bool) -> Callable[..., str]:
    def lower(b: Builder, x: str, y: str) -> str:
        zero = b.op(f"setp.eq.{w.s}", "p", y, "0")
        minus1 = b.op(f"setp.eq.{w.s}", "p", y, "-1")
        bad = b.op("or.pred", "p", zero, minus1)
        r = b.op(f"{'rem' if rem else 'div'}.{w.s}", w.kind, x, _selp(b, "1", y, bad, w))
        if rem:
            return _selp(b, "0", r, bad, w)
        r = _selp(b, b.op(f"neg.{w.s}", w.kind, x), r, minus1, w)  # MIN / -1 wraps to MIN
        return _selp(b, w.ones, r, zero, w)

    return lower


def _shift(opcode: str, w: Width) -> Callable[..., str]:
    """Shift by the amount masked to the width (the amount is a U32 register at either width)."""
    def lower(b: Builder, x: str, y: str) -> str:
        return b.op(opcode, w.kind, x, b.op("and.b32", "r", y, str(w.bits - 1)))

    return lower


def _rotate(direction: str) -> Callable[..., str]:
    def lower(b: Builder, x: str, y: str) -> str:
        return b.op(f"shf.{direction}.wrap.b32", "r", x, x, y)  # .wrap masks the amount to 5 bits

    return lower


def _rotate64(left: bool) -> Callable[..., str]:
    """(x << s) | (x >> (64 - s) & 63) with s = amount & 63 (s = 0 gives x | x); right: mirrored."""
    def lower(b: Builder, x: str, y: str) -> str:
        s = b.op("and.b32", "r", y, "63")
        t = b.op("and.b32", "r", b.op("sub.u32", "r", "64", s), "63")
        first, second = ("shl.b64", "shr.b64") if left else ("shr.b64", "shl.b64")
        return b.op("or.b64", "rd", b.op(first, "rd", x, s), b.op(second, "rd", x, t))

    return lower


def _fminmax(opcode: str, zeros: str, w: Width) -> Callable[..., str]:
    """min/max return the non-NaN operand; equal operands (±0) resolve by sign bits."""

    def lower(b: Builder, x: str, y: str) -> str:
        m = b.op(f"{opcode}.{w.f}", w.kind, x, y)
        same = b.op(f"setp.eq.{w.f}", "p", x, y)
        return _selp(b, b.op(f"{zeros}.{w.b}", w.kind, x, y), m, same, w)

    return lower


def _abs_diff_int(t: str, w: Width) -> Callable[..., str]:
    def lower(b: Builder, x: str, y: str) -> str:
        return b.op(f"sub.{w.u}", w.kind, b.op(f"max.{t}", w.kind, x, y), b.op(f"min.{t}", w.kind, x, y))

    return lower


def _abs_diff_float(w: Width) -> Callable[..., str]:
    def lower(b: Builder, x: str, y: str) -> str:
        return b.op(f"and.{w.b}", w.kind, b.op(f"sub.rn.{w.f}", w.kind, x, y), w.magnitude)

    return lower


def _sat_add_u(w: Width) -> Callable[..., str]:
    def lower(b: Builder, x: str, y: str) -> str:
        s = b.op(f"add.{w.u}", w.kind, x, y)
        return _selp(b, w.ones, s, b.op(f"setp.lt.{w.u}", "p", s, x), w)

    return lower


def _sat_sub_u(w: Width) -> Callable[..., str]:
    def lower(b: Builder, x: str, y: str) -> str:
        return b.op(f"sub.{w.u}", w.kind, b.op(f"max.{w.u}", w.kind, x, y), y)

    return lower


def _sat_mul_u(w: Width) -> Callable[..., str]:
    def lower(b: Builder, x: str, y: str) -> str:
        over = b.op(f"setp.ne.{w.u}", "p", b.op(f"mul.hi.{w.u}", w.kind, x, y), "0")
        return _selp(b, w.ones, b.op(f"mul.lo.{w.u}", w.kind, x, y), over, w)

    return lower


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


def _saturate_s64(b: Builder, value: str, over: str, negative: str) -> str:
    """``value``, or MIN/MAX (after ``negative``) where ``over``."""
    limit = _selp(b, W64.sign, W64.magnitude, negative, W64)
    return _selp(b, limit, value, over, W64)


def _sat_add_s64(b: Builder, x: str, y: str) -> str:
    """Wrapping sum; it overflowed when its sign differs from both operands' ((x ^ s) & (y ^ s) < 0)."""
    s = b.op("add.s64", "rd", x, y)
    flags = b.op("and.b64", "rd", b.op("xor.b64", "rd", x, s), b.op("xor.b64", "rd", y, s))
    return _saturate_s64(b, s, b.op("setp.lt.s64", "p", flags, "0"), b.op("setp.lt.s64", "p", x, "0"))


def _sat_sub_s64(b: Builder, x: str, y: str) -> str:
    """Wrapping difference; it overflowed when the operands' signs differ and the result's sign is y's."""
    s = b.op("sub.s64", "rd", x, y)
    flags = b.op("and.b64", "rd", b.op("xor.b64", "rd", x, y), b.op("xor.b64", "rd", x, s))
    return _saturate_s64(b, s, b.op("setp.lt.s64", "p", flags, "0"), b.op("setp.lt.s64", "p", x, "0"))


def _sat_mul_s64(b: Builder, x: str, y: str) -> str:
    """The 128-bit product fits when its high half repeats the low half's sign; else its sign picks the limit."""
    hi = b.op("mul.hi.s64", "rd", x, y)
    lo = b.op("mul.lo.s64", "rd", x, y)
    over = b.op("setp.ne.s64", "p", hi, b.op("shr.s64", "rd", lo, "63"))
    return _saturate_s64(b, lo, over, b.op("setp.lt.s64", "p", hi, "0"))


def _bool_eq(b: Builder, x: str, y: str) -> str:
    return b.op("not.pred", "p", b.op("xor.pred", "p", x, y))


_CMP = {Op.EQ: "eq", Op.NE: "ne", Op.LT: "lt", Op.GT: "gt", Op.LE: "le", Op.GE: "ge"}


def _binary_table(w: Width, u: DataType, s: DataType, f: DataType) -> dict[tuple[str, DataType], Lowering]:
    """The binary lowerings on the unsigned, signed and float type of width ``w``."""
    table: dict[tuple[str, DataType], Lowering] = {
        (Op.ADD, u): f"add.{w.u}", (Op.ADD, s): f"add.{w.s}", (Op.ADD, f): f"add.rn.{w.f}",
        (Op.SUB, u): f"sub.{w.u}", (Op.SUB, s): f"sub.{w.s}", (Op.SUB, f): f"sub.rn.{w.f}",
        (Op.MUL, u): f"mul.lo.{w.u}", (Op.MUL, s): f"mul.lo.{w.s}", (Op.MUL, f): f"mul.rn.{w.f}",
        (Op.DIV, u): _div_u(w, False), (Op.DIV, s): _div_s(w, False), (Op.DIV, f): f"div.rn.{w.f}",
        (Op.REM, u): _div_u(w, True), (Op.REM, s): _div_s(w, True),
        (Op.SHL, u): _shift(f"shl.{w.b}", w), (Op.SHL, s): _shift(f"shl.{w.b}", w),
        (Op.SHR, u): _shift(f"shr.{w.u}", w), (Op.SHR, s): _shift(f"shr.{w.s}", w),
        (Op.MIN, u): f"min.{w.u}", (Op.MIN, s): f"min.{w.s}", (Op.MIN, f): _fminmax("min", "or", w),
        (Op.MAX, u): f"max.{w.u}", (Op.MAX, s): f"max.{w.s}", (Op.MAX, f): _fminmax("max", "and", w),
        (Op.ABS_DIFF, u): _abs_diff_int(w.u, w), (Op.ABS_DIFF, s): _abs_diff_int(w.s, w),
        (Op.ABS_DIFF, f): _abs_diff_float(w),
        (Op.SATURATING_ADD, u): _sat_add_u(w), (Op.SATURATING_SUB, u): _sat_sub_u(w),
        (Op.SATURATING_MUL, u): _sat_mul_u(w),
        (Op.MUL_HIGH, u): f"mul.hi.{w.u}", (Op.MUL_HIGH, s): f"mul.hi.{w.s}",
        **{(Op(f"bit{op}"), t): f"{op}.{w.b}" for op in ("and", "or", "xor") for t in (u, s)},
        **{(op, t): f"setp.{_CMP[op]}.{sfx}" for op in _CMP for t, sfx in ((u, w.u), (s, w.s))},
        **{(op, f): f"setp.{'neu' if op == 'ne' else op}.{w.f}" for op in _CMP},
    }
    if w.bits == 32:
        table.update({
            (Op.ROTATE_LEFT, u): _rotate("l"), (Op.ROTATE_LEFT, s): _rotate("l"),
            (Op.ROTATE_RIGHT, u): _rotate("r"), (Op.ROTATE_RIGHT, s): _rotate("r"),
            (Op.SATURATING_ADD, s): _sat_addsub_s32("add.s64"), (Op.SATURATING_SUB, s): _sat_addsub_s32("sub.s64"),
            (Op.SATURATING_MUL, s): _sat_mul_s32,
        })
    else:
        table.update({
            (Op.ROTATE_LEFT, u): _rotate64(True), (Op.ROTATE_LEFT, s): _rotate64(True),
            (Op.ROTATE_RIGHT, u): _rotate64(False), (Op.ROTATE_RIGHT, s): _rotate64(False),
            (Op.SATURATING_ADD, s): _sat_add_s64, (Op.SATURATING_SUB, s): _sat_sub_s64,
            (Op.SATURATING_MUL, s): _sat_mul_s64,
        })
    return table


BINARY: dict[tuple[str, DataType], Lowering] = {
    **{k: v for types in TYPES for k, v in _binary_table(*types).items()},
    (Op.AND_, BOOL): "and.pred", (Op.OR_, BOOL): "or.pred",
    (Op.EQ, BOOL): _bool_eq, (Op.NE, BOOL): "xor.pred",
    **{(Op(f"bit{op}"), BOOL): f"{op}.pred" for op in ("and", "or", "xor")},
}


# ---- unary ------------------------------------------------------------------------------------------
def _abs_s(w: Width) -> Callable[..., str]:
    # (x ^ m) + (m & 1) with m = x >> (w - 1) (arithmetic), an unsigned add: abs(MIN) = MIN, as the
    # oracle says. Not abs.s32, nor the (x ^ m) - m idiom ptxas recognises as abs: ptxas takes an abs to
    # be non-negative, so rem(abs(MIN), d) lost its sign, abs(MIN) < 0 folded to false and
    # abs(MIN) >> 31 to 0 (found by the generated-program tests; seen in ptxas 13.0's sm_90 code).
    # Not max(x, -x): on sm_90 the JIT fuses that max with a following max into one 3-input
    # VIMNMX3 and drops the negation (found by the fuzzer).
    def lower(b: Builder, x: str) -> str:
        mask = b.op(f"shr.{w.s}", w.kind, x, str(w.bits - 1))
        return b.op(f"add.{w.u}", w.kind, b.op(f"xor.{w.b}", w.kind, x, mask), b.op(f"and.{w.b}", w.kind, mask, "1"))

    return lower


def _sign_u(w: Width) -> Callable[..., str]:
    return lambda b, x: _selp(b, "1", "0", b.op(f"setp.ne.{w.u}", "p", x, "0"), w)


def _sign_s(w: Width) -> Callable[..., str]:
    def lower(b: Builder, x: str) -> str:
        pos = _selp(b, "1", "0", b.op(f"setp.gt.{w.s}", "p", x, "0"), w)
        return _selp(b, w.ones, pos, b.op(f"setp.lt.{w.s}", "p", x, "0"), w)

    return lower


def _sign_f(w: Width) -> Callable[..., str]:
    def lower(b: Builder, x: str) -> str:
        r = _selp(b, w.one, x, b.op(f"setp.gt.{w.f}", "p", x, w.zero), w)  # NaN and ±0 keep x
        return _selp(b, w.imm(-1.0), r, b.op(f"setp.lt.{w.f}", "p", x, w.zero), w)

    return lower


def _round_f(w: Width) -> Callable[..., str]:
    """Half away from zero: t = trunc(x); t + copysign(1, x) when |x - t| >= 0.5 (all exact)."""
    def lower(b: Builder, x: str) -> str:
        t = b.op(f"cvt.rzi.{w.f}.{w.f}", w.kind, x)
        frac = b.op(f"and.{w.b}", w.kind, b.op(f"sub.rn.{w.f}", w.kind, x, t), w.magnitude)
        one = b.op(f"or.{w.b}", w.kind, b.op(f"and.{w.b}", w.kind, x, w.sign), w.one)
        up = b.op(f"setp.ge.{w.f}", "p", frac, w.imm(0.5))
        return _selp(b, b.op(f"add.rn.{w.f}", w.kind, t, one), t, up, w)

    return lower


def _inverse_sqrt(w: Width) -> Callable[..., str]:
    """1 / sqrt(x) from two correctly rounded steps: at most ~1 ULP, exact specials (F64: the oracle's
    definition exactly)."""
    return lambda b, x: b.op(f"rcp.rn.{w.f}", w.kind, b.op(f"sqrt.rn.{w.f}", w.kind, x))


def _count64(opcode: str) -> Callable[..., str]:
    """popc/clz of a 64-bit value give a u32 count: widened back to the operand's type."""
    return lambda b, x: b.op("cvt.u64.u32", "rd", b.op(opcode, "r", x))


def _unary_table(w: Width, u: DataType, s: DataType, f: DataType) -> dict[tuple[str, DataType], Lowering]:
    """The unary lowerings on the unsigned, signed and float type of width ``w``."""
    if w.bits == 32:
        counts = {Op.POPCOUNT: "popc.b32", Op.CLZ: "clz.b32",
                  Op.CTZ: lambda b, x: b.op("clz.b32", "r", b.op("brev.b32", "r", x))}
    else:
        counts = {Op.POPCOUNT: _count64("popc.b64"), Op.CLZ: _count64("clz.b64"),
                  Op.CTZ: lambda b, x: _count64("clz.b64")(b, b.op("brev.b64", "rd", x))}
    return {
        (Op.NEG, u): f"neg.{w.s}", (Op.NEG, s): f"neg.{w.s}",
        (Op.NEG, f): lambda b, x: b.op(f"xor.{w.b}", w.kind, x, w.sign),
        (Op.ABS, u): lambda b, x: x, (Op.ABS, s): _abs_s(w),
        (Op.ABS, f): lambda b, x: b.op(f"and.{w.b}", w.kind, x, w.magnitude),
        (Op.SIGN, u): _sign_u(w), (Op.SIGN, s): _sign_s(w), (Op.SIGN, f): _sign_f(w),
        **{(op, t): code for t in (u, s) for op, code in (
            (Op.BITNOT, f"not.{w.b}"), (Op.REVERSE_BITS, f"brev.{w.b}"), *counts.items())},
        (Op.SQRT, f): f"sqrt.rn.{w.f}", (Op.RECIPROCAL, f): f"rcp.rn.{w.f}", (Op.INVERSE_SQRT, f): _inverse_sqrt(w),
        (Op.FLOOR, f): f"cvt.rmi.{w.f}.{w.f}", (Op.CEIL, f): f"cvt.rpi.{w.f}.{w.f}",
        (Op.TRUNC, f): f"cvt.rzi.{w.f}.{w.f}", (Op.ROUND, f): _round_f(w),
        (Op.IS_NAN, f): f"testp.notanumber.{w.f}", (Op.IS_INF, f): f"testp.infinite.{w.f}",
        (Op.IS_FINITE, f): f"testp.finite.{w.f}",
    }


UNARY: dict[tuple[str, DataType], Lowering] = {
    **{k: v for types in TYPES for k, v in _unary_table(*types).items()},
    (Op.NOT_, BOOL): "not.pred",
    **{(op, F32): fn for op, fn in mathlib.FUNCTIONS.items()},
    **{(op, F64): fn for op, fn in mathlib64.FUNCTIONS.items()},
}


def apply(table: dict[tuple[str, DataType], Lowering], key: tuple[str, DataType], b: Builder,
          kind: str, *regs: str) -> str:
    """Emit the lowering of ``key`` on operand registers ``regs``; returns the result register."""
    low = table[key]
    if isinstance(low, str):
        return b.op(low, kind, *regs)
    return low(b, *regs)
