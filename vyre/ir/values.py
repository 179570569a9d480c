"""Random buffer contents rich in edge values (zero, ±1, MIN/MAX, NaN, ±inf, -0.0, subnormals)."""

from __future__ import annotations

import numpy as np

from vyre.ir.types import DataType

#: fraction of elements replaced by an edge value of their type
EDGE_SHARE = 0.3

_F32_EDGES = np.array([0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x3F000000, 0xBF000000, 0x40200000,
                       0x3FC00000, 0xC0200000, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF,
                       0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7FA00001, 0x4B000000,
                       0x4F000000, 0x4F800000, 0xCF000000, 0x5F800000], dtype=np.uint32)
_F64_EDGES = np.array([0x0000000000000000, 0x8000000000000000, 0x3FF0000000000000, 0xBFF0000000000000,
                       0x3FE0000000000000, 0x4004000000000000, 0x0000000000000001, 0x8000000000000001,
                       0x000FFFFFFFFFFFFF, 0x0010000000000000, 0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF,
                       0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000, 0xFFF8000000000000,
                       0x7FF4000000000001, 0x4330000000000000, 0x4330000000000001, 0x43E0000000000000,
                       0xC3E0000000000000, 0x43F0000000000000, 0x41F0000000000000, 0x47EFFFFFE0000000],
                      dtype=np.uint64)
_F16_EDGES = np.array([0x0000, 0x8000, 0x3C00, 0xBC00, 0x3800, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF,
                       0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x3E00], dtype=np.uint16)
_BF16_EDGES = np.array([0x0000, 0x8000, 0x3F80, 0xBF80, 0x3F00, 0x0001, 0x8001, 0x007F, 0x0080, 0x7F7F, 0xFF7F,
                        0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x4B00], dtype=np.uint16)


def _int_edges(dtype: np.dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    edges = {0, 1, 2, 3, 7, 16, 31, 32, 33, 255, info.max, info.max - 1, info.min, info.min + 1, info.max // 2 + 1}
    if info.min < 0:
        edges |= {-1, -2, -32}
    return np.array(sorted(e for e in edges if info.min <= e <= info.max), dtype=dtype)


def _base(dtype: DataType, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(random values, edge values) of ``dtype``'s buffer representation."""
    if dtype is DataType.BOOL:
        words = rng.integers(0, 2, n, dtype=np.uint32)
        return words, np.array([0, 1, 2, 0x80000000, 0xFFFFFFFF], dtype=np.uint32)
    if dtype.is_int:
        t = dtype.np_dtype
        info = np.iinfo(t)
        small = rng.integers(-40 if info.min < 0 else 0, 300, n).clip(info.min, info.max).astype(t)
        wide = rng.integers(info.min, info.max, n, dtype=t, endpoint=True)
        return np.where(rng.random(n) < 0.5, small, wide), _int_edges(t)
    if dtype in (DataType.F32, DataType.F64):
        ft, ut = dtype.np_dtype, (np.uint64 if dtype is DataType.F64 else np.uint32)
        bits = rng.integers(0, np.iinfo(ut).max, n, dtype=ut, endpoint=True).view(ft)
        plain = (rng.standard_normal(n) * rng.choice([1.0, 10.0, 1000.0], n)).astype(ft)
        halves = (rng.integers(-20, 20, n) / 2).astype(ft)
        pick = rng.random(n)
        values = np.where(pick < 0.3, bits, np.where(pick < 0.8, plain, halves))
        return values, (_F64_EDGES if dtype is DataType.F64 else _F32_EDGES).view(ft)
    bits = rng.integers(0, 2**16, n, dtype=np.uint16)
    if dtype is DataType.F16:
        plain = (rng.standard_normal(n) * 8).astype(np.float16)
        return np.where(rng.random(n) < 0.4, bits.view(np.float16), plain), _F16_EDGES.view(np.float16)
    plain = (rng.standard_normal(n) * 8).astype(np.float32).view(np.uint32) >> 16  # BF16: truncated F32 bits
    return np.where(rng.random(n) < 0.4, bits, plain.astype(np.uint16)), _BF16_EDGES


def random_values(dtype: DataType, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` elements of a ``dtype`` buffer (``dtype.np_dtype``), about 30% of them edge values."""
    values, edges = _base(dtype, n, rng)
    out = np.array(values, dtype=dtype.np_dtype)
    mask = rng.random(n) < EDGE_SHARE
    out[mask] = rng.choice(edges, int(mask.sum()))
    return out
