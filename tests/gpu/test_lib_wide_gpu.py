"""``vyre.lib`` on uint64, int64 and float64 CuPy arrays on ``cuda``: every function against numpy
(float64 sums against the documented order, ``expected.tree_reduce`` / ``tree_scan``) from 0 to
2**24 elements, and bit for bit against the oracle at small sizes."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lib import expected as E
from vyre import lib

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

SIZES = [0, 1, 4097, (1 << 16) + 3, (1 << 20) + 1, 1 << 24]
WIDE = E.WIDE


@pytest.fixture(scope="module")
def oracle():
    import vyre

    return vyre.acquire("reference")


def host(x: object) -> np.ndarray:
    return cupy.asnumpy(x) if isinstance(x, cupy.ndarray) else np.asarray(x)


def same_bits(actual: object, expected: np.ndarray) -> None:
    E.assert_same_bits(host(actual), np.asarray(expected))


def ops(dtype: type) -> list[str]:
    return ["add", "min", "max", "and", "or", "xor"] if np.dtype(dtype).kind in "iu" else ["add", "min", "max"]


@pytest.mark.parametrize("dtype", WIDE)
@pytest.mark.parametrize("n", SIZES)
def test_reduce_and_scans(backend, rng, dtype, n):
    x = E.data(rng, dtype, n, finite=True)
    d = cupy.asarray(x)
    for op in ops(dtype):
        got = lib.reduce(d, op, backend=backend)
        assert isinstance(got, cupy.ndarray) and got.shape == () and got.dtype == dtype
        same_bits(host(got).reshape(1), np.asarray([E.reduce(x, op)], dtype))
        same_bits(lib.inclusive_scan(d, op, backend=backend), E.inclusive_scan(x, op))
        same_bits(lib.exclusive_scan(d, op, backend=backend), E.exclusive_scan(x, op))


@pytest.mark.parametrize("dtype", WIDE)
@pytest.mark.parametrize("n", [0, 1, 257, 4097, (1 << 16) + 3])
def test_every_function_matches_the_oracle(backend, oracle, rng, dtype, n):
    x = E.data(rng, dtype, n)
    d = cupy.asarray(x)
    flags = (x.view(np.uint64) & np.uint64(3)).astype(np.uint32) if n else np.zeros(0, np.uint32)
    f = cupy.asarray(flags)
    offsets = E.random_offsets(rng, n, 33)
    edges = E.EDGES[np.dtype(dtype)]
    lo, hi = sorted((edges[3], edges[-4]))
    calls = {
        "reduce": lambda a, b: lib.reduce(a, "max", backend=b),
        "sum": lambda a, b: lib.reduce(a, backend=b),
        "scan": lambda a, b: lib.inclusive_scan(a, backend=b),
        "exclusive": lambda a, b: lib.exclusive_scan(a, "min", backend=b),
        "select": lambda a, b: lib.select(a, f if b is backend else flags, backend=b),
        "select_if": lambda a, b: lib.select_if(a, lo, hi, backend=b),
        "sort": lambda a, b: lib.sort(a, backend=b),
        "argsort": lambda a, b: lib.argsort(a, backend=b),
        "pairs": lambda a, b: lib.sort(a, a.copy(), backend=b),
        "unique": lambda a, b: lib.unique(a, backend=b),
        "rle": lambda a, b: lib.run_length_encode(a, backend=b),
        "segmented": lambda a, b: lib.segmented_reduce(a, offsets, backend=b),
    }
    if dtype != np.float64:
        calls["histogram"] = lambda a, b: lib.histogram(a, 3000, backend=b)
        calls["histogram64"] = lambda a, b: lib.histogram(a, 20_000, counts_dtype=np.uint64, backend=b)
    for name, call in calls.items():
        got, want = call(d, backend), call(x, oracle)
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        for g, w in zip(got, want):
            assert host(g).dtype == np.asarray(w).dtype, name
            E.assert_same_bits(host(g).reshape(np.shape(w)), np.asarray(w))


@pytest.mark.parametrize("dtype", WIDE)
@pytest.mark.parametrize("n", SIZES)
def test_sort_argsort_pairs(backend, rng, dtype, n):
    keys = E.data(rng, dtype, n)
    keys[: n // 4] = keys[n // 4: 2 * (n // 4)]  # ties, so stability shows
    order = E.sort_order(keys)
    d = cupy.asarray(keys)
    same_bits(lib.sort(d, backend=backend), keys[order])
    same_bits(lib.argsort(d, backend=backend), order.astype(np.uint32))
    values = np.arange(n, dtype=np.int64) * 3 - 7
    got_k, got_v = lib.sort(d, cupy.asarray(values), backend=backend)
    same_bits(got_k, keys[order])
    same_bits(got_v, values[order])


def test_sort_2_24_float32_keys_with_float64_values(backend, rng):
    n = 1 << 24
    keys, values = E.data(rng, np.float32, n), E.data(rng, np.float64, n)
    order = E.sort_order(keys)
    got_k, got_v = lib.sort(cupy.asarray(keys), cupy.asarray(values), backend=backend)
    same_bits(got_k, keys[order])
    same_bits(got_v, values[order])


def test_sort_high_halves_decide(backend, rng):
    high = rng.integers(0, 2**32, 1 << 20, dtype=np.uint64)
    keys = np.concatenate([(high << np.uint64(32)) | np.uint64(7), high])
    same_bits(lib.sort(cupy.asarray(keys), backend=backend), np.sort(keys, kind="stable"))


@pytest.mark.parametrize("dtype", WIDE)
@pytest.mark.parametrize("n", [0, 1, (1 << 20) + 1, 1 << 24])
def test_select_histogram_unique_rle_segmented(backend, rng, dtype, n):
    x = E.data(rng, dtype, n)
    d = cupy.asarray(x)
    flags = rng.random(n) < 0.5
    same_bits(lib.select(d, cupy.asarray(flags), backend=backend), x[flags])
    edges = E.EDGES[np.dtype(dtype)]
    lo, hi = sorted((edges[3], edges[-4]))
    same_bits(lib.select_if(d, lo, hi, backend=backend), x[(x >= lo) & (x < hi)])
    runs = E.runs(rng, dtype, n)
    r = cupy.asarray(runs)
    for got, want in zip(lib.unique(r, backend=backend), E.unique(runs)):
        same_bits(got, want)
    for got, want in zip(lib.run_length_encode(r, backend=backend), E.run_length_encode(runs)):
        same_bits(got, want)
    offsets = E.random_offsets(rng, n, 1000)
    finite = E.data(rng, dtype, n, finite=True)
    for op in ops(dtype):
        same_bits(lib.segmented_reduce(cupy.asarray(finite), cupy.asarray(offsets), op, backend=backend),
                  E.segmented_reduce(finite, offsets, op))
    if dtype != np.float64:
        small = (x.view(np.uint64) % np.uint64(70_000)).astype(dtype)
        small[: n // 3] = x[: n // 3]  # out-of-range and negative values too
        wide = small.astype(np.float64)
        inside = (wide >= 0) & (wide < 65_536)
        want = np.bincount(small[inside].astype(np.int64), minlength=65_536)
        for counts_dtype in (np.uint32, np.uint64):
            got = lib.histogram(cupy.asarray(small), 65_536, counts_dtype=counts_dtype, backend=backend)
            same_bits(got, want.astype(counts_dtype))
        got = lib.histogram(cupy.asarray(small), 256, counts_dtype=np.uint64, backend=backend)
        same_bits(got, want[:256].astype(np.uint64))


def test_count_device_and_resident_arrays(backend, rng):
    n = (1 << 20) + 5
    x = E.data(rng, np.int64, n)
    kept, count = lib.select_if(cupy.asarray(x), -(2**62), 2**62, count="device", backend=backend)
    keep = (x >= -(2**62)) & (x < 2**62)
    assert int(count[0]) == int(keep.sum())
    same_bits(kept[: int(keep.sum())], x[keep])
    handle = backend.allocate_resident(x.nbytes)
    backend.upload_resident(handle, x)
    try:
        out = lib.sort(lib.ResidentArray(handle, np.int64, n), backend=backend)
        same_bits(backend.download_resident(out.handle, 0, x.nbytes).view(np.int64), np.sort(x, kind="stable"))
        lib.recycle(out, backend=backend)
    finally:
        backend.free_resident(handle)


def test_torch_int64_and_float64(backend, rng):
    torch = pytest.importorskip("torch")
    x = E.data(rng, np.float64, 100_003)
    t = torch.from_numpy(x).cuda()
    got = lib.sort(t, backend=backend)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
    same_bits(got.cpu().numpy(), x[E.sort_order(x)])
    y = E.data(rng, np.int64, 100_003)
    total = lib.reduce(torch.from_numpy(y).cuda(), backend=backend)
    assert int(total.cpu()) == int(y.sum(dtype=np.int64))
