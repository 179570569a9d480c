"""``unique`` of u32/i32 keys on ``cuda`` with the run starts counted by the sort's last pass
(``onesweep.count_runs``; the path with ``RUNS_LOOKBACK`` off, on a backend of this module's own
whose plans are built with it off; ``test_runs_lookback_gpu`` takes these keys through the
single pass): sizes past 2^21 (where the compaction scans its segments' counts),
odd and tile-sized, full-range keys with duplicates, few distinct values, the all-ones key,
equal lower bits with many top digits, and keys the windows cannot place (the recount), against
numpy, on host arrays and on ``ResidentArray``s whose results were poisoned and recycled first;
and the per-segment counts the pass leaves, against numpy's, where no recount was asked."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lib import expected as E
from tests.lib.test_sort_counts_runs import counted, starts_per_segment
from vyre import lib
from vyre.ir import DataType
from vyre.lib._select import topology as select_topo
from vyre.lib._sort import topology as sort_topo
from vyre.lib.plan import capacity

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def backend():
    """A backend whose plans count the run starts in the sort (``RUNS_LOOKBACK`` off meanwhile)."""
    from vyre_cuda.backend import CudaBackend

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(select_topo, "RUNS_LOOKBACK", False)
        be = CudaBackend()
        yield be
        lib.release_scratch(be)
        be.shutdown()


SIZES = [2**21 + 5, 3 * 6144 * 200 + 1, 2**22]
POISON = 0xAB


def _keys(rng: np.random.Generator, case: str, n: int) -> np.ndarray:
    if case == "dups":
        x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
        x[: n // 3] = x[n // 3: 2 * (n // 3)]
        x[-5:] = 0xFFFFFFF0 + np.arange(5, dtype=np.uint32)  # digit 255, last by their lower bits
        return x
    if case == "few":
        return rng.integers(0, 2**32, 16, dtype=np.uint64).astype(np.uint32)[rng.integers(0, 16, n)]
    if case == "ones":
        x = rng.integers(0, 300, n).astype(np.uint32) * np.uint32(0x01000001)
        x[-1000:] = 0xFFFFFFFF
        return x
    if case == "spread":  # four blocks of equal lower bits, 256 top digits in each
        return rng.integers(0, 2**10, n).astype(np.uint32) << 22
    # the recount: equal lower bits, digit 0 then digit 1, with digit 1 also far before the boundary
    x = np.full(n, 5, np.uint32) | ((np.arange(n, dtype=np.uint64) * 2 // n).astype(np.uint32) << 24)
    x[np.arange(0, n // 2, 6144)] |= 1 << 24
    return x


CASES = ["dups", "few", "ones", "spread", "recount"]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [np.uint32, np.int32])
def test_unique_matches_numpy(backend, rng, case, n, dtype):
    x = _keys(rng, case, n).view(dtype)
    assert sort_topo.counts_runs(DataType.U32 if dtype is np.uint32 else DataType.I32, n)
    assert select_topo.counts_scanned(capacity(n))
    u, c = lib.unique(x, backend=backend)
    eu, ec = np.unique(x, return_counts=True)
    E.assert_same(u, eu)
    E.assert_same(c, ec.astype(np.uint32))


@pytest.mark.parametrize("case", CASES)
def test_resident_results_are_written_whole(backend, rng, case):
    """Results poisoned and recycled first: every value and count comes from the call."""
    n = SIZES[1]
    x = _keys(rng, case, n)
    h = backend.allocate_resident(x.nbytes)
    backend.upload_resident(h, x)
    rx = lib.ResidentArray(h, x.dtype.str, n)
    for _ in range(2):
        u, c = lib.unique(rx, backend=backend)
        for r in (u, c):
            backend.upload_resident(r.handle, np.full(r.n * 4, POISON, np.uint8))
        lib.recycle(u, c, backend=backend)
    u, c = lib.unique(rx, backend=backend)
    eu, ec = np.unique(x, return_counts=True)
    E.assert_same(backend.download_resident(u.handle, 0, 4 * u.n).view(np.uint32), eu)
    E.assert_same(backend.download_resident(c.handle, 0, 4 * c.n).view(np.uint32), ec.astype(np.uint32))
    backend.free_resident(h)


@pytest.mark.parametrize("case", ["dups", "few", "ones"])
def test_the_pass_leaves_numpys_counts(backend, rng, case):
    """Keys whose windows decide every digit: no recount, and the counts are numpy's exactly."""
    keys = _keys(rng, case, SIZES[0])
    counts, recount, span = counted(keys, backend)
    assert recount == 0
    E.assert_same(counts, starts_per_segment(keys, span, counts.size))
