"""``segmented_reduce`` on the oracle: short segments on one subgroup each, segments longer than
``LONG`` split into tiles (heads, tails, tile edges, empty and tiny neighbours), stale or
adversarial scratch, the search for each tile's segment, and unchecked resident offsets
(clamped, out of order: tiles whose holder the search misses are folded by the segment)."""

from __future__ import annotations

from typing import Annotated

import numpy as np
import pytest

from tests.lib import expected as E
from vyre import lib
from vyre.driver.config import DispatchConfig
from vyre.lib import ResidentArray
from vyre.lib._scan.segmented import LONG, NO_SEGMENT, TILE, holder_of, tile_groups
from vyre.lib.blocks import PARAM_WORDS, PARAMS, WARPS
from vyre.lib.plan import capacity
from vyre.lib.scratch import scratch_for
from vyre.reference import ReferenceBackend

N = 5 * LONG + 1234  # capacity class 2^18: the split plan


def _ops(dtype: np.dtype) -> tuple[str, ...]:
    return ("add", "min", "max") if np.dtype(dtype).kind == "f" else ("add", "min", "max", "and", "or", "xor")


def _check(got: np.ndarray, x: np.ndarray, offsets: np.ndarray, op: str) -> None:
    """Exact against the model, except float32 sums (another order than numpy's)."""
    want = E.segmented_reduce(x, offsets, op)
    if op == "add" and x.dtype == np.float32:
        for s in range(len(offsets) - 1):
            part = x[offsets[s]:offsets[s + 1]]
            E.assert_close_sum(got[s], part, np.float32(np.sum(part, dtype=np.float64)))
        return
    E.assert_same_bits(got, want)


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.float32, np.uint64, np.int64, np.float64])
@pytest.mark.parametrize("layout", list(E.segment_layouts(N)))
def test_long_and_short_segments(backend, rng, dtype, layout):
    x = E.data(rng, dtype, N, finite=True)
    offsets = E.segment_layouts(N)[layout].astype(np.uint32)
    for op in _ops(dtype):
        _check(lib.segmented_reduce(x, offsets, op, backend=backend), x, offsets, op)


def test_random_segments_of_every_length(backend, rng):
    """Lengths from 0 to several ``LONG``, on one backend, several times: what the last call left in
    the scratch (tile owners, partials) never leaks into the next."""
    for _ in range(3):
        n = int(rng.integers(LONG + 1, 4 * LONG))
        lengths = rng.choice([0, 1, 2, 3, 31, 1024, LONG, LONG + 1, 3 * LONG + 77], size=40)
        offsets = np.minimum(np.concatenate([[0], np.cumsum(lengths)]), n).astype(np.uint32)
        offsets[-1] = n
        x = E.data(rng, np.float64, n, finite=True)
        _check(lib.segmented_reduce(x, offsets, "add", backend=backend), x, offsets, "add")
        y = E.data(rng, np.int32, n)
        _check(lib.segmented_reduce(y, offsets, "max", backend=backend), y, offsets, "max")


@pytest.mark.parametrize("poison", [0, 1, 2, NO_SEGMENT])
def test_any_scratch_word_is_harmless(backend, rng, poison):
    """The found words name segments that are long but do not hold the tile, or no segment at
    all; partials hold garbage: the tiles program writes every found word again, and the result
    is exact."""
    x = E.data(rng, np.uint32, N)
    offsets = E.segment_layouts(N)["edges"].astype(np.uint32)
    lib.segmented_reduce(x, offsets, backend=backend)  # the scratch exists now
    cache = scratch_for(backend)
    words = capacity(tile_groups(capacity(N)) * WARPS)
    backend.upload_resident(cache.get("seg.found", words * 4), np.full(words, poison, np.uint32))
    backend.upload_resident(cache.get("seg.partial", words * 4), np.full(words, 0x5A5A5A5A, np.uint32))
    _check(lib.segmented_reduce(x, offsets, backend=backend), x, offsets, "add")


def _holders(offsets: np.ndarray, n: int, elements: np.ndarray) -> np.ndarray:
    """``holder_of`` for each element on the oracle: one subgroup per element."""
    from vyre.frontend import lang as vk

    @vk.kernel(workgroup_size=32, name="test_holder_of")
    def search(offsets: vk.In[vk.u32], at: vk.In[vk.u32], got: vk.InOut[vk.u32],
               params: Annotated[vk.Uniform[vk.u32], PARAMS]):
        s = holder_of(offsets, params, at[vk.wid()], 0, 1)
        if vk.subgroup_local_id() == 0:
            got[vk.wid()] = s

    params = np.zeros(PARAM_WORDS, np.uint32)
    params[:2] = n, len(offsets) - 1
    out = ReferenceBackend().dispatch(search.program, [offsets.astype(np.uint32), elements.astype(np.uint32),
                                                        np.zeros(len(elements), np.uint32), params],
                                      DispatchConfig(grid=(len(elements), 1, 1)))
    return np.asarray(out[-1]).view(np.uint32)


@pytest.mark.parametrize("segments", [1, 2, 31, 32, 33, 1000, 1024, 1025, 40000])
def test_the_search_finds_the_segment_holding_an_element(rng, segments):
    """In order: the last segment whose clamped start is at most the element, for segment
    counts around powers of 32, empty segments and offsets past n (clamped)."""
    n = 1 << 20
    offsets = np.sort(rng.integers(0, n + 50, segments + 1)).astype(np.uint32)
    offsets[0] = 0
    elements = rng.integers(0, n, 64).astype(np.uint32)
    begins = np.minimum(offsets[:-1], n)
    want = np.array([np.flatnonzero(begins <= e).max() for e in elements], np.uint32)
    assert np.array_equal(_holders(offsets, n, elements), want)


def _put(be, a: np.ndarray) -> ResidentArray:
    handle = be.allocate_resident(max(a.nbytes, 4))
    be.upload_resident(handle, a)
    return ResidentArray(handle, a.dtype, a.size)


def test_resident_offsets_are_clamped_and_may_overlap(backend, rng):
    """Offsets on the device are not checked: each is clamped to ``[0, n]`` and an end below its
    start makes the segment empty; long segments that overlap each get all their elements."""
    x = E.data(rng, np.uint32, N)
    raw = np.array([2**31 + 5, 100, 100 + 2 * LONG, 50, N + 7, LONG, 2**32 - 1], np.uint32)
    got = lib.segmented_reduce(_put(backend, x), _put(backend, raw), backend=backend)
    got = backend.download_resident(got.handle, 0, got.n * 4).view(np.uint32)
    want = []
    for s in range(len(raw) - 1):
        begin = min(int(raw[s]), N)
        end = min(max(int(raw[s + 1]), begin), N)
        want.append(x[begin:end].sum(dtype=np.uint32))
    E.assert_same(got, np.array(want, np.uint32))


def test_small_classes_run_one_program(rng):
    """Capacity classes up to ``LONG`` elements hold no long segment: one launch, no scratch."""
    from tests.lib.test_plan import RecordingBackend

    be = RecordingBackend()
    x = E.data(rng, np.uint32, LONG)
    lib.segmented_reduce(x, np.array([0, LONG]), backend=be)
    names = [p.name for steps in be.sequences for p, _, _ in steps]
    assert names == ["lib_segmented_reduce_add_u32"]
    lib.segmented_reduce(E.data(rng, np.uint32, LONG + 1), np.array([0, LONG + 1]), backend=be)
    names = [p.name for p, _, _ in be.sequences[-1]]
    assert names == ["lib_segmented_reduce_tiles_add_u32", "lib_segmented_reduce_add_u32_split"]
    be.shutdown()


@pytest.mark.parametrize("dtype", [np.uint32, np.float32, np.int64])
def test_tiles_the_search_misses_are_folded_by_their_segment(backend, rng, dtype):
    """Offsets out of order: the last segment starting at or before each tile of the long
    segment 0 is the short segment 2, so the search finds no holder of any of them; segment 0
    folds them itself, exactly."""
    n = 12 * TILE + 77
    x = E.data(rng, dtype, n, finite=True)
    raw = np.array([0, 10 * TILE + 5, 0, 1], np.uint32)
    want_segments = [(0, 10 * TILE + 5), (10 * TILE + 5, 10 * TILE + 5), (0, 1)]
    got = lib.segmented_reduce(_put(backend, x), _put(backend, raw), backend=backend)
    got = backend.download_resident(got.handle, 0, got.n * x.itemsize).view(dtype)
    for s, (begin, end) in enumerate(want_segments):
        part = x[begin:end]
        if dtype == np.float32:
            E.assert_close_sum(got[s], part, np.float32(np.sum(part, dtype=np.float64)))
        else:
            assert got[s] == part.sum(dtype=dtype), s


def test_tile_counts_are_zero_after_each_call(backend, rng):
    """``seg.counts`` (the tiles found per segment) is state the split step zeroes again: after
    calls with offsets in order, out of order (tiles the search misses) and overlapping, every
    word is zero, and repeated calls stay exact."""
    x = E.data(rng, np.uint32, N)
    layouts = [E.segment_layouts(N)["edges"].astype(np.uint32),
               np.array([0, 2 * LONG + 5, 0, 1, LONG, N], np.uint32),
               np.array([100, 100 + 2 * LONG, 50, N, LONG], np.uint32)]
    for raw in layouts:
        for _ in range(2):
            got = lib.segmented_reduce(_put(backend, x), _put(backend, raw), backend=backend)
            got = backend.download_resident(got.handle, 0, got.n * 4).view(np.uint32)
            for s in range(len(raw) - 1):
                begin = min(int(raw[s]), N)
                assert got[s] == x[begin:min(max(int(raw[s + 1]), begin), N)].sum(dtype=np.uint32), s
            words = capacity(len(raw) - 1)
            counts = scratch_for(backend).get("seg.counts", words * 4, zeroed=True)
            assert not backend.download_resident(counts, 0, words * 4).view(np.uint32).any()
