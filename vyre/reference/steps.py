"""Resident steps of the oracle bound to their handles once, then run any number of times.

A ``BoundStep`` holds, for one ``(program, handles, config)``, typed arrays over the handles' own
bytes (views, no copies), the element counts and the grid. Running it zeroes the ``output``
buffers and interprets the program directly on those bytes, keeping a journal of every value it
overwrites: a dispatch that fails puts them back, so it still writes nothing. Steps are cached per
backend (``StepCache``) and checked against the store on every use, so a freed handle is still
``InvalidHandle``; a sequence, repeated steps or a fixed-point loop then cost the interpretation
and nothing that grows with the buffers.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from vyre.driver.config import DispatchConfig, effective_workgroup, resolve_grid
from vyre.driver.inputs import check_byte_length, resident_decls
from vyre.ir.program import Access, Program
from vyre.reference.limits import Deadline, host_memory
from vyre.reference.memory import undo
from vyre.reference.resident import HostResidentStore

#: most bound steps one backend keeps (a library call binds a few dozen)
MAX_BOUND_STEPS = 4096


class BoundStep:
    """One resident dispatch, bound: arrays over the handles' bytes, counts and the grid."""

    def __init__(self, program: Program, handles: Sequence[Any], config: DispatchConfig | None,
                 store: HostResidentStore) -> None:
        decls = resident_decls(program, handles)
        self.program, self.handles, self.config = program, tuple(handles), config
        self.storages = [store.storage(h) for h in handles]
        self.arrays: dict[str, np.ndarray] = {}
        self.outputs: list[np.ndarray] = []
        counts: dict[str, int] = {}
        for decl, storage in zip(decls, self.storages):
            count = check_byte_length(decl, storage.size - storage.size % decl.dtype.size)
            view = storage[:count * decl.dtype.size].view(decl.dtype.np_dtype)
            self.arrays[decl.name] = view
            if decl.access is Access.OUTPUT:
                self.outputs.append(view)
            counts[decl.name] = count
        self.grid = resolve_grid(program, config, counts)
        self.workgroup = effective_workgroup(program, config)

    def current(self, store: HostResidentStore) -> bool:
        """Whether every handle still names the bytes this step was bound to (raises for a freed one)."""
        return all(store.storage(h) is s for h, s in zip(self.handles, self.storages))

    def run(self) -> None:
        """Zero the outputs and interpret; on any error put every byte back as it was."""
        from vyre.reference.interpreter import execute

        journal: list = []
        with host_memory(sum(out.nbytes for out in self.outputs)):
            saved = [out.copy() for out in self.outputs]
        try:
            for out in self.outputs:
                out.fill(0)
            deadline = Deadline(self.config.timeout_s if self.config else None, self.program.name or "(unnamed)")
            with host_memory():
                execute(self.program, self.arrays, self.grid, self.workgroup, deadline, journal)
        except BaseException:
            undo(journal)
            for out, old in zip(self.outputs, saved):
                out[:] = old
            raise


class StepCache:
    """Bound steps of one backend by ``(program, handles, config)``; stale entries are rebound.

    ``forget(handle)`` drops the steps that hold a freed handle, so its bytes are released.
    """

    def __init__(self, store: HostResidentStore) -> None:
        self.store = store
        self._steps: dict[tuple, BoundStep] = {}
        self._by_handle: dict[int, set[tuple]] = {}
        self._lock = threading.Lock()  # threads may bind and free at once

    def bind(self, program: Program, handles: Sequence[Any], config: DispatchConfig | None) -> BoundStep:
        """The step for these arguments: the cached one if its handles still hold the same bytes."""
        key = _key(program, handles, config)
        step = self._steps.get(key) if key is not None else None
        if step is not None and step.current(self.store):  # the key's ids are of objects the step holds
            return step
        step = BoundStep(program, handles, config, self.store)
        if key is not None:
            with self._lock:
                if len(self._steps) >= MAX_BOUND_STEPS:
                    self._steps.clear()
                    self._by_handle.clear()
                self._steps[key] = step
                for handle in step.handles:
                    self._by_handle.setdefault(id(handle), set()).add(key)
        return step

    def forget(self, handle: Any) -> None:
        """Drop every step bound to ``handle`` (it is being freed)."""
        with self._lock:
            for key in self._by_handle.pop(id(handle), ()):
                self._steps.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._steps.clear()
            self._by_handle.clear()


def _key(program: Program, handles: Sequence[Any], config: DispatchConfig | None) -> tuple | None:
    """A hashable key of the arguments (identities of the program and handles), or None when the config is
    unhashable. ``bind`` checks the identities: the step holds the objects, so no id is reused meanwhile."""
    try:
        key = (id(program), tuple(id(h) for h in handles), config)
        hash(key)
    except TypeError:
        return None
    return key
