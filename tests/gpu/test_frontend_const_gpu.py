"""Kernels with ``vyre.Const`` parameters on ``cuda``: each specialisation bit for bit against the oracle."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "frontend"))

from const_kernels import alternating, moving_sum, power, power_rolled, scale_or_shift  # noqa: E402

from vyre.driver.config import DispatchConfig  # noqa: E402
from vyre.reference import run  # noqa: E402

pytestmark = pytest.mark.gpu

N = 3001  # not a multiple of the workgroup: the guard matters


def _inputs(rng: np.random.Generator, dtype: type) -> np.ndarray:
    if dtype is np.float32:
        return rng.uniform(-2, 2, N).astype(np.float32)
    return rng.integers(-(2**31), 2**31, N, dtype=np.int64).astype(dtype)


CASES = [
    (power, (4,), np.float32), (power, (0,), np.float32), (scale_or_shift, (True, -3), np.int32),
    (scale_or_shift, (False, 2**31 - 1), np.int32), (alternating, (5,), np.float32), (moving_sum, (7,), np.uint32),
]


@pytest.mark.parametrize(("template", "consts", "dtype"), CASES,
                         ids=[f"{t.name}-{'-'.join(map(str, c))}" for t, c, _ in CASES])
def test_const_kernel_on_cuda_matches_the_oracle(backend, rng, template, consts, dtype):
    x = _inputs(rng, dtype)
    (got,) = template(x, *consts, backend=backend, elements=N)
    kernel = template.bind(*consts)
    (expected,) = run(kernel.specialise(None, N), kernel.inputs(x), DispatchConfig(elements=N))
    assert np.asarray(got).tobytes() == np.asarray(expected).tobytes()


def test_unrolled_equals_rolled_on_cuda(backend, rng):
    x = _inputs(rng, np.float32)
    for n in (1, 3, 6):
        (unrolled,) = power(x, n, backend=backend, elements=N)
        (rolled,) = power_rolled(x, n, backend=backend, elements=N)
        assert np.asarray(unrolled).tobytes() == np.asarray(rolled).tobytes()

