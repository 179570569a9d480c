"""``unique(x, key_range=(lo, hi))`` on the oracle: the same values and counts as ``numpy.unique``
and as the sort-based ``unique``, without a sort; keys outside the range and bad ranges refused."""

from __future__ import annotations

import numpy as np
import pytest

from tests.codegen.codegen_support import assemble, needs_ptxas
from tests.lib.test_plan import RecordingBackend
from vyre import lib
from vyre.driver.errors import InvalidProgram
from vyre.ir import DataType
from vyre.lib.scratch import scratch_for

RANGES = [(np.uint32, 0, 256), (np.uint32, 2**32 - 10_000, 2**32), (np.int32, -1000, 5000),
          (np.int32, -(2**31), -(2**31) + 9000), (np.int32, 2**31 - 3, 2**31)]


@pytest.mark.parametrize("dtype, lo, hi", RANGES)
@pytest.mark.parametrize("n", [1, 2, 33, 4097, 70_001])
def test_matches_numpy_and_the_sorted_unique(backend, rng, dtype, lo, hi, n):
    x = rng.integers(lo, hi, n).astype(dtype)
    x[rng.choice(n, min(n, 2), replace=False)] = [lo, hi - 1][:min(n, 2)]  # both ends of the range
    values, counts = lib.unique(x, key_range=(lo, hi), backend=backend)
    want_values, want_counts = np.unique(x, return_counts=True)
    assert values.dtype == dtype and counts.dtype == np.uint32
    np.testing.assert_array_equal(values, want_values)
    np.testing.assert_array_equal(counts, want_counts)
    sorted_values, sorted_counts = lib.unique(x, backend=backend)
    np.testing.assert_array_equal(values, sorted_values)
    np.testing.assert_array_equal(counts, sorted_counts)


def test_few_values_in_a_wide_range(backend, rng):
    """Bins past the shared-memory size (global atomics) and mostly empty bins."""
    x = rng.choice(np.array([3, 70_000, 1_000_000, 2**24 - 1], np.uint32), 50_001)
    values, counts = lib.unique(x, key_range=(0, 2**24), backend=backend)
    want_values, want_counts = np.unique(x, return_counts=True)
    np.testing.assert_array_equal(values, want_values)
    np.testing.assert_array_equal(counts, want_counts)


def test_empty_input(backend):
    values, counts = lib.unique(np.zeros(0, np.int32), key_range=(-5, 5), backend=backend)
    assert values.dtype == np.int32 and counts.dtype == np.uint32 and values.size == counts.size == 0


def test_no_sort_runs(rng):
    be = RecordingBackend()
    lib.unique(rng.integers(0, 100, 5000).astype(np.uint32), key_range=(0, 100), backend=be)
    names = [p.name for steps in be.sequences for p, _, _ in steps]
    assert not any("radix" in (name or "") or "sort" in (name or "") for name in names), names
    assert any((name or "").startswith("lib_histogram_u32_of_u32_minus_lo") for name in names), names


@pytest.mark.parametrize("x, key_range, says", [
    (np.array([1, 2, 10], np.uint32), (0, 10), "1 of the 3 keys are outside"),
    (np.array([-1, 2], np.int32), (0, 10), "outside"),
    (np.array([1], np.uint32), (5, 5), "is not \\(lo, hi\\)"),
    (np.array([1], np.uint32), (0, 2**24 + 1), "is not \\(lo, hi\\)"),
    (np.array([1], np.uint32), (-1, 10), "is not \\(lo, hi\\)"),
    (np.array([1], np.int32), (0, 2**31 + 1), "is not \\(lo, hi\\)"),
    (np.array([1], np.uint32), [0, 10], "is not \\(lo, hi\\)"),
    (np.array([1], np.uint32), (0.0, 10), "is not \\(lo, hi\\)"),
    (np.array([1.0], np.float32), (0, 10), "uint32 or int32 keys"),
    (np.array([1], np.uint64), (0, 10), "uint32 or int32 keys"),
])
def test_refusals(backend, x, key_range, says):
    with pytest.raises(InvalidProgram, match=says) as info:
        lib.unique(x, key_range=key_range, backend=backend)
    assert "Fix: " in str(info.value)


def test_device_count_is_refused(backend):
    with pytest.raises(InvalidProgram, match="count='exact'"):
        lib.unique(np.array([1], np.uint32), key_range=(0, 4), count="device", backend=backend)


@needs_ptxas
def test_kernels_assemble_for_sm90(rng):
    from vyre_cuda import emit_ptx

    be = RecordingBackend()
    lib.unique(rng.integers(-50, 50, 5000).astype(np.int32), key_range=(-50, 50), backend=be)
    lib.unique(rng.integers(0, 20_000, 5000).astype(np.uint32), key_range=(0, 20_000), backend=be)
    programs = {p.name: p for steps in be.sequences for p, _, _ in steps}
    failures = assemble({name: emit_ptx(p, sm="90") for name, p in programs.items()}, "90")
    assert not failures, "\n".join(failures[:20])


@pytest.mark.parametrize("big_at, probes, counted", [(None, 2, True), (10, 1, False), (60_000, 2, False)])
def test_the_probe_reads_a_sample_first(monkeypatch, rng, big_at, probes, counted):
    """Above twice ``PROBE_SAMPLE`` keys the probe ORs the first ``PROBE_SAMPLE`` keys first: a key
    there that rules the histogram plan out skips the full read (one OR, then the sort); a sample of
    small keys is followed by the full OR, which finds a large key past the sample (two ORs, then the
    sort) or none (two ORs, then the count). numpy's values and counts every time."""
    from vyre.lib._runs import api

    monkeypatch.setattr(api, "PROBE_MIN", 4096)
    monkeypatch.setattr(api, "PROBE_SAMPLE", 4096)
    be = RecordingBackend()
    x = rng.integers(0, 200, 70_001).astype(np.uint32)
    if big_at is not None:
        x[big_at] = 1 << 20
    handle = be.allocate_resident(x.nbytes)
    be.upload_resident(handle, x)
    values, counts = lib.unique(lib.ResidentArray(handle, np.uint32, x.size), backend=be)
    want_values, want_counts = np.unique(x, return_counts=True)
    np.testing.assert_array_equal(be.download_resident(values.handle, 0, values.n * 4).view(np.uint32), want_values)
    np.testing.assert_array_equal(be.download_resident(counts.handle, 0, counts.n * 4).view(np.uint32), want_counts)
    ors = [steps for steps in be.sequences if any(p.name == "lib_reduce_or_u32" for p, _, _ in steps)]
    assert len(ors) == probes
    names = {program.name for steps in be.sequences for program, _, _ in steps}
    assert (not any(name.startswith("lib_radix_histograms") for name in names)) == counted, names


@pytest.mark.parametrize("dtype, top, counted", [(np.uint32, 200, True), (np.int32, 2048, True),
                                                 (np.uint32, 1 << 20, False), (np.int32, -1, False),
                                                 (np.uint32, 2**32 - 1, False)])
def test_unique_counts_small_device_keys_instead_of_sorting(monkeypatch, rng, dtype, top, counted):
    """``unique`` of many resident (or device) u32/i32 keys first ORs them: keys that are all in
    ``[0, 2**k)`` with ``2**k <= n / 16`` are counted by the histogram plan, others sorted; the
    same values and counts as numpy either way."""
    from vyre.lib._runs import api

    monkeypatch.setattr(api, "PROBE_MIN", 4096)  # the oracle's numpy lanes: a smaller threshold
    be = RecordingBackend()
    x = rng.integers(0, min(abs(top), 200), 70_001).astype(dtype)
    x[rng.integers(0, x.size)] = np.array(top).astype(dtype)  # one key sets the OR's top bit
    handle = be.allocate_resident(x.nbytes)
    be.upload_resident(handle, x)
    values, counts = lib.unique(lib.ResidentArray(handle, dtype, x.size), backend=be)
    want_values, want_counts = np.unique(x, return_counts=True)
    got = (be.download_resident(values.handle, 0, values.n * 4).view(dtype),
           be.download_resident(counts.handle, 0, counts.n * 4).view(np.uint32))
    np.testing.assert_array_equal(got[0], want_values)
    np.testing.assert_array_equal(got[1], want_counts)
    names = {program.name for steps in be.sequences for program, _, _ in steps}
    assert (not any(name.startswith("lib_radix_histograms") for name in names)) == counted, names
    assert "lib_reduce_or_u32" in names or "lib_reduce_or_i32" in names
    host = lib.unique(x, backend=be)  # host keys: never probed (they would cross the link twice)
    np.testing.assert_array_equal(host[0], want_values)


def test_a_class_whose_probe_chose_the_sort_sorts_next_time_without_probing(monkeypatch, rng):
    """After a probe that chose the sort the class's guess is ``SORTED``: the next call sorts with
    no probe of its own, its plan ORing the first ``PROBE_SAMPLE`` keys (read back with the count).
    A sample the histogram plan could take drops the guess and sends the call to the probe (the
    sample, then all keys); when only the full OR rules the count out, no guess is kept (a sample
    would not see why). numpy's values and counts every time."""
    from vyre.lib._runs import api

    monkeypatch.setattr(api, "PROBE_MIN", 4096)
    monkeypatch.setattr(api, "PROBE_SAMPLE", 4096)
    be = RecordingBackend()
    n = 70_001
    handle = be.allocate_resident(4 * n)
    key = ("unique.bins", DataType.U32, 1 << 17)
    # full-range keys; again (no probe); small keys in the sample, a large one past it (the sample
    # drops the guess: probe, the sample then all keys, then the sort); again (no guess: the same)
    for i, big_at in enumerate([5, 5, 60_000, 60_000]):
        x = rng.integers(0, 200, n).astype(np.uint32)
        x[big_at] = 1 << 30
        be.upload_resident(handle, x)
        before = len(be.sequences)
        values, counts = lib.unique(lib.ResidentArray(handle, np.uint32, n), backend=be)
        want_values, want_counts = np.unique(x, return_counts=True)
        np.testing.assert_array_equal(be.download_resident(values.handle, 0, values.n * 4).view(np.uint32),
                                      want_values)
        np.testing.assert_array_equal(be.download_resident(counts.handle, 0, counts.n * 4).view(np.uint32),
                                      want_counts)
        ran = be.sequences[before:]
        probes = [steps for steps in ran if all(p.name == "lib_reduce_or_u32" for p, _, _ in steps)]
        assert len(probes) == [1, 0, 2, 2][i], f"call {i} probed {len(probes)} times"
        assert scratch_for(be).guesses.get(key) == (api.SORTED if i in (0, 1) else None), f"call {i}"
