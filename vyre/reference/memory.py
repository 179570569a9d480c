"""Buffers as the oracle sees them: widening loads, narrowing stores and bounds.

A ``Memory`` is one flat numpy array in the buffer's storage dtype. Global buffers are the
caller's arrays (mutated in place); a workgroup buffer is one array of ``groups * count``
elements for the ``groups`` workgroups of the chunk being run (see ``vyre.reference.grid``),
lane ``l`` of the chunk's ``w``-th workgroup addressing ``w * count + index``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vyre.ir.types import DataType
from vyre.reference import floats
from vyre.reference.scalar_ops import LANE_DTYPE, Lanes


@dataclass
class Memory:
    """One buffer: storage ``data``, element ``count`` per instance, and per-lane base offsets."""

    name: str
    dtype: DataType
    data: np.ndarray
    count: int
    base: np.ndarray | None = None  # per-lane start (workgroup buffers); None for global buffers

    def address(self, index: Lanes, active: Lanes | None) -> tuple[np.ndarray, np.ndarray]:
        """Flat element addresses and the lanes (active and in bounds) that may access them."""
        index = np.asarray(index, dtype=np.uint32)
        ok = index < np.uint32(self.count) if self.count else np.zeros(index.shape, bool)
        if active is not None:
            ok = ok & active
        flat = np.where(ok, index, np.uint32(0)).astype(np.int64)
        if self.base is not None:
            flat = flat + self.base
        return flat, ok

    def load(self, index: Lanes, active: Lanes | None) -> Lanes:
        """Widened lane values; out-of-bounds lanes read a typed zero."""
        if np.ndim(index) == 0 and self.base is None:
            i = int(index)
            raw = self.data[i : i + 1] if i < self.count else np.zeros(1, self.data.dtype)
            return widen(self.dtype, raw)[0]
        flat, ok = self.address(index, None)
        if self.count == 0:
            return widen(self.dtype, np.zeros(flat.shape, self.data.dtype))
        values = widen(self.dtype, self.data[flat])
        return values if ok.all() else np.where(ok, values, LANE_DTYPE[self.dtype.arith].type(0))

    def store(self, index: Lanes, value: Lanes, active: Lanes | None, lanes: int) -> None:
        """Write narrowed values of active, in-bounds lanes (later lanes win on a shared address)."""
        index = np.broadcast_to(np.asarray(index, np.uint32), (lanes,))
        flat, ok = self.address(index, active)
        narrow_values = narrow(self.dtype, np.broadcast_to(value, (lanes,)))
        if ok.all():
            self.data[flat] = narrow_values
        else:
            self.data[flat[ok]] = narrow_values[ok]


def widen(dtype: DataType, raw: np.ndarray) -> Lanes:
    """Storage values -> arithmetic lanes (zero/sign extension, exact F16/BF16 -> F32, BOOL words)."""
    if dtype is DataType.BF16:
        return floats.bf16_to_f32(raw)
    if dtype is DataType.BOOL:
        return raw != 0
    return raw.astype(LANE_DTYPE[dtype.arith])


def narrow(dtype: DataType, lanes: Lanes) -> np.ndarray:
    """Arithmetic lanes -> storage values (truncation, round to nearest even for F16/BF16)."""
    if dtype is DataType.BF16:
        return floats.f32_to_bf16(lanes)
    return np.asarray(lanes).astype(dtype.np_dtype)
