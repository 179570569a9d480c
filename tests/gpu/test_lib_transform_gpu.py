"""The fused ``transform_reduce`` / ``transform_*_scan`` on ``cuda``: CuPy arrays in, CuPy results
out, against numpy, and bit for bit against the oracle (float sums in the same tree order); and the
sort-free ``unique(x, key_range=...)`` on CuPy keys."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lib import expected as E
from tests.lib.test_transform import half_as_f64, mix_bits, odd, square_plus_one, widen_times_three
from vyre import lib
from vyre.driver.errors import InvalidProgram
from vyre.reference import ReferenceBackend

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

SIZES = (1, 33, 4097, 70_001, (1 << 24) + 3)
ORACLE_SIZES = (1, 33, 4097, 70_001, (1 << 20) + 1)  # the oracle runs the same calls: it is slower


@pytest.fixture(scope="module")
def backend():
    import vyre

    return vyre.default_backend()


@pytest.fixture(scope="module")
def oracle():
    be = ReferenceBackend()
    yield be
    be.shutdown()


@pytest.mark.parametrize("n", SIZES)
def test_integer_transforms_on_cupy_match_numpy(backend, rng, n):
    x = E.data(rng, np.uint32, n)
    d = cupy.asarray(x)
    fx = x ^ (x >> 3)
    got = lib.transform_reduce(d, mix_bits, "add", backend=backend)
    assert isinstance(got, cupy.ndarray) and got.shape == () and int(got) == int(fx.sum(dtype=np.uint32))
    E.assert_same(cupy.asnumpy(lib.transform_inclusive_scan(d, mix_bits, backend=backend)),
                  np.cumsum(fx, dtype=np.uint32))
    E.assert_same(cupy.asnumpy(lib.transform_exclusive_scan(d, mix_bits, "max", 5, backend=backend)),
                  E.exclusive_scan(fx, "max", 5))
    wide = x.astype(np.uint64) * np.uint64(3)
    assert int(lib.transform_reduce(d, widen_times_three, backend=backend)) == int(wide.sum(dtype=np.uint64))
    E.assert_same(cupy.asnumpy(lib.transform_inclusive_scan(d, widen_times_three, "max", backend=backend)),
                  np.maximum.accumulate(wide))
    small = (x & 0xFFFF).astype(np.uint16)
    E.assert_same(cupy.asnumpy(lib.transform_inclusive_scan(cupy.asarray(small), odd, backend=backend)),
                  np.cumsum(small & 1, dtype=np.uint32))


@pytest.mark.parametrize("n", ORACLE_SIZES)
def test_float_transforms_match_the_oracle_bit_for_bit(backend, oracle, rng, n):
    x = E.data(rng, np.float32, n, finite=True)
    d = cupy.asarray(x)
    for fn in (square_plus_one, half_as_f64):
        got = cupy.asnumpy(lib.transform_reduce(d, fn, backend=backend)).reshape(1)
        assert got.tobytes() == np.asarray([lib.transform_reduce(x, fn, backend=oracle)]).tobytes(), fn.name
        for scan in (lib.transform_inclusive_scan, lib.transform_exclusive_scan):
            got = cupy.asnumpy(scan(d, fn, backend=backend))
            assert got.tobytes() == scan(x, fn, backend=oracle).tobytes(), (fn.name, scan.__name__)
    fx = x * x + np.float32(1.0)
    E.assert_close_sum(lib.transform_reduce(x, square_plus_one, backend=backend), fx, E.reduce(fx, "add"))
    E.assert_same(np.asarray([lib.transform_reduce(x, square_plus_one, "max", backend=backend)]),
                  np.asarray([E.reduce(fx, "max")]))


def test_repeated_calls_replay_and_stay_exact(backend, rng):
    """The compiled fast path keys on the transform: two functions on the same array never share a replay."""
    x = E.data(rng, np.uint32, 1 << 20)
    d = cupy.asarray(x)
    for _ in range(3):
        assert int(lib.transform_reduce(d, mix_bits, backend=backend)) == int((x ^ (x >> 3)).sum(dtype=np.uint32))
        assert int(lib.transform_reduce(d, widen_times_three, backend=backend)) == \
            int((x.astype(np.uint64) * np.uint64(3)).sum(dtype=np.uint64))
        assert int(lib.reduce(d, backend=backend)) == int(x.sum(dtype=np.uint32))


@pytest.mark.parametrize("n", (1, 4097, (1 << 24) + 3))
@pytest.mark.parametrize("lo, hi", [(0, 256), (-5000, 5000), (0, 1 << 20)])
def test_unique_key_range_on_cupy_matches_numpy(backend, rng, n, lo, hi):
    """The sort-free ``unique`` on CuPy keys: numpy's values and counts, and the sort-based call's."""
    x = rng.integers(lo, hi, n).astype(np.int32)
    x[0] = lo
    d = cupy.asarray(x)
    values, counts = lib.unique(d, key_range=(lo, hi), backend=backend)
    assert isinstance(values, cupy.ndarray) and values.dtype == np.int32 and counts.dtype == np.uint32
    want_values, want_counts = np.unique(x, return_counts=True)
    E.assert_same(cupy.asnumpy(values), want_values)
    E.assert_same(cupy.asnumpy(counts), want_counts.astype(np.uint32))
    sorted_values, sorted_counts = lib.unique(d, backend=backend)
    E.assert_same(cupy.asnumpy(values), cupy.asnumpy(sorted_values))
    E.assert_same(cupy.asnumpy(counts), cupy.asnumpy(sorted_counts))
    with pytest.raises(InvalidProgram, match="outside"):
        lib.unique(d, key_range=(lo + 1, hi), backend=backend)
