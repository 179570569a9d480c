"""Every binary and unary op on every arithmetic type, on edge values and fresh random data.

Results are compared with the oracle bit for bit (any NaN equals any NaN), except the
transcendental ops, which are checked against float64 within their documented ULP bound.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import check, edges, elementwise, pairs, random_array

from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.ir.typing import BINARY_TYPES, COMPARE_OPS, PREDICATE_UNARY, SHIFT_OPS, TRANSCENDENTAL_UNARY, UNARY_TYPES

pytestmark = pytest.mark.gpu

U32, I32, F32, BOOL = DataType.U32, DataType.I32, DataType.F32, DataType.BOOL
U64, I64, F64 = DataType.U64, DataType.I64, DataType.F64
ARITH = (U32, I32, F32, BOOL, U64, I64, F64)

#: op -> (max ULP, float64 reference, input domain (lo, hi))
TRANSCENDENTAL = {
    "inverse_sqrt": (2, lambda x: 1.0 / np.sqrt(x), (1e-30, 1e30)),
    "exp": (2, np.exp, (-87.0, 88.0)),
    "exp2": (2, np.exp2, (-125.0, 127.0)),
    "log": (2, np.log, (1.2e-38, 3e38)),
    "log2": (2, np.log2, (1.2e-38, 3e38)),
    "sin": (2, np.sin, (-1e4, 1e4)),
    "cos": (2, np.cos, (-1e4, 1e4)),
    "tan": (4, np.tan, (-1e4, 1e4)),
    "asin": (4, np.arcsin, (-1.0, 1.0)),
    "acos": (4, np.arccos, (-1.0, 1.0)),
    "atan": (4, np.arctan, (-1e4, 1e4)),
    "sinh": (4, np.sinh, (-80.0, 80.0)),
    "cosh": (4, np.cosh, (-80.0, 80.0)),
    "tanh": (4, np.tanh, (-80.0, 80.0)),
}

BINARY_CASES = [(op, t) for op, types in BINARY_TYPES.items() for t in types]
#: F64 inverse_sqrt is exact (reciprocal of the correctly rounded sqrt): it joins the bit-exact cases; the
#: F64 transcendentals are ULP-bounded (tests/gpu/test_f64_transcendental_gpu.py)
UNARY_CASES = [(op, t) for op, types in UNARY_TYPES.items() for t in types
               if op not in TRANSCENDENTAL or (t is F64 and op not in TRANSCENDENTAL_UNARY)]


def _buffers(n: int, a: DataType, b: DataType | None, result: DataType) -> tuple[list[BufferDecl], BufferDecl]:
    decls = [BufferDecl.read("a", 0, a)] + ([BufferDecl.read("b", 1, b)] if b is not None else [])
    return decls, BufferDecl.output("out", 2, result, n)


@pytest.mark.parametrize(("op", "dtype"), BINARY_CASES, ids=[f"{o}-{t.name}" for o, t in BINARY_CASES])
def test_binary_op(backend, rng, op: str, dtype: DataType) -> None:
    amount = U32 if op in SHIFT_OPS else dtype
    a, b = pairs(rng, dtype, amount)
    result = BOOL if op in COMPARE_OPS else dtype
    decls, out = _buffers(len(a), dtype, amount, result)
    i = Expr.var("i")
    value = getattr(Expr, op)(Expr.load("a", i), Expr.load("b", i))
    check(backend, elementwise(f"bin_{op}_{dtype.name}", decls, value, out), [a, b])


@pytest.mark.parametrize(("op", "dtype"), UNARY_CASES, ids=[f"{o}-{t.name}" for o, t in UNARY_CASES])
def test_unary_op(backend, rng, op: str, dtype: DataType) -> None:
    a = np.concatenate([edges(dtype), random_array(rng, dtype, 4096)]).astype(dtype.np_dtype)
    result = BOOL if op in PREDICATE_UNARY else dtype
    decls, out = _buffers(len(a), dtype, None, result)
    value = getattr(Expr, op)(Expr.load("a", Expr.var("i")))
    check(backend, elementwise(f"un_{op}_{dtype.name}", decls, value, out), [a])


@pytest.mark.parametrize("op", sorted(TRANSCENDENTAL))
def test_transcendental_within_ulp(backend, rng, op: str) -> None:
    from vyre.reference import run
    from vyre.reference.ulp import assert_within_ulp

    bound, truth, (lo, hi) = TRANSCENDENTAL[op]
    if lo > 0:  # log-uniform over a positive domain
        x = np.exp(rng.uniform(np.log(lo), np.log(hi), 8192))
    else:
        x = rng.uniform(lo, hi, 8192)
    x = np.concatenate([x, [lo, hi, 0.5, 1.0]]).astype(np.float32)
    specials = np.array([np.nan], np.float32)
    a = np.concatenate([x, specials])
    decls, out = _buffers(len(a), F32, None, F32)
    program = elementwise(f"tr_{op}", decls, getattr(Expr, op)(Expr.load("a", Expr.var("i"))), out)
    (actual,) = backend.dispatch(program, [a])
    with np.errstate(all="ignore"):
        expected = truth(a.astype(np.float64)).astype(np.float32)
    assert_within_ulp(expected, actual, bound, f"{op} vs float64")
    (oracle,) = run(program, [a])
    assert_within_ulp(oracle, actual, 2 * bound, f"{op} vs the oracle")


@pytest.mark.parametrize("src", ARITH)
@pytest.mark.parametrize("dst", ARITH)
def test_cast(backend, rng, src: DataType, dst: DataType) -> None:
    a = np.concatenate([edges(src), random_array(rng, src, 4096)]).astype(src.np_dtype)
    decls, out = _buffers(len(a), src, None, dst)
    value = Expr.cast(dst, Expr.load("a", Expr.var("i")))
    check(backend, elementwise(f"cast_{src.name}_{dst.name}", decls, value, out), [a])


@pytest.mark.parametrize("dtype", [U32, I32, F32, U64, I64, F64])
def test_fma_and_select(backend, rng, dtype: DataType) -> None:
    a, b = pairs(rng, dtype, dtype)
    c = random_array(rng, dtype, len(a))
    decls = [BufferDecl.read("a", 0, dtype), BufferDecl.read("b", 1, dtype), BufferDecl.read("c", 2, dtype)]
    out = BufferDecl.output("out", 3, dtype, len(a))
    i = Expr.var("i")
    la, lb, lc = (Expr.load(n, i) for n in "abc")
    value = Expr.select(Expr.lt(la, lb), Expr.fma(la, lb, lc), Expr.sub(lc, la))
    check(backend, elementwise(f"fma_sel_{dtype.name}", decls, value, out), [a, b, c])


@pytest.mark.parametrize("dtype", [U32, I32, F32, U64, I64, F64])
def test_literals(backend, rng, dtype: DataType) -> None:
    a = random_array(rng, dtype, 1000)
    make = {U32: lambda v: Expr.u32(v & 0xFFFFFFFF), I32: lambda v: Expr.i32(v),
            F32: lambda v: Expr.f32(float(v) * 0.37), U64: lambda v: Expr.u64((v * 0x9E3779B97F4A7C15) % 2**64),
            I64: lambda v: Expr.i64(v * 0x123456789AB), F64: lambda v: Expr.f64(float(v) * 0.37)}[dtype]
    decls, out = _buffers(len(a), dtype, None, dtype)
    value = Expr.add(Expr.mul(Expr.load("a", Expr.var("i")), make(-3 if dtype is not U32 else 3)), make(7))
    check(backend, elementwise(f"lit_{dtype.name}", decls, value, out), [a])


@pytest.mark.parametrize("op", ["saturating_add", "saturating_sub"])
def test_saturating_after_multiply_add(backend, rng, op: str) -> None:
    """Saturation must survive an integer multiply-add feeding it (found by the fuzzer, seed 3157426164)."""
    n = 4096
    a, b, c, d = (random_array(rng, I32, n) for _ in range(4))
    a[:4] = [2**31 - 1, -(2**31), 2**31 - 1, 5]
    b[:4], c[:4], d[:4] = -1453657562, -2147483647, [-1313398956, 1313398956, 7, -7]
    decls = [BufferDecl.read(x, k, I32) for k, x in enumerate("abcd")]
    out = BufferDecl.output("out", 4, I32, n)
    i = Expr.var("i")
    la, lb, lc, ld = (Expr.load(x, i) for x in "abcd")
    value = getattr(Expr, op)(la, Expr.fma(lb, lc, Expr.min(ld, Expr.i32(-1313398956))))
    check(backend, elementwise(f"sat_mad_{op}", decls, value, out), [a, b, c, d])
    literal = Program([BufferDecl.output("o", 0, I32, 1)], (1, 1, 1),
                      [Node.store("o", Expr.u32(0), Expr.saturating_add(
                          Expr.i32(2**31 - 1),
                          Expr.fma(Expr.i32(-1453657562), Expr.i32(-2147483647), Expr.i32(-1313398956))))],
                      name="sat_mad_literal")
    check(backend, literal, [])
