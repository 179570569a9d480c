"""numpy models of every ``vyre.lib`` function, and test data with edge values.

Shared by the CPU tests (``tests/lib``, on the oracle) and the GPU tests (``tests/gpu``).
"""

from __future__ import annotations

import numpy as np

F32_EDGES = np.array([0.0, -0.0, 1.0, -1.0, 0.5, np.nan, -np.nan, np.inf, -np.inf, 3.4028235e38, -3.4028235e38,
                      1.17549435e-38, 1e-45, -1e-45, 1e-40, -3e-39, 2.0**24, -7.25], np.float32)
U32_EDGES = np.array([0, 1, 2, 31, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFE, 0xFFFFFFFF], np.uint32)
I32_EDGES = U32_EDGES.view(np.int32)
EDGES = {np.dtype(np.float32): F32_EDGES, np.dtype(np.uint32): U32_EDGES, np.dtype(np.int32): I32_EDGES}


def data(rng: np.random.Generator, dtype: np.dtype, n: int, edges: bool = True, finite: bool = False) -> np.ndarray:
    """``n`` random values of ``dtype`` (never all zeros), with the edge values mixed in at random places."""
    dtype = np.dtype(dtype)
    if dtype == np.float32:
        out = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(np.float32)
    else:
        out = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(dtype)
    if edges and n:
        pool = EDGES[dtype]
        if finite:  # values whose sums stay finite
            pool = pool[np.isfinite(pool) & (np.abs(pool.astype(np.float64)) < 1e30)]
        places = rng.choice(n, size=min(n, len(pool) * 2), replace=False)
        out[places] = rng.choice(pool, size=len(places))
    return out


def runs(rng: np.random.Generator, dtype: np.dtype, n: int) -> np.ndarray:
    """Data with runs of equal values (for run-length encoding and unique)."""
    pool = data(rng, dtype, 5)
    return pool[np.repeat(rng.integers(0, 5, n), rng.integers(1, 6, n))[:n]]


# ---- models ---------------------------------------------------------------------------------------
_UFUNC = {"add": np.add, "min": np.fmin, "max": np.fmax, "and": np.bitwise_and, "or": np.bitwise_or,
          "xor": np.bitwise_xor}
_INT_UFUNC = dict(_UFUNC, min=np.minimum, max=np.maximum)


def ufunc(op: str, dtype: np.dtype) -> np.ufunc:
    return (_UFUNC if np.dtype(dtype) == np.float32 else _INT_UFUNC)[op]


def identity(op: str, dtype: np.dtype) -> np.generic:
    dtype = np.dtype(dtype)
    if op in ("add", "or", "xor"):
        return dtype.type(0)
    if op == "and":
        return np.array(-1).astype(dtype) if dtype != np.uint32 else dtype.type(0xFFFFFFFF)
    if dtype == np.float32:
        return dtype.type(np.inf if op == "min" else -np.inf)
    info = np.iinfo(dtype)
    return dtype.type(info.max if op == "min" else info.min)


def reduce(x: np.ndarray, op: str) -> np.generic:
    if x.size == 0:
        return identity(op, x.dtype)
    if op == "add" and x.dtype == np.float32:
        return np.float32(np.sum(x, dtype=np.float64))
    return ufunc(op, x.dtype).reduce(x, dtype=x.dtype)


def inclusive_scan(x: np.ndarray, op: str) -> np.ndarray:
    if op == "add" and x.dtype == np.float32:
        return np.cumsum(x, dtype=np.float64).astype(np.float32)
    return ufunc(op, x.dtype).accumulate(x, dtype=x.dtype) if x.size else x.copy()


def exclusive_scan(x: np.ndarray, op: str, init: object = None) -> np.ndarray:
    start = identity(op, x.dtype) if init is None else x.dtype.type(init)
    if init is None and x.dtype == np.float32 and op == "add":
        start = np.float32(0.0)
    body = np.concatenate([np.array([start], x.dtype), x[:-1]]) if x.size else x.copy()
    if op == "add" and x.dtype == np.float32:
        return np.cumsum(body, dtype=np.float64).astype(np.float32)
    return ufunc(op, x.dtype).accumulate(body, dtype=x.dtype) if x.size else body


def sort_order(keys: np.ndarray) -> np.ndarray:
    """The stable order of the total order: -0.0 before +0.0, every NaN last in input order."""
    if keys.dtype != np.float32:
        return np.argsort(keys, kind="stable")
    nan = np.isnan(keys)
    tie = np.where(nan, 0, ~np.signbit(keys)).astype(np.int8)
    primary = np.where(nan, np.inf, keys)
    return np.lexsort((tie, primary, nan))


def canonical(keys: np.ndarray) -> np.ndarray:
    """Raw bits with every NaN made 0x7FFFFFFF (what sort returns for NaNs)."""
    bits = keys.view(np.uint32).copy()
    if keys.dtype == np.float32:
        bits[np.isnan(keys)] = 0x7FFFFFFF
    return bits


def run_length_encode(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if x.size == 0:
        return x.copy(), np.zeros(0, np.uint32)
    bits = canonical(x)
    starts = np.flatnonzero(np.concatenate([[True], bits[1:] != bits[:-1]]))
    lengths = np.diff(np.concatenate([starts, [x.size]])).astype(np.uint32)
    return x[starts], lengths


def unique(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values, counts = run_length_encode(x[sort_order(x)])
    return values, counts


def segmented_reduce(x: np.ndarray, offsets: np.ndarray, op: str) -> np.ndarray:
    return np.array([reduce(x[offsets[s]:offsets[s + 1]], op) for s in range(len(offsets) - 1)], dtype=x.dtype)


def random_offsets(rng: np.random.Generator, n: int, segments: int) -> np.ndarray:
    """CSR offsets over ``n`` elements with some empty segments."""
    cuts = np.sort(rng.integers(0, n + 1, max(segments - 1, 0)))
    return np.concatenate([[0], cuts, [n]]).astype(np.uint32)


def assert_same(actual: np.ndarray, expected: np.ndarray) -> None:
    """Equal values (NaN equals NaN, -0.0 equals +0.0), same dtype and length."""
    actual = np.asarray(actual)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    np.testing.assert_array_equal(actual, expected)


def assert_same_bits(actual: np.ndarray, expected: np.ndarray) -> None:
    """Bit-identical, except that every NaN equals every other NaN."""
    actual = np.asarray(actual)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual.dtype, actual.shape)
    np.testing.assert_array_equal(canonical(actual), canonical(expected))


def assert_close_sum(actual: np.ndarray, x: np.ndarray, expected: np.ndarray) -> None:
    """float32 sums in another order: within a few ulps of the running sum of magnitudes."""
    scale = np.cumsum(np.abs(x.astype(np.float64))) if np.ndim(expected) else np.sum(np.abs(x.astype(np.float64)))
    err = np.abs(np.asarray(actual, np.float64) - np.asarray(expected, np.float64))
    assert np.all(err <= 1e-5 * scale + 1e-30), float(np.max(err - 1e-5 * scale))
