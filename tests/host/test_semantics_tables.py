"""Per-operation semantic tables: every op, cast and atomic on each type it takes, over edge values.

Expectations are computed here, independently of the oracle, with Python ints, floats, struct
and fractions; each op runs through ``execute`` as a small program (inputs in read buffers, the
result in an output buffer), one lane per operand pair.
"""

from __future__ import annotations

import itertools
import math
import struct
from fractions import Fraction

import numpy as np
import pytest

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ir.typing import BINARY_TYPES, UNARY_TYPES
from vyre.reference.interpreter import execute

U32, I32, F32, BOOL = DataType.U32, DataType.I32, DataType.F32, DataType.BOOL
U64, I64, F64 = DataType.U64, DataType.I64, DataType.F64
MIN32, MAX32 = -(2**31), 2**31 - 1
MIN64, MAX64 = -(2**63), 2**63 - 1
FLOATS = (F32, F64)


# ---- bit patterns and Python values -----------------------------------------------------------
def width(t: DataType) -> int:
    """Bits of a value of ``t`` in a buffer (BOOL is a 32-bit word)."""
    return 8 * t.size


def mask(t: DataType) -> int:
    return (1 << width(t)) - 1


def f32_of(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def f64_of(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def bits_of(value: float) -> int:
    """Bits of a float that is already exactly a binary32 value (or inf/NaN)."""
    return struct.unpack("<I", struct.pack("<f", value))[0]


def bits64_of(value: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", value))[0]


def signed(bits: int, w: int) -> int:
    bits &= (1 << w) - 1
    return bits - (1 << w) if bits >> (w - 1) else bits


def s32(bits: int) -> int:
    return signed(bits, 32)


def decode(dtype: DataType, bits: int):
    if dtype is F32:
        return f32_of(bits)
    if dtype is F64:
        return f64_of(bits)
    if dtype in (I32, I64):
        return signed(bits, width(dtype))
    if dtype is BOOL:
        return bool(bits)
    return bits


def encode(dtype: DataType, value) -> int:
    if dtype is F32:
        return bits_of(value)
    if dtype is F64:
        return bits64_of(value)
    return int(value) & mask(dtype)


#: float type -> (significand bits, lowest normal exponent, highest exponent)
FORMATS = {F32: (24, -126, 127), F64: (53, -1022, 1023)}


def round_float(q: Fraction, t: DataType = F32) -> float:
    """Exact rational -> nearest value of float type ``t`` (ties to even), overflow to infinity."""
    if q == 0:
        return 0.0
    digits, emin, emax = FORMATS[t]
    sign, q = (-1.0 if q < 0 else 1.0), abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    e = max(e, emin)
    scaled = q / Fraction(2) ** (e - digits + 1)
    m = math.floor(scaled)
    rest = scaled - m
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and m % 2):
        m += 1
    if m == 1 << digits:
        m, e = 1 << (digits - 1), e + 1
    if e > emax:
        return sign * math.inf
    return sign * math.ldexp(m, e - digits + 1)


def round_f32(q: Fraction) -> float:
    return round_float(q, F32)


F32_EDGES_BITS = [
    0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x3F000000, 0xBF000000, 0x3FC00000, 0x40200000,
    0xC0200000, 0x3E99999A, 0xBE99999A, 0x40400000, 0x7F7FFFFF, 0xFF7FFFFF, 0x00800000, 0x00000001,
    0x80000001, 0x007FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x501502F9, 0xD01502F9, 0x4F000000,
    0xCF000000, 0x4F800000, 0x4B800001, 0x3EAAAAAB, 0x33800000, 0x34000001, 0x7F800001, 0xFFA00000,
]
F64_EDGES_BITS = [
    0x0000000000000000, 0x8000000000000000, 0x3FF0000000000000, 0xBFF0000000000000, 0x3FE0000000000000,
    0x3FF8000000000000, 0x4004000000000000, 0xC004000000000000, 0x3FD3333333333333, 0x4008000000000000,
    0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF, 0x0010000000000000, 0x0000000000000001, 0x8000000000000001,
    0x000FFFFFFFFFFFFF, 0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000, 0x43E0000000000000,
    0xC3E0000000000000, 0x43F0000000000000, 0x4330000000000001, 0x3FD5555555555555, 0x3CA0000000000000,
    0x7FF0000000000001, 0xFFF4000000000000, 0x41E0000000000000, 0x41F0000000000000, 0x4330000000000000,
]
EDGES = {
    U32: [0, 1, 2, 3, 7, 31, 32, 33, 12345, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xDEADBEEF, 0xFFFFFFFE, 0xFFFFFFFF],
    I32: [encode(I32, v) for v in (0, 1, -1, 2, -2, 7, -7, 31, 32, 33, 12345, -12345, MAX32, MAX32 - 1, MIN32,
                                   MIN32 + 1)],
    F32: F32_EDGES_BITS,
    BOOL: [0, 1],
    U64: [0, 1, 2, 3, 63, 64, 65, 0xFFFFFFFF, 0x100000000, 0x123456789ABCDEF0, 2**63 - 1, 2**63, 2**63 + 1,
          2**64 - 2, 2**64 - 1],
    I64: [encode(I64, v) for v in (0, 1, -1, 2, -2, 7, -7, 63, 64, 2**32, -(2**32), 0x7FFFFFFF, MAX64,
                                   MAX64 - 1, MIN64, MIN64 + 1)],
    F64: F64_EDGES_BITS,
}
SHIFT_AMOUNTS = [0, 1, 5, 31, 32, 33, 63, 64, 65, 127, 0xFFFFFFFF]


def as_array(bits: list[int], t: DataType) -> np.ndarray:
    """Bit patterns as a buffer of ``t``."""
    return np.array(bits, np.uint64 if t.size == 8 else np.uint32).view(t.np_dtype)


def bits_list(a: np.ndarray) -> list[int]:
    return [int(v) for v in a.view(np.uint64 if a.dtype.itemsize == 8 else np.uint32)]


# ---- running one op over many lanes --------------------------------------------------------------
def run_lanes(dtypes: list[DataType], result: DataType, build, operands: list[tuple[int, ...]]) -> list[int]:
    """Run ``build(*loads)`` once per operand tuple (bit patterns) and return the result bits."""
    n = len(operands)
    bufs = [BufferDecl.read(f"in{k}", k, t) for k, t in enumerate(dtypes)]
    out = BufferDecl.output("out", len(dtypes), result, n)
    i = Expr.invocation_id(0)
    body = [Node.store("out", i, build(*(Expr.load(b.name, i) for b in bufs)))]
    program = Program([*bufs, out], (64, 1, 1), body)
    arrays = {b.name: as_array([ops[k] for ops in operands], t) for k, (b, t) in enumerate(zip(bufs, dtypes))}
    arrays["out"] = np.zeros(n, result.np_dtype)
    execute(program, arrays, (-(-n // 64), 1, 1))
    return bits_list(arrays["out"])


def run_uniform(dtypes: list[DataType], result: DataType, build, operands: list[tuple[int, ...]]) -> list[int]:
    """Like ``run_lanes`` with literal operands: exercises the oracle's uniform (numpy scalar) path."""
    body = [Node.store("out", Expr.u32(k), build(*(literal(t, b) for t, b in zip(dtypes, ops))))
            for k, ops in enumerate(operands)]
    program = Program([BufferDecl.output("out", 0, result, len(operands))], (1, 1, 1), body)
    arrays = {"out": np.zeros(len(operands), result.np_dtype)}
    execute(program, arrays, (1, 1, 1))
    return bits_list(arrays["out"])


def literal(t: DataType, bits: int) -> Expr:
    return {U32: Expr.u32, I32: lambda b: Expr.i32(s32(b)), F32: Expr.f32_from_bits, BOOL: Expr.bool,
            U64: Expr.u64, I64: lambda b: Expr.i64(signed(b, 64)), F64: Expr.f64_from_bits}[t](bits)


def uniform_edges(t: DataType) -> list[int]:
    """A shorter edge list for the literal-operand tables (keeps NaNs and signed zeros)."""
    extra = {F32: [0x7FC00000, 0x7F800001, 0x80000000],
             F64: [0x7FF8000000000000, 0x7FF0000000000001, 0x8000000000000000]}.get(t, [])
    return EDGES[t][::3] + extra if len(EDGES[t]) > 4 else EDGES[t]


def check(result: DataType, expected: list[int], actual: list[int], operands, label: str) -> None:
    bad = []
    for ops, e, a in zip(operands, expected, actual):
        same = e == a or (result in FLOATS and math.isnan(decode(result, e)) and math.isnan(decode(result, a)))
        if not same:
            bad.append(f"{label}{tuple(hex(o) for o in ops)}: expected {e:#x} got {a:#x}")
    assert not bad, f"{len(bad)} mismatches:\n  " + "\n  ".join(bad[:10])


# ---- independent integer semantics -------------------------------------------------------------
def trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def clamp(v: int, t: DataType) -> int:
    lo, hi = {U32: (0, 0xFFFFFFFF), I32: (MIN32, MAX32), U64: (0, 2**64 - 1), I64: (MIN64, MAX64)}[t]
    return min(max(v, lo), hi)


def int_div(a: int, b: int, t: DataType) -> int:
    if b == 0:
        return -1
    return trunc_div(a, b)  # MIN / -1 = 2**31 wraps to MIN when encoded


def int_rem(a: int, b: int, t: DataType) -> int:
    return 0 if b == 0 else a - trunc_div(a, b) * b


def rotl(a: int, s: int, t: DataType) -> int:
    w = width(t)
    a &= mask(t)
    s &= w - 1
    return ((a << s) | (a >> (w - s))) & mask(t)


INT_BINARY = {
    "add": lambda a, b, t: a + b, "sub": lambda a, b, t: a - b, "mul": lambda a, b, t: a * b,
    "div": int_div, "rem": int_rem,
    "bitand": lambda a, b, t: a & b, "bitor": lambda a, b, t: a | b, "bitxor": lambda a, b, t: a ^ b,
    "shl": lambda a, b, t: a << (b & (width(t) - 1)), "shr": lambda a, b, t: a >> (b & (width(t) - 1)),
    "rotate_left": lambda a, b, t: rotl(a, b, t),
    "rotate_right": lambda a, b, t: rotl(a, width(t) - (b & (width(t) - 1)), t),
    "eq": lambda a, b, t: a == b, "ne": lambda a, b, t: a != b, "lt": lambda a, b, t: a < b,
    "gt": lambda a, b, t: a > b, "le": lambda a, b, t: a <= b, "ge": lambda a, b, t: a >= b,
    "min": lambda a, b, t: min(a, b), "max": lambda a, b, t: max(a, b), "abs_diff": lambda a, b, t: abs(a - b),
    "saturating_add": lambda a, b, t: clamp(a + b, t), "saturating_sub": lambda a, b, t: clamp(a - b, t),
    "saturating_mul": lambda a, b, t: clamp(a * b, t), "mul_high": lambda a, b, t: (a * b) >> width(t),
}
BOOL_BINARY = {
    "bitand": lambda a, b: a and b, "bitor": lambda a, b: a or b, "bitxor": lambda a, b: a != b,
    "and_": lambda a, b: a and b, "or_": lambda a, b: a or b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
}


# ---- independent float semantics ---------------------------------------------------------------
def exact_or_special(a: float, b: float, exact, double, t: DataType = F32) -> float:
    """Round the exact rational result, falling back to IEEE double for specials and zero signs."""
    try:
        r = double(a, b)
    except ZeroDivisionError:
        r = math.nan if (a == 0 or math.isnan(a)) else math.copysign(math.inf, a) * math.copysign(1, b)
    if math.isfinite(a) and math.isfinite(b) and math.isfinite(r) and r != 0:
        return round_float(exact(Fraction(a), Fraction(b)), t)
    return r


def f_min(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b):
        return b if math.isnan(a) else a
    if a == b == 0:
        return -0.0 if math.copysign(1, a) < 0 or math.copysign(1, b) < 0 else 0.0
    return min(a, b)


def f_max(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b):
        return b if math.isnan(a) else a
    if a == b == 0:
        return 0.0 if math.copysign(1, a) > 0 or math.copysign(1, b) > 0 else -0.0
    return max(a, b)


def f_sub(a: float, b: float, t: DataType = F32) -> float:
    return exact_or_special(a, b, lambda x, y: x - y, lambda x, y: x - y, t)


def _exact(fn):
    return lambda a, b, t: exact_or_special(a, b, fn, fn, t)


FLOAT_BINARY = {
    "add": _exact(lambda x, y: x + y), "sub": f_sub, "mul": _exact(lambda x, y: x * y),
    "div": _exact(lambda x, y: x / y),
    "min": lambda a, b, t: f_min(a, b), "max": lambda a, b, t: f_max(a, b),
    "abs_diff": lambda a, b, t: abs(f_sub(a, b, t)),
    "eq": lambda a, b, t: a == b, "ne": lambda a, b, t: a != b, "lt": lambda a, b, t: a < b,
    "gt": lambda a, b, t: a > b, "le": lambda a, b, t: a <= b, "ge": lambda a, b, t: a >= b,
}


def to_integral(x: float, fn, t: DataType = F32) -> float:
    if not math.isfinite(x) or abs(x) >= 2.0 ** (FORMATS[t][0] - 1):
        return x
    return math.copysign(float(fn(Fraction(x))), x)


def round_half_away(x: float, t: DataType = F32) -> float:
    return to_integral(x, lambda v: math.floor(abs(v) + Fraction(1, 2)), t)


def f_sign(x: float) -> float:
    if math.isnan(x) or x == 0:
        return x
    return 1.0 if x > 0 else -1.0


def f_sqrt(x: float, t: DataType = F32) -> float:
    if math.isnan(x) or x < 0:
        return math.nan
    if t is F64:
        return math.sqrt(x)  # IEEE sqrt: correctly rounded
    return round_f32(Fraction(math.sqrt(x))) if math.isfinite(x) and x else x  # double sqrt rounds innocuously


FLOAT_UNARY = {
    "neg": lambda x, t: -x, "abs": lambda x, t: abs(x), "sign": lambda x, t: f_sign(x), "sqrt": f_sqrt,
    "reciprocal": lambda x, t: FLOAT_BINARY["div"](1.0, x, t),
    "inverse_sqrt": lambda x, t: FLOAT_BINARY["div"](1.0, f_sqrt(x, t), t),  # F64: two correct roundings
    "floor": lambda x, t: to_integral(x, math.floor, t), "ceil": lambda x, t: to_integral(x, math.ceil, t),
    "trunc": lambda x, t: to_integral(x, math.trunc, t), "round": round_half_away,
    "is_nan": lambda x, t: math.isnan(x), "is_inf": lambda x, t: math.isinf(x),
    "is_finite": lambda x, t: math.isfinite(x),
}
TRANSCENDENTAL = {
    "exp": math.exp, "exp2": lambda x: 2.0**x, "log": math.log, "log2": math.log2, "sin": math.sin,
    "cos": math.cos, "tan": math.tan, "asin": math.asin, "acos": math.acos, "atan": math.atan,
    "sinh": math.sinh, "cosh": math.cosh, "tanh": math.tanh, "inverse_sqrt": lambda x: 1.0 / math.sqrt(x),
}
INT_UNARY = {
    "neg": lambda a, t: -a, "bitnot": lambda a, t: ~a, "popcount": lambda a, t: bin(a & mask(t)).count("1"),
    "clz": lambda a, t: width(t) - (a & mask(t)).bit_length(),
    "ctz": lambda a, t: width(t) if a == 0 else ((a & -a) & mask(t)).bit_length() - 1,
    "reverse_bits": lambda a, t: int(f"{a & mask(t):0{width(t)}b}"[::-1], 2), "abs": lambda a, t: abs(a),
    "sign": lambda a, t: (a > 0) - (a < 0),
}


# ---- the tables --------------------------------------------------------------------------------
def binary_cases():
    for op, types in BINARY_TYPES.items():
        for t in types:
            yield pytest.param(op, t, id=f"{op}-{t.name}")


def binary_table(op: str, t: DataType, edges: list[int]):
    """Operand pairs, operand/result types and independently computed expected bits of one binary op."""
    shift = op in ("shl", "shr", "rotate_left", "rotate_right")
    rhs_type = U32 if shift else t
    operands = list(itertools.product(edges, SHIFT_AMOUNTS if shift else edges))
    result = BOOL if op in ("eq", "ne", "lt", "gt", "le", "ge") else t
    if t is BOOL:
        expected = [encode(BOOL, BOOL_BINARY[op](bool(a), bool(b))) for a, b in operands]
    elif t in FLOATS:
        expected = [encode(result, FLOAT_BINARY[op](decode(t, a), decode(t, b), t)) for a, b in operands]
    else:
        expected = [encode(result, INT_BINARY[op](decode(t, a), decode(rhs_type, b), t)) for a, b in operands]
    return operands, [t, rhs_type], result, expected


@pytest.mark.parametrize("op,t", list(binary_cases()))
def test_binary(op: str, t: DataType) -> None:
    operands, types, result, expected = binary_table(op, t, EDGES[t])
    check(result, expected, run_lanes(types, result, getattr(Expr, op), operands), operands, op)


@pytest.mark.parametrize("op,t", list(binary_cases()))
def test_binary_uniform_operands(op: str, t: DataType) -> None:
    operands, types, result, expected = binary_table(op, t, uniform_edges(t))
    check(result, expected, run_uniform(types, result, getattr(Expr, op), operands), operands, op)


def unary_cases():
    for op, types in UNARY_TYPES.items():
        for t in types:
            yield pytest.param(op, t, id=f"{op}-{t.name}")


def unary_expected(op: str, t: DataType, operands) -> list[int]:
    """Independently computed result bits of a (non-transcendental) unary op."""
    if op == "not_":
        return [encode(BOOL, not a) for (a,) in operands]
    if op in ("neg", "abs") and t in FLOATS:  # sign-bit operations keep NaN payloads exactly
        sign = 1 << (width(t) - 1)
        return [a ^ sign if op == "neg" else a & (sign - 1) for (a,) in operands]
    if t in FLOATS:
        result = BOOL if op in ("is_nan", "is_inf", "is_finite") else t
        return [encode(result, FLOAT_UNARY[op](decode(t, a), t)) for (a,) in operands]
    return [encode(t, INT_UNARY[op](decode(t, a), t)) for (a,) in operands]


@pytest.mark.parametrize("uniform", [False, True], ids=["lanes", "uniform"])
@pytest.mark.parametrize("op,t", list(unary_cases()))
def test_unary(op: str, t: DataType, uniform: bool) -> None:
    operands = [(v,) for v in (uniform_edges(t) if uniform else EDGES[t])]
    result = BOOL if op in ("is_nan", "is_inf", "is_finite") else t
    actual = (run_uniform if uniform else run_lanes)([t], result, getattr(Expr, op), operands)
    if op in TRANSCENDENTAL and (t is F32 or op != "inverse_sqrt"):
        check_transcendental(op, operands, actual, t)
    else:
        check(result, unary_expected(op, t, operands), actual, operands, op)


def check_transcendental(op: str, operands, actual: list[int], t: DataType = F32) -> None:
    """The float64 result (rounded to binary32 for F32) within 1 ulp (libm differences), specials exact."""
    for (a,), got in zip(operands, actual):
        x = decode(t, a)
        try:
            want = TRANSCENDENTAL[op](x)
        except (ValueError, ZeroDivisionError):
            want = {"log": -math.inf, "log2": -math.inf, "inverse_sqrt": math.copysign(math.inf, x)}.get(op, math.nan) \
                if x == 0 else math.nan
        except OverflowError:
            want = math.inf if op != "sinh" else math.copysign(math.inf, x)
        g = decode(t, got)
        if math.isnan(want):
            assert math.isnan(g), f"{op}({x!r}) = {g!r}, expected NaN"
            continue
        w = round_f32(Fraction(want)) if t is F32 and math.isfinite(want) and want != 0 else want
        if w == g and math.copysign(1, w) == math.copysign(1, g):
            continue
        bits = width(t)
        assert math.isfinite(w) and abs(signed(encode(t, w), bits) - signed(got, bits)) <= 1, \
            f"{op}({x!r}) = {g!r}, expected {w!r}"


@pytest.mark.parametrize("t", [U32, I32, F32, BOOL, U64, I64, F64], ids=lambda t: t.name)
def test_select(t: DataType) -> None:
    operands = [(c, a, b) for c in (0, 1, 2) for a, b in itertools.product(EDGES[t][:6], EDGES[t][-6:])]
    actual = run_lanes([BOOL, t, t], t, Expr.select, operands)
    check(t, [a if c else b for c, a, b in operands], actual, operands, "select")


# ---- fma ------------------------------------------------------------------------------------------
def fma_exact(a: float, b: float, c: float, t: DataType = F32) -> float:
    double = a * b + c  # for F32 a * b is exact in double; this gives the specials and zero signs
    if math.isfinite(a) and math.isfinite(b) and not math.isfinite(c):
        return c  # the exact product is finite (it cannot overflow inside an fma): inf or NaN wins
    if all(map(math.isfinite, (a, b, c))):
        q = Fraction(a) * Fraction(b) + Fraction(c)
        if q != 0:
            return round_float(q, t)
        return double if a == 0 or b == 0 else 0.0  # a cancellation of non-zero terms gives +0
    return double


def random_f32_bits(rng: np.random.Generator, n: int) -> list[int]:
    near_one = rng.integers(0x3F000000, 0x40000000, n)
    anywhere = rng.integers(0, 2**32, n)
    return [int(v) for v in np.concatenate([near_one, anywhere])]


def test_fma_f32_single_rounding() -> None:
    rng = np.random.default_rng(7)
    edges = [b for b in F32_EDGES_BITS if b != 0x7FC00000][:16]
    triples = list(itertools.product(edges, edges[:8], edges[:8]))
    pool = random_f32_bits(rng, 300)
    triples += [tuple(pool[i] for i in rng.integers(0, len(pool), 3)) for _ in range(3000)]
    # hard cases: products that cancel c almost exactly, and halfway ties after cancellation
    for _ in range(2000):
        a, b = (int(v) for v in rng.integers(0x3F000000, 0x40000000, 2))
        p = f32_of(a) * f32_of(b)
        c = bits_of(round_f32(Fraction(-p)))
        triples.append((a, b, c ^ int(rng.integers(0, 4))))
    # double-rounding traps: short significands whose exact product is a binary32 midpoint,
    # nudged off it by a tiny c (a float64 sum would round back onto the midpoint)
    short = (rng.integers(0, 1 << 12, 4000) << 11) | 0x3F800000
    tiny = [bits_of(s * 2.0**-60) for s in (1.0, -1.0)]
    triples += [(int(short[k]), int(short[-k - 1]), tiny[k % 2]) for k in range(2000)]
    triples.append((0x3F800001, 0x3F800001, 0xBF800002))  # 1+2^-22 + 2^-46 - (1+2^-22)
    actual = run_lanes([F32, F32, F32], F32, Expr.fma, triples)
    expected = [bits_of(fma_exact(*(f32_of(v) for v in t))) for t in triples]
    check(F32, expected, actual, triples, "fma")


def test_fma_f64_single_rounding() -> None:
    rng = np.random.default_rng(11)
    edges = [b for b in F64_EDGES_BITS if b != 0x7FF8000000000000][:14]
    triples = list(itertools.product(edges, edges[:8], edges[:8]))
    pool = [int(v) for v in np.concatenate([rng.integers(0x3FE0000000000000, 0x4000000000000000, 300, dtype=np.uint64),
                                            rng.integers(0, 2**64, 300, dtype=np.uint64)])]
    triples += [tuple(pool[i] for i in rng.integers(0, len(pool), 3)) for _ in range(3000)]
    for _ in range(1000):  # products that cancel c almost exactly
        a, b = (int(v) for v in rng.integers(0x3FE0000000000000, 0x4000000000000000, 2, dtype=np.uint64))
        c = bits64_of(round_float(-Fraction(f64_of(a)) * Fraction(f64_of(b)), F64))
        triples.append((a, b, c ^ int(rng.integers(0, 4))))
    # double-rounding traps: exact products on a binary64 midpoint, nudged off it by a tiny c
    short = [(int(v) << 26) | 0x3FF0000000000000 for v in rng.integers(0, 1 << 26, 2000)]
    tiny = [bits64_of(s * 2.0**-120) for s in (1.0, -1.0)]
    triples += [(short[k], short[-k - 1], tiny[k % 2]) for k in range(2000)]
    # operands out of the fast path's range: huge and subnormal products
    triples += [(0x7FE0000000000001, 0x3FF0000000000001, 0xFFE0000000000000),
                (0x0000000000000003, 0x3CB0000000000001, 0),
                (0x1000000000000001, 0x1000000000000001, 0x8000000000000001),
                (0x6000000000000000, 0x6000000000000000, 0)]
    # a finite product past the range plus an infinite addend is that infinity (found by the
    # generated-program test on an H200: the oracle rounded the product first and got NaN)
    big, neg_big = 0x7FEFFFFFFFFFFFFF, bits64_of(-165594.29327326396)
    triples += [(neg_big, big, 0x7FF0000000000000), (big, big, 0xFFF0000000000000),
                (big, neg_big, 0x7FF0000000000000), (big, big, 0x7FF8000000000000)]
    actual = run_lanes([F64, F64, F64], F64, Expr.fma, triples)
    expected = [bits64_of(fma_exact(*(f64_of(v) for v in t), t=F64)) for t in triples]
    check(F64, expected, actual, triples, "fma")


@pytest.mark.parametrize("t", [U32, I32, U64, I64])
def test_fma_int_wraps(t: DataType) -> None:
    triples = list(itertools.product(EDGES[t][:8], EDGES[t], EDGES[t][::3]))
    actual = run_lanes([t, t, t], t, Expr.fma, triples)
    expected = [encode(t, decode(t, a) * decode(t, b) + decode(t, c)) for a, b, c in triples]
    check(t, expected, actual, triples, "fma")


# ---- casts ----------------------------------------------------------------------------------------
def cast_value(src: DataType, dst: DataType, bits: int):
    v = decode(src, bits)
    if dst is BOOL:
        return v != 0 or (src in FLOATS and math.isnan(v))
    if src is BOOL:
        return float(v) if dst in FLOATS else int(v)
    if dst in FLOATS:
        if src in FLOATS and (not math.isfinite(v) or v == 0):  # specials and signed zeros carry over
            return v
        return round_float(Fraction(v), dst)
    if src in FLOATS:
        if math.isnan(v):
            return 0
        lo, hi = {U32: (0, 0xFFFFFFFF), I32: (MIN32, MAX32), U64: (0, 2**64 - 1), I64: (MIN64, MAX64)}[dst]
        return min(max(math.trunc(v), lo), hi) if math.isfinite(v) else (hi if v > 0 else lo)
    return v  # integers: the value, encoded in the target's width (same width: the bits)


CAST_TYPES = (U32, I32, F32, BOOL, U64, I64, F64)
#: integers whose conversion to a float rounds (ties, just above and below ties)
ROUNDING_INTS = (0x01000001, 0x01000003, 0xFFFFFF81, 0x7FFFFFC0, 0x7FFFFFBF)
ROUNDING_INTS64 = (2**53 + 1, 2**53 + 3, 2**62 + 2**38 + 1, 2**63 + 2**39, 2**64 - 2**10, 2**64 - 2**10 - 1,
                   0x7FFFFFFFFFFFFE00, 0x7FFFFFFFFFFFFDFF)


@pytest.mark.parametrize("src,dst", [pytest.param(s, d, id=f"{s.name}-{d.name}")
                                     for s in CAST_TYPES for d in CAST_TYPES])
@pytest.mark.parametrize("uniform", [False, True], ids=["lanes", "uniform"])
def test_cast(src: DataType, dst: DataType, uniform: bool) -> None:
    operands = [(v,) for v in EDGES[src]]
    if src in (U32, I32):
        operands += [(v,) for v in ROUNDING_INTS]
    if src in (U64, I64):
        operands += [(v,) for v in ROUNDING_INTS + ROUNDING_INTS64]
    actual = (run_uniform if uniform else run_lanes)([src], dst, lambda x: Expr.cast(dst, x), operands)
    expected = [encode(dst, cast_value(src, dst, a)) for (a,) in operands]
    check(dst, expected, actual, operands, f"cast<{dst.name}>")


# ---- atomics ----------------------------------------------------------------------------------------
ATOMIC_RESULT = {
    AtomicOp.ADD: lambda m, v: m + v, AtomicOp.OR: lambda m, v: m | v, AtomicOp.AND: lambda m, v: m & v,
    AtomicOp.XOR: lambda m, v: m ^ v, AtomicOp.MIN: min, AtomicOp.MAX: max,
    AtomicOp.EXCHANGE: lambda m, v: v,
}


@pytest.mark.parametrize("op", list(AtomicOp), ids=lambda o: o.name)
@pytest.mark.parametrize("t", [U32, I32, U64, I64], ids=lambda t: t.name)
def test_atomic_single_lane(op: AtomicOp, t: DataType) -> None:
    """Each lane owns one word: the old value comes back and the new value is op(old, value)."""
    pairs = list(itertools.product(EDGES[t], EDGES[t]))
    expected_arg = [m if k % 2 else (m + 1) & mask(t) for k, (m, _) in enumerate(pairs)]
    n = len(pairs)
    i = Expr.invocation_id(0)
    cas = op.base is AtomicOp.COMPARE_EXCHANGE
    body = [Node.let("old", Expr.atomic(op, "mem", i, Expr.load("val", i), Expr.load("exp", i) if cas else None)),
            Node.store("out", i, Expr.var("old"))]
    program = Program([BufferDecl.read_write("mem", 0, t), BufferDecl.read("val", 1, t), BufferDecl.read("exp", 2, t),
                       BufferDecl.output("out", 3, t, n)], (64, 1, 1), body)
    arrays = {"mem": as_array([m for m, _ in pairs], t), "val": as_array([v for _, v in pairs], t),
              "exp": as_array(expected_arg, t), "out": np.zeros(n, t.np_dtype)}
    execute(program, arrays, (-(-n // 64), 1, 1))
    assert bits_list(arrays["out"]) == [m for m, _ in pairs]
    if cas:
        want = [v if e == m else m for (m, v), e in zip(pairs, expected_arg)]
    else:
        want = [encode(t, ATOMIC_RESULT[op.base](decode(t, m), decode(t, v))) for m, v in pairs]
    assert bits_list(arrays["mem"]) == want


def test_atomic_f64_add_rounds_in_lane_order() -> None:
    """Contended F64 ADD: each lane's old value is the sum of the earlier lanes, rounded after every add."""
    vals = [1.0, 2.0**-53, 2.0**-53, 3.5, -1.0, 1e300, -1e300, 0.1]
    n = len(vals)
    body = [Node.store("out", Expr.invocation_id(0),
                       Expr.atomic(AtomicOp.ADD, "acc", Expr.u32(0), Expr.load("val", Expr.invocation_id(0))))]
    program = Program([BufferDecl.read_write("acc", 0, F64), BufferDecl.read("val", 1, F64),
                       BufferDecl.output("out", 2, F64, n)], (n, 1, 1), body)
    arrays = {"acc": np.array([0.25]), "val": np.array(vals), "out": np.zeros(n)}
    execute(program, arrays, (1, 1, 1))
    run, olds = 0.25, []
    for v in vals:
        olds.append(run)
        run += v
    assert arrays["out"].tolist() == olds and arrays["acc"].tolist() == [run]
