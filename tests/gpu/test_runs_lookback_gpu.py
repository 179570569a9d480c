"""The single-pass run-length encoding (``runs_lookback``) on ``cuda``: many tiles in flight at once,
where the look-back really waits on other workgroups. ``run_length_encode`` against numpy with
short runs, runs longer than the look-back's window (no run start in 32 tiles: the last-start
walk goes on past it), one run and every element a run, for 32- and 64-bit and float keys; calls
repeated on fresh data of one class (the two sets of tile words take turns; a smaller input
leaves tiles past n); ``unique`` of full-range u32/i32 keys through it; and no wait running out."""

from __future__ import annotations

import numpy as np
import pytest

from tests.gpu.test_unique_counted_gpu import CASES, _keys
from tests.lib import expected as E
from tests.lib.test_rle_tiles import _check
from tests.lib.test_runs_lookback import _runs, _waits_ran_out
from vyre import lib
from vyre.lib._select import runs_lookback as L
from vyre.lib.blocks import WG

pytestmark = pytest.mark.gpu
TILE = WG * L.RUNS_LOOKBACK_ITEMS
LONG = (L.RUNS_LOOKBACK_WINDOW + 3) * TILE  # a run whose tiles fill more than a window


@pytest.mark.parametrize("dtype", [np.uint32, np.float32, np.uint64, np.float64])
@pytest.mark.parametrize("longest", [4, 3000, 2 * LONG])
def test_matches_numpy(own_backend, rng, dtype, longest):
    n = 2**22 + 7
    _check(_runs(rng, dtype, n, longest), own_backend)
    assert _waits_ran_out(own_backend, dtype, n) == 0


@pytest.mark.parametrize("n", [2**21 + 1, 2**23 - 5])
def test_one_run_and_every_element_a_run(backend, n):
    _check(np.full(n, 3, np.int32), backend)
    _check(np.arange(n, dtype=np.uint32)[::-1].copy(), backend)


def test_repeated_calls_on_fresh_data(own_backend, rng):
    """One class, calls in turn on fresh data (and a smaller input, with tiles past n)."""
    for n, longest in ((2**22, 6), (2**22, LONG), (2**21 + 3, 40), (2**22, 1), (2**22 - 1, 900)):
        _check(_runs(rng, np.uint32, n, longest), own_backend)
    assert _waits_ran_out(own_backend, np.uint32, 2**22) == 0


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [np.uint32, np.int32])
def test_unique_matches_numpy(backend, rng, case, dtype):
    x = _keys(rng, case, 3 * 2**20 + 11).view(dtype)
    u, c = lib.unique(x, backend=backend)
    eu, ec = np.unique(x, return_counts=True)
    E.assert_same(u, eu)
    E.assert_same(c, ec.astype(np.uint32))
