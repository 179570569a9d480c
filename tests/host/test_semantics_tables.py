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
MIN32, MAX32 = -(2**31), 2**31 - 1


# ---- bit patterns and Python values -----------------------------------------------------------
def f32_of(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def bits_of(value: float) -> int:
    """Bits of a float that is already exactly a binary32 value (or inf/NaN)."""
    return struct.unpack("<I", struct.pack("<f", value))[0]


def s32(bits: int) -> int:
    bits &= 0xFFFFFFFF
    return bits - (1 << 32) if bits & 0x80000000 else bits


def decode(dtype: DataType, bits: int):
    if dtype is F32:
        return f32_of(bits)
    if dtype is I32:
        return s32(bits)
    if dtype is BOOL:
        return bool(bits)
    return bits


def encode(dtype: DataType, value) -> int:
    if dtype is F32:
        return bits_of(value)
    return int(value) & 0xFFFFFFFF


def round_f32(q: Fraction) -> float:
    """Exact rational -> nearest binary32 (ties to even), overflow to infinity."""
    if q == 0:
        return 0.0
    sign, q = (-1.0 if q < 0 else 1.0), abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    e = max(e, -126)
    scaled = q / Fraction(2) ** (e - 23)
    m = math.floor(scaled)
    rest = scaled - m
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and m % 2):
        m += 1
    if m == 1 << 24:
        m, e = 1 << 23, e + 1
    if e > 127:
        return sign * math.inf
    return sign * math.ldexp(m, e - 23)


F32_EDGES_BITS = [
    0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x3F000000, 0xBF000000, 0x3FC00000, 0x40200000,
    0xC0200000, 0x3E99999A, 0xBE99999A, 0x40400000, 0x7F7FFFFF, 0xFF7FFFFF, 0x00800000, 0x00000001,
    0x80000001, 0x007FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x501502F9, 0xD01502F9, 0x4F000000,
    0xCF000000, 0x4F800000, 0x4B800001, 0x3EAAAAAB, 0x33800000, 0x34000001, 0x7F800001, 0xFFA00000,
]
EDGES = {
    U32: [0, 1, 2, 3, 7, 31, 32, 33, 12345, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xDEADBEEF, 0xFFFFFFFE, 0xFFFFFFFF],
    I32: [encode(I32, v) for v in (0, 1, -1, 2, -2, 7, -7, 31, 32, 33, 12345, -12345, MAX32, MAX32 - 1, MIN32,
                                   MIN32 + 1)],
    F32: F32_EDGES_BITS,
    BOOL: [0, 1],
}
SHIFT_AMOUNTS = [0, 1, 5, 31, 32, 33, 63, 0xFFFFFFFF]


# ---- running one op over many lanes --------------------------------------------------------------
def run_lanes(dtypes: list[DataType], result: DataType, build, operands: list[tuple[int, ...]]) -> list[int]:
    """Run ``build(*loads)`` once per operand tuple (bit patterns) and return the result bits."""
    n = len(operands)
    bufs = [BufferDecl.read(f"in{k}", k, t) for k, t in enumerate(dtypes)]
    out = BufferDecl.output("out", len(dtypes), result, n)
    i = Expr.invocation_id(0)
    body = [Node.store("out", i, build(*(Expr.load(b.name, i) for b in bufs)))]
    program = Program([*bufs, out], (64, 1, 1), body)
    arrays = {b.name: np.array([ops[k] for ops in operands], np.uint32).view(t.np_dtype)
              for k, (b, t) in enumerate(zip(bufs, dtypes))}
    arrays["out"] = np.zeros(n, result.np_dtype)
    execute(program, arrays, (-(-n // 64), 1, 1))
    return [int(v) for v in arrays["out"].view(np.uint32)]


def run_uniform(dtypes: list[DataType], result: DataType, build, operands: list[tuple[int, ...]]) -> list[int]:
    """Like ``run_lanes`` with literal operands: exercises the oracle's uniform (numpy scalar) path."""
    body = [Node.store("out", Expr.u32(k), build(*(literal(t, b) for t, b in zip(dtypes, ops))))
            for k, ops in enumerate(operands)]
    program = Program([BufferDecl.output("out", 0, result, len(operands))], (1, 1, 1), body)
    arrays = {"out": np.zeros(len(operands), result.np_dtype)}
    execute(program, arrays, (1, 1, 1))
    return [int(x) for x in arrays["out"].view(np.uint32)]


def literal(t: DataType, bits: int) -> Expr:
    return {U32: Expr.u32, I32: lambda b: Expr.i32(s32(b)), F32: Expr.f32_from_bits, BOOL: Expr.bool}[t](bits)


def uniform_edges(t: DataType) -> list[int]:
    """A shorter edge list for the literal-operand tables (keeps NaNs and signed zeros)."""
    extra = [0x7FC00000, 0x7F800001, 0x80000000] if t is F32 else []
    return EDGES[t][::3] + extra if len(EDGES[t]) > 4 else EDGES[t]


def check(result: DataType, expected: list[int], actual: list[int], operands, label: str) -> None:
    bad = []
    for ops, e, a in zip(operands, expected, actual):
        same = e == a or (result is F32 and math.isnan(f32_of(e)) and math.isnan(f32_of(a)))
        if not same:
            bad.append(f"{label}{tuple(hex(o) for o in ops)}: expected {e:#010x} got {a:#010x}")
    assert not bad, f"{len(bad)} mismatches:\n  " + "\n  ".join(bad[:10])


# ---- independent integer semantics -------------------------------------------------------------
def trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def clamp(v: int, t: DataType) -> int:
    lo, hi = (0, 0xFFFFFFFF) if t is U32 else (MIN32, MAX32)
    return min(max(v, lo), hi)


def int_div(a: int, b: int, t: DataType) -> int:
    if b == 0:
        return -1
    return trunc_div(a, b)  # MIN / -1 = 2**31 wraps to MIN when encoded


def int_rem(a: int, b: int, t: DataType) -> int:
    return 0 if b == 0 else a - trunc_div(a, b) * b


def rotl(a: int, s: int) -> int:
    a &= 0xFFFFFFFF
    s &= 31
    return ((a << s) | (a >> (32 - s))) & 0xFFFFFFFF


INT_BINARY = {
    "add": lambda a, b, t: a + b, "sub": lambda a, b, t: a - b, "mul": lambda a, b, t: a * b,
    "div": int_div, "rem": int_rem,
    "bitand": lambda a, b, t: a & b, "bitor": lambda a, b, t: a | b, "bitxor": lambda a, b, t: a ^ b,
    "shl": lambda a, b, t: a << (b & 31), "shr": lambda a, b, t: a >> (b & 31),
    "rotate_left": lambda a, b, t: rotl(a, b), "rotate_right": lambda a, b, t: rotl(a, 32 - (b & 31)),
    "eq": lambda a, b, t: a == b, "ne": lambda a, b, t: a != b, "lt": lambda a, b, t: a < b,
    "gt": lambda a, b, t: a > b, "le": lambda a, b, t: a <= b, "ge": lambda a, b, t: a >= b,
    "min": lambda a, b, t: min(a, b), "max": lambda a, b, t: max(a, b), "abs_diff": lambda a, b, t: abs(a - b),
    "saturating_add": lambda a, b, t: clamp(a + b, t), "saturating_sub": lambda a, b, t: clamp(a - b, t),
    "saturating_mul": lambda a, b, t: clamp(a * b, t), "mul_high": lambda a, b, t: (a * b) >> 32,
}
BOOL_BINARY = {
    "bitand": lambda a, b: a and b, "bitor": lambda a, b: a or b, "bitxor": lambda a, b: a != b,
    "and_": lambda a, b: a and b, "or_": lambda a, b: a or b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
}


# ---- independent float semantics ---------------------------------------------------------------
def exact_or_special(a: float, b: float, exact, double) -> float:
    """Round the exact rational result, falling back to IEEE double for specials and zero signs."""
    try:
        r = double(a, b)
    except ZeroDivisionError:
        r = math.nan if (a == 0 or math.isnan(a)) else math.copysign(math.inf, a) * math.copysign(1, b)
    if math.isfinite(a) and math.isfinite(b) and math.isfinite(r) and r != 0:
        return round_f32(exact(Fraction(a), Fraction(b)))
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


def f_sub(a: float, b: float) -> float:
    return exact_or_special(a, b, lambda x, y: x - y, lambda x, y: x - y)


FLOAT_BINARY = {
    "add": lambda a, b: exact_or_special(a, b, lambda x, y: x + y, lambda x, y: x + y),
    "sub": f_sub,
    "mul": lambda a, b: exact_or_special(a, b, lambda x, y: x * y, lambda x, y: x * y),
    "div": lambda a, b: exact_or_special(a, b, lambda x, y: x / y, lambda x, y: x / y),
    "min": f_min, "max": f_max, "abs_diff": lambda a, b: abs(f_sub(a, b)),
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "gt": lambda a, b: a > b, "le": lambda a, b: a <= b, "ge": lambda a, b: a >= b,
}


def to_integral(x: float, fn) -> float:
    if not math.isfinite(x) or abs(x) >= 2**23:
        return x
    return math.copysign(float(fn(x)), x)


def round_half_away(x: float) -> float:
    return to_integral(x, lambda v: math.floor(abs(v) + 0.5))


def f_sign(x: float) -> float:
    if math.isnan(x) or x == 0:
        return x
    return 1.0 if x > 0 else -1.0


def f_sqrt(x: float) -> float:
    if math.isnan(x) or x < 0:
        return math.nan
    return round_f32(Fraction(math.sqrt(x))) if math.isfinite(x) and x else x  # double sqrt rounds innocuously


FLOAT_UNARY = {
    "neg": lambda x: -x, "abs": abs, "sign": f_sign, "sqrt": f_sqrt,
    "reciprocal": lambda x: FLOAT_BINARY["div"](1.0, x),
    "floor": lambda x: to_integral(x, math.floor), "ceil": lambda x: to_integral(x, math.ceil),
    "trunc": lambda x: to_integral(x, math.trunc), "round": round_half_away,
    "is_nan": math.isnan, "is_inf": math.isinf, "is_finite": math.isfinite,
}
TRANSCENDENTAL = {
    "exp": math.exp, "exp2": lambda x: 2.0**x, "log": math.log, "log2": math.log2, "sin": math.sin,
    "cos": math.cos, "tan": math.tan, "asin": math.asin, "acos": math.acos, "atan": math.atan,
    "sinh": math.sinh, "cosh": math.cosh, "tanh": math.tanh, "inverse_sqrt": lambda x: 1.0 / math.sqrt(x),
}
INT_UNARY = {
    "neg": lambda a: -a, "bitnot": lambda a: ~a, "popcount": lambda a: bin(a & 0xFFFFFFFF).count("1"),
    "clz": lambda a: 32 - (a & 0xFFFFFFFF).bit_length(),
    "ctz": lambda a: 32 if a == 0 else ((a & -a) & 0xFFFFFFFF).bit_length() - 1,
    "reverse_bits": lambda a: int(f"{a & 0xFFFFFFFF:032b}"[::-1], 2), "abs": abs,
    "sign": lambda a: (a > 0) - (a < 0),
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
    elif t is F32:
        expected = [encode(result, FLOAT_BINARY[op](f32_of(a), f32_of(b))) for a, b in operands]
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
    if op in ("neg", "abs") and t is F32:  # sign-bit operations keep NaN payloads exactly
        return [a ^ 0x80000000 if op == "neg" else a & 0x7FFFFFFF for (a,) in operands]
    if t is F32:
        result = BOOL if op in ("is_nan", "is_inf", "is_finite") else t
        return [encode(result, FLOAT_UNARY[op](f32_of(a))) for (a,) in operands]
    return [encode(t, INT_UNARY[op](decode(t, a))) for (a,) in operands]


@pytest.mark.parametrize("uniform", [False, True], ids=["lanes", "uniform"])
@pytest.mark.parametrize("op,t", list(unary_cases()))
def test_unary(op: str, t: DataType, uniform: bool) -> None:
    operands = [(v,) for v in (uniform_edges(t) if uniform else EDGES[t])]
    result = BOOL if op in ("is_nan", "is_inf", "is_finite") else t
    actual = (run_uniform if uniform else run_lanes)([t], result, getattr(Expr, op), operands)
    if op in TRANSCENDENTAL:
        check_transcendental(op, operands, actual)
    else:
        check(result, unary_expected(op, t, operands), actual, operands, op)


def check_transcendental(op: str, operands, actual: list[int]) -> None:
    """The float64 result rounded to binary32 (within 1 ulp for libm differences), specials exact."""
    for (a,), got in zip(operands, actual):
        x = f32_of(a)
        try:
            want = TRANSCENDENTAL[op](x)
        except (ValueError, ZeroDivisionError):
            want = {"log": -math.inf, "log2": -math.inf, "inverse_sqrt": math.copysign(math.inf, x)}.get(op, math.nan) \
                if x == 0 else math.nan
        except OverflowError:
            want = math.inf if op != "sinh" else math.copysign(math.inf, x)
        g = f32_of(got)
        if math.isnan(want):
            assert math.isnan(g), f"{op}({x!r}) = {g!r}, expected NaN"
            continue
        w = round_f32(Fraction(want)) if math.isfinite(want) and want != 0 else want
        if w == g and math.copysign(1, w) == math.copysign(1, g):
            continue
        assert math.isfinite(w) and abs(s32(bits_of(w)) - s32(got)) <= 1, f"{op}({x!r}) = {g!r}, expected {w!r}"


@pytest.mark.parametrize("t", [U32, I32, F32, BOOL], ids=lambda t: t.name)
def test_select(t: DataType) -> None:
    operands = [(c, a, b) for c in (0, 1, 2) for a, b in itertools.product(EDGES[t][:6], EDGES[t][-6:])]
    actual = run_lanes([BOOL, t, t], t, Expr.select, operands)
    check(t, [a if c else b for c, a, b in operands], actual, operands, "select")


# ---- fma ------------------------------------------------------------------------------------------
def fma_exact(a: float, b: float, c: float) -> float:
    double = a * b + c  # a * b is exact in double; this gives the specials and zero signs
    if all(map(math.isfinite, (a, b, c))):
        q = Fraction(a) * Fraction(b) + Fraction(c)
        return round_f32(q) if q != 0 else double
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


@pytest.mark.parametrize("t", [U32, I32])
def test_fma_int_wraps(t: DataType) -> None:
    triples = list(itertools.product(EDGES[t][:8], EDGES[t], EDGES[t][::3]))
    actual = run_lanes([t, t, t], t, Expr.fma, triples)
    expected = [encode(t, decode(t, a) * decode(t, b) + decode(t, c)) for a, b, c in triples]
    check(t, expected, actual, triples, "fma")


# ---- casts ----------------------------------------------------------------------------------------
def cast_value(src: DataType, dst: DataType, bits: int):
    v = decode(src, bits)
    if dst is BOOL:
        return v != 0 or (src is F32 and math.isnan(v))
    if src is BOOL:
        return float(v) if dst is F32 else int(v)
    if dst is F32:
        return round_f32(Fraction(v)) if src is not F32 else v
    if src is F32:
        if math.isnan(v):
            return 0
        lo, hi = (0, 0xFFFFFFFF) if dst is U32 else (MIN32, MAX32)
        return min(max(math.trunc(v), lo), hi) if math.isfinite(v) else (hi if v > 0 else lo)
    return bits  # U32 <-> I32 reinterpret


@pytest.mark.parametrize("src,dst", [pytest.param(s, d, id=f"{s.name}-{d.name}")
                                     for s in (U32, I32, F32, BOOL) for d in (U32, I32, F32, BOOL)])
@pytest.mark.parametrize("uniform", [False, True], ids=["lanes", "uniform"])
def test_cast(src: DataType, dst: DataType, uniform: bool) -> None:
    operands = [(v,) for v in EDGES[src]]
    if src in (U32, I32):
        operands += [(v,) for v in (0x01000001, 0x01000003, 0xFFFFFF81, 0x7FFFFFC0, 0x7FFFFFBF)]
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
@pytest.mark.parametrize("t", [U32, I32], ids=lambda t: t.name)
def test_atomic_single_lane(op: AtomicOp, t: DataType) -> None:
    """Each lane owns one word: the old value comes back and the new value is op(old, value)."""
    pairs = list(itertools.product(EDGES[t], EDGES[t]))
    expected_arg = [m if k % 2 else (m + 1) & 0xFFFFFFFF for k, (m, _) in enumerate(pairs)]
    n = len(pairs)
    i = Expr.invocation_id(0)
    cas = op.base is AtomicOp.COMPARE_EXCHANGE
    body = [Node.let("old", Expr.atomic(op, "mem", i, Expr.load("val", i), Expr.load("exp", i) if cas else None)),
            Node.store("out", i, Expr.var("old"))]
    program = Program([BufferDecl.read_write("mem", 0, t), BufferDecl.read("val", 1, t), BufferDecl.read("exp", 2, t),
                       BufferDecl.output("out", 3, t, n)], (64, 1, 1), body)
    arrays = {"mem": np.array([m for m, _ in pairs], np.uint32).view(t.np_dtype),
              "val": np.array([v for _, v in pairs], np.uint32).view(t.np_dtype),
              "exp": np.array(expected_arg, np.uint32).view(t.np_dtype), "out": np.zeros(n, t.np_dtype)}
    execute(program, arrays, (-(-n // 64), 1, 1))
    assert arrays["out"].view(np.uint32).tolist() == [m for m, _ in pairs]
    if cas:
        want = [v if e == m else m for (m, v), e in zip(pairs, expected_arg)]
    else:
        want = [encode(t, ATOMIC_RESULT[op.base](decode(t, m), decode(t, v))) for m, v in pairs]
    assert arrays["mem"].view(np.uint32).tolist() == want
