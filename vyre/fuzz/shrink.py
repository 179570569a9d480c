"""Shrink a failing program to a small one that still fails (greedy, validity-preserving)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from vyre.ir.expr import Expr
from vyre.ir.node import Assign, Barrier, Block, If, Let, Loop, Node, Region, Store
from vyre.ir.op import Op
from vyre.ir.program import Program
from vyre.ir.types import DataType

Predicate = Callable[[Program], bool]
#: a variable bound to an id usually indexes stores: a constant in its place would add a race
_ID_OPS = frozenset({Op.INVOCATION_ID, Op.LOCAL_ID, Op.WORKGROUP_ID})

_ZERO = {DataType.U32: Expr.u32(0), DataType.I32: Expr.i32(0), DataType.F32: Expr.f32(0.0),
         DataType.BOOL: Expr.bool(False), DataType.U64: Expr.u64(0), DataType.I64: Expr.i64(0),
         DataType.F64: Expr.f64(0.0)}


def _body_variants(body: tuple[Node, ...]) -> Iterator[tuple[Node, ...]]:
    """Smaller versions of a statement list: drop a statement, inline a branch, unroll a loop."""
    for i, node in enumerate(body):
        head, tail = body[:i], body[i + 1:]
        if not isinstance(node, Barrier):  # dropping a barrier could add a race, not shrink the bug
            yield head + tail
        if isinstance(node, If):
            yield head + (Block(node.then),) + tail
            if node.otherwise:
                yield head + (Block(node.otherwise),) + tail
        if isinstance(node, Loop):
            yield head + (Block((Let(node.var, node.start), *node.body)),) + tail
        if isinstance(node, (Block, Region)):
            yield head + node.body + tail
        for inner in _node_variants(node):
            yield head + (inner,) + tail


def _node_variants(node: Node) -> Iterator[Node]:
    """Versions of one statement with a smaller child body or expression."""
    if isinstance(node, If):
        for then in _body_variants(node.then):
            yield If(node.cond, then, node.otherwise)
        for other in _body_variants(node.otherwise):
            yield If(node.cond, node.then, other)
        for cond in _expr_variants(node.cond):
            yield If(cond, node.then, node.otherwise)
    elif isinstance(node, Loop):
        for body in _body_variants(node.body):
            yield Loop(node.var, node.start, node.end, body)
        for end in _expr_variants(node.end):
            yield Loop(node.var, node.start, end, node.body)
    elif isinstance(node, Block):
        for body in _body_variants(node.body):
            yield Block(body)
    elif isinstance(node, Region):
        for body in _body_variants(node.body):
            yield Region(node.generator, body)
    elif isinstance(node, (Let, Assign)) and node.value.op not in _ID_OPS:  # ids index stores: keep them
        for value in _expr_variants(node.value):
            yield type(node)(node.name, value)
    elif isinstance(node, Store):
        for value in _expr_variants(node.value):  # the index stays: a new index could add a race
            yield Store(node.buffer, node.index, value)


def _expr_variants(e: Expr) -> Iterator[Expr]:
    """Simpler expressions in place of ``e``: an operand, a zero literal, or a simpler operand."""
    if e.op == Op.LIT:
        return
    for arg in e.args:
        yield arg  # kept only when the types still check
    yield from _ZERO.values()
    for i, arg in enumerate(e.args):
        if i == 0 and e.op in (Op.LOAD, Op.ATOMIC):
            continue  # keep memory indices: a new index could add a race, not shrink the bug
        for smaller in _expr_variants(arg):
            yield Expr(e.op, e.args[:i] + (smaller,) + e.args[i + 1:], e.dtype, e.value, e.name)


def _is_valid(program: Program) -> bool:
    from vyre.driver.errors import ValidationError
    from vyre.ir.validate import validate

    try:
        validate(program)
    except ValidationError:
        return False
    return True


def shrink(program: Program, still_fails: Predicate, max_tries: int = 2000) -> Program:
    """Greedy reduction: accept any valid smaller variant for which ``still_fails`` holds."""
    tries = 0
    improved = True
    while improved and tries < max_tries:
        improved = False
        for body in _body_variants(program.body):
            candidate = Program(program.buffers, program.workgroup_size, body, program.name)
            if not _is_valid(candidate):
                continue
            tries += 1
            if still_fails(candidate):
                program, improved = candidate, True
                break
            if tries >= max_tries:
                break
    return program


def size(program: Program) -> int:
    """A rough size measure (statements + expression nodes) for reporting shrink progress."""
    from vyre.ir.walk import iter_all_exprs, iter_nodes

    return sum(1 for _ in iter_nodes(program.body)) + sum(1 for _ in iter_all_exprs(program.body))
