"""The single-pass run-length encoding (``runs_lookback``) on the oracle: ``run_length_encode`` and
``unique`` against numpy for every key type at sizes on and off its tiles (4096 elements for
32-bit keys, 2048 for 64-bit ones), with runs inside a tile, across tiles and over the whole input;
the windows too small to hold an inclusive prefix (the walks past them, over the oracle's
lockstep chunks, where the lower tiles have published their totals but not their prefixes); waits
that run out (the tile counts the run starts below it itself, and says so in the state's word 1);
repeated calls (the two sets of tile words take turns); the tiles past n; the plan it takes."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.lib import expected as E
from tests.lib.test_plan import RecordingBackend
from tests.lib.test_rle_tiles import _check, _runs_of
from vyre import lib
from vyre.lib._select import runs_lookback as L
from vyre.lib._select import topology as select_topo
from vyre.lib.blocks import WG
from vyre.lib.plan import capacity
from vyre.lib.scratch import scratch_for
from vyre.reference import ReferenceBackend

TILE = WG * L.RUNS_LOOKBACK_ITEMS  # 32-bit keys' tile
KEYS = [np.uint32, np.int32, np.float32, np.uint64, np.int64, np.float64]


def _runs(rng: np.random.Generator, dtype: type, n: int, longest: int) -> np.ndarray:
    """Runs of 1 to ``longest`` elements, neighbouring runs of different values (NaNs and -0.0 too)."""
    lengths = rng.integers(1, longest + 1, n)
    return _runs_of(lengths[: np.searchsorted(np.cumsum(lengths), n) + 1].tolist(), np.dtype(dtype), rng)[:n]


def _waits_ran_out(be, dtype: type, n: int) -> int:
    """Word 1 of the state buffer the call of ``n`` keys of ``dtype`` used."""
    items = L.RUNS_LOOKBACK_ITEMS_64 if np.dtype(dtype).itemsize == 8 else L.RUNS_LOOKBACK_ITEMS
    tiles = capacity(n) // (WG * items)
    handle = scratch_for(be).get("compact.runs_state", capacity(L.state_words(tiles)) * 4, zeroed=True)
    return int(np.frombuffer(be.download_resident(handle, 4, 4), np.uint32)[0])


@pytest.mark.parametrize("dtype", KEYS)
@pytest.mark.parametrize("n", [4097, 3 * TILE, 3 * TILE + 1, 7 * TILE - 3])
@pytest.mark.parametrize("longest", [3, 700, 3 * TILE])
def test_matches_numpy(backend, rng, dtype, n, longest):
    _check(_runs(rng, dtype, n, longest), backend)


@pytest.mark.parametrize("n", [4097, 5 * TILE + 9])
def test_one_run_and_every_element_a_run(backend, n):
    _check(np.full(n, 7, np.uint32), backend)
    _check(np.arange(n, dtype=np.uint32), backend)
    _check(np.full(n, np.nan, np.float32), backend)  # every NaN equal to every other


@pytest.mark.parametrize("dtype", [np.uint32, np.int32])
def test_unique_through_it(backend, rng, dtype):
    x = E.data(rng, np.dtype(dtype), 3 * TILE + 5)
    x[: x.size // 3] = x[x.size // 3: 2 * (x.size // 3)]
    u, c = lib.unique(x, backend=backend)
    eu, ec = np.unique(x, return_counts=True)
    E.assert_same(u, eu)
    E.assert_same(c, ec.astype(np.uint32))


@pytest.mark.parametrize("dtype", [np.uint32, np.float64])
@pytest.mark.parametrize("window", [1, 2])
def test_walks_past_the_window(monkeypatch, rng, dtype, window):
    """Windows of one or two tiles: in the oracle's lockstep chunks a tile's window holds the
    totals of lower tiles but not yet their prefixes, so invocation 0 walks on past it; runs over
    several tiles leave windows with no run start, so invocation 32 walks on too. No wait runs out."""
    monkeypatch.setattr(L, "runs_lookback", functools.partial(L.runs_lookback.__wrapped__, window=window))
    be = ReferenceBackend()
    n = 9 * TILE + 17
    for longest in (5, 4 * TILE):
        _check(_runs(rng, dtype, n, longest), be)
    assert _waits_ran_out(be, dtype, n) == 0


def test_waits_that_run_out(monkeypatch, rng):
    """A wait of no trips at all: every tile above the first counts the run starts below itself
    (and its last start), and the results are still numpy's."""
    monkeypatch.setattr(L, "runs_lookback", functools.partial(L.runs_lookback.__wrapped__, spin=(1, 0)))
    be = ReferenceBackend()
    n = 5 * TILE + 3
    for longest in (4, 2 * TILE):
        _check(_runs(rng, np.int32, n, longest), be)
    assert _waits_ran_out(be, np.int32, n) > 0


def test_repeated_calls_and_tiles_past_n(rng):
    """Calls of one class take turns with the two sets of tile words (each tile clears its words
    of the other set for the next call); smaller inputs of the class leave tiles past n, which
    write nothing."""
    be = ReferenceBackend()
    for n in (8 * TILE, 5 * TILE + 1, 8 * TILE, 4 * TILE + 1, 7 * TILE - 1):
        _check(_runs(rng, np.uint32, n, int(rng.integers(2, 2 * TILE))), be)
    assert _waits_ran_out(be, np.uint32, 8 * TILE) == 0


def test_count_on_device(backend, rng):
    x = _runs(rng, np.uint32, 3 * TILE + 1, 50)
    values, lengths, count = lib.run_length_encode(x, count="device", backend=backend)
    want_values, want_lengths = E.run_length_encode(x)
    k = int(np.asarray(count)[0])
    assert k == want_values.size
    E.assert_same(np.asarray(values)[:k], want_values)
    E.assert_same(np.asarray(lengths)[:k], want_lengths)


def test_the_plan_is_one_pass(rng, monkeypatch):
    """Past one workgroup's class, run lengths are one step of ``lib_rle_lookback``; with
    ``RUNS_LOOKBACK`` off, the segments' count, scan and compaction."""
    x = _runs(rng, np.uint32, 20000, 9)
    be = RecordingBackend()
    lib.run_length_encode(x, backend=be)
    assert [p.name for p, _, _ in be.sequences[-1]] == ["lib_rle_lookback"]
    monkeypatch.setattr(select_topo, "RUNS_LOOKBACK", False)
    be = RecordingBackend()
    lib.run_length_encode(x, backend=be)
    assert "lib_rle_lookback" not in [p.name for p, _, _ in be.sequences[-1]]
