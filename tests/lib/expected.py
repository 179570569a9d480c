"""numpy models of every ``vyre.lib`` function, and test data with edge values.

Shared by the CPU tests (``tests/lib``, on the oracle) and the GPU tests (``tests/gpu``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

F32_EDGES = np.array([0.0, -0.0, 1.0, -1.0, 0.5, np.nan, -np.nan, np.inf, -np.inf, 3.4028235e38, -3.4028235e38,
                      1.17549435e-38, 1e-45, -1e-45, 1e-40, -3e-39, 2.0**24, -7.25], np.float32)
U32_EDGES = np.array([0, 1, 2, 31, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFE, 0xFFFFFFFF], np.uint32)
I32_EDGES = U32_EDGES.view(np.int32)
F64_EDGES = np.array([0.0, -0.0, 1.0, -1.0, 0.5, np.nan, -np.nan, np.inf, -np.inf, 1.7976931348623157e308,
                      -1.7976931348623157e308, 2.2250738585072014e-308, 5e-324, -5e-324, 1e-310, -3e-320, 2.0**53,
                      -7.25, 3.4028235e38, 1e-45], np.float64)
U64_EDGES = np.array([0, 1, 2, 31, 0xFFFFFFFF, 2**32, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 2, 2**64 - 1],
                     np.uint64)
I64_EDGES = U64_EDGES.view(np.int64)
EDGES = {np.dtype(np.float32): F32_EDGES, np.dtype(np.uint32): U32_EDGES, np.dtype(np.int32): I32_EDGES,
         np.dtype(np.float64): F64_EDGES, np.dtype(np.uint64): U64_EDGES, np.dtype(np.int64): I64_EDGES}
WIDE = [np.uint64, np.int64, np.float64]


def data(rng: np.random.Generator, dtype: np.dtype, n: int, edges: bool = True, finite: bool = False) -> np.ndarray:
    """``n`` random values of ``dtype`` (never all zeros), with the edge values mixed in at random places."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        out = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(dtype)
    elif dtype.itemsize == 8:
        out = rng.integers(0, 2**64, n, dtype=np.uint64).view(dtype)
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


KEY_DISTS = ("uniform", "sorted", "reversed", "few_distinct", "zipf")  # the key distributions sorts are tested on
ZIPF_A = 1.2


def key_distribution(rng: np.random.Generator, name: str, dtype: np.dtype, n: int) -> np.ndarray:
    """``n`` keys of ``dtype`` of the distribution ``name`` (``KEY_DISTS``): random (``data``, edge values
    mixed in), those in ascending or descending sort order (``sort_order``), 16 distinct random values
    picked uniformly, or Zipf ranks (``a = ZIPF_A``, clipped to u32; cast to float keys, else their bits)."""
    dtype = np.dtype(dtype)
    if name == "few_distinct":
        return data(rng, dtype, 16, edges=False)[rng.integers(0, 16, n)]
    if name == "zipf":
        ranks = np.minimum(rng.zipf(ZIPF_A, n), 2**32 - 1).astype(np.uint32)
        return ranks.astype(dtype) if dtype.kind == "f" else ranks.view(dtype)
    keys = data(rng, dtype, n)
    if name == "uniform":
        return keys
    ordered = keys[sort_order(keys)]
    if name == "sorted":
        return ordered
    if name == "reversed":
        return ordered[::-1].copy()
    raise ValueError(f"unknown key distribution {name!r}; pick one of {KEY_DISTS}")


# ---- models ---------------------------------------------------------------------------------------
_UFUNC = {"add": np.add, "min": np.fmin, "max": np.fmax, "and": np.bitwise_and, "or": np.bitwise_or,
          "xor": np.bitwise_xor}
_INT_UFUNC = dict(_UFUNC, min=np.minimum, max=np.maximum)


class FloatMinMax:
    """Float ``min``/``max`` as docs/semantics.md defines them (a NaN operand gives the other one,
    ``-0.0 < +0.0``), with numpy's ``reduce``/``accumulate`` signatures. ``np.fmin``/``np.fmax``
    leave the sign of equal zeros to the C library, so they cannot model it."""

    def __init__(self, op: str) -> None:
        self.op = op

    def accumulate(self, x: np.ndarray, dtype: object = None) -> np.ndarray:
        x = np.asarray(x)
        bits = np.dtype(f"u{x.dtype.itemsize}")
        top = bits.type(1 << (8 * x.dtype.itemsize - 1))
        nan = np.isnan(x)
        filled = np.where(nan, x.dtype.type(np.inf if self.op == "min" else -np.inf), x)
        raw = filled.view(bits)
        key = np.where(raw & top, ~raw, raw | top)  # ascending integer keys in float order, -0.0 < +0.0
        key = (np.minimum if self.op == "min" else np.maximum).accumulate(key)
        out = np.where(key & top, key & ~top, ~key).view(x.dtype)
        return np.where(np.logical_and.accumulate(nan), x.dtype.type(np.nan), out)

    def reduce(self, x: np.ndarray, dtype: object = None) -> np.generic:
        return self.accumulate(x)[-1]


_FLOAT_UFUNC = dict(_UFUNC, min=FloatMinMax("min"), max=FloatMinMax("max"))


def ufunc(op: str, dtype: np.dtype) -> Any:
    return (_FLOAT_UFUNC if np.dtype(dtype).kind == "f" else _INT_UFUNC)[op]


def identity(op: str, dtype: np.dtype) -> np.generic:
    dtype = np.dtype(dtype)
    if op in ("add", "or", "xor"):
        return dtype.type(0)
    if op == "and":
        return np.array(-1).astype(dtype) if dtype.kind == "i" else dtype.type(np.iinfo(dtype).max)
    if dtype.kind == "f":
        return dtype.type(np.inf if op == "min" else -np.inf)
    info = np.iinfo(dtype)
    return dtype.type(info.max if op == "min" else info.min)


def reduce(x: np.ndarray, op: str) -> np.generic:
    if x.size == 0:
        return identity(op, x.dtype)
    if op == "add" and x.dtype == np.float32:
        return np.float32(np.sum(x, dtype=np.float64))
    if op == "add" and x.dtype == np.float64:
        return tree_reduce(x)
    return ufunc(op, x.dtype).reduce(x, dtype=x.dtype)


def inclusive_scan(x: np.ndarray, op: str) -> np.ndarray:
    if op == "add" and x.dtype == np.float64:
        return tree_scan(x, True)
    if op == "add" and x.dtype == np.float32:
        return np.cumsum(x, dtype=np.float64).astype(np.float32)
    return ufunc(op, x.dtype).accumulate(x, dtype=x.dtype) if x.size else x.copy()


def exclusive_scan(x: np.ndarray, op: str, init: object = None) -> np.ndarray:
    if op == "add" and x.dtype == np.float64:
        return tree_scan(x, False, 0.0 if init is None else init)
    start = identity(op, x.dtype) if init is None else x.dtype.type(init)
    if init is None and x.dtype == np.float32 and op == "add":
        start = np.float32(0.0)
    body = np.concatenate([np.array([start], x.dtype), x[:-1]]) if x.size else x.copy()
    if op == "add" and x.dtype == np.float32:
        return np.cumsum(body, dtype=np.float64).astype(np.float32)
    return ufunc(op, x.dtype).accumulate(body, dtype=x.dtype) if x.size else body


def sort_order(keys: np.ndarray) -> np.ndarray:
    """The stable order of the total order: -0.0 before +0.0, every NaN last in input order."""
    if keys.dtype.kind != "f":
        return np.argsort(keys, kind="stable")
    nan = np.isnan(keys)
    tie = np.where(nan, 0, ~np.signbit(keys)).astype(np.int8)
    primary = np.where(nan, np.inf, keys)
    return np.lexsort((tie, primary, nan))


def canonical(keys: np.ndarray) -> np.ndarray:
    """Raw bits with every NaN made 0x7FFFFFFF, or 0x7FFFFFFFFFFFFFFF for float64 (what sort returns)."""
    wide = keys.dtype.itemsize == 8
    bits = keys.view(np.uint64 if wide else np.uint32).copy()
    if keys.dtype.kind == "f":
        bits[np.isnan(keys)] = 0x7FFFFFFFFFFFFFFF if wide else 0x7FFFFFFF
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
    """Each segment reduced; float64 sums in ``segmented_reduce``'s order (``segment_sum``)."""
    bounds = [(int(offsets[s]), int(offsets[s + 1])) for s in range(len(offsets) - 1)]
    if op == "add" and x.dtype == np.float64:
        return np.array([segment_sum(x, b, e) for b, e in bounds], dtype=x.dtype)
    return np.array([reduce(x[b:e], op) for b, e in bounds], dtype=x.dtype)


def random_offsets(rng: np.random.Generator, n: int, segments: int) -> np.ndarray:
    """CSR offsets over ``n`` elements with some empty segments."""
    cuts = np.sort(rng.integers(0, n + 1, max(segments - 1, 0)))
    return np.concatenate([[0], cuts, [n]]).astype(np.uint32)


def segment_order(keys: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The stable order of each segment's keys (``sort_order``), segment after segment."""
    parts = [int(b) + sort_order(keys[int(b):int(e)]) for b, e in zip(offsets[:-1], offsets[1:], strict=True)]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def segmented_sort_case(rng: np.random.Generator, dtype: np.dtype, n: int, segments: int
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Keys with ties across and inside segments (so stability shows), offsets with empty segments,
    u32 values, and the order ``segmented_sort`` must give them."""
    keys = data(rng, dtype, n)
    keys[: n // 3] = keys[n // 3: 2 * (n // 3)]
    offsets = random_offsets(rng, n, segments)
    return keys, offsets, data(rng, np.uint32, n), segment_order(keys, offsets)


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


# ---- float64 sums in vyre.lib's documented order (docs/lib.md, "Float sums") ------------------------
WG, WARPS, NEG_ZERO = 256, 8, -0.0
quiet = np.errstate(over="ignore", invalid="ignore")  # inputs may hold infinities and NaNs


def _butterfly(v: np.ndarray) -> np.ndarray:
    """``subgroup_add`` over the last axis (32 lanes): ``v = v + v[lane ^ d]`` for d = 16 .. 1; lane 0's sum."""
    lanes = np.arange(32)
    for d in (16, 8, 4, 2, 1):
        v = v + v[..., lanes ^ d]
    return v[..., 0]


def _in_order(columns: np.ndarray) -> np.ndarray:
    """``-0.0 + c[..., 0] + c[..., 1] + ...`` added left to right along the last axis."""
    acc = np.full(columns.shape[:-1], NEG_ZERO)
    for j in range(columns.shape[-1]):
        acc = acc + columns[..., j]
    return acc


def _block_sum(per_invocation: np.ndarray) -> np.ndarray:
    """A workgroup's 256 values (last axis) summed: each warp's butterfly, then the 8 in order."""
    return _in_order(_butterfly(per_invocation.reshape(*per_invocation.shape[:-1], WARPS, 32)))


def _padded(x: np.ndarray, length: int) -> np.ndarray:
    out = np.full(length, NEG_ZERO)
    out[:x.size] = x
    return out


@quiet
def tree_reduce(x: np.ndarray, items: int = 16) -> np.float64:
    """``reduce(x)`` of float64: 4096-element tiles, invocation ``t`` adding elements ``k*256 + t``
    in order, each warp's butterfly, the 8 warp sums in order; levels until one value is left."""
    x = np.asarray(x, np.float64)
    if x.size == 0:
        return np.float64(0.0)
    tile = WG * items
    while True:
        tiles = -(-x.size // tile)
        per = _in_order(_padded(x, tiles * tile).reshape(tiles, items, WG).transpose(0, 2, 1))
        x = _block_sum(per)
        if tiles == 1:
            return np.float64(x[0])


SEGMENT_LONG, SEGMENT_TILE = 32768, 4096  # vyre.lib._scan.segmented's LONG and TILE


def segment_layouts(n: int) -> dict[str, np.ndarray]:
    """Offsets over ``n > 4 * SEGMENT_LONG`` elements that reach every path of ``segmented_reduce``:
    long segments at and off tile edges, exactly ``SEGMENT_LONG`` and one more, one segment of
    everything, tiny and empty neighbours, not starting at 0, not ending at ``n``."""
    long, tile = SEGMENT_LONG, SEGMENT_TILE
    a, b = tile + long, 3 * tile + 17 + 2 * long
    return {
        "one": np.array([0, n]),
        "one_unaligned": np.array([7, n - 5]),
        "edges": np.array([0, 0, 1, 3, tile, tile, a, a, b, b + long + 1, n - 2, n - 2, n]),
        "tiny": np.concatenate([np.arange(0, 4000, 3), [long + 9000, n]]),
        "mixed": np.array([5, 5, 5 + long + 3 * tile, 5 + long + 3 * tile, 2 * long + 64, n - 31, n]),
    }


def _lanes(x: np.ndarray) -> np.ndarray:
    """``x`` dealt to 32 lanes in order (lane ``l`` gets elements ``l, l+32, ...``), padded with -0.0."""
    rows = -(-x.size // 32)
    return _padded(x, rows * 32).reshape(rows, 32).T


@quiet
def warp_reduce(x: np.ndarray, op: str = "add") -> np.float64:
    """``segmented_reduce``'s float64 sum of a segment of up to ``SEGMENT_LONG`` elements (and of
    a long segment's tile): lane ``l`` adds elements ``l, l+32, ...`` in order, then the
    butterfly; an empty segment gives +0.0."""
    if x.size == 0:
        return np.float64(0.0)
    return np.float64(_butterfly(_in_order(_lanes(x))))


@quiet
def segment_sum(x: np.ndarray, begin: int, end: int) -> np.float64:
    """``segmented_reduce``'s float64 sum of ``x[begin:end]``. A segment longer than
    ``SEGMENT_LONG``: each lane adds its share of the head (before the first whole 4096-element
    tile of ``x``), then of the tiles' sums (each a ``warp_reduce``), then of the tail, in order;
    then the butterfly."""
    if end - begin <= SEGMENT_LONG:
        return warp_reduce(x[begin:end])
    first, last = -(-begin // SEGMENT_TILE), end // SEGMENT_TILE
    tiles = np.array([warp_reduce(x[t * SEGMENT_TILE:(t + 1) * SEGMENT_TILE]) for t in range(first, last)])
    pieces = (x[begin:first * SEGMENT_TILE], tiles, x[last * SEGMENT_TILE:end])
    return np.float64(_butterfly(_in_order(np.concatenate([_lanes(p) for p in pieces], axis=1))))


def _warp_scan(v: np.ndarray) -> np.ndarray:
    """Hillis-Steele over the last axis (32 lanes): ``s = s[lane - d] + s`` where ``lane >= d``."""
    for d in (1, 2, 4, 8, 16):
        shifted = np.concatenate([v[..., :d], v[..., :-d]], axis=-1)
        v = np.where(np.arange(32) >= d, shifted + v, v)
    return v


def _scan_segment(x: np.ndarray, carry: float, inclusive: bool, items: int = 8) -> np.ndarray:
    """One workgroup's downsweep over its segment (whole 2048-element tiles, padded with -0.0)."""
    tile = WG * items
    tiles = -(-x.size // tile)
    out = np.empty(tiles * tile)
    for t, values in enumerate(_padded(x, tiles * tile).reshape(tiles, WARPS, items, 32)):
        before = np.full(WARPS, NEG_ZERO)
        results = np.empty((WARPS, items, 32))
        for k in range(items):
            scanned = _warp_scan(values[:, k, :])
            r = scanned if k == 0 else before[:, None] + scanned
            if inclusive:
                results[:, k, :] = r
            else:
                results[:, k, 0], results[:, k, 1:] = before, r[:, :-1]
            before = r[:, 31]
        wp = np.full(WARPS, NEG_ZERO)
        for w in range(1, WARPS):
            wp[w] = wp[w - 1] + before[w - 1]
        wbase = carry + wp
        out[t * tile:(t + 1) * tile] = (wbase[:, None, None] + results).reshape(-1)
        carry = carry + _in_order(before)
    return out[:x.size]


@quiet
def tree_scan(x: np.ndarray, inclusive: bool, init: float | None = None) -> np.ndarray:
    """The float64 add scans: up to 4096 elements one workgroup's downsweep; beyond, segments of
    whole 4096-element tiles (at most 4096 of them), each summed as ``reduce`` sums a tile range,
    the segment sums scanned exclusively the same way (the spine), and each segment's downsweep
    starting from ``init + carry``."""
    x = np.asarray(x, np.float64)
    start = NEG_ZERO if init is None else np.float64(init)
    if x.size == 0:
        return x.copy()
    cap = 1 << max(x.size - 1, 0).bit_length()
    if cap <= 4096:
        return _scan_segment(x, start, inclusive)
    unit = WG * 16
    groups = min(-(-cap // unit), 4096)
    per_group = -(-x.size // groups)
    span = -(-per_group // unit) * unit
    pieces = [x[s:s + span] for s in range(0, x.size, span)]
    partial = np.array([_segment_fold(p) for p in pieces])
    carries = tree_scan(partial, False)
    return np.concatenate([_scan_segment(p, c if init is None else start + c, inclusive)
                           for p, c in zip(pieces, carries)])


def _segment_fold(x: np.ndarray, items: int = 16) -> np.float64:
    """The upsweep's sum of one segment: invocation ``t`` adds element ``k*256 + t`` of every
    4096-element tile in order, then the workgroup sum."""
    tile = WG * items
    tiles = -(-x.size // tile)
    per = _in_order(_padded(x, tiles * tile).reshape(tiles * items, WG).T)
    return np.float64(_block_sum(per))


def put_resident(be: Any, a: np.ndarray) -> Any:
    """``a`` uploaded into a new handle of ``be``, as a ``ResidentArray`` naming ``be``."""
    from vyre.lib import ResidentArray

    handle = be.allocate_resident(max(a.nbytes, 4))
    be.upload_resident(handle, a)
    return ResidentArray(handle, a.dtype, a.size, be)


def get_resident(be: Any, r: Any) -> np.ndarray:
    """The ``ResidentArray`` ``r``'s elements, downloaded from ``be``."""
    return be.download_resident(r.handle, 0, r.n * r.dtype.itemsize).view(r.dtype)


def check_sort_family(backend: Any, keys: np.ndarray, values: np.ndarray) -> None:
    """``sort``, ``argsort`` and the key-value ``sort`` of ``keys`` on ``backend`` are numpy's stable order."""
    from vyre import lib

    order = sort_order(keys)
    assert_same_bits(lib.sort(keys, backend=backend), keys[order])
    assert_same(lib.argsort(keys, backend=backend), order.astype(np.uint32))
    got_k, got_v = lib.sort(keys, values, backend=backend)
    assert_same_bits(got_k, keys[order])
    assert_same(got_v, values[order])
