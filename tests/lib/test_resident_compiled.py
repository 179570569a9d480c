"""The compiled path of ``ResidentArray`` calls (``FastCall`` over aliased handles, repeats keyed
by dtype and length), run on the CPU through ``tests.lib.aliasing.AliasingReference`` (the oracle
with the aliasing methods ``cuda`` has): each repeat must notice new contents, other handles,
other lengths, freed inputs and recycled or kept results, and every result is the oracle's.
(The same on ``cuda``: ``tests/gpu/test_lib_resident_fast.py``.)"""

from __future__ import annotations

import numpy as np
import pytest

import vyre
from tests.lib import expected as E
from tests.lib.aliasing import AliasingReference
from vyre import lib
from vyre.driver.errors import InvalidHandle
from vyre.lib import ResidentArray
from vyre.lib.scratch import scratch_for


@pytest.fixture
def be():
    backend = AliasingReference()
    yield backend
    lib.release_scratch(backend)


def _resident_keys(be) -> list:
    return [k for k in scratch_for(be).fast if k[0] == "resident"]


def test_repeats_run_compiled_and_follow_contents_handles_and_lengths(be, rng):
    """The first call of a shape records and compiles it, later ones run the compiled form (the
    third through its repeat) with this call's handles; new contents, handles and lengths and
    kept results all stay exact."""
    scratch = scratch_for(be)
    n = 3000
    rx = E.put_resident(be, np.zeros(n, np.uint32))
    kept = []
    for i in range(7):
        if i == 5:
            n = 1999  # another length: a key of its own
        x = E.data(rng, np.uint32, n)
        if i in (3, 5):
            rx = E.put_resident(be, x)
        else:
            be.upload_resident(rx.handle, x)
            rx = ResidentArray(rx.handle, np.uint32, n, be)
        assert lib.reduce(rx, "max", backend=be) == x.max()
        scan = lib.exclusive_scan(rx, backend=be)
        want = np.concatenate([[0], np.cumsum(x, dtype=np.uint32)[:-1]]).astype(np.uint32)
        E.assert_same(E.get_resident(be, scan), want)
        hist = lib.histogram(rx, 32, backend=be)
        E.assert_same(E.get_resident(be, hist), np.bincount(x[x < 32], minlength=32).astype(np.uint32))
        if i % 2:
            kept.append((np.bincount(x[x < 32], minlength=32).astype(np.uint32), hist))
            lib.recycle(scan, backend=be)
        else:
            lib.recycle(scan, hist, backend=be)
        if i == 2:
            assert len(_resident_keys(be)) == 3 and be.compiled == 3, "one compiled call per function and shape"
            assert len(scratch.repeats) == 3, "the third equal call found its repeat"
    assert be.compiled == 6, "the new length compiled each function once more, nothing else did"
    for want, hist in kept:
        E.assert_same(E.get_resident(be, hist), want)


def test_recycled_results_come_back_and_reduce_keeps_no_handle(be, rng):
    """Recycled results are issued again to the next compiled call; ``reduce`` issues no result
    handle (its value is read back from scratch with its steps, one wait per call), so a loop of
    it holds no more bytes than its first call."""
    x = E.data(rng, np.uint32, 4097)
    rx = E.put_resident(be, x)
    first = lib.inclusive_scan(rx, backend=be)
    lib.recycle(first, backend=be)
    lib.reduce(rx, backend=be)
    held = be.metrics()["reference_resident_bytes"]
    for _ in range(4):
        out = lib.inclusive_scan(rx, backend=be)
        assert out.handle is first.handle
        E.assert_same(E.get_resident(be, out), np.cumsum(x, dtype=np.uint32))
        lib.recycle(out, backend=be)
        waits = be.waits
        assert lib.reduce(rx, backend=be) == x.sum(dtype=np.uint32)
        assert be.waits == waits + 1, "the value comes back in the one read of the call"
    assert be.metrics()["reference_resident_bytes"] == held


def test_sort_pairs_and_device_counts_compiled(be, rng):
    """Functions with two inputs or two results (sort with values, ``select_if(count="device")``)
    map each recorded role to this call's handles."""
    for _ in range(4):
        x, v = E.data(rng, np.uint32, 2500), E.data(rng, np.uint32, 2500)
        rx, rv = E.put_resident(be, x), E.put_resident(be, v)
        keys, values = lib.sort(rx, rv, backend=be)
        order = np.argsort(x, kind="stable")
        E.assert_same(E.get_resident(be, keys), x[order])
        E.assert_same(E.get_resident(be, values), v[order])
        kept, count = lib.select_if(rx, 0, 2**31, count="device", backend=be)
        want = x[x < 2**31]
        assert int(E.get_resident(be, count)[0]) == want.size
        E.assert_same(E.get_resident(be, kept)[:want.size], want)
        lib.recycle(keys, values, kept, count, backend=be)
        for r in (rx, rv):
            be.free_resident(r.handle)
    assert be.compiled == 2, "sort and select_if compiled once each, then ran compiled with new handles"


def test_freed_input_raises_and_a_live_one_runs_again(be, rng):
    """A freed input of a repeated call raises ``InvalidHandle`` as the full path does, leaking no
    result handle; a live handle of the same length then runs compiled again."""
    x = E.data(rng, np.uint32, 3000)
    rx = E.put_resident(be, x)
    for _ in range(3):
        lib.recycle(lib.inclusive_scan(rx, backend=be), backend=be)
        lib.reduce(rx, backend=be)
    be.free_resident(rx.handle)
    held = be.metrics()["reference_resident_bytes"]
    for fn in (lib.inclusive_scan, lib.reduce):
        with pytest.raises(InvalidHandle, match="Fix: "):
            fn(rx, backend=be)
    assert be.metrics()["reference_resident_bytes"] <= held
    ry = E.put_resident(be, x[::-1].copy())
    for _ in range(3):
        assert lib.reduce(ry, backend=be) == x.sum(dtype=np.uint32)
        E.assert_same(E.get_resident(be, lib.inclusive_scan(ry, backend=be)), np.cumsum(x[::-1], dtype=np.uint32))


def test_mixed_resident_and_host_inputs_take_the_full_path(be, rng):
    """A resident array with host data beside it (host offsets, a host ``init``) is not compiled:
    the host data is copied into scratch each call."""
    x = E.data(rng, np.uint32, 1000)
    rx = E.put_resident(be, x)
    offsets = np.array([0, 10, 10, 1000], np.uint32)
    for _ in range(3):
        out = lib.segmented_reduce(rx, offsets, backend=be)
        E.assert_same(E.get_resident(be, out), E.segmented_reduce(x, offsets, "add"))
        scan = lib.inclusive_scan(rx, init=5, backend=be)
        E.assert_same(E.get_resident(be, scan), np.cumsum(x, dtype=np.uint32) + np.uint32(5))
    assert all(len(k[2]) == 1 for k in _resident_keys(be)), "only the scan (one resident array) compiled"


def test_segmented_reduce_compiled_with_resident_offsets(be, rng):
    """``segmented_reduce`` of resident values and offsets runs compiled: new offsets in the same
    handle (other segment bounds, same count) change the result."""
    x = E.data(rng, np.uint32, 5000)
    rx = E.put_resident(be, x)
    ro = E.put_resident(be, np.zeros(6, np.uint32))
    for i in range(4):
        offsets = np.sort(rng.integers(0, 5001, 6)).astype(np.uint32)
        offsets[0] = i  # a first segment that starts late
        offsets.sort()
        be.upload_resident(ro.handle, offsets)
        out = lib.segmented_reduce(rx, ro, "max", backend=be)
        E.assert_same(E.get_resident(be, out), E.segmented_reduce(x, offsets, "max"))
        lib.recycle(out, backend=be)
    assert be.compiled == 1


def test_empty_inputs_are_never_compiled(be, rng):
    """An empty ``ResidentArray`` (no bytes to alias) takes the full path, call after call."""
    rx = E.put_resident(be, E.data(rng, np.uint32, 100))
    empty = ResidentArray(rx.handle, np.uint32, 0, be)
    for _ in range(3):
        assert lib.reduce(empty, backend=be) == 0
        E.assert_same(E.get_resident(be, lib.histogram(empty, 8, backend=be)), np.zeros(8, np.uint32))
    assert be.compiled == 0


@vyre.func
def _low_square(v):
    w = v & 65535
    return w * w


@vyre.func
def _plus_one(v):
    return v + 1


def test_transform_reduce_repeats_by_its_function(be, rng):
    """A ``@vyre.func`` is part of a repeated call's key, by identity: a loop of ``transform_reduce``
    runs its repeat (no new compile), new contents stay exact, and another function is its own key."""
    scratch = scratch_for(be)
    rx = E.put_resident(be, E.data(rng, np.uint32, 2048))
    for _ in range(4):
        x = E.data(rng, np.uint32, 2048)
        be.upload_resident(rx.handle, x)
        w = x & np.uint32(65535)
        assert lib.transform_reduce(rx, _low_square, backend=be) == (w * w).sum(dtype=np.uint32)
    assert be.compiled == 1 and len(scratch.repeats) == 1, "one compile, the loop ran its repeat"
    assert lib.transform_reduce(rx, _plus_one, backend=be) == (x + np.uint32(1)).sum(dtype=np.uint32)
    assert be.compiled == 2, "another function compiled its own call"
