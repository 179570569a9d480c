"""F64 transcendentals (``mathlib64``) checked on the CPU, without a GPU.

The numpy model (``f64_model``) runs the very algorithm the emitter lowers to PTX (one function
per op, written against ``mathlib64.Arith``) with the same constants and an exact fma. Its error
is measured against a 64-bit-significand reference (x87 long double: 11 bits beyond binary64)
and against the oracle (numpy float64), on random bit patterns (every binade), uniform samples
and edge inputs; specials must match C99 Annex F bit for bit. The emitted PTX must assemble.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from tests.codegen.codegen_support import assemble, needs_ptxas
from tests.codegen.f64_model import EDGES, EXACT_BOUND, ORACLE_BOUND, REF, in_domain, model, samples
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.ir.generate import generate_case
from vyre.ir.typing import TRANSCENDENTAL_UNARY
from vyre.ir.validate import validate
from vyre.reference import run
from vyre.reference.scalar_ops import UNARY
from vyre.reference.ulp import ulp_distance
from vyre_cuda._codegen import mathlib64_consts as C
from vyre_cuda._codegen.mathlib64 import ALGORITHMS

F64 = DataType.F64
LD = np.longdouble
EXTENDED = np.finfo(LD).nmant >= 63
needs_long_double = pytest.mark.skipif(not EXTENDED, reason="numpy long double is not x87 extended here")

def test_every_transcendental_has_an_f64_algorithm() -> None:
    assert set(ALGORITHMS) == set(TRANSCENDENTAL_UNARY) == set(REF)


def _exact_error(op: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """|y - f(x)| in ULPs of f(x) (long double reference), 0 where the reference is not finite."""
    with np.errstate(all="ignore"):
        ref = REF[op](x.astype(LD))
        r64 = ref.astype(np.float64)
        err = np.abs((y.astype(LD) - ref) / np.spacing(np.abs(r64)).astype(LD))
    return np.where(np.isfinite(r64) & np.isfinite(y) & (r64 != 0), err, 0).astype(np.float64)


@needs_long_double
@pytest.mark.parametrize("op", sorted(REF))
def test_model_error_within_the_documented_bound(op: str) -> None:
    x = samples(op, np.random.default_rng(sum(map(ord, op))))
    y = model(op, x)
    err = _exact_error(op, x, y)
    worst = int(np.argmax(err))
    assert err[worst] <= EXACT_BOUND, f"{op}({x[worst]!r}) = {y[worst]!r}: {err[worst]:.3f} ulp"
    with np.errstate(all="ignore"):
        oracle = UNARY[op](x)
    dist = np.where(in_domain(op, x), ulp_distance(oracle, y), 0)
    assert oracle.dtype == np.float64 and dist.max() <= ORACLE_BOUND, (op, x[np.argmax(dist)])


@pytest.mark.parametrize("op", sorted(REF))
def test_specials_follow_annex_f(op: str) -> None:
    """NaN, ±inf, ±0 and results that are ±0/±inf come out bit for bit (any NaN equals any NaN)."""
    x = EDGES
    y = model(op, x)
    with np.errstate(all="ignore"):
        want = REF[op](x)
    want = np.where(in_domain(op, x), want, np.nan)  # documented: trig of |x| >= 2^50 is NaN
    special = ~np.isfinite(want) | (want == 0) | ~np.isfinite(y)
    same = (np.isnan(want) & np.isnan(y)) | (want.view(np.uint64) == y.view(np.uint64))
    bad = special & ~same
    assert not bad.any(), [(a, b, c) for a, b, c in zip(x[bad], y[bad], want[bad])]


@needs_long_double
@pytest.mark.parametrize("op", ["sin", "cos", "tan"])
def test_arguments_next_to_multiples_of_half_pi(op: str) -> None:
    """The three-part reduction keeps full accuracy where |x| - k pi/2 cancels (k up to ~2^49)."""
    ks = np.unique(np.concatenate([np.arange(1, 800), np.round(np.geomspace(1, 2.0**49, 800))]))
    near = np.array([float(int(k) * C.PI / 2) for k in ks])
    x = np.concatenate([near, np.nextafter(near, 0), np.nextafter(near, np.inf), -near])
    err = _exact_error(op, x, model(op, x))
    assert err.max() <= EXACT_BOUND, (op, x[np.argmax(err)], err.max())


def test_trig_beyond_the_reduction_limit_is_nan() -> None:
    x = np.array([C.TRIG_LIMIT, -C.TRIG_LIMIT, 1e300, np.nextafter(C.TRIG_LIMIT, 0)])
    for op in ("sin", "cos", "tan"):
        y = model(op, x)
        assert np.isnan(y[:3]).all() and np.isfinite(y[3]), op


def test_constants_are_the_exact_values_rounded() -> None:
    assert float(C.PI) == np.pi and Fraction(C.PIO2_1) + Fraction(C.PIO2_2) + Fraction(C.PIO2_3) - C.PI / 2 \
        < Fraction(1, 2**160)
    assert C.EXP_P[:2] == (1 / 6, -1 / 360) and C.LN2_HI * 2**31 == int(C.LN2_HI * 2**31)
    assert abs(Fraction(C.ATAN_HALF[0]) + Fraction(C.ATAN_HALF[1]) - Fraction(np.arctan(0.5))) < Fraction(1, 2**53)


def _program(op: str) -> Program:
    i = Expr.var("i")
    return Program([BufferDecl.read("x", 0, F64), BufferDecl.output("y", 1, F64, 1024)], (64, 1, 1),
                   [Node.let("i", Expr.invocation_id(0)), Node.store("y", i, getattr(Expr, op)(Expr.load("x", i)))],
                   name=f"f64_{op}")


@pytest.mark.parametrize("op", sorted(REF))
def test_validator_accepts_and_oracle_keeps_float64(op: str) -> None:
    program = _program(op)
    validate(program)
    x = np.linspace(-0.9, 3.0, 1024)
    (out,) = run(program, [x])
    with np.errstate(all="ignore"):
        assert out.dtype == np.float64 and out.tobytes() == REF[op](x).tobytes()


@needs_ptxas
def test_f64_lowerings_assemble_for_sm_90() -> None:
    from vyre_cuda import emit_ptx

    ptx = {op: emit_ptx(_program(op), sm="90") for op in sorted(REF)}
    assert all("fma.rn.f64" in text for text in ptx.values())
    assert assemble(ptx, "90") == []


def test_wide_approximate_generator_emits_f64_transcendentals() -> None:
    """``generate_case(approximate=True, wide=True)`` calls them on F64: valid, lowered, run by the oracle,
    and the text and wire formats carry them (the op names are the F32 ones)."""
    from vyre.ir.text import parse, to_text
    from vyre.ir.wire import from_wire, to_wire
    from vyre_cuda import emit_ptx

    seen: set[str] = set()
    for seed in range(40):
        case = generate_case(seed, approximate=True, wide=True, max_depth=4, max_stmts=20)
        ptx = emit_ptx(case.program, sm="90")
        found = {op for op in REF if f"// f64 {op}\n" in ptx}
        if found:
            run(case.program, case.inputs, case.config)
            assert parse(to_text(case.program)) == case.program == from_wire(to_wire(case.program))
        seen |= found
    assert len(seen) >= 8, seen
