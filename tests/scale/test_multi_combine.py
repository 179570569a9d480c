"""``multi.histogram`` and ``multi.reduce``, whose per-device partials are combined, on 1-3 oracle
backends (whose parts are numpy, so the partials are combined on the host), judged by numpy."""

from __future__ import annotations

import numpy as np
import pytest
from test_multi import oracles

from vyre.lib import multi
from vyre.lib.multi_devices import UFUNCS
from vyre.lib.multi_ops import _Split
from vyre.lib.sharded import Sharded

SIZES = [0, 1, 2, 63, 64, 65, 255, 256, 257, 1000, 4099]
OPS = ["add", "min", "max", "or", "and", "xor"]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng()


def values(rng: np.random.Generator, n: int, dtype: type, bins: int) -> np.ndarray:
    """Mostly values in ``[0, bins)``, the rest the type's edges and the bins' own edges
    (-1, bins, min, max), in random places."""
    info = np.iinfo(dtype)
    edges = np.array([0, 1, -1, bins - 1, bins, bins + 1, info.min, info.max, info.max - 1], np.int64)
    edges = edges[(edges >= info.min) & (edges <= info.max)]
    inside = rng.integers(0, max(bins, 1), n)
    out = np.where(rng.random(n) < 0.75, inside, rng.choice(edges, n)).astype(dtype)
    return out


def counts(x: np.ndarray, bins: int) -> np.ndarray:
    """numpy's histogram of ``x`` over ``[0, bins)``, values outside it ignored."""
    wide = x.astype(np.int64)
    return np.bincount(wide[(wide >= 0) & (wide < bins)], minlength=bins).astype(np.uint32)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.uint32, np.int32])
def test_histogram_equals_numpy_for_host_and_sharded_inputs(rng, n: int, k: int, dtype: type) -> None:
    for bins in (0, 1, 7, 256, 1000):
        x = values(rng, n, dtype, bins)
        want = counts(x, bins)
        got = multi.histogram(x, bins, devices=oracles(k))
        assert isinstance(got, np.ndarray) and got.dtype == np.uint32 and np.array_equal(got, want)
        sharded = multi.histogram(multi.shard(x, oracles(k), align=64), bins)
        assert isinstance(sharded, np.ndarray) and np.array_equal(sharded, want)  # the oracle's parts are numpy


def test_histogram_of_parts_of_unequal_length_and_empty_parts(rng) -> None:
    x = values(rng, 3000, np.uint32, 50)
    parts = [x[:0], x[:2900], x[2900:2900], x[2900:]]
    got = multi.histogram(Sharded(parts, oracles(4)), 50)
    assert np.array_equal(got, counts(x, 50))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [np.uint32, np.int32])
@pytest.mark.parametrize("n", [0, 1, 65, 4099])
def test_reduce_every_op_equals_numpy(rng, op: str, dtype: type, n: int) -> None:
    x = values(rng, n, dtype, 1000)
    ufunc = UFUNCS[op]
    identity = {"add": 0, "or": 0, "xor": 0, "and": ~dtype(0), "min": np.iinfo(dtype).max,
                "max": np.iinfo(dtype).min}[op]
    want = ufunc.reduce(x, dtype=dtype) if n else dtype(identity)
    for k in (1, 2, 3):
        got = multi.reduce(x, op, devices=oracles(k))
        assert isinstance(got, np.generic) and got.dtype == dtype and got == want, (k, got, want)
        assert multi.reduce(multi.shard(x, oracles(k), align=32), op) == want


def test_reduce_float_min_max_skip_a_part_of_nans(rng) -> None:
    x = rng.standard_normal(2000).astype(np.float32)
    x[:1000] = np.nan  # the first of two parts holds only NaN: its partial is NaN
    assert multi.reduce(x, "min", devices=oracles(2)) == np.nanmin(x)
    assert multi.reduce(x, "max", devices=oracles(2)) == np.nanmax(x)
    assert np.isnan(multi.reduce(np.full(10, np.nan, np.float32), "min", devices=oracles(2)))


def test_host_combine_wraps_u32_counts_like_the_device() -> None:
    split = _Split(np.zeros(4, np.uint32), oracles(2), "multi.histogram")
    partials = [np.array([0xFFFFFFFF, 1, 0x80000000], np.uint32), np.array([2, 3, 0x80000000], np.uint32)]
    combined = split.combine(partials, np.add)
    assert combined.dtype == np.uint32 and combined.tolist() == [1, 4, 0]
