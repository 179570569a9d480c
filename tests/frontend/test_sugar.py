"""Operator sugar on Expr for builder users: the same Expr as the named constructors."""

from __future__ import annotations

import pytest

import vyre
from vyre.ir import DataType, Expr

x, y = Expr.var("x"), Expr.var("y")
i = Expr.i32(5)
f = Expr.cast(DataType.F32, x)


@pytest.mark.parametrize(("sugar", "built"), [
    (x + y, Expr.add(x, y)), (x - y, Expr.sub(x, y)), (x * y, Expr.mul(x, y)), (x / y, Expr.div(x, y)),
    (x // y, Expr.div(x, y)), (x % y, Expr.rem(x, y)), (x & y, Expr.bitand(x, y)), (x | y, Expr.bitor(x, y)),
    (x ^ y, Expr.bitxor(x, y)), (x << y, Expr.shl(x, y)), (x >> y, Expr.shr(x, y)), (-x, Expr.neg(x)),
    (~x, Expr.bitnot(x)),
    (x.lt(y), Expr.lt(x, y)), (x.eq(y), Expr.eq(x, y)), (x.ge(y), Expr.ge(x, y)), (x.min(y), Expr.min(x, y)),
    (f.sqrt(), Expr.sqrt(f)), (x.and_(y), Expr.and_(x, y)),
])
def test_operators_build_the_named_constructors(sugar, built):
    assert sugar == built


def test_python_numbers_take_the_expr_type():
    assert i + 1 == Expr.add(i, Expr.i32(1))
    assert 1 - i == Expr.sub(Expr.i32(1), i)
    assert f * 2 == Expr.mul(f, Expr.f32(2.0))
    assert f + 0.5 == Expr.add(f, Expr.f32(0.5))
    assert i.lt(-3) == Expr.lt(i, Expr.i32(-3))
    assert Expr.max(i, 3) == Expr.max(i, Expr.i32(3))
    assert i << 2 == Expr.shl(i, Expr.u32(2))  # shift amounts are always U32
    assert 1 << x == Expr.shl(Expr.u32(1), x)
    assert Expr.invocation_id(0) * 4 == Expr.mul(Expr.invocation_id(0), Expr.u32(4))
    assert x + 1 == Expr.add(x, Expr.u32(1))  # a var's type is in the program: ints are U32 there


def test_equality_stays_structural():
    assert (x == Expr.var("x")) is True
    assert (x == y) is False
    assert hash(x + y) == hash(Expr.add(x, y))


def test_vyre_functions_build_exprs_outside_kernels():
    assert vyre.sqrt(f) == Expr.sqrt(f)
    assert vyre.sqrt(2) == Expr.sqrt(Expr.f32(2.0))
    assert vyre.min(i, 2) == Expr.min(i, Expr.i32(2))
    assert vyre.u32(x) == Expr.cast(DataType.U32, x) and vyre.i32(-2) == Expr.i32(-2)
    assert vyre.gid(1) == Expr.invocation_id(1)
    assert vyre.select(x.lt(y), i, 0) == Expr.select(Expr.lt(x, y), i, Expr.i32(0))


def test_sugar_rejects_other_operands():
    with pytest.raises(TypeError):
        x + "a"
    with pytest.raises(TypeError, match="Fix:"):
        Expr.add(x, "a")
    with pytest.raises(TypeError, match="only has a meaning inside a @vyre.kernel"):
        vyre.shared(vyre.f32, 4)


def test_star_import_keeps_python_builtins():
    namespace: dict = {}
    exec("from vyre import *", namespace)
    assert "min" not in namespace and "abs" not in namespace and "sqrt" in namespace and "kernel" in namespace
    assert vyre.min(i, 1) == Expr.min(i, Expr.i32(1))  # still reachable as vyre.min
