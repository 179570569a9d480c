"""Resident buffers in, resident buffers out: ``ResidentArray`` on the oracle (the same code runs on cuda)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lib import expected as E
from vyre import lib
from vyre.driver.errors import InvalidHandle, InvalidProgram
from vyre.lib import ResidentArray
from vyre.reference import ReferenceBackend


def _put(be, a: np.ndarray) -> ResidentArray:
    handle = be.allocate_resident(max(a.nbytes, 4))
    if a.size:
        be.upload_resident(handle, a)
    return ResidentArray(handle, a.dtype, a.size)


def _get(be, r: ResidentArray) -> np.ndarray:
    assert isinstance(r, ResidentArray)
    if r.n == 0:
        return np.zeros(0, r.dtype)
    return be.download_resident(r.handle, 0, r.n * r.dtype.itemsize).view(r.dtype)


def test_resident_in_resident_out(rng):
    be = ReferenceBackend()
    x = E.data(rng, np.uint32, 3001)
    rx = _put(be, x)
    E.assert_same(_get(be, lib.inclusive_scan(rx, backend=be)), np.cumsum(x, dtype=np.uint32))
    assert lib.reduce(rx, "max", backend=be) == x.max()
    flags = x & 1
    E.assert_same(_get(be, lib.select(rx, _put(be, flags), backend=be)), x[flags != 0])
    E.assert_same(_get(be, lib.select_if(rx, 7, 2**31, backend=be)), x[(x >= 7) & (x < 2**31)])
    E.assert_same(_get(be, lib.histogram(ResidentArray(rx.handle, np.uint8), 256, backend=be)),
                  np.bincount(x.view(np.uint8), minlength=256).astype(np.uint32))
    keys, values = lib.sort(rx, _put(be, np.arange(3001, dtype=np.uint32)), backend=be)
    E.assert_same(_get(be, keys), np.sort(x))
    E.assert_same(_get(be, values), np.argsort(x, kind="stable").astype(np.uint32))
    small = _put(be, x % 5)
    values, counts = lib.unique(small, backend=be)
    want_values, want_counts = np.unique(x % 5, return_counts=True)
    E.assert_same(_get(be, values), want_values)
    E.assert_same(_get(be, counts), want_counts.astype(np.uint32))
    offsets = _put(be, np.array([0, 10, 10, 3001], np.uint32))
    E.assert_same(_get(be, lib.segmented_reduce(rx, offsets, backend=be)),
                  E.segmented_reduce(x, np.array([0, 10, 10, 3001]), "add"))


def test_outputs_belong_to_the_caller(rng):
    be = ReferenceBackend()
    rx = _put(be, E.data(rng, np.int32, 500))
    out = lib.exclusive_scan(rx, backend=be)
    before = be.metrics()["reference_resident_bytes"]
    be.free_resident(out.handle)
    assert be.metrics()["reference_resident_bytes"] == before - out.handle.nbytes
    assert _get(be, lib.sort(_put(be, np.zeros(0, np.int32)), backend=be)).size == 0


def test_partial_handle_and_bad_handles(rng):
    be = ReferenceBackend()
    x = E.data(rng, np.uint32, 100)
    rx = _put(be, x)
    E.assert_same(_get(be, lib.inclusive_scan(ResidentArray(rx.handle, np.uint32, 40), backend=be)),
                  np.cumsum(x[:40], dtype=np.uint32))
    with pytest.raises(InvalidProgram, match="Fix: "):
        ResidentArray(rx.handle, np.uint32, 101)
    be.free_resident(rx.handle)
    held = be.metrics()["reference_resident_bytes"]
    with pytest.raises(InvalidHandle):
        lib.inclusive_scan(rx, backend=be)
    assert be.metrics()["reference_resident_bytes"] <= held, "a failed call leaks no scratch"
    E.assert_same(lib.inclusive_scan(x, backend=be), np.cumsum(x, dtype=np.uint32))
    other = ReferenceBackend()
    with pytest.raises(InvalidHandle):
        lib.reduce(_put(other, x), backend=be)


def test_recycled_results_are_reused_and_released(rng):
    """recycle hands a result's handle back: the next call of that role and class writes into it again."""
    be = ReferenceBackend()
    x = E.data(rng, np.uint32, 3000)
    rx = _put(be, x)
    first = lib.inclusive_scan(rx, backend=be)
    lib.recycle(first, backend=be)
    again = lib.inclusive_scan(rx, backend=be)
    assert again.handle is first.handle
    E.assert_same(_get(be, again), np.cumsum(x, dtype=np.uint32))
    keys, values = lib.sort(rx, rx, backend=be)
    lib.recycle((keys, values), backend=be)
    keys2, values2 = lib.sort(rx, rx, backend=be)
    assert {keys2.handle.id, values2.handle.id} == {keys.handle.id, values.handle.id}
    E.assert_same(_get(be, keys2), np.sort(x))
    lib.recycle(keys2, values2, backend=be)
    held = be.metrics()["reference_resident_bytes"]
    assert lib.release_scratch(be) > 0
    assert be.metrics()["reference_resident_bytes"] < held
    with pytest.raises(InvalidProgram, match="Fix:"):
        lib.recycle(keys2, backend=be)  # already handed back
    with pytest.raises(InvalidProgram, match="Fix:"):
        lib.recycle(rx, backend=be)  # the caller's own input, not a result


def test_argsort_hands_out_only_the_indices(rng):
    """argsort's sorted keys stay in scratch: recycled calls hold no more memory than the first."""
    be = ReferenceBackend()
    x = E.data(rng, np.float32, 2500)
    rx = _put(be, x)
    lib.recycle(lib.argsort(rx, backend=be), backend=be)
    held = be.metrics()["reference_resident_bytes"]
    for _ in range(2):
        order = lib.argsort(rx, backend=be)
        E.assert_same(_get(be, order), E.sort_order(x).astype(np.uint32))
        lib.recycle(order, backend=be)
    assert be.metrics()["reference_resident_bytes"] == held


def test_device_protocols_are_absent_on_the_oracle(rng):
    """A ResidentArray of the oracle has no device memory: CuPy/torch see no device array, and the
    reason names the backend and ends with a Fix."""
    be = ReferenceBackend()
    out = lib.inclusive_scan(_put(be, rng.integers(0, 2**31, 1000).astype(np.uint32)), backend=be)
    assert out.backend is be
    assert not hasattr(out, "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="reference.*Fix: "):
        out.__dlpack_device__()


def test_repeated_resident_calls_follow_new_data_lengths_and_handles(backend, rng):
    """A loop of equal calls on ``ResidentArray``s (the calls ``cuda`` runs compiled; the oracle runs
    each in full): new contents in the same handle, other handles of the same length, another
    length, recycled and kept results, a freed input. Every result is the oracle's."""
    be = backend
    kept = []
    rx = _put(be, E.data(rng, np.uint32, 5000))
    for i in range(6):
        x = E.data(rng, np.uint32, 5000 if i < 4 else 3001)
        if i == 2:
            rx = _put(be, x)  # another handle, same length
        elif i < 4:
            be.upload_resident(rx.handle, x)  # new contents, same handle
        else:
            rx = ResidentArray(rx.handle, np.uint32, x.size)  # another length
            be.upload_resident(rx.handle, x)
        assert lib.reduce(rx, backend=be) == x.sum(dtype=np.uint32)
        scan = lib.inclusive_scan(rx, backend=be)
        E.assert_same(_get(be, scan), np.cumsum(x, dtype=np.uint32))
        hist = lib.histogram(rx, 64, backend=be)
        E.assert_same(_get(be, hist), np.bincount(x[x < 64], minlength=64).astype(np.uint32))
        if i % 2:
            lib.recycle(scan, hist, backend=be)
        else:
            kept.append((np.cumsum(x, dtype=np.uint32), scan))
    for want, scan in kept:  # kept results are never written by later calls
        E.assert_same(_get(be, scan), want)
    be.free_resident(rx.handle)
    with pytest.raises(InvalidHandle, match="Fix: "):
        lib.reduce(rx, backend=be)
    with pytest.raises(InvalidHandle, match="Fix: "):
        lib.inclusive_scan(rx, backend=be)
