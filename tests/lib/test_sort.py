"""``sort``, ``argsort``, ``unique`` and ``run_length_encode`` on the oracle against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lib import expected as E
from vyre import lib
from vyre.driver.errors import InvalidProgram
from vyre.lib._sort import kernels as K
from vyre.lib._sort import topology as sort_topology
from vyre.lib.blocks import WG

SIZES = [0, 1, 255, 256, 257, 1025, 3073, 6145, 2**16 + 1]
KEY_TYPES = [np.uint32, np.int32, np.float32]


@pytest.mark.parametrize("n", SIZES)
def test_sort_sizes(backend, rng, n):
    keys = E.data(rng, np.uint32, n)
    E.assert_same(lib.sort(keys, backend=backend), np.sort(keys))


@pytest.mark.parametrize("dtype", KEY_TYPES)
@pytest.mark.parametrize("n", [300, 4000])
def test_sort_types_total_order(backend, rng, dtype, n):
    keys = E.data(rng, dtype, n)
    keys[: n // 4] = keys[n // 4: n // 2]  # plenty of ties, so stability shows
    order = E.sort_order(keys)
    E.assert_same_bits(lib.sort(keys, backend=backend), keys[order])
    E.assert_same(lib.argsort(keys, backend=backend), order.astype(np.uint32))


@pytest.mark.parametrize("dist", E.KEY_DISTS)
@pytest.mark.parametrize("dtype", KEY_TYPES)
@pytest.mark.parametrize("n", [1, 257, 5000])
def test_sort_family_on_key_distributions(backend, rng, dist, dtype, n):
    """Keys, argsort and pairs are numpy's stable order on each key distribution the sort is timed on."""
    keys = E.key_distribution(rng, dist, dtype, n)
    E.check_sort_family(backend, keys, E.data(rng, np.uint32, n))


@pytest.mark.parametrize("dtype", KEY_TYPES)
def test_key_distributions(rng, dtype):
    """Each distribution is what it says: random, ordered both ways, 16 values, or skewed Zipf ranks."""
    n = 4000
    keys = {d: E.key_distribution(rng, d, dtype, n) for d in E.KEY_DISTS}
    assert all(k.dtype == np.dtype(dtype) and k.shape == (n,) for k in keys.values())
    E.assert_same(E.sort_order(keys["sorted"]), np.arange(n))
    E.assert_same_bits(keys["reversed"][::-1], keys["reversed"][E.sort_order(keys["reversed"])])
    assert np.unique(E.canonical(keys["uniform"])).size > n * 0.9
    assert np.unique(E.canonical(keys["few_distinct"])).size <= 16
    ranks, counts = np.unique(E.canonical(keys["zipf"]), return_counts=True)
    assert counts.max() > n / 10 and ranks.size > 100  # one value is frequent, and the tail is long
    with pytest.raises(ValueError, match="unknown key distribution"):
        E.key_distribution(rng, "normal", dtype, n)


def test_float_total_order_edges(backend):
    keys = np.array([np.nan, 0.0, -0.0, np.inf, -np.nan, -np.inf, 1e-45, -1e-45, 0.0, -0.0, 1.0], np.float32)
    got = lib.sort(keys, backend=backend)
    want_bits = np.array([0xFF800000, 0x80000001, 0x80000000, 0x80000000, 0, 0, 1, 0x3F800000, 0x7F800000,
                          0x7FFFFFFF, 0x7FFFFFFF], np.uint32)
    E.assert_same(got.view(np.uint32), want_bits)
    E.assert_same(lib.argsort(keys, backend=backend), np.array([5, 7, 2, 9, 1, 8, 6, 10, 3, 0, 4], np.uint32))


@pytest.mark.parametrize("key_type", KEY_TYPES)
@pytest.mark.parametrize("value_type", [np.uint32, np.int32, np.float32])
def test_sort_pairs(backend, rng, key_type, value_type):
    keys = E.data(rng, key_type, 2500)
    keys[:1000] = keys[1000:2000]
    values = E.data(rng, value_type, 2500)
    got_k, got_v = lib.sort(keys, values, backend=backend)
    order = E.sort_order(keys)
    E.assert_same_bits(got_k, keys[order])
    assert got_v.tobytes() == values[order].tobytes()


def test_segments_of_several_tiles(backend, rng, monkeypatch):
    """The segmented sort (the plan for n >= 2^30, forced here): with two segments each workgroup
    walks several tiles (alternating counter halves, output positions carried from tile to tile,
    keys loaded ahead across tiles) and the last is partial."""
    monkeypatch.setattr(sort_topology, "SORT_GROUPS", 2)
    monkeypatch.setattr(sort_topology, "ONESWEEP_LIMIT", 0)
    n = 5 * WG * K.SORT_ITEMS + 7
    keys = E.data(rng, np.float32, n)
    keys[: n // 3] = keys[n // 3: 2 * n // 3]
    E.check_sort_family(backend, keys, E.data(rng, np.int32, n))


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.float32, np.uint64])
def test_digits_absent_from_passes(backend, rng, dtype):
    """Keys whose bytes take 3 values each, so most digits are absent from every pass: tiles after
    the first do not look back for those digits (``onesweep.SKIP_EMPTY``), over several tiles,
    and the sort family is still numpy's stable order (the top bytes sign or exponent bits too)."""
    n = 3 * WG * K.SORT_ITEMS + 11
    width = np.dtype(dtype).itemsize
    raw = np.zeros(n, np.uint64)
    for b in range(width):
        raw |= rng.choice(np.array([0x00, 0x5A, 0xFF], np.uint64), n) << np.uint64(8 * b)
    keys = raw.astype(np.uint64 if width == 8 else np.uint32).view(dtype)
    digits = [np.unique((raw >> np.uint64(8 * b)) & np.uint64(255)).size for b in range(width)]
    assert max(digits) <= 3  # absent digits in every pass: what the test is about
    E.check_sort_family(backend, keys, E.data(rng, np.dtype(np.uint32), n))


def test_sort_large_pairs(backend, rng):
    keys = rng.integers(0, 1000, 2**16 + 1).astype(np.uint32)
    got_k, got_v = lib.sort(keys, np.arange(keys.size, dtype=np.uint32), backend=backend)
    order = np.argsort(keys, kind="stable")
    E.assert_same(got_k, keys[order])
    E.assert_same(got_v, order.astype(np.uint32))


@pytest.mark.parametrize("dtype", KEY_TYPES)
@pytest.mark.parametrize("n", [0, 1, 257, 3000])
def test_unique_types(backend, rng, dtype, n):
    x = E.runs(rng, dtype, n)
    x[: min(n, 4)] = E.EDGES[np.dtype(dtype)][: min(n, 4)]
    values, counts = lib.unique(x, backend=backend)
    want_values, want_counts = E.unique(x)
    E.assert_same_bits(values, want_values.astype(dtype))
    E.assert_same(counts, want_counts)


@pytest.mark.parametrize("n", [255, 256, 2**16 + 1])
def test_unique_sizes(backend, rng, n):
    x = rng.integers(0, n // 3 + 2, n).astype(np.int32)
    values, counts = lib.unique(x, backend=backend)
    want_values, want_counts = np.unique(x, return_counts=True)
    E.assert_same(values, want_values)
    E.assert_same(counts, want_counts.astype(np.uint32))


@pytest.mark.parametrize("dtype", KEY_TYPES)
@pytest.mark.parametrize("n", [0, 1, 256, 1025, 2**16 + 1])
def test_run_length_encode(backend, rng, dtype, n):
    x = E.runs(rng, dtype, n)
    values, lengths = lib.run_length_encode(x, backend=backend)
    want_values, want_lengths = E.run_length_encode(x)
    E.assert_same_bits(values, want_values)
    E.assert_same(lengths, want_lengths)


def test_run_length_nan_runs_merge(backend):
    x = np.array([np.nan, -np.nan, 1.0, -0.0, 0.0, 0.0], np.float32)
    values, lengths = lib.run_length_encode(x, backend=backend)
    E.assert_same(lengths, np.array([2, 1, 1, 2], np.uint32))
    assert np.isnan(values[0]) and values[2] == 0 and np.signbit(values[2]) and not np.signbit(values[3])


@pytest.mark.parametrize("call", [
    lambda b: lib.sort(np.ones(4, np.float16), backend=b),
    lambda b: lib.sort(np.ones(4, np.uint32), np.ones(3, np.uint32), backend=b),
    lambda b: lib.sort(np.ones(4, np.uint32), np.ones(4, np.uint8), backend=b),
    lambda b: lib.unique(np.ones(4, np.int16), backend=b),
    lambda b: lib.run_length_encode(np.ones(4, np.uint16), backend=b),
])
def test_bad_arguments(backend, call):
    with pytest.raises(InvalidProgram, match="Fix: "):
        call(backend)
