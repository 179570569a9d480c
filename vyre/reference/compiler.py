"""Compiling a program once into nested closures that the oracle runs per dispatch.

Each expression becomes ``fn(run, mask) -> lanes`` and each statement ``fn(run, mask, declared)``:
what an op means, which buffer it names and which sub-expressions it evaluates (in the order of
docs/semantics.md) are looked up once per program, not once per evaluation. The closures call
the same lane functions as before (``scalar_ops``, ``Memory``, ``apply_atomic``, ``subgroups``),
so results are unchanged; only the tree walk is gone. ``compiled`` caches them per program.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from vyre.driver.errors import InvalidProgram
from vyre.ir.expand import expand_calls
from vyre.ir.expr import BINARY_OPS, ID_OPS, SUBGROUP_OPS, UNARY_OPS, Expr, dtype_of, name_of
from vyre.ir.node import Assign, Barrier, Block, If, Let, Loop, Node, Region, Return, Store
from vyre.ir.op import Op
from vyre.ir.program import Program
from vyre.ir.types import DataType
from vyre.ir.walk import iter_all_exprs, iter_nodes
from vyre.ops import get_op
from vyre.reference import scalar_ops, subgroups
from vyre.reference.atomics import apply_atomic
from vyre.reference.scalar_ops import LANE_DTYPE, Lanes, spread

if TYPE_CHECKING:
    from vyre.reference.interpreter import _Run

Mask = np.ndarray | None
ExprFn = Callable[["_Run", Mask], Lanes]
StmtFn = Callable[["_Run", Mask, list], None]
Body = tuple[StmtFn, ...]

_BINARY = {op: scalar_ops.BINARY[op] for op in BINARY_OPS}
_UNARY = {op: scalar_ops.UNARY[op] for op in UNARY_OPS}


class Compiled:
    """A program ready to run: its compiled body and the sizes that bound its chunks (``grid.chunks``)."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.body: Body = body(program.body)
        self.nodes = sum(1 for _ in iter_nodes(program.body)) + sum(1 for _ in iter_all_exprs(program.body))
        self.shared = sum(b.count * b.dtype.size for b in program.buffers if b.is_workgroup)
        self.storage = [(b, b.dtype.np_dtype) for b in program.buffers]


@lru_cache(maxsize=1024)
def compiled(program: Program) -> Compiled:
    """``program`` (already expanded: no composed calls) compiled once; equal programs share it."""
    return Compiled(program)


@lru_cache(maxsize=1024)
def has_calls(program: Program) -> bool:
    """Whether ``program`` calls any registered op (then it is expanded before every run: the
    registry may change between runs, so neither the expansion nor the lookup is kept here)."""
    return any(e.op == Op.CALL for e in iter_all_exprs(program.body))


def prepare(program: Program) -> Compiled:
    """``program`` with its composed calls expanded (``vyre.ir.expand``), compiled.

    The same program object is found by identity first (hashing a program hashes its buffers).
    """
    hit = _BY_IDENTITY.get(id(program))
    if hit is not None and hit[0] is program:
        return hit[1]
    result = compiled(expand_calls(program) if has_calls(program) else program)
    if not has_calls(program):  # an expansion may change with the registry: looked up each time
        if len(_BY_IDENTITY) >= _IDENTITY_ENTRIES:
            _BY_IDENTITY.clear()
        _BY_IDENTITY[id(program)] = (program, result)  # holding the program keeps its id unique
    return result


_IDENTITY_ENTRIES = 1024
_BY_IDENTITY: dict[int, tuple[Program, Compiled]] = {}


def literal(e: Expr) -> Lanes:
    """The numpy scalar of a literal expression."""
    if e.dtype is DataType.BOOL:
        return np.bool_(bool(e.value))
    dtype = dtype_of(e)
    return (np.uint64 if dtype.is_wide else np.uint32)(e.value).view(LANE_DTYPE[dtype])


# ---- expressions ---------------------------------------------------------------------------------
def expr(e: Expr) -> ExprFn:
    """The closure computing ``e``'s lane values for the lanes in ``mask`` (others: don't care)."""
    op = e.op
    if op in _BINARY:
        return _binary(_BINARY[op], expr(e.args[0]), expr(e.args[1]))
    if op in _UNARY:
        return _unary(_UNARY[op], expr(e.args[0]))
    make = _MAKERS.get(op)
    if make is None:
        return _raiser(InvalidProgram(f"unknown expression op {op!r}", "build expressions with Expr.*."))
    return make(e)


def _binary(fn: Callable[[Lanes, Lanes], Lanes], a: ExprFn, b: ExprFn) -> ExprFn:
    return lambda run, mask: fn(a(run, mask), b(run, mask))


def _unary(fn: Callable[[Lanes], Lanes], a: ExprFn) -> ExprFn:
    return lambda run, mask: fn(a(run, mask))


def _raiser(error: Exception) -> ExprFn:
    def fail(run: _Run, mask: Mask) -> Lanes:
        raise error
    return fail


def _var(e: Expr) -> ExprFn:
    name = name_of(e)
    return lambda run, mask: run.vars[name]


def _lit(e: Expr) -> ExprFn:
    value = literal(e)
    return lambda run, mask: value


def _load(e: Expr) -> ExprFn:
    name, index = name_of(e), expr(e.args[0])
    return lambda run, mask: run.memory[name].load(index(run, mask), mask)


def _select(e: Expr) -> ExprFn:
    cond, a, b = (expr(x) for x in e.args)

    def select(run: _Run, mask: Mask) -> Lanes:
        c = cond(run, mask)
        x = a(run, mask)
        return np.where(c, x, b(run, mask))
    return select


def _cast(e: Expr) -> ExprFn:
    target, a = dtype_of(e), expr(e.args[0])
    return lambda run, mask: scalar_ops.cast(target, a(run, mask))


def _fma(e: Expr) -> ExprFn:
    a, b, c = (expr(x) for x in e.args)

    def fma(run: _Run, mask: Mask) -> Lanes:
        x = a(run, mask)
        y = b(run, mask)
        return scalar_ops.fma(x, y, c(run, mask))
    return fma


def _buf_len(e: Expr) -> ExprFn:
    name = name_of(e)
    return lambda run, mask: np.uint32(run.memory[name].count)


def _grid_id(e: Expr) -> ExprFn:
    op, axis = e.op, e.value
    return lambda run, mask: getattr(run.grid, op)(axis)


def _atomic(e: Expr) -> ExprFn:
    name, op = name_of(e), e.value.base
    index, value = expr(e.args[0]), expr(e.args[1])
    expected = expr(e.args[2]) if len(e.args) == 3 else None

    def atomic(run: _Run, mask: Mask) -> Lanes:
        memory = run.memory[name]
        i = index(run, mask)
        v = value(run, mask)
        x = expected(run, mask) if expected is not None else None
        flat, ok = memory.address(spread(i, run.lanes), mask)
        if memory.journal is not None:
            memory.remember(flat[ok])
        return apply_atomic(memory.data, op, flat, ok, v, x)  # ordering: the oracle is sequential
    return atomic


def _subgroup(e: Expr) -> ExprFn:
    op = e.op
    if op == Op.SUBGROUP_SIZE:
        size = np.uint32(subgroups.SUBGROUP)
        return lambda run, mask: size
    if op == Op.SUBGROUP_LOCAL_ID:
        return lambda run, mask: run.grid.subgroup_local_id()
    args = [expr(x) for x in e.args]
    lane_fn = {Op.SUBGROUP_BALLOT: subgroups.ballot, Op.SUBGROUP_SHUFFLE: subgroups.shuffle}.get(op, subgroups.add)

    def subgroup(run: _Run, mask: Mask) -> Lanes:
        if run.grid.per_group % subgroups.SUBGROUP:
            raise InvalidProgram(f"{op} needs workgroups of a multiple of {subgroups.SUBGROUP} invocations, "
                                 f"not {run.grid.workgroup_size}", "make the workgroup x-size a multiple of 32.")
        values = [a(run, mask) for a in args]
        return lane_fn(*values, mask, run.lanes)
    return subgroup


def _call(e: Expr) -> ExprFn:
    name, args = name_of(e), [expr(x) for x in e.args]

    def call(run: _Run, mask: Mask) -> Lanes:
        op = get_op(name)
        if op is None:
            raise InvalidProgram(f"op {name!r} is not registered", "install the op pack that provides it.")
        if op.expand is not None:  # execute() expanded every composed call
            raise InvalidProgram(f"composed op {name!r} reached the interpreter unexpanded",
                                 "run programs through vyre.reference.interpreter.execute, which expands them.")
        values = [spread(a(run, mask), run.lanes) for a in args]
        result = np.asarray(op.reference(*values))
        return result.astype(LANE_DTYPE[op.result_type], copy=False)
    return call


_MAKERS: dict[Op, Callable[[Expr], ExprFn]] = {
    Op.VAR: _var, Op.LIT: _lit, Op.LOAD: _load, Op.SELECT: _select, Op.CAST: _cast, Op.FMA: _fma,
    Op.BUF_LEN: _buf_len, Op.ATOMIC: _atomic, Op.CALL: _call, **{op: _grid_id for op in ID_OPS},
    **{op: _subgroup for op in SUBGROUP_OPS},
}


# ---- statements ----------------------------------------------------------------------------------
def body(nodes: tuple[Node, ...]) -> Body:
    """A statement list compiled (run it with ``_Run.block``)."""
    return tuple(statement(node) for node in nodes)


def statement(node: Node) -> StmtFn:
    """The closure running ``node`` for the lanes in ``mask``; it adds the names it declares to ``declared``."""
    make = _STATEMENTS.get(type(node))
    if make is None:
        error = InvalidProgram(f"unknown statement {node!r}", "build statements with Node.*.")

        def fail(run: _Run, mask: Mask, declared: list) -> None:
            raise error
        return fail
    return make(node)


def _let(node: Let) -> StmtFn:
    name, value = node.name, expr(node.value)

    def let(run: _Run, mask: Mask, declared: list) -> None:
        run.vars[name] = value(run, mask)
        declared.append(name)
    return let


def _assign(node: Assign) -> StmtFn:
    name, value = node.name, expr(node.value)

    def assign(run: _Run, mask: Mask, declared: list) -> None:
        v = value(run, mask)
        run.vars[name] = v if mask is None else np.where(mask, v, run.vars[name])
    return assign


def _store(node: Store) -> StmtFn:
    name, index, value = node.buffer, expr(node.index), expr(node.value)

    def store(run: _Run, mask: Mask, declared: list) -> None:
        i = index(run, mask)
        v = value(run, mask)
        run.memory[name].store(i, v, mask, run.lanes)
    return store


def _if(node: If) -> StmtFn:
    cond, then, otherwise = expr(node.cond), body(node.then), body(node.otherwise)
    return lambda run, mask, declared: run.branch(cond(run, mask), then, otherwise, mask)


def _loop(node: Loop) -> StmtFn:
    name, start, end, inner = node.var, expr(node.start), expr(node.end), body(node.body)

    def loop(run: _Run, mask: Mask, declared: list) -> None:
        first = start(run, mask)
        run.loop(name, first, end(run, mask), inner, mask)
    return loop


def _block(node: Block | Region) -> StmtFn:
    inner = body(node.body)
    return lambda run, mask, declared: run.block(inner, mask)


def _return(node: Return) -> StmtFn:
    return lambda run, mask, declared: run.finish(mask)


def _barrier(node: Barrier) -> StmtFn:
    return lambda run, mask, declared: None  # lockstep: a barrier orders nothing more


_STATEMENTS: dict[type, Callable] = {
    Let: _let, Assign: _assign, Store: _store, If: _if, Loop: _loop, Block: _block, Region: _block,
    Return: _return, Barrier: _barrier,
}
