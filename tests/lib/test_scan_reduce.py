"""``reduce``, ``inclusive_scan`` and ``exclusive_scan`` on the oracle against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lib import expected as E
from vyre import lib
from vyre.driver.errors import InvalidProgram

SIZES = [0, 1, 255, 256, 257, 1023, 1025, 4097, 2**16 + 1]
INT_OPS = ["add", "min", "max", "and", "or", "xor"]
FLOAT_OPS = ["add", "min", "max"]
MATRIX = [(np.uint32, op) for op in INT_OPS] + [(np.int32, op) for op in INT_OPS] + \
         [(np.float32, op) for op in FLOAT_OPS]


def _check_reduce(backend, x, op):
    got = lib.reduce(x, op, backend=backend)
    want = E.reduce(x, op)
    assert np.asarray(got).dtype == x.dtype
    if op == "add" and x.dtype == np.float32:
        E.assert_close_sum(got, x, want)
    else:
        E.assert_same(np.asarray([got]), np.asarray([want], x.dtype))


def _check_scan(backend, x, op, inclusive, init=None):
    if inclusive:
        got, want = lib.inclusive_scan(x, op, backend=backend), E.inclusive_scan(x, op)
    else:
        got, want = lib.exclusive_scan(x, op, init, backend=backend), E.exclusive_scan(x, op, init)
    if op == "add" and x.dtype == np.float32:
        assert got.dtype == np.float32 and got.shape == want.shape
        E.assert_close_sum(got, x, want)
    else:
        E.assert_same(got, want)


@pytest.mark.parametrize("n", SIZES)
def test_sizes_u32_add(backend, rng, n):
    x = E.data(rng, np.uint32, n)
    _check_reduce(backend, x, "add")
    _check_scan(backend, x, "add", True)
    _check_scan(backend, x, "add", False)


@pytest.mark.parametrize("dtype, op", MATRIX)
@pytest.mark.parametrize("n", [257, 5000])
def test_ops_and_types(backend, rng, dtype, op, n):
    x = E.data(rng, dtype, n, finite=(op == "add"))
    _check_reduce(backend, x, op)
    _check_scan(backend, x, op, True)
    _check_scan(backend, x, op, False)


@pytest.mark.parametrize("n", [1, 3000])
def test_float_minmax_with_nan_and_signed_zeros(backend, rng, n):
    x = rng.choice(E.F32_EDGES, n)
    for op in ("min", "max"):
        _check_reduce(backend, x, op)
        _check_scan(backend, x, op, True)
    nan = np.full(n, np.nan, np.float32)
    assert np.isnan(lib.reduce(nan, "min", backend=backend))


def test_float_add_is_deterministic(backend, rng):
    x = E.data(rng, np.float32, 70_000, finite=True)
    first = lib.reduce(x, backend=backend)
    assert lib.reduce(x, backend=backend).tobytes() == first.tobytes()
    assert lib.inclusive_scan(x, backend=backend).tobytes() == lib.inclusive_scan(x, backend=backend).tobytes()


def test_three_level_scan(backend, rng):
    """2**20 + 1 elements: tiles of 1024 -> 1025 totals -> 2 -> one tile: three levels."""
    x = E.data(rng, np.uint32, 2**20 + 1)
    _check_scan(backend, x, "add", True)
    _check_scan(backend, x, "max", False, init=7)


@pytest.mark.parametrize("dtype, op, init", [(np.uint32, "add", 5), (np.int32, "min", -3), (np.float32, "max", 2.5),
                                             (np.uint32, "and", 0xF0F0F0F0)])
def test_exclusive_init(backend, rng, dtype, op, init):
    x = E.data(rng, dtype, 2000, finite=True)
    _check_scan(backend, x, op, False, init)


def test_empty_identities(backend):
    for dtype, op in MATRIX:
        got = lib.reduce(np.zeros(0, dtype), op, backend=backend)
        E.assert_same(np.asarray([got]), np.asarray([E.identity(op, dtype)], dtype))
    assert lib.inclusive_scan(np.zeros(0, np.int32), backend=backend).dtype == np.int32


@pytest.mark.parametrize("call", [
    lambda b: lib.reduce(np.ones(4, np.uint32), "mul", backend=b),
    lambda b: lib.reduce(np.ones(4, np.float32), "xor", backend=b),
    lambda b: lib.reduce(np.ones(4, np.float16), backend=b),
    lambda b: lib.inclusive_scan(np.ones(4, np.uint8), backend=b),
    lambda b: lib.exclusive_scan(np.ones(4, np.uint32), init=-1, backend=b),
    lambda b: lib.reduce("abc", backend=b),
])
def test_bad_arguments(backend, call):
    with pytest.raises(InvalidProgram, match="Fix: "):
        call(backend)
