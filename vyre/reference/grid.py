"""Lane numbering of the oracle: lane ``w * T + l`` is local invocation ``l`` of workgroup ``w``.

``w`` and ``l`` are linear (x fastest), ``T`` the workgroup's invocation count, so subgroups
and workgroups are runs of consecutive lanes and lane order is the linear invocation order.

A big grid runs in chunks of consecutive workgroups (``chunks``): workgroups are independent, so
running them chunk by chunk is one of the orders a GPU may pick, and the oracle's memory is bounded
by the chunk (every lane's values, at most one per statement and expression of the program, and
the workgroup memory of the chunk's workgroups).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from functools import lru_cache

import numpy as np

from vyre.driver.errors import UnsupportedFeature
from vyre.ir.program import Program
from vyre.ir.walk import iter_all_exprs, iter_nodes

#: most invocations of one dispatch: memory is bounded by the chunk, time is not (about a minute
#: per simple statement at this size; ``DispatchConfig.timeout_s`` stops a dispatch earlier)
MAX_INVOCATIONS = 1 << 30
#: most invocations of one chunk
CHUNK_LANES = 1 << 20
#: most bytes of lane values one chunk may hold, counting one 8-byte value per lane for every
#: statement and expression of the program (a bigger program runs in smaller chunks)
CHUNK_VALUE_BYTES = 1 << 30
#: most bytes of workgroup memory allocated for one chunk (all its workgroups together)
CHUNK_WORKGROUP_BYTES = 64 << 20
#: chunks of at most this many invocations keep their ``Grid`` (and its id arrays) between dispatches
SHARED_LANES = 1 << 16


class Grid:
    """Per-lane ids (cached uint32 arrays) of the workgroups ``first .. first + groups - 1`` of a
    dispatch of ``grid`` workgroups of ``workgroup_size`` invocations (all of them by default)."""

    def __init__(self, grid: tuple[int, int, int], workgroup_size: tuple[int, int, int], first: int = 0,
                 groups: int | None = None) -> None:
        self.grid = tuple(int(g) for g in grid)
        self.workgroup_size = tuple(int(w) for w in workgroup_size)
        self.first = first
        self.groups = math.prod(self.grid) - first if groups is None else groups
        self.per_group = math.prod(self.workgroup_size)
        self.lanes = self.groups * self.per_group
        self._ids: dict[tuple[str, int], np.ndarray] = {}

    def group_linear(self) -> np.ndarray:
        """Linear workgroup index (in the whole dispatch) of each lane."""
        return self._memo("group", 3, lambda: np.repeat(np.arange(self.first, self.first + self.groups,
                                                                  dtype=np.int64), self.per_group))

    def group_offset(self) -> np.ndarray:
        """Index of each lane's workgroup within this chunk (where its workgroup memory starts)."""
        return self._memo("offset", 3, lambda: np.repeat(np.arange(self.groups, dtype=np.int64), self.per_group))

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
        """The id array ``kind`` of ``axis``, made once and read-only (lane values are never written in place)."""
        key = (kind, axis)
        ids = self._ids.get(key)
        if ids is None:
            ids = self._ids[key] = make()
            ids.flags.writeable = False
        return ids


def _split(linear: np.ndarray, dims: tuple[int, ...], axis: int) -> np.ndarray:
    """Component ``axis`` of a linear index over ``dims`` (x fastest)."""
    if dims[axis] == 1:
        return np.zeros(linear.shape, np.uint32)
    stride = math.prod(dims[:axis])
    return ((linear // stride) % dims[axis]).astype(np.uint32)


def chunks(program: Program, grid: tuple[int, int, int], workgroup_size: tuple[int, int, int],
           sizes: tuple[int, int] | None = None) -> Iterator[Grid]:
    """``program``'s dispatch as chunks of consecutive workgroups, each within ``CHUNK_LANES``
    invocations, ``CHUNK_VALUE_BYTES`` of lane values and ``CHUNK_WORKGROUP_BYTES`` of workgroup
    memory; at least one workgroup per chunk. ``sizes``: the program's statements plus expression
    nodes and its workgroup memory bytes, when the caller already counted them."""
    total = math.prod(int(g) for g in grid)
    per_group = math.prod(int(w) for w in workgroup_size)
    if total * per_group > MAX_INVOCATIONS:
        raise UnsupportedFeature(f"dispatches of {total * per_group} invocations (its limit is {MAX_INVOCATIONS}: "
                                 "it runs every invocation on the CPU)", "reference",
                                 "dispatch fewer invocations on the oracle, or use a GPU backend.")
    if sizes is None:
        sizes = (sum(1 for _ in iter_nodes(program.body)) + sum(1 for _ in iter_all_exprs(program.body)),
                 sum(b.count * b.dtype.size for b in program.buffers if b.is_workgroup))
    nodes, shared = sizes
    lanes = min(CHUNK_LANES, CHUNK_VALUE_BYTES // (8 * max(nodes, 1)))
    step = max(1, min(lanes // per_group, CHUNK_WORKGROUP_BYTES // max(shared, 1)))
    for first in range(0, total, step):
        groups = min(step, total - first)
        if groups * per_group <= SHARED_LANES:
            yield _shared(tuple(grid), tuple(workgroup_size), first, groups)
        else:
            yield Grid(grid, workgroup_size, first, groups)


@lru_cache(maxsize=256)
def _shared(grid: tuple[int, int, int], workgroup_size: tuple[int, int, int], first: int, groups: int) -> Grid:
    """A small chunk's ``Grid``, kept: its id arrays are read-only, so dispatches of the same shape share them."""
    return Grid(grid, workgroup_size, first, groups)
