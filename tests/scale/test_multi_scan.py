"""``multi.inclusive_scan`` on 1-3 oracle backends (numpy parts: carries combined on the host, each
device's scan started from its carry as a host ``init``), judged by numpy: every op, u32 and i32,
sizes 0 to 4099 with the type's edge values, host and sharded inputs, empty parts anywhere."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from test_multi import oracles

from vyre.lib import multi
from vyre.lib.multi_devices import UFUNCS
from vyre.lib.multi_ops import _Split
from vyre.lib.sharded import Sharded

SIZES = [0, 1, 2, 63, 64, 65, 255, 256, 257, 1000, 4097, 4099]
OPS = ["add", "min", "max", "or", "and", "xor"]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng()


def values(rng: np.random.Generator, n: int, dtype: type) -> np.ndarray:
    """Random values of ``dtype``, a third of them the type's edges (0, 1, -1, min, max, max - 1)."""
    info = np.iinfo(dtype)
    out = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    edges = np.array([0, 1, -1, info.min, info.max, info.max - 1], np.int64)
    edges = edges[(edges >= info.min) & (edges <= info.max)].astype(dtype)
    places = rng.random(n) < 1 / 3
    out[places] = rng.choice(edges, int(places.sum()))
    return out


def scan(x: np.ndarray, op: str) -> np.ndarray:
    return UFUNCS[op].accumulate(x, dtype=x.dtype) if x.size else x.copy()


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.uint32, np.int32])
def test_scan_of_host_and_sharded_inputs_equals_numpy(rng, n: int, k: int, dtype: type) -> None:
    for op in OPS:
        x = values(rng, n, dtype)
        want = scan(x, op)
        got = multi.inclusive_scan(x, op, devices=oracles(k))
        assert isinstance(got, np.ndarray) and got.dtype == dtype and np.array_equal(got, want), op
        sharded = multi.inclusive_scan(multi.shard(x, oracles(k), align=32), op)
        assert isinstance(sharded, Sharded) and sharded.dtype == dtype
        assert np.array_equal(sharded.gather(), want), op


@pytest.mark.parametrize("op", OPS)
def test_scan_over_empty_parts_anywhere(rng, op: str) -> None:
    """Empty first, middle and last parts (their totals skipped), a one-element part, unequal lengths."""
    x = values(rng, 3001, np.int32)
    cuts = [x[:0], x[:1], x[1:1], x[1:2000], x[2000:2000], x[2000:], x[3001:]]
    got = multi.inclusive_scan(Sharded(cuts, oracles(len(cuts))), op)
    assert got.sizes == [c.size for c in cuts]
    assert np.array_equal(got.gather(), scan(x, op))


def test_float_min_max_over_devices(rng) -> None:
    x = rng.standard_normal(5000).astype(np.float32)
    assert np.array_equal(multi.inclusive_scan(x, "max", devices=oracles(3)), np.maximum.accumulate(x))
    assert np.array_equal(multi.inclusive_scan(x, "min", devices=oracles(2)), np.minimum.accumulate(x))


def test_host_carries_wrap_without_warnings() -> None:
    """Carries of u32 totals that overflow wrap like the device, with no numpy overflow warning."""
    split = _Split(np.zeros(4, np.uint32), oracles(4), "multi.inclusive_scan")
    totals = [np.array([0xFFFFFFFF], np.uint32), None, np.array([2], np.uint32), None]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        carries = split.carries(totals, np.add)
    assert carries == [None, 0xFFFFFFFF, 0xFFFFFFFF, 1]  # every part holds an element
    assert all(c is None or c.dtype == np.uint32 for c in carries)
    gapped = _Split(Sharded([np.ones(2, np.uint32), np.zeros(0, np.uint32), np.ones(1, np.uint32)], oracles(3)),
                    None, "multi.inclusive_scan")
    assert gapped.carries([np.array([2], np.uint32), None, None], np.add) == [None, None, 2]  # an empty part: none
    x = np.array([0xFFFFFFFF, 0xFFFFFFFF, 3, 0x80000000], np.uint32)
    assert np.array_equal(multi.inclusive_scan(x, devices=oracles(4)), np.cumsum(x, dtype=np.uint32))
