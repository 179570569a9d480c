"""``run_length_encode`` and ``unique`` on the oracle where runs meet the compaction's tiles (2048
elements) and segments (one tile each up to 2^20 elements, one per workgroup): the run lengths
written by the compaction itself, against numpy. Every test runs three times: in the single pass
(``runs_lookback``, what sizes past one workgroup take), and with ``RUNS_LOOKBACK`` off: with the
carries summed by the downsweep (up to ``OWN_CARRY_GROUPS`` segments; each segment ends its last
run at the next segment's first run start), and through the scan of the counts with
``run_tail_lengths`` ending the runs that cross segments."""

from __future__ import annotations

import numpy as np
import pytest

import tests.lib.expected as E
from vyre import lib
from vyre.lib._runs import topology as runs_topology
from vyre.lib._select import topology as select_topology

TILE = 2048
SPAN = 4096  # two of these sizes' segments (one 2048-element tile each)
KEYS = [np.uint32, np.int32, np.float32, np.uint64, np.int64, np.float64]


@pytest.fixture(params=["lookback", "own_carry", "spine"], autouse=True)
def carries(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The single pass; or the downsweep's own carries, or (``OWN_CARRY_GROUPS`` 1) the scan and
    the tail step."""
    if request.param != "lookback":
        monkeypatch.setattr(select_topology, "RUNS_LOOKBACK", False)
    if request.param == "spine":
        monkeypatch.setattr(select_topology, "OWN_CARRY_GROUPS", 1)
    return request.param


def _runs_of(lengths: list[int], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """Consecutive runs of the given lengths, each value differing from the one before."""
    pool = E.data(rng, dtype, 64)
    bits = E.canonical(pool)
    keep = np.concatenate([[True], bits[1:] != bits[:-1]])  # neighbours in the pool differ
    pool = pool[keep]
    return np.repeat(pool[np.arange(len(lengths)) % pool.size], lengths)


def _check(x: np.ndarray, backend: object) -> None:
    values, lengths = lib.run_length_encode(x, backend=backend)
    want_values, want_lengths = E.run_length_encode(x)
    E.assert_same_bits(values, want_values)
    E.assert_same(lengths, want_lengths)


#: run lengths: across 1, 2 and many tiles and segments, ending on and off their edges
LAYOUTS = {
    "cross_one_tile": [TILE - 3, 7, TILE - 4, 5],
    "end_on_tile_edge": [TILE, TILE, 1, TILE - 1, 3],
    "cross_two_tiles": [5, 2 * TILE + 9, 11, 3],
    "cross_one_segment": [SPAN - 1, 2, SPAN + 1, 17],
    "cross_many_segments": [3, 9 * SPAN + 5, 4, 6 * SPAN, 1, 2],
    "tail_from_first_tile": [1, 7 * SPAN + 3],
    "empty_segments_at_end": [2, 3, 5 * SPAN + 7],
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
@pytest.mark.parametrize("dtype", [np.uint32, np.float64])
def test_runs_across_tiles_and_segments(backend, rng, name, dtype):
    _check(_runs_of(LAYOUTS[name], np.dtype(dtype), rng), backend)


@pytest.mark.parametrize("n", [1, 2, TILE - 1, TILE, TILE + 1, SPAN + 1, 3 * SPAN - 1, 20 * SPAN + 3])
def test_one_run_over_the_whole_input(backend, n):
    _check(np.full(n, 7, np.uint32), backend)


@pytest.mark.parametrize("n", [1, 3, TILE + 1, 2 * SPAN + 5, 9 * SPAN + 11])
def test_every_element_its_own_run(backend, n):
    _check(np.arange(n, dtype=np.int64) * -3, backend)


@pytest.mark.parametrize("dtype", KEYS)
@pytest.mark.parametrize("n", [4097, 12_289, 40_001, 2**17 + 7])
def test_random_runs_odd_sizes(backend, rng, dtype, n):
    lengths = rng.choice([1, 2, 3, 40, 900, 3000, 9000], size=n)
    lengths = lengths[: np.searchsorted(np.cumsum(lengths), n) + 1]
    _check(_runs_of(list(lengths), np.dtype(dtype), rng)[:n], backend)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_and_signed_zero_runs_on_tile_edges(backend, rng, dtype):
    """NaNs of any payload and sign are one run; -0.0 and +0.0 are two, across tile edges."""
    x = np.zeros(3 * SPAN + 5, dtype)
    x[: TILE - 1] = np.nan
    x[TILE - 1: TILE + 2] = -np.nan
    bits = x.view(np.uint64 if x.itemsize == 8 else np.uint32)
    bits[5] |= 1  # another NaN payload
    x[TILE + 2: SPAN + 1] = -0.0
    x[SPAN + 1: 2 * SPAN] = 0.0
    x[2 * SPAN:] = rng.choice(np.array([np.nan, 0.0, -0.0, 1.0], dtype), x.size - 2 * SPAN)
    _check(x, backend)


@pytest.mark.parametrize("dtype", [np.uint64, np.int64])
def test_64_bit_keys_that_differ_in_the_high_half(backend, rng, dtype):
    """Keys equal in their low 32 bits are different runs, across segments."""
    low = np.full(5 * SPAN + 3, 0x1234, np.uint64)
    high = np.repeat(rng.integers(0, 3, 40), rng.integers(1, 1500, 40))[: low.size].astype(np.uint64)
    _check(((high << np.uint64(32)) | low[: high.size]).astype(dtype), backend)


def test_count_device_across_segments(backend, rng):
    """``count="device"``: the first ``runs[0]`` entries are the runs, at a multi-segment size."""
    x = _runs_of(list(rng.integers(1, 3 * SPAN, 40)), np.dtype(np.int32), rng)
    values, lengths, runs = lib.run_length_encode(x, count="device", backend=backend)
    want_values, want_lengths = E.run_length_encode(x)
    assert values.size == x.size and int(runs[0]) == want_values.size
    E.assert_same(values[: want_values.size], want_values)
    E.assert_same(lengths[: want_values.size], want_lengths)


def test_unique_counts_across_segments(backend, rng):
    """``unique`` takes the same runs after its sort: counts spanning many segments."""
    x = rng.choice(np.array([5, 1, 9, 1 << 30], np.uint32), 9 * SPAN + 1, p=[0.7, 0.1, 0.1, 0.1])
    values, counts = lib.unique(x, backend=backend)
    want_values, want_counts = np.unique(x, return_counts=True)
    E.assert_same(values, want_values)
    E.assert_same(counts, want_counts.astype(np.uint32))


def test_the_two_pass_form_agrees(backend, rng, monkeypatch):
    """``FUSED = False`` (run starts, then their differences) gives the same result."""
    x = _runs_of(list(rng.integers(1, 3 * SPAN, 30)), np.dtype(np.float32), rng)
    monkeypatch.setattr(runs_topology, "FUSED", False)
    _check(x, backend)
