"""F64 transcendentals on the device: within docs/semantics.md's bound of the oracle, specials
exact, and bit-identical to the CPU model of the emitted algorithm (``tests/codegen/f64_model``).

The model runs the same ``mathlib64`` algorithm with the PTX operations' semantics (correctly
rounded add/mul/div/sqrt, single-rounding fma), so any bit difference is a lowering or model bug.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import elementwise

from tests.codegen.f64_model import EDGES, ORACLE_BOUND, REF, in_domain, model, samples
from vyre.ir import BufferDecl, DataType, Expr
from vyre.reference import run
from vyre.reference.ulp import assert_within_ulp, mismatches

pytestmark = pytest.mark.gpu
F64 = DataType.F64


def _dispatch(backend, op: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(device result, oracle result) of ``y[i] = op(x[i])`` on F64."""
    decls, out = [BufferDecl.read("x", 0, F64)], BufferDecl.output("y", 1, F64, x.size)
    program = elementwise(f"f64_{op}", decls, getattr(Expr, op)(Expr.load("x", Expr.var("i"))), out)
    (actual,) = backend.dispatch(program, [x])
    (oracle,) = run(program, [x])
    return np.asarray(actual), oracle


@pytest.mark.parametrize("op", sorted(REF))
def test_f64_transcendental_within_bound_of_the_oracle(backend, rng, op: str) -> None:
    x = samples(op, rng, 1 << 16)
    actual, oracle = _dispatch(backend, op, x)
    keep = in_domain(op, x)
    assert_within_ulp(oracle[keep], actual[keep], ORACLE_BOUND, f"F64 {op} vs the oracle")


@pytest.mark.parametrize("op", sorted(REF))
def test_f64_transcendental_specials_exact(backend, op: str) -> None:
    actual, _ = _dispatch(backend, op, EDGES.copy())
    with np.errstate(all="ignore"):
        want = np.where(in_domain(op, EDGES), REF[op](EDGES), np.nan)  # trig of |x| >= 2^50: NaN
    special = ~np.isfinite(want) | (want == 0) | ~np.isfinite(actual)
    bad = np.flatnonzero(special)[mismatches(want[special], actual[special])]
    assert bad.size == 0, [(EDGES[i], actual[i], want[i]) for i in bad]


@pytest.mark.parametrize("op", sorted(REF))
def test_f64_transcendental_equals_the_cpu_model_bit_for_bit(backend, rng, op: str) -> None:
    x = samples(op, rng, 1 << 14)
    actual, _ = _dispatch(backend, op, x)
    bad = mismatches(model(op, x), actual)
    assert bad.size == 0, [(x[i], actual[i], model(op, x[i:i + 1])[0]) for i in bad[:5]]
