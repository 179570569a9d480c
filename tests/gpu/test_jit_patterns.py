"""Op compositions that the sm_90 JIT has miscompiled: each must still equal the oracle.

The fuzzer found two (now in tests/fuzz/corpus/fuzz_jit_*): ``max(x, neg x)`` fused with a
following ``max`` into one VIMNMX3 that dropped the negation, and ``add.sat.s32`` fed by
``mad.lo`` folded into a wrapping IMAD. The generated-program tests found a third: ptxas takes
``abs.s32`` to be non-negative, so ``rem(abs(MIN), d)`` lost its sign. These tests build the same
shapes from user-level ops. A fourth (``fuzz_jit_float_literal_tie``): the JIT folds float ops on
two literals and rounds exact ties the wrong way; the code generator now folds them itself.
"""

from __future__ import annotations

import pytest
from conftest import check, elementwise, pairs

from tests.codegen.test_literal_fold import CASES as LITERAL_CASES
from tests.codegen.test_literal_fold import program_of as literal_program
from vyre.ir import BufferDecl, DataType, Expr

pytestmark = pytest.mark.gpu

D = DataType
X, Y = Expr.load("x", Expr.var("i")), Expr.load("y", Expr.var("i"))
C = Expr.i32(-13)

SHAPES = {
    "max_max_neg": Expr.max(Expr.max(X, Expr.neg(X)), C),
    "max_neg_max": Expr.max(Expr.max(Expr.neg(X), X), Y),
    "min_min_neg": Expr.min(Expr.min(X, Expr.neg(X)), Y),
    "max_abs_c": Expr.max(Expr.abs(X), C),
    "min_abs_y": Expr.min(Expr.abs(Y), Expr.max(X, C)),
    "sat_add_fma": Expr.saturating_add(Y, Expr.fma(X, Expr.i32(-2147483647), Expr.min(Y, C))),
    "sat_sub_fma": Expr.saturating_sub(Expr.fma(X, Y, C), Expr.fma(Y, X, Expr.i32(7))),
    "sat_add_mul": Expr.saturating_add(Expr.mul(X, Y), Expr.i32(2**31 - 1)),
    "rem_abs": Expr.rem(Expr.abs(X), Y),
    "div_abs": Expr.div(Expr.abs(X), Y),
    "abs_below_zero": Expr.select(Expr.lt(Expr.abs(X), Expr.i32(0)), Expr.i32(1), Expr.i32(0)),
    "shr_abs": Expr.shr(Expr.abs(X), Expr.u32(31)),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_composition_matches_oracle(backend, rng, name: str) -> None:
    x, y = pairs(rng, D.I32, D.I32)
    decls = [BufferDecl.read("x", 0, D.I32), BufferDecl.read("y", 1, D.I32)]
    program = elementwise(f"jit_{name}", decls, SHAPES[name], BufferDecl.output("o", 2, D.I32, len(x)))
    check(backend, program, [x, y])


@pytest.mark.parametrize("lets", [False, True])
@pytest.mark.parametrize("name", sorted(LITERAL_CASES))
def test_float_ops_on_literals_match_oracle(backend, name: str, lets: bool) -> None:
    """Exact ties of float ops on literals: the driver's JIT, left to fold them, rounds some the
    wrong way (tests/fuzz/corpus/fuzz_jit_float_literal_tie); the code generator folds them."""
    dtype, value = LITERAL_CASES[name]
    check(backend, literal_program(dtype, value, lets), [])
