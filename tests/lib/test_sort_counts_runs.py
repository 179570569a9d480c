"""The sort's last pass counting the run starts of its result for ``unique``'s compaction
(``onesweep.count_runs``) on the oracle: the per-segment counts it leaves against numpy's, the
recount word where its windows cannot tell, and ``unique`` through it against numpy. The
single pass (``RUNS_LOOKBACK``) and the compaction's own-carry classes (``OWN_CARRY_GROUPS`` 0)
are taken off so that small inputs take the counted path, with segments of one 2048-element
tile: the digits' keys often cross them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.lib import expected as E
from vyre import lib
from vyre.ir import DataType
from vyre.lib._runs import api as runs_api
from vyre.lib._select import topology as select_topo
from vyre.lib._select.kernels import RUN_COUNT_COPIES, run_count_words
from vyre.lib._sort import topology as sort_topo
from vyre.lib.plan import Plan, capacity
from vyre.lib.scratch import scratch_for
from vyre.reference import ReferenceBackend

N = 3 * 2048 * 5 + 7  # 15 tiles of 2048 keys and a short one


@pytest.fixture(autouse=True)
def _scanned_counts(monkeypatch):
    monkeypatch.setattr(select_topo, "RUNS_LOOKBACK", False)
    monkeypatch.setattr(select_topo, "OWN_CARRY_GROUPS", 0)


def _cases(rng: np.random.Generator) -> dict[str, np.ndarray]:
    dups = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    dups[: N // 3] = dups[N // 3: 2 * (N // 3)]
    dups[-5:] = 0xFFFFFFF0 + np.arange(5, dtype=np.uint32)  # digit 255, last by their lower bits: the padding follows
    few = rng.integers(0, 2**32, 16, dtype=np.uint64).astype(np.uint32)[rng.integers(0, 16, N)]
    ones = rng.integers(0, 50, N).astype(np.uint32) * np.uint32(0x01000001)
    ones[-100:] = 0xFFFFFFFF  # the all-ones key, as the last tile's padding is
    spread = rng.integers(0, 2**10, N).astype(np.uint32) << 22  # equal lower bits, many top digits
    return {"dups": dups, "few": few, "ones": ones, "spread": spread}


def counted(keys: np.ndarray, be: Any = None) -> tuple[np.ndarray, int, int]:
    """The per-segment counts (the sum of its copies) and the recount word the sort's last pass
    leaves for ``keys`` (on ``be``, the oracle by default), and the segments' span."""
    be = be if be is not None else ReferenceBackend()
    n = keys.size
    src = be.allocate_resident(4 * n)
    be.upload_resident(src, keys)
    plan = Plan(be, scratch_for(be))
    runs = select_topo.counted_runs(plan, n, capacity(n))
    assert runs is not None
    sort_topo.sort(plan, DataType.U32, src, None, None, "none", n, capacity(n), runs=runs)
    plan.run()
    counts, span_word, _, segments = runs
    words = be.download_resident(counts, 0, 4 * run_count_words(segments)).view(np.uint32).copy()
    be.free_resident(src)
    copies = words[segments + 1:].reshape(RUN_COUNT_COPIES, segments)  # each tile adds into one copy
    return copies.sum(axis=0, dtype=np.uint32), int(words[segments]), int(plan._words[span_word])


def starts_per_segment(keys: np.ndarray, span: int, segments: int) -> np.ndarray:
    s = np.sort(keys)
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    return np.bincount(starts // span, minlength=segments).astype(np.uint32)


@pytest.mark.parametrize("case", ["dups", "few", "ones"])
def test_last_pass_counts_run_starts_per_segment(rng, case):
    """Where the windows decide every digit (no recount asked: the blocks of equal lower bits at
    tile starts are short, or hold one digit), the counts are numpy's exactly."""
    keys = _cases(rng)[case]
    counts, recount, span = counted(keys)
    assert recount == 0
    E.assert_same(counts, starts_per_segment(keys, span, counts.size))


def test_a_run_the_windows_cannot_place_asks_for_a_recount():
    """All keys share their lower 24 bits and come in two halves of two top digits: the tile where
    digit 1 begins finds it after its start but not in the 256 keys before (which are all in the
    block), so it cannot tell whether digit 1 occurred earlier and sets the recount word; the
    compaction then counts again, and ``unique`` is exact."""
    keys = np.full(N, 5, np.uint32) | ((np.arange(N, dtype=np.uint32) * 2 // N) << 24)
    keys[np.arange(0, N // 2, 2048)] |= 1 << 24  # digit 1 also in the first half, far before the boundary
    _, recount, _ = counted(keys)
    assert recount == 1
    u, c = lib.unique(keys, backend=ReferenceBackend())
    eu, ec = np.unique(keys, return_counts=True)
    E.assert_same(u, eu)
    E.assert_same(c, ec.astype(np.uint32))


@pytest.mark.parametrize("dtype", [np.uint32, np.int32])
def test_unique_through_the_counted_compaction(rng, dtype):
    """``unique`` takes the counted path (its plan has the counting pass) and matches numpy on
    every case, as u32 and as i32 keys."""
    assert runs_api.COUNT_IN_SORT
    be = ReferenceBackend()
    for case, keys in _cases(rng).items():
        x = keys.view(dtype)
        assert sort_topo.counts_runs(DataType.U32 if dtype is np.uint32 else DataType.I32, x.size)
        u, c = lib.unique(x, backend=be)
        eu, ec = np.unique(x, return_counts=True)
        assert np.array_equal(u, eu) and np.array_equal(c, ec.astype(np.uint32)), case
