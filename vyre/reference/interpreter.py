"""The CPU reference oracle: runs a validated program over a whole grid, vectorised with numpy.

Every statement runs for all invocations ("lanes") at once, in lockstep, so a barrier is only
an ordering point that lockstep already gives. Divergent control flow runs under a lane mask;
``return_`` clears lanes from the ``alive`` mask. A uniform value (a literal, a buffer length,
a loop counter with uniform bounds) stays a numpy scalar until something needs it per lane.
See docs/semantics.md for what every operation means.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from vyre.driver.errors import InvalidProgram
from vyre.ir.expand import expand_calls
from vyre.ir.expr import BINARY_OPS, UNARY_OPS, Expr
from vyre.ir.node import Assign, Barrier, Block, If, Let, Loop, Node, Region, Return, Store
from vyre.ir.program import Program
from vyre.ir.types import DataType
from vyre.ops import get_op
from vyre.reference import scalar_ops, subgroups
from vyre.reference.atomics import apply_atomic
from vyre.reference.grid import Grid, chunks
from vyre.reference.limits import NO_DEADLINE, Deadline
from vyre.reference.memory import Memory
from vyre.reference.scalar_ops import LANE_DTYPE, Lanes


def execute(
    program: Program,
    arrays: dict[str, np.ndarray],
    grid: tuple[int, int, int],
    workgroup_size: tuple[int, int, int] | None = None,
    deadline: Deadline = NO_DEADLINE,
) -> None:
    """Run ``program`` over ``grid`` workgroups, mutating ``arrays`` (one per non-workgroup buffer).

    ``arrays`` are 1-D, in each buffer's storage dtype (``decl.dtype.np_dtype``); their lengths
    are the run-time element counts. ``workgroup_size`` overrides the program's. Workgroups run in
    chunks of bounded size (``vyre.reference.grid.chunks``); ``deadline`` is checked between
    statements and loop iterations. Calls of composed ops run call by value
    (``vyre.ir.expand.expand_calls``).
    """
    program = expand_calls(program)
    for ids in chunks(program, grid, workgroup_size or program.workgroup_size):
        run = _Run(program, arrays, ids, deadline)
        if run.lanes:
            with np.errstate(all="ignore"):
                run.block(program.body, None)


@lru_cache(maxsize=4096)
def literal(e: Expr) -> Lanes:
    """The numpy scalar of a literal expression."""
    bits = np.uint32(e.value)
    if e.dtype is DataType.BOOL:
        return np.bool_(bool(e.value))
    return bits.view(LANE_DTYPE[e.dtype])


class _Run:
    """State of one execution: memories, variables, the alive mask and the grid."""

    def __init__(self, program: Program, arrays: Mapping[str, np.ndarray], grid: Grid, deadline: Deadline) -> None:
        self.grid = grid
        self.deadline = deadline
        self.lanes = grid.lanes
        self.memory = {b.name: self._memory(b, arrays) for b in program.buffers}
        self.vars: dict[str, Lanes] = {}
        self.alive: np.ndarray | None = None

    def _memory(self, decl, arrays: Mapping[str, np.ndarray]) -> Memory:
        if decl.is_workgroup:
            data = np.zeros(self.grid.groups * decl.count, decl.dtype.np_dtype)
            base = self.grid.group_offset() * decl.count if self.lanes else None
            return Memory(decl.name, decl.dtype, data, decl.count, base)
        data = arrays.get(decl.name)
        if not isinstance(data, np.ndarray) or data.ndim != 1 or data.dtype != decl.dtype.np_dtype:
            raise InvalidProgram(f"the oracle needs a 1-D {decl.dtype.np_dtype} array for buffer {decl.name!r}",
                                 "prepare the arrays with vyre.driver.inputs.prepare_host_dispatch.")
        return Memory(decl.name, decl.dtype, data, data.shape[0])

    # ---- statements ----------------------------------------------------------------------------
    def _active(self, ctrl: np.ndarray | None) -> np.ndarray | None | bool:
        """Lanes that run the next statement: ``ctrl`` and alive; False when there are none."""
        if self.alive is None:
            return ctrl
        mask = self.alive if ctrl is None else ctrl & self.alive
        return _normalise(mask)

    def block(self, body: tuple[Node, ...], ctrl: np.ndarray | None) -> None:
        """Run a statement list under ``ctrl``; its lets end with it."""
        declared: list[str] = []
        for node in body:
            self.deadline.check()
            mask = self._active(ctrl)
            if mask is False:
                break
            self.statement(node, mask, declared)
        for name in declared:
            self.vars.pop(name, None)

    def statement(self, node: Node, mask: np.ndarray | None, declared: list[str]) -> None:
        if isinstance(node, Let):
            self.vars[node.name] = self.eval(node.value, mask)
            declared.append(node.name)
        elif isinstance(node, Assign):
            value = self.eval(node.value, mask)
            self.vars[node.name] = value if mask is None else np.where(mask, value, self.vars[node.name])
        elif isinstance(node, Store):
            index, value = self.eval(node.index, mask), self.eval(node.value, mask)
            self.memory[node.buffer].store(index, value, mask, self.lanes)
        elif isinstance(node, If):
            self._if(node, mask)
        elif isinstance(node, Loop):
            self._loop(node, mask)
        elif isinstance(node, (Block, Region)):
            self.block(node.body, mask)
        elif isinstance(node, Return):
            keep = np.zeros(self.lanes, bool) if mask is None else ~mask
            self.alive = keep if self.alive is None else self.alive & keep
        elif not isinstance(node, Barrier):  # lockstep: a barrier orders nothing more
            raise InvalidProgram(f"unknown statement {node!r}", "build statements with Node.*.")

    def _if(self, node: If, mask: np.ndarray | None) -> None:
        cond = self.eval(node.cond, mask)
        if np.ndim(cond) == 0:
            self.block(node.then if cond else node.otherwise, mask)
            return
        for body, taken in ((node.then, cond), (node.otherwise, ~cond)):
            sub = _normalise(taken if mask is None else mask & taken)
            if body and sub is not False:
                self.block(body, sub)

    def _loop(self, node: Loop, mask: np.ndarray | None) -> None:
        start, end = self.eval(node.start, mask), self.eval(node.end, mask)
        if np.ndim(start) == 0 and np.ndim(end) == 0:
            for i in range(int(start), int(end)):
                self.deadline.check()
                if self._active(mask) is False:
                    break
                self.vars[node.var] = np.uint32(i)
                self.block(node.body, mask)
        else:
            start = np.broadcast_to(start, (self.lanes,))
            trips = np.where(end > start, end - start, np.uint32(0))
            if mask is not None:
                trips = np.where(mask, trips, np.uint32(0))
            everyone = int(trips[mask].min()) if mask is not None and mask.any() else int(trips.min())
            for k in range(int(trips.max())):
                self.deadline.check()
                sub = mask if k < everyone else _normalise(trips > k)
                if self._active(sub) is False:
                    break
                self.vars[node.var] = start + np.uint32(k)
                self.block(node.body, sub)
        self.vars.pop(node.var, None)

    # ---- expressions ---------------------------------------------------------------------------
    def eval(self, e: Expr, mask: np.ndarray | None) -> Lanes:
        """Lane values of ``e`` for the lanes in ``mask`` (other lanes hold don't-care values)."""
        op = e.op
        if op in _BINARY:
            return _BINARY[op](self.eval(e.args[0], mask), self.eval(e.args[1], mask))
        if op in _UNARY:
            return _UNARY[op](self.eval(e.args[0], mask))
        if op == "var":
            return self.vars[e.name]
        if op == "lit":
            return literal(e)
        if op == "load":
            return self.memory[e.name].load(self.eval(e.args[0], mask), mask)
        if op == "select":
            cond, a, b = (self.eval(x, mask) for x in e.args)
            return np.where(cond, a, b)
        if op == "cast":
            return scalar_ops.cast(e.dtype, self.eval(e.args[0], mask))
        if op == "fma":
            return scalar_ops.fma(*(self.eval(x, mask) for x in e.args))
        if op == "buf_len":
            return np.uint32(self.memory[e.name].count)
        if op in ("invocation_id", "workgroup_id", "local_id"):
            return getattr(self.grid, op)(e.value)
        if op == "atomic":
            return self._atomic(e, mask)
        if op.startswith("subgroup_"):
            return self._subgroup(e, mask)
        if op == "call":
            return self._call(e, mask)
        raise InvalidProgram(f"unknown expression op {op!r}", "build expressions with Expr.*.")

    def _atomic(self, e: Expr, mask: np.ndarray | None) -> Lanes:
        memory = self.memory[e.name]
        index, value = self.eval(e.args[0], mask), self.eval(e.args[1], mask)
        expected = self.eval(e.args[2], mask) if len(e.args) == 3 else None
        flat, ok = memory.address(np.broadcast_to(index, (self.lanes,)), mask)
        return apply_atomic(memory.data, e.value.base, flat, ok, value, expected)  # ordering: the oracle is sequential

    def _subgroup(self, e: Expr, mask: np.ndarray | None) -> Lanes:
        op = e.op
        if op == "subgroup_size":
            return np.uint32(subgroups.SUBGROUP)
        if op == "subgroup_local_id":
            return self.grid.subgroup_local_id()
        if self.grid.per_group % subgroups.SUBGROUP:
            raise InvalidProgram(f"{op} needs workgroups of a multiple of {subgroups.SUBGROUP} invocations, "
                                 f"not {self.grid.workgroup_size}", "make the workgroup x-size a multiple of 32.")
        args = [self.eval(x, mask) for x in e.args]
        if op == "subgroup_ballot":
            return subgroups.ballot(args[0], mask, self.lanes)
        if op == "subgroup_shuffle":
            return subgroups.shuffle(args[0], args[1], mask, self.lanes)
        return subgroups.add(args[0], mask, self.lanes)

    def _call(self, e: Expr, mask: np.ndarray | None) -> Lanes:
        op = get_op(e.name)
        if op is None:
            raise InvalidProgram(f"op {e.name!r} is not registered", "install the op pack that provides it.")
        if op.expand is not None:  # execute() expanded every composed call
            raise InvalidProgram(f"composed op {e.name!r} reached the interpreter unexpanded",
                                 "run programs through vyre.reference.interpreter.execute, which expands them.")
        args = [np.broadcast_to(self.eval(x, mask), (self.lanes,)) for x in e.args]
        result = np.asarray(op.reference(*args))
        return result.astype(LANE_DTYPE[op.result_type], copy=False)


def _normalise(mask: np.ndarray) -> np.ndarray | None | bool:
    """None when every lane is set, False when none is, else the mask."""
    if mask.all():
        return None
    return mask if mask.any() else False


_BINARY = {op: scalar_ops.BINARY[op] for op in BINARY_OPS}
_UNARY = {op: scalar_ops.UNARY[op] for op in UNARY_OPS}
