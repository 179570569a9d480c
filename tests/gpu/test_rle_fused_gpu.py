"""``run_length_encode`` (and ``unique``) on ``cuda`` with the run lengths written where the run
starts are found (one workgroup's class: ``compact_run_lengths``; past it the single pass,
``runs_lookback``): fresh random inputs at sizes from one
element to 2**24 against numpy, on host arrays and on ``ResidentArray``s whose result handles were
poisoned and recycled first (every length must be written by the call), and the two-pass form
(``FUSED = False``) agreeing with it."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lib import expected as E
from vyre import lib
from vyre.lib._runs import topology as runs_topology

pytestmark = pytest.mark.gpu
SIZES = [1, 2047, 2**20 + 3, 2**24]
POISON = 0xAB


def _mixed_runs(rng: np.random.Generator, dtype: type, n: int) -> np.ndarray:
    """Short runs, runs across tiles (2048) and segments, and the bench's input (4 random values)."""
    lengths = rng.choice([1, 1, 2, 3, 7, 2047, 2049, 5000, 70_000], size=n)
    lengths = lengths[: np.searchsorted(np.cumsum(lengths), n) + 1]
    pool = E.data(rng, np.dtype(dtype), 16)
    return pool[np.repeat(rng.integers(0, pool.size, lengths.size), lengths)][:n]


def _bench_input(rng: np.random.Generator, n: int) -> np.ndarray:
    return (rng.integers(0, 2**31, n, dtype=np.uint32) >> 29).astype(np.uint32)


def _poison(be, r: lib.ResidentArray) -> None:
    be.upload_resident(r.handle, np.full(r.n * r.dtype.itemsize, POISON, np.uint8))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.float32, np.uint64, np.int64, np.float64])
def test_host_arrays_match_numpy(backend, rng, dtype, n):
    x = _mixed_runs(rng, dtype, n)
    values, lengths = lib.run_length_encode(x, backend=backend)
    want_values, want_lengths = E.run_length_encode(x)
    E.assert_same_bits(values, want_values)
    E.assert_same(lengths, want_lengths)


@pytest.mark.parametrize("n", SIZES)
def test_resident_results_over_poisoned_handles(backend, rng, n):
    """A call whose result handles hold poison (recycled) writes every value and length it returns."""
    rx = E.put_resident(backend, _bench_input(rng, n))
    values, lengths, runs = lib.run_length_encode(rx, count="device", backend=backend)
    for r in (values, lengths, runs):
        _poison(backend, r)
    lib.recycle(values, lengths, runs, backend=backend)
    for x in (_mixed_runs(rng, np.uint32, n), _bench_input(rng, n)):  # stale scratch from the call before too
        backend.upload_resident(rx.handle, x)
        values, lengths, runs = lib.run_length_encode(rx, count="device", backend=backend)
        want_values, want_lengths = E.run_length_encode(x)
        k = int(E.get_resident(backend, runs)[0])
        assert k == want_values.size
        E.assert_same(E.get_resident(backend, values)[:k], want_values)
        E.assert_same(E.get_resident(backend, lengths)[:k], want_lengths)
        lib.recycle(values, lengths, runs, backend=backend)
    backend.free_resident(rx.handle)


@pytest.mark.parametrize("n", [2**20 + 3, 2**24])
def test_one_run_and_all_runs(backend, n):
    """One run over the whole input (its length from the last segment), every element its own run."""
    for x in (np.full(n, 3, np.uint32), np.arange(n, dtype=np.uint32)):
        values, lengths = lib.run_length_encode(x, backend=backend)
        want_values, want_lengths = E.run_length_encode(x)
        E.assert_same(values, want_values)
        E.assert_same(lengths, want_lengths)


def test_unique_counts(backend, rng):
    x = rng.choice(np.array([7, 1, 2**31 + 5, 9], np.uint32), 2**24 + 1, p=[0.85, 0.05, 0.05, 0.05])
    values, counts = lib.unique(x, backend=backend)
    want_values, want_counts = np.unique(x, return_counts=True)
    E.assert_same(values, want_values)
    E.assert_same(counts, want_counts.astype(np.uint32))


def test_the_two_pass_form_agrees(backend, rng, monkeypatch):
    x = _bench_input(rng, 2**20 + 3)
    fused = lib.run_length_encode(x, backend=backend)
    monkeypatch.setattr(runs_topology, "FUSED", False)
    two_pass = lib.run_length_encode(x, backend=backend)
    for a, b in zip(fused, two_pass):
        E.assert_same(a, b)
