"""``segmented_sort`` on the oracle: each segment in the sort's stable total order, segments in place,
values moved with their keys; empty and single-element segments, edge values, resident input and
unchecked device offsets (clamped into the first and last segment), refusals with a Fix."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lib import expected as E
from vyre import lib
from vyre.driver.errors import InvalidProgram
from vyre.lib import ResidentArray

KEY_TYPES = [np.uint32, np.int32, np.float32]


@pytest.mark.parametrize("dtype", KEY_TYPES)
@pytest.mark.parametrize(("n", "segments"), [(1, 1), (2, 5), (300, 1), (1000, 7), (4099, 900), (7000, 2)])
def test_each_segment_sorted_with_its_values(backend, rng, dtype, n, segments):
    keys, offsets, values, order = E.segmented_sort_case(rng, dtype, n, segments)
    got_keys, got_values = lib.segmented_sort(keys, offsets, values, backend=backend)
    E.assert_same_bits(got_keys, keys[order])
    E.assert_same(got_values, values[order])
    E.assert_same_bits(lib.segmented_sort(keys, offsets.astype(np.int64), backend=backend), keys[order])


def test_one_segment_equals_sort(backend, rng):
    keys = E.data(rng, np.float32, 5000)
    E.assert_same_bits(lib.segmented_sort(keys, [0, keys.size], backend=backend), lib.sort(keys, backend=backend))


def test_resident_input_and_unchecked_offsets_are_clamped(backend, rng):
    """Resident offsets are not checked: keys before offsets[0] sort with the first segment, keys
    from offsets[-1] on with the last (as ``segmented_reduce`` clamps them)."""
    n = 3000
    keys = E.data(rng, np.int32, n)
    offsets = np.array([100, 900, 900, 2500], np.uint32)
    handles = [backend.allocate_resident(a.nbytes) for a in (keys, offsets)]
    try:
        for h, a in zip(handles, (keys, offsets), strict=True):
            backend.upload_resident(h, a)
        got = lib.segmented_sort(ResidentArray(handles[0], np.int32, n, backend),
                                 ResidentArray(handles[1], np.uint32, 4, backend), backend=backend)
        assert isinstance(got, ResidentArray) and got.n == n
        out = backend.download_resident(got.handle, 0, 4 * n).view(np.int32)
        lib.recycle(got, backend=backend)
    finally:
        for h in handles:
            backend.free_resident(h)
    order = E.segment_order(keys, np.array([0, 900, 900, n]))
    E.assert_same(out, keys[order])


def test_empty_input(backend):
    out = lib.segmented_sort(np.zeros(0, np.uint32), [0], backend=backend)
    assert out.size == 0 and out.dtype == np.uint32
    k, v = lib.segmented_sort(np.zeros(0, np.float32), [0, 0], np.zeros(0, np.int32), backend=backend)
    assert k.dtype == np.float32 and v.dtype == np.int32 and k.size == v.size == 0


@pytest.mark.parametrize("offsets", [[], [0], [1, 5], [0, 4], [0, 6, 5], [0, -1, 5], [0.0, 5.0]])
def test_offsets_that_do_not_cover_the_keys_are_refused(backend, offsets):
    with pytest.raises(InvalidProgram, match="Fix:"):
        lib.segmented_sort(np.arange(5, dtype=np.uint32), np.array(offsets), backend=backend)


def test_bad_keys_and_values_are_refused(backend):
    keys = np.arange(5, dtype=np.uint32)
    for call in (lambda: lib.segmented_sort(keys.astype(np.uint64), [0, 5], backend=backend),
                 lambda: lib.segmented_sort(keys, [0, 5], np.arange(4, dtype=np.uint32), backend=backend),
                 lambda: lib.segmented_sort(keys, [0, 5], np.arange(5, dtype=np.float64), backend=backend)):
        with pytest.raises(InvalidProgram, match="Fix:"):
            call()
