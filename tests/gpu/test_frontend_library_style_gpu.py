"""The library-style front-end kernels (folded Const arithmetic, helpers handing back their own
variables, ``vyre.registers``, parameters left out) on ``cuda``: bit for bit against the oracle."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "frontend"))

from test_library_style import _offsetter, divided, helpers, rounds, strided  # noqa: E402

from vyre.reference import ReferenceBackend  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def oracle():
    with ReferenceBackend() as be:
        yield be


def _same(kernel, args, options, backend, oracle) -> None:
    got = kernel(*args, backend=backend, **options)
    expected = kernel(*args, backend=oracle, **options)
    assert [np.asarray(g).tobytes() for g in got] == [np.asarray(e).tobytes() for e in expected]


def test_library_style_kernels_on_cuda_match_the_oracle(backend, oracle, rng):
    x = rng.integers(0, 2**32, 3 * 64, dtype=np.uint64).astype(np.uint32)
    _same(strided, (x, 3, 0), {"grid": (1, 1, 1), "output_counts": {"out": 3 * 64}}, backend, oracle)
    _same(divided, (2,), {"grid": (1, 1, 1)}, backend, oracle)
    _same(helpers, (x[:8],), {}, backend, oracle)
    for inclusive in (True, False):
        _same(rounds, (x[:128] % 1000, 4, inclusive), {"grid": (1, 1, 1), "output_counts": {"out": 128}},
              backend, oracle)
    _same(_offsetter(False), (x[:8], False), {"output_counts": {"out": 8}}, backend, oracle)
    _same(_offsetter(True), (x[:8], x[:8], True), {"output_counts": {"out": 8}}, backend, oracle)
