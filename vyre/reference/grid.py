"""Lane numbering of the oracle: lane ``w * T + l`` is local invocation ``l`` of workgroup ``w``.

``w`` and ``l`` are linear (x fastest), ``T`` the workgroup's invocation count, so subgroups
and workgroups are runs of consecutive lanes and lane order is the linear invocation order.
"""

from __future__ import annotations

import math

import numpy as np


class Grid:
    """Per-lane ids (cached uint32 arrays) of ``grid`` workgroups of ``workgroup_size`` invocations."""

    def __init__(self, grid: tuple[int, int, int], workgroup_size: tuple[int, int, int]) -> None:
        self.grid = tuple(int(g) for g in grid)
        self.workgroup_size = tuple(int(w) for w in workgroup_size)
        self.groups = math.prod(self.grid)
        self.per_group = math.prod(self.workgroup_size)
        self.lanes = self.groups * self.per_group
        self._ids: dict[tuple[str, int], np.ndarray] = {}

    def group_linear(self) -> np.ndarray:
        """Linear workgroup index of each lane."""
        return self._memo("group", 3, lambda: np.repeat(np.arange(self.groups, dtype=np.int64), self.per_group))

    def local_linear(self) -> np.ndarray:
        """Linear local id of each lane (``lx + ly*wx + lz*wx*wy``)."""
        return self._memo("local", 3, lambda: np.tile(np.arange(self.per_group, dtype=np.uint32), self.groups))

    def workgroup_id(self, axis: int) -> np.ndarray:
        return self._memo("wg", axis, lambda: _split(self.group_linear(), self.grid, axis))

    def local_id(self, axis: int) -> np.ndarray:
        return self._memo("lid", axis, lambda: _split(self.local_linear(), self.workgroup_size, axis))

    def invocation_id(self, axis: int) -> np.ndarray:
        size = np.uint32(self.workgroup_size[axis])
        return self._memo("gid", axis, lambda: self.workgroup_id(axis) * size + self.local_id(axis))

    def subgroup_local_id(self) -> np.ndarray:
        return self._memo("sg", 0, lambda: self.local_linear() & np.uint32(31))

    def _memo(self, kind: str, axis: int, make) -> np.ndarray:
        key = (kind, axis)
        if key not in self._ids:
            self._ids[key] = make()
        return self._ids[key]


def _split(linear: np.ndarray, dims: tuple[int, ...], axis: int) -> np.ndarray:
    """Component ``axis`` of a linear index over ``dims`` (x fastest)."""
    if dims[axis] == 1:
        return np.zeros(linear.shape, np.uint32)
    stride = math.prod(dims[:axis])
    return ((linear // stride) % dims[axis]).astype(np.uint32)
