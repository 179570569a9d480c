"""Op compositions that the sm_90 JIT has miscompiled: each must still equal the oracle.

The fuzzer found two (now in tests/fuzz/corpus/fuzz_jit_*): ``max(x, neg x)`` fused with a
following ``max`` into one VIMNMX3 that dropped the negation, and ``add.sat.s32`` fed by
``mad.lo`` folded into a wrapping IMAD. The generated-program tests found a third: ptxas takes
``abs.s32`` to be non-negative, so ``rem(abs(MIN), d)`` lost its sign. These tests build the same
shapes from user-level ops. A fourth (``fuzz_jit_float_literal_tie``): the JIT folds float ops on
two literals and rounds exact ties the wrong way; the code generator now folds them itself.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import check, elementwise, pairs

from tests.codegen.test_literal_fold import CASES as LITERAL_CASES
from tests.codegen.test_literal_fold import program_of as literal_program
from vyre.driver.config import DispatchConfig
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


@pytest.mark.parametrize("length", [0, 3, 4])
@pytest.mark.parametrize("dtype", [D.BOOL, D.U32, D.I32])
def test_if_on_a_guarded_load_out_of_bounds(backend, length: int, dtype: DataType) -> None:
    """``if flags[3] == 0 {} else {out = 2.5}`` with ``flags[3]`` out of bounds (reads 0) for short
    ``flags``: ptxas once folded the empty branch into an exit that forgot the out-of-bounds case
    (tests/fuzz/corpus/fuzz_jit_guarded_bool_load)."""
    from vyre.ir import Node, Program

    i = Expr.var("i")
    flag = Expr.load("flags", Expr.u32(3))
    literal_zero = Expr.u32(0) if dtype is D.U32 else Expr.i32(0)
    zero = Expr.bitxor(Expr.bool(True), flag) if dtype is D.BOOL else Expr.eq(flag, literal_zero)
    body = [Node.let("i", Expr.invocation_id(0)), Node.store("o", i, Expr.f32(0.0)),
            Node.if_(zero, [], [Node.store("o", i, Expr.f32(2.5))])]
    program = Program([BufferDecl.read("flags", 0, dtype), BufferDecl.output("o", 1, D.F32, 4)], (1, 1, 1), body,
                      name="guarded_flag")
    flags = (np.arange(length) % 2).astype(np.uint32 if dtype is D.BOOL else dtype.np_dtype)
    check(backend, program, [flags], DispatchConfig(grid=(1, 1, 2)))
