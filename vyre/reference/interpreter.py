"""The CPU reference oracle: runs a validated program over a whole grid, vectorised with numpy.

Every statement runs for all invocations ("lanes") at once, in lockstep, so a barrier is only
an ordering point that lockstep already gives. Divergent control flow runs under a lane mask;
``return_`` clears lanes from the ``alive`` mask. A uniform value (a literal, a buffer length,
a loop counter with uniform bounds) stays a numpy scalar until something needs it per lane.
See docs/semantics.md for what every operation means.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import numpy as np

from vyre.driver.errors import InvalidProgram
from vyre.ir.expr import Expr
from vyre.ir.program import BufferDecl, Program
from vyre.reference.compiler import Body, Compiled, prepare
from vyre.reference.compiler import literal as _literal
from vyre.reference.grid import Grid, chunks
from vyre.reference.limits import NO_DEADLINE, Deadline
from vyre.reference.memory import Memory
from vyre.reference.scalar_ops import Lanes, spread


def execute(
    program: Program,
    arrays: dict[str, np.ndarray],
    grid: tuple[int, int, int],
    workgroup_size: tuple[int, int, int] | None = None,
    deadline: Deadline = NO_DEADLINE,
    journal: list | None = None,
) -> None:
    """Run ``program`` over ``grid`` workgroups, mutating ``arrays`` (one per non-workgroup buffer).

    ``arrays`` are 1-D, in each buffer's storage dtype (``decl.dtype.np_dtype``); their lengths
    are the run-time element counts. ``workgroup_size`` overrides the program's. Workgroups run in
    chunks of bounded size (``vyre.reference.grid.chunks``); ``deadline`` is checked between
    statements and loop iterations. Calls of composed ops run call by value
    (``vyre.ir.expand.expand_calls``); the program is compiled once (``vyre.reference.compiler``).
    With ``journal``, every write to ``arrays`` first records what it overwrites there
    (``vyre.reference.memory.undo`` puts it back).
    """
    prepared = prepare(program)
    for ids in chunks(prepared.program, grid, workgroup_size or program.workgroup_size,
                      (prepared.nodes, prepared.shared)):
        run = _Run(prepared, arrays, ids, deadline, journal)
        if run.lanes:
            with np.errstate(all="ignore"):
                run.block(prepared.body, None)


def literal(e: Expr) -> Lanes:
    """The numpy scalar of a literal expression."""
    return _literal(e)


class _Run:
    """State of one execution: memories, variables, the alive mask and the grid."""

    def __init__(self, prepared: Compiled, arrays: Mapping[str, np.ndarray], grid: Grid, deadline: Deadline,
                 journal: list | None = None) -> None:
        self.grid = grid
        self.deadline = deadline
        self.journal = journal
        self.lanes = grid.lanes
        self.memory = {b.name: self._memory(b, dtype, arrays) for b, dtype in prepared.storage}
        self.vars: dict[str, Lanes] = {}
        self.alive: np.ndarray | None = None

    def _memory(self, decl: BufferDecl, dtype: np.dtype, arrays: Mapping[str, np.ndarray]) -> Memory:
        """The memory of buffer ``decl`` (storage dtype ``dtype``): the caller's array, or fresh workgroup memory."""
        if decl.is_workgroup:
            data = np.zeros(self.grid.groups * decl.count, dtype)
            base = self.grid.group_offset() * decl.count if self.lanes else None
            return Memory(decl.name, decl.dtype, data, decl.count, base)
        data = arrays.get(decl.name)
        if not isinstance(data, np.ndarray) or data.ndim != 1 or data.dtype != dtype:
            raise InvalidProgram(f"the oracle needs a 1-D {dtype} array for buffer {decl.name!r}",
                                 "prepare the arrays with vyre.driver.inputs.prepare_host_dispatch.")
        return Memory(decl.name, decl.dtype, data, data.shape[0], journal=self.journal)

    # ---- control flow (called by the compiled statements) ------------------------------------------
    def _active(self, ctrl: np.ndarray | Literal[False] | None) -> np.ndarray | Literal[False] | None:
        """Lanes that run the next statement: ``ctrl`` and alive; False when there are none."""
        if self.alive is None:
            return ctrl
        mask = self.alive if ctrl is None else ctrl & self.alive
        return _normalise(mask)

    def block(self, body: Body, ctrl: np.ndarray | Literal[False] | None) -> None:
        """Run a compiled statement list under ``ctrl``; its lets end with it."""
        declared: list[str] = []
        check = self.deadline.check
        for statement in body:
            check()
            mask = self._active(ctrl)
            if mask is False:
                break
            statement(self, mask, declared)
        for name in declared:
            self.vars.pop(name, None)

    def branch(self, cond: Lanes, then: Body, otherwise: Body, mask: np.ndarray | None) -> None:
        """An ``if``: a uniform condition runs one arm; a varying one runs each arm under its lanes."""
        if np.ndim(cond) == 0:
            self.block(then if cond else otherwise, mask)
            return
        for body, taken in ((then, cond), (otherwise, ~cond)):
            sub = _normalise(taken if mask is None else mask & taken)
            if body and sub is not False:
                self.block(body, sub)

    def loop(self, var: str, start: Lanes, end: Lanes, body: Body, mask: np.ndarray | None) -> None:
        """A ``loop`` whose bounds were evaluated (start first): uniform bounds run in Python, varying
        ones run every lane's trips under a mask that drops lanes as their trips end."""
        if np.ndim(start) == 0 and np.ndim(end) == 0:
            for i in range(int(start), int(end)):
                self.deadline.check()
                if self._active(mask) is False:
                    break
                self.vars[var] = np.uint32(i)
                self.block(body, mask)
        else:
            start = spread(start, self.lanes)
            trips = np.where(end > start, end - start, np.uint32(0))
            if mask is not None:
                trips = np.where(mask, trips, np.uint32(0))
            everyone = int(trips[mask].min()) if mask is not None and mask.any() else int(trips.min())
            for k in range(int(trips.max())):
                self.deadline.check()
                sub = mask if k < everyone else _normalise(trips > k)
                if self._active(sub) is False:
                    break
                self.vars[var] = start + np.uint32(k)
                self.block(body, sub)
        self.vars.pop(var, None)

    def finish(self, mask: np.ndarray | None) -> None:
        """A ``return_``: the lanes in ``mask`` stop."""
        keep = np.zeros(self.lanes, bool) if mask is None else ~mask
        self.alive = keep if self.alive is None else self.alive & keep


def _normalise(mask: np.ndarray) -> np.ndarray | Literal[False] | None:
    """None when every lane is set, False when none is, else the mask."""
    if mask.all():
        return None
    return mask if mask.any() else False
