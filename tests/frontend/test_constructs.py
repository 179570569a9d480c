"""Each construct of the kernel subset: the front end's Program equals the builder's, and the
oracle running the kernel agrees with numpy on fresh random inputs with edge values."""

from __future__ import annotations

import numpy as np
import pytest
from frontend_cases import CASES, N, by_name, rng_fixture  # noqa: F401 - the rng fixture

from vyre.reference import ReferenceBackend
from vyre.reference.ulp import assert_outputs_equal


@pytest.fixture(scope="module")
def oracle():
    with ReferenceBackend() as backend:
        yield backend


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_program_equals_the_builders(case):
    assert case.kernel.program == case.builder, case.kernel.to_text()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_oracle_matches_numpy(case, oracle, rng):
    inputs = case.inputs(rng)
    outputs = case.kernel(*inputs, backend=oracle, **case.call)
    with np.errstate(all="ignore"):
        expected = case.expected(*inputs)
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        if want is not None:
            assert_outputs_equal([np.asarray(want, got.dtype)], [got], case.kernel.program)


def test_compare_exchange_stores_one_winner(oracle, rng):
    data = rng.integers(0, 2**32, N, dtype=np.uint32)
    _, first = by_name("histogram16").kernel(data, backend=oracle, elements=N)
    assert 1 <= first[0] <= N
