"""32-lane subgroup ops over lane arrays whose consecutive groups of 32 lanes are subgroups.

Inactive lanes contribute 0 / false (docs/semantics.md); every lane receives the result.
"""

from __future__ import annotations

import numpy as np

from vyre.reference.scalar_ops import Lanes, spread

SUBGROUP = 32


def _rows(x: Lanes, active: Lanes | None, lanes: int) -> np.ndarray:
    """``x`` as (subgroups, 32), inactive lanes zeroed."""
    full = spread(x, lanes)
    if active is not None:
        full = np.where(active, full, full.dtype.type(0))
    return full.reshape(-1, SUBGROUP)


def ballot(cond: Lanes, active: Lanes | None, lanes: int) -> Lanes:
    """U32 whose bit ``i`` is ``cond`` of lane ``i`` of the subgroup."""
    rows = _rows(np.asarray(cond, dtype=np.bool_), active, lanes)
    words = np.packbits(rows, axis=1, bitorder="little").view("<u4").reshape(-1)  # lane i -> bit i
    return np.repeat(words.astype(np.uint32), SUBGROUP)


def shuffle(value: Lanes, lane: Lanes, active: Lanes | None, lanes: int) -> Lanes:
    """``value`` of lane ``lane & 31`` of the same subgroup."""
    rows = _rows(value, active, lanes)
    src = (spread(lane, lanes) & np.uint32(SUBGROUP - 1)).reshape(-1, SUBGROUP)
    return np.take_along_axis(rows, src.astype(np.intp), axis=1).reshape(lanes)


def add(value: Lanes, active: Lanes | None, lanes: int) -> Lanes:
    """Butterfly sum: for offsets 16, 8, 4, 2, 1, ``v = v + v_of(lane ^ offset)``."""
    rows = _rows(value, active, lanes)
    ids = np.arange(SUBGROUP)
    for offset in (16, 8, 4, 2, 1):
        rows = rows + rows[:, ids ^ offset]
    return rows.reshape(lanes)
