"""``select``, ``select_if``, ``histogram`` and ``segmented_reduce`` on the oracle against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lib import expected as E
from vyre import lib
from vyre.driver.errors import InvalidProgram

SIZES = [0, 1, 255, 256, 257, 1025, 2**16 + 1]


@pytest.mark.parametrize("n", SIZES)
def test_select_sizes(backend, rng, n):
    x = E.data(rng, np.uint32, n)
    flags = rng.random(n) < 0.3
    E.assert_same(lib.select(x, flags, backend=backend), x[flags])


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.float32])
@pytest.mark.parametrize("flag_dtype", [np.bool_, np.uint8, np.int16, np.uint32, np.int32, np.float32])
def test_select_types(backend, rng, dtype, flag_dtype):
    x = E.data(rng, dtype, 1500)
    flags = rng.integers(0, 2, 1500).astype(flag_dtype)
    if flag_dtype == np.float32:
        flags[:6] = [-0.0, np.nan, 0.0, 1e-45, -np.inf, 0.0]  # -0.0 is false, NaN and subnormals are true
    got = lib.select(x, flags, backend=backend)
    E.assert_same_bits(got, x[flags != 0])


def test_select_all_and_none(backend, rng):
    x = E.data(rng, np.int32, 3000)
    E.assert_same(lib.select(x, np.ones(3000, np.uint32), backend=backend), x)
    E.assert_same(lib.select(x, np.zeros(3000, np.uint32), backend=backend), x[:0])


@pytest.mark.parametrize("n", SIZES)
def test_select_if_sizes(backend, rng, n):
    x = E.data(rng, np.int32, n)
    lo, hi = -(2**30), 2**29
    E.assert_same(lib.select_if(x, lo, hi, backend=backend), x[(lo <= x) & (x < hi)])


@pytest.mark.parametrize("dtype, lo, hi", [(np.uint32, 5, 0x80000001), (np.float32, -1.0, np.inf),
                                           (np.float32, -np.inf, 0.0), (np.int32, 0, 0)])
def test_select_if_edges(backend, rng, dtype, lo, hi):
    x = E.data(rng, dtype, 2000)
    keep = (dtype(lo) <= x) & (x < dtype(hi))
    E.assert_same_bits(lib.select_if(x, lo, hi, backend=backend), x[keep])


@pytest.mark.parametrize("n", SIZES)
def test_histogram_sizes(backend, rng, n):
    x = rng.integers(0, 300, n).astype(np.uint32)
    x[: min(n, 3)] = [0xFFFFFFFF, 256, 0][: min(n, 3)]
    got = lib.histogram(x, 256, backend=backend)
    want = np.bincount(x[x < 256], minlength=256).astype(np.uint32)
    E.assert_same(got, want)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16, np.int32])
@pytest.mark.parametrize("bins", [1, 7, 1000, 8192, 10_000])
def test_histogram_types_and_bins(backend, rng, dtype, bins):
    info = np.iinfo(dtype)
    x = rng.integers(max(info.min, -50), min(info.max, 12_000) + 1, 3000).astype(dtype)
    wide = x.astype(np.int64)
    want = np.bincount(wide[(wide >= 0) & (wide < bins)], minlength=bins).astype(np.uint32)
    E.assert_same(lib.histogram(x, bins, backend=backend), want)


def test_histogram_zero_bins(backend):
    assert lib.histogram(np.arange(5, dtype=np.uint32), 0, backend=backend).shape == (0,)


@pytest.mark.parametrize("dtype, op", [(np.uint32, "add"), (np.int32, "min"), (np.float32, "max"),
                                       (np.float32, "add"), (np.uint32, "xor"), (np.int32, "and")])
@pytest.mark.parametrize("n, segments", [(0, 3), (1, 1), (255, 256), (300, 17), (5000, 40), (5000, 1),
                                         (2**16 + 1, 300)])
def test_segmented_reduce(backend, rng, dtype, op, n, segments):
    x = E.data(rng, dtype, n, finite=(op == "add"))
    offsets = E.random_offsets(rng, n, segments)
    got = lib.segmented_reduce(x, offsets, op, backend=backend)
    want = E.segmented_reduce(x, offsets, op)
    if op == "add" and dtype == np.float32:  # another order: within a few ulps of each segment's sum of magnitudes
        magnitude = np.abs(x.astype(np.float64))
        scale = np.array([magnitude[b:e].sum() for b, e in zip(offsets[:-1], offsets[1:])])
        err = np.abs(got.astype(np.float64) - want.astype(np.float64))
        assert got.shape == want.shape and np.all(err <= 1e-5 * scale + 1e-30), float(np.max(err - 1e-5 * scale))
    else:
        E.assert_same(got, want)


def test_segmented_reduce_no_segments(backend):
    assert lib.segmented_reduce(np.ones(4, np.uint32), np.zeros(1, np.uint32), backend=backend).shape == (0,)


@pytest.mark.parametrize("call", [
    lambda b: lib.select(np.ones(4, np.uint32), np.ones(5, np.uint32), backend=b),
    lambda b: lib.select(np.ones(4, np.float16), np.ones(4, np.uint32), backend=b),
    lambda b: lib.select_if(np.ones(4, np.uint32), -1, 3, backend=b),
    lambda b: lib.select_if(np.ones(4, np.int32), 0, 2.5, backend=b),
    lambda b: lib.select_if(np.ones(4, np.int32), 0, float("nan"), backend=b),
    lambda b: lib.histogram(np.ones(4, np.float32), 4, backend=b),
    lambda b: lib.histogram(np.ones(4, np.uint32), -1, backend=b),
    lambda b: lib.histogram(np.ones(4, np.uint32), 2**32 - 1, backend=b),
    lambda b: lib.segmented_reduce(np.ones(4, np.uint32), np.array([0, 3, 2, 4]), backend=b),
    lambda b: lib.segmented_reduce(np.ones(4, np.uint32), np.array([0, 5]), backend=b),
    lambda b: lib.segmented_reduce(np.ones(4, np.uint32), np.array([0.0, 4.0]), backend=b),
])
def test_bad_arguments(backend, call):
    with pytest.raises(InvalidProgram, match="Fix: "):
        call(backend)


def test_segmented_reduce_takes_host_offsets_of_any_integer_type(backend):
    x = np.arange(10, dtype=np.uint32)
    for offsets in (np.array([0, 3, 10]), np.array([0, 3, 10], dtype=np.int16), [0, 3, 10]):
        assert lib.segmented_reduce(x, offsets, backend=backend).tolist() == [3, 42]
