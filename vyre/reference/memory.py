"""Buffers as the oracle sees them: widening loads, narrowing stores and bounds.

A ``Memory`` is one flat numpy array in the buffer's storage dtype. Global buffers are the
caller's arrays (mutated in place; with a ``journal`` every write first records what it
overwrites, so a failed dispatch can be undone: ``undo``); a workgroup buffer is one array of ``groups * count``
elements for the ``groups`` workgroups of the chunk being run (see ``vyre.reference.grid``),
lane ``l`` of the chunk's ``w``-th workgroup addressing ``w * count + index``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vyre.ir.types import DataType
from vyre.reference import floats
from vyre.reference.scalar_ops import LANE_DTYPE, Lanes, spread


@dataclass
class Memory:
    """One buffer: storage ``data``, element ``count`` per instance, and per-lane base offsets."""

    name: str
    dtype: DataType
    data: np.ndarray
    count: int
    base: np.ndarray | None = None  # per-lane start (workgroup buffers); None for global buffers
    journal: list | None = None  # when set, (data, addresses, old values) is appended before each write

    def remember(self, flat: np.ndarray) -> None:
        """Keep the values at ``flat`` before they are overwritten, if this memory keeps a journal."""
        if self.journal is not None:
            self.journal.append((self.data, flat, self.data[flat]))

    def address(self, index: Lanes, active: Lanes | None) -> tuple[np.ndarray, np.ndarray]:
        """Flat element addresses and the lanes (active and in bounds) that may access them."""
        flat, ok, _ = self._address(index, active)
        return flat, ok

    def _address(self, index: Lanes, active: Lanes | None) -> tuple[np.ndarray, np.ndarray, bool]:
        """``address`` and whether every lane may access (then ``flat`` is ``index`` itself, plus the base)."""
        index = np.asarray(index, dtype=np.uint32)
        ok = index < np.uint32(self.count) if self.count else np.zeros(index.shape, bool)
        if active is not None:
            ok = ok & active
        whole = bool(ok.all())
        flat = index if whole else np.where(ok, index, np.uint32(0))
        if self.base is not None:
            flat = flat + self.base
        return flat, ok, whole

    def load(self, index: Lanes, active: Lanes | None) -> Lanes:
        """Widened lane values; out-of-bounds lanes read a typed zero."""
        if np.ndim(index) == 0 and self.base is None:
            i = int(index)
            raw = self.data[i : i + 1] if i < self.count else np.zeros(1, self.data.dtype)
            return widen(self.dtype, raw)[0]
        flat, ok, whole = self._address(index, None)
        if self.count == 0:
            return widen(self.dtype, np.zeros(flat.shape, self.data.dtype))
        values = widen(self.dtype, self.data[flat])
        return values if whole else np.where(ok, values, LANE_DTYPE[self.dtype.arith].type(0))

    def store(self, index: Lanes, value: Lanes, active: Lanes | None, lanes: int) -> None:
        """Write narrowed values of active, in-bounds lanes (later lanes win on a shared address)."""
        if np.ndim(index) == 0 and np.ndim(value) == 0 and self.base is None:
            self._store_uniform(int(index), value, active)
            return
        flat, ok, whole = self._address(spread(np.asarray(index, np.uint32), lanes), active)
        narrow_values = narrow(self.dtype, spread(value, lanes))
        if not whole:
            flat, narrow_values = flat[ok], narrow_values[ok]
        self.remember(flat)
        self.data[flat] = narrow_values

    def _store_uniform(self, index: int, value: Lanes, active: Lanes | None) -> None:
        """Every active lane stores the same value at the same index: one write, if any lane runs."""
        if index < self.count and (active is None or active.any()):
            flat = np.array([index], dtype=np.int64)
            self.remember(flat)
            self.data[flat] = narrow(self.dtype, np.asarray(value).reshape(1))


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


def undo(journal: list) -> None:
    """Put back every value a journal recorded, latest write first."""
    for data, flat, old in reversed(journal):
        data[flat] = old
    journal.clear()
