"""Every ``vyre.lib`` function on uint64, int64 and float64 data, on the oracle against numpy.

float64 sums are compared bit for bit with the documented order (``expected.tree_reduce``,
``tree_scan``, ``warp_reduce``); everything else exactly with numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.codegen.codegen_support import assemble, needs_ptxas
from tests.lib import expected as E
from tests.lib.test_plan import RecordingBackend
from vyre import lib
from vyre.driver.errors import InvalidProgram
from vyre.lib._sort import topology as sort_topology

SIZES = [0, 1, 33, 4097, 2**14 + 3]
WIDE = E.WIDE
INT_OPS = ["add", "min", "max", "and", "or", "xor"]


def ops(dtype: type) -> list[str]:
    return INT_OPS if np.dtype(dtype).kind in "iu" else ["add", "min", "max"]


def same_bits(actual: object, expected: np.ndarray) -> None:
    """Same dtype, shape and bits (every NaN one NaN; -0.0 and +0.0 differ)."""
    E.assert_same_bits(np.asarray(actual), np.asarray(expected))


@pytest.mark.parametrize("dtype", WIDE)
@pytest.mark.parametrize("n", SIZES)
def test_reduce_and_scans(backend, rng, dtype, n):
    x = E.data(rng, dtype, n, finite=True)
    for op in ops(dtype):
        got = lib.reduce(x, op, backend=backend)
        assert np.asarray(got).dtype == dtype
        same_bits(np.asarray([got]), np.asarray([E.reduce(x, op)], dtype))
        same_bits(lib.inclusive_scan(x, op, backend=backend), E.inclusive_scan(x, op))
        same_bits(lib.exclusive_scan(x, op, backend=backend), E.exclusive_scan(x, op))


@pytest.mark.parametrize("dtype, op, init", [(np.uint64, "add", 2**64 - 5), (np.int64, "min", -(2**62)),
                                             (np.int64, "xor", -1), (np.float64, "add", 0.1),
                                             (np.float64, "max", -np.inf), (np.uint64, "and", 2**63 + 7)])
@pytest.mark.parametrize("n", [1, 4097])
def test_exclusive_init(backend, rng, dtype, op, init, n):
    x = E.data(rng, dtype, n, finite=True)
    same_bits(lib.exclusive_scan(x, op, init, backend=backend), E.exclusive_scan(x, op, init))


def test_float64_edges(backend, rng):
    """min/max skip NaN; sums of infinities, subnormals and -0.0 in the documented order."""
    x = rng.choice(E.F64_EDGES, 3001)
    for op in ("min", "max", "add"):
        same_bits(np.asarray([lib.reduce(x, op, backend=backend)]), np.asarray([E.reduce(x, op)]))
        same_bits(lib.inclusive_scan(x, op, backend=backend), E.inclusive_scan(x, op))
    assert np.isnan(lib.reduce(np.full(7, np.nan), "max", backend=backend))
    negative_zeros = np.full(5000, -0.0)
    assert np.signbit(lib.reduce(negative_zeros, backend=backend))  # -0.0 pads: the sum stays -0.0
    tiny = np.full(2**14 + 3, 5e-324)  # subnormal sums are exact: no flush to zero
    assert lib.reduce(tiny, backend=backend) == np.float64(5e-324) * tiny.size


def test_float64_sum_order_is_not_sequential(backend):
    """The documented tree order, not numpy's sequential one: 1e16 + 1.0 rounds back to 1e16, so
    adding 4096 ones one by one loses them all, while the tree loses only the 15 that invocation 0
    adds to 1e16 itself."""
    x = np.ones(4097)
    x[0] = 1e16
    got = lib.reduce(x, backend=backend)
    assert got == E.tree_reduce(x) == 1e16 + 4096.0 - 15.0
    assert np.cumsum(x)[-1] == 1e16


def test_integer_extremes_wrap(backend):
    x = np.array([2**64 - 1, 2**64 - 1, 2, 2**63], np.uint64)
    assert lib.reduce(x, backend=backend) == x.sum(dtype=np.uint64)
    y = E.I64_EDGES.copy()
    same_bits(lib.inclusive_scan(y, "add", backend=backend), np.cumsum(y, dtype=np.int64))
    assert lib.reduce(y, "min", backend=backend) == np.iinfo(np.int64).min
    assert lib.reduce(y, "max", backend=backend) == np.iinfo(np.int64).max


def test_empty_identities(backend):
    for dtype in WIDE:
        for op in ops(dtype):
            got = lib.reduce(np.zeros(0, dtype), op, backend=backend)
            same_bits(np.asarray([got]), np.asarray([E.identity(op, dtype)], dtype))


@pytest.mark.parametrize("dtype", WIDE)
@pytest.mark.parametrize("n", SIZES)
def test_select_and_select_if(backend, rng, dtype, n):
    x = E.data(rng, dtype, n)
    flags = rng.random(n) < 0.4
    same_bits(lib.select(x, flags, backend=backend), x[flags])
    lo, hi = (E.EDGES[np.dtype(dtype)][3], E.EDGES[np.dtype(dtype)][-4])
    lo, hi = min(lo, hi), max(lo, hi)
    keep = (x >= lo) & (x < hi)
    same_bits(lib.select_if(x, lo, hi, backend=backend), x[keep])
    kept, count = lib.select_if(x, lo, hi, count="device", backend=backend)
    assert count.tolist() == [int(keep.sum())]
    same_bits(kept[:int(keep.sum())], x[keep])


def test_select_if_float64_edges(backend, rng):
    x = rng.choice(E.F64_EDGES, 2000)
    for lo, hi in ((-0.0, np.inf), (-np.inf, 0.0), (5e-324, 1.0), (-1.7976931348623157e308, np.inf)):
        same_bits(lib.select_if(x, lo, hi, backend=backend), x[(x >= lo) & (x < hi)])


@pytest.mark.parametrize("flag_dtype", WIDE + [np.uint32])
def test_select_with_64_bit_flags(backend, rng, flag_dtype):
    x = E.data(rng, np.int64, 1500)
    flags = rng.integers(0, 2, 1500).astype(flag_dtype)
    if flag_dtype == np.float64:
        flags[:6] = [-0.0, np.nan, 0.0, 5e-324, -np.inf, 0.0]  # -0.0 is false, NaN and subnormals are true
    if flag_dtype == np.uint64:
        flags[:2] = [2**32, 2**63]  # only high bits set: non-zero
    same_bits(lib.select(x, flags, backend=backend), x[flags != 0])


@pytest.mark.parametrize("dtype", [np.uint64, np.int64])
@pytest.mark.parametrize("bins", [1, 7, 1000, 10_000])
@pytest.mark.parametrize("counts_dtype", [np.uint32, np.uint64])
def test_histogram(backend, rng, dtype, bins, counts_dtype):
    x = rng.integers(-50, 12_000, 3001).astype(dtype)
    x[:4] = np.array([2**32, 2**32 + 3, 2**63, 2**64 - 1], np.uint64).view(dtype)  # low bits in range, value not
    wide = x.astype(np.float64)  # the values' signs and sizes, for the model
    inside = (wide >= 0) & (wide < bins)
    want = np.bincount(x[inside].astype(np.int64), minlength=bins).astype(counts_dtype)
    got = lib.histogram(x, bins, counts_dtype=counts_dtype, backend=backend)
    same_bits(got, want)


def test_histogram_64_bit_counts_of_32_bit_values(backend, rng):
    x = rng.integers(0, 300, 5000).astype(np.uint32)
    got = lib.histogram(x, 256, counts_dtype=np.uint64, backend=backend)
    same_bits(got, np.bincount(x[x < 256], minlength=256).astype(np.uint64))
    assert lib.histogram(x, 0, counts_dtype=np.uint64, backend=backend).dtype == np.uint64
    assert lib.histogram(x[:0], 3, counts_dtype="uint64", backend=backend).tolist() == [0, 0, 0]


@pytest.mark.parametrize("dtype", WIDE)
@pytest.mark.parametrize("n", SIZES)
def test_sort_argsort(backend, rng, dtype, n):
    keys = E.data(rng, dtype, n)
    keys[: n // 4] = keys[n // 4: 2 * (n // 4)]  # ties, so stability shows
    order = E.sort_order(keys)
    same_bits(lib.sort(keys, backend=backend), keys[order])
    same_bits(lib.argsort(keys, backend=backend), order.astype(np.uint32))


def test_sort_high_halves_decide(backend, rng):
    """Keys equal in their low 32 bits and different above (and the reverse): both halves count."""
    high = rng.integers(0, 2**32, 3000, dtype=np.uint64)
    keys = np.concatenate([(high << np.uint64(32)) | np.uint64(7), high])
    order = np.argsort(keys, kind="stable")
    same_bits(lib.sort(keys, backend=backend), keys[order])
    same_bits(lib.argsort(keys.view(np.int64), backend=backend),
              np.argsort(keys.view(np.int64), kind="stable").astype(np.uint32))


def test_float64_total_order_edges(backend):
    keys = np.array([np.nan, 0.0, -0.0, np.inf, -np.nan, -np.inf, 5e-324, -5e-324, 0.0, -0.0, 1.0])
    got = lib.sort(keys, backend=backend)
    nan = 0x7FFFFFFFFFFFFFFF
    want = np.array([0xFFF0000000000000, 0x8000000000000001, 0x8000000000000000, 0x8000000000000000, 0, 0, 1,
                     0x3FF0000000000000, 0x7FF0000000000000, nan, nan], np.uint64)
    same_bits(got.view(np.uint64), want)
    same_bits(lib.argsort(keys, backend=backend), np.array([5, 7, 2, 9, 1, 8, 6, 10, 3, 0, 4], np.uint32))


@pytest.mark.parametrize("key_type", [np.uint64, np.int64, np.float64, np.float32])
@pytest.mark.parametrize("value_type", [np.uint32, np.float64, np.int64])
def test_sort_pairs(backend, rng, key_type, value_type):
    keys = E.data(rng, key_type, 2501)
    keys[:1000] = keys[1000:2000]
    values = E.data(rng, value_type, 2501)
    got_k, got_v = lib.sort(keys, values, backend=backend)
    order = E.sort_order(keys)
    same_bits(got_k, keys[order])
    assert got_v.dtype == value_type and got_v.tobytes() == values[order].tobytes()


@pytest.mark.parametrize("dtype", WIDE)
@pytest.mark.parametrize("n", SIZES)
def test_unique_and_run_length_encode(backend, rng, dtype, n):
    x = E.runs(rng, dtype, n)
    values, counts = lib.unique(x, backend=backend)
    want_values, want_counts = E.unique(x)
    same_bits(values, want_values)
    same_bits(counts, want_counts)
    values, lengths = lib.run_length_encode(x, backend=backend)
    want_values, want_lengths = E.run_length_encode(x)
    same_bits(values, want_values)
    same_bits(lengths, want_lengths)


def test_run_length_float64_nan_and_zeros(backend):
    x = np.array([np.nan, -np.nan, 0.0, -0.0, -0.0, 1.0, 1.0])
    values, lengths = lib.run_length_encode(x, backend=backend)
    assert lengths.tolist() == [2, 1, 2, 2]
    assert np.isnan(values[0]) and not np.signbit(values[1]) and np.signbit(values[2])
    values, counts = lib.unique(x, backend=backend)
    assert counts.tolist() == [2, 1, 2, 2] and np.signbit(values[0]) and np.isnan(values[3])


def test_run_length_low_halves_equal(backend):
    """Values that differ only in their high 32 bits are different runs."""
    x = np.array([5, 5 + 2**32, 5 + 2**32, 5], np.uint64)
    values, lengths = lib.run_length_encode(x, backend=backend)
    assert values.tolist() == [5, 5 + 2**32, 5] and lengths.tolist() == [1, 2, 1]


@pytest.mark.parametrize("dtype", WIDE)
@pytest.mark.parametrize("n", [0, 1, 999, 2**14 + 3])
def test_segmented_reduce(backend, rng, dtype, n):
    x = E.data(rng, dtype, n, finite=True)
    offsets = E.random_offsets(rng, n, 40)
    for op in ops(dtype):
        same_bits(lib.segmented_reduce(x, offsets, op, backend=backend), E.segmented_reduce(x, offsets, op))


@pytest.mark.parametrize("call", [
    lambda b: lib.reduce(np.ones(4, np.float64), "xor", backend=b),
    lambda b: lib.exclusive_scan(np.ones(4, np.uint64), init=-1, backend=b),
    lambda b: lib.exclusive_scan(np.ones(4, np.int64), init=2**63, backend=b),
    lambda b: lib.select_if(np.ones(4, np.uint64), 0, 2**64, backend=b),
    lambda b: lib.histogram(np.ones(4, np.float64), 4, backend=b),
    lambda b: lib.histogram(np.ones(4, np.uint64), 4, counts_dtype=np.int64, backend=b),
    lambda b: lib.histogram(np.ones(4, np.uint64), 4, counts_dtype=None, backend=b),
    lambda b: lib.histogram(np.ones(4, np.uint64), 4, counts_dtype="no such type", backend=b),
    lambda b: lib.sort(np.ones(4, np.uint64), np.ones(4, np.uint16), backend=b),
    lambda b: lib.sort(np.ones(4, np.uint64), np.ones(3, np.uint64), backend=b),
    lambda b: lib.run_length_encode(np.ones(4, np.complex64), backend=b),
])
def test_bad_arguments(backend, call):
    with pytest.raises(InvalidProgram, match="Fix: "):
        call(backend)


def test_segmented_sort_plan(backend, rng, monkeypatch):
    """The plan for n >= 2^30 (forced here) sorts 64-bit keys and 8-byte values too."""
    monkeypatch.setattr(sort_topology, "ONESWEEP_LIMIT", 0)
    keys = E.data(rng, np.float64, 7001)
    values = E.data(rng, np.int64, 7001)
    order = E.sort_order(keys)
    got_k, got_v = lib.sort(keys, values, backend=backend)
    same_bits(got_k, keys[order])
    same_bits(got_v, values[order])


def test_resident_arrays(backend, rng):
    keys = E.data(rng, np.int64, 5003)
    handle = backend.allocate_resident(keys.nbytes)
    backend.upload_resident(handle, keys)
    try:
        out = lib.sort(lib.ResidentArray(handle, np.int64, keys.size), backend=backend)
        assert out.dtype == np.int64 and out.n == keys.size
        got = backend.download_resident(out.handle, 0, keys.nbytes).view(np.int64)
        same_bits(got, np.sort(keys, kind="stable"))
        assert lib.reduce(lib.ResidentArray(handle, np.int64, keys.size), backend=backend) == keys.sum()
        backend.free_resident(out.handle)
    finally:
        backend.free_resident(handle)


@needs_ptxas
def test_every_64_bit_kernel_assembles_for_sm90(rng, monkeypatch):
    from vyre_cuda import emit_ptx

    be = RecordingBackend()
    for dtype in WIDE:
        x = E.data(rng, dtype, 5000)
        for op in ops(dtype):
            lib.exclusive_scan(x, op, backend=be)
            lib.reduce(x, op, backend=be)
            lib.segmented_reduce(x, [0, 100, 5000], op, backend=be)
        lib.select(x, x, backend=be)
        lib.select_if(x, x[0], x[1], backend=be)
        lib.sort(x, x, backend=be)
        lib.sort(x.view(np.uint32)[:5000].copy(), x, backend=be)  # 32-bit keys, 8-byte values
        lib.argsort(x, backend=be)
        lib.unique(x, backend=be)
        if dtype != np.float64:
            lib.histogram(x, 100, counts_dtype=np.uint64, backend=be)
            lib.histogram(x, 20_000, counts_dtype=np.uint64, backend=be)
    monkeypatch.setattr(sort_topology, "ONESWEEP_LIMIT", 0)  # and the composite sort of 64-bit keys (n >= 2^30)
    lib.sort(x, x, backend=be)
    programs = {p.name + str(i): p for i, p in enumerate({s[0] for seq in be.sequences for s in seq})}
    assert any("split_keys" in name for name in programs) and any("gather" in name for name in programs)
    assert any("onesweep64" in name for name in programs)
    failures = assemble({name: emit_ptx(p, sm="90") for name, p in programs.items()}, "90")
    assert not failures, "\n".join(failures[:20])
