"""The native sort of 64-bit keys on ``cuda`` (eight single-pass radix passes over the whole keys):
keys alone, argsort and pairs with 4- and 8-byte values, numpy and CuPy in and out, against
numpy's stable order up to 2**24 keys; and the same result as the composite plan."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lib import expected as E
from vyre import lib
from vyre.lib._sort import kernels, onesweep
from vyre.lib._sort import topology as topo

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

SIZES = [1, 257, 4097, (1 << 16) + 3, (1 << 20) + 1, 1 << 24]
KEY_TYPES = [np.uint64, np.int64, np.float64]


def host(x: object) -> np.ndarray:
    return cupy.asnumpy(x) if isinstance(x, cupy.ndarray) else np.asarray(x)


def _keys(rng: np.random.Generator, dtype: type, n: int) -> np.ndarray:
    keys = E.data(rng, dtype, n)
    keys[: n // 4] = keys[n // 4: 2 * (n // 4)]  # ties, so stability shows
    return keys


@pytest.mark.parametrize("dtype", KEY_TYPES)
@pytest.mark.parametrize("n", SIZES)
def test_sort_argsort_pairs_cupy(backend, rng, dtype, n):
    keys = _keys(rng, dtype, n)
    order = E.sort_order(keys)
    d = cupy.asarray(keys)
    got = lib.sort(d, backend=backend)
    assert isinstance(got, cupy.ndarray) and got.dtype == dtype
    E.assert_same_bits(host(got), keys[order])
    E.assert_same(host(lib.argsort(d, backend=backend)), order.astype(np.uint32))
    for value_type in (np.float32, np.int64):
        values = E.data(rng, value_type, n)
        got_k, got_v = lib.sort(d, cupy.asarray(values), backend=backend)
        E.assert_same_bits(host(got_k), keys[order])
        assert host(got_v).tobytes() == values[order].tobytes()


@pytest.mark.parametrize("dtype", KEY_TYPES)
@pytest.mark.parametrize("n", [4097, 1 << 24])
def test_sort_numpy_in_and_out(backend, rng, dtype, n):
    keys = _keys(rng, dtype, n)
    order = E.sort_order(keys)
    got = lib.sort(keys, backend=backend)
    assert isinstance(got, np.ndarray)
    E.assert_same_bits(got, keys[order])
    values = E.data(rng, np.uint32, n)
    got_k, got_v = lib.sort(keys, values, backend=backend)
    E.assert_same_bits(got_k, keys[order])
    E.assert_same(got_v, values[order])


def test_every_digit_decides(backend, rng):
    """Keys that differ in one byte only, at each of the eight digit positions."""
    n = 1 << 22
    digits = rng.integers(0, 256, n, dtype=np.uint64)
    keys = digits << (rng.integers(0, 8, n, dtype=np.uint64) * np.uint64(8))
    E.assert_same(host(lib.sort(cupy.asarray(keys), backend=backend)), np.sort(keys, kind="stable"))
    signed = keys.view(np.int64)
    E.assert_same(host(lib.argsort(cupy.asarray(signed), backend=backend)),
                  np.argsort(signed, kind="stable").astype(np.uint32))


def test_float64_nans_and_zeros(backend, rng):
    """NaNs of every sign and payload last in input order, as 0x7FFFFFFFFFFFFFFF; -0.0 before +0.0."""
    n = (1 << 20) + 7
    pool = np.array([0x7FF8000000000001, 0xFFF0000000000001, 0xFFFFFFFFFFFFFFFF, 0, 0x8000000000000000, 1,
                     0x8000000000000001, 0x7FF0000000000000, 0xFFF0000000000000], np.uint64)
    keys = rng.choice(pool, n).view(np.float64)
    order = E.sort_order(keys)
    got = host(lib.sort(cupy.asarray(keys), backend=backend))
    E.assert_same_bits(got, keys[order])
    nan = np.isnan(keys[order])
    assert (got.view(np.uint64)[nan] == np.uint64(0x7FFFFFFFFFFFFFFF)).all()
    E.assert_same(host(lib.argsort(cupy.asarray(keys), backend=backend)), order.astype(np.uint32))


@pytest.mark.parametrize("dtype", KEY_TYPES)
def test_native_and_composite_plans_agree(backend, rng, monkeypatch, dtype):
    """The native plan (eight passes over the whole keys) and the composite one (two 32-bit sorts of
    indices and gathers, forced by a zero ``ONESWEEP_LIMIT``) give the same bytes; argsort and
    key-value sorts take the composite plan and give the documented order."""
    built: list[str] = []

    def spy(module: object, name: str) -> None:
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *args, **kwargs: built.append(name) or real(*args, **kwargs))

    spy(onesweep, "radix_histograms")
    spy(kernels, "split_keys")
    lib.release_scratch(backend)  # drops compiled calls of CuPy arrays: each plan below is built anew
    n = (1 << 22) + 5
    keys = cupy.asarray(_keys(rng, dtype, n))
    values = cupy.asarray(E.data(rng, np.float64, n))
    try:
        native = [host(lib.sort(keys, backend=backend))]
        assert "radix_histograms" in built and "split_keys" not in built
        pairs = [host(a) for a in (lib.argsort(keys, backend=backend), *lib.sort(keys, values, backend=backend))]
        assert "split_keys" in built  # values and indices take the composite plan for now
        monkeypatch.setattr(topo, "ONESWEEP_LIMIT", 0)
        lib.release_scratch(backend)
        composite = [host(lib.sort(keys, backend=backend))]
        order = E.sort_order(host(keys))  # the documented order (NaNs last, -0.0 before +0.0)
        np.testing.assert_array_equal(pairs[0], order.astype(np.uint32))
        assert pairs[2].tobytes() == host(values)[order].tobytes()
    finally:
        lib.release_scratch(backend)
    for a, b in zip(native, composite):
        assert a.tobytes() == b.tobytes()
