"""Call-by-value expansion of composed ops: the one pass that replaces ``Expr.call`` by IR.

A composed op (``OpDef(expand=...)``) is expanded where it is called: each argument is evaluated
exactly once, left to right, and bound with a ``let`` under a fresh name, then the op's
expansion is built from those names. An argument the expansion uses twice is still evaluated
once; one it never uses is still evaluated. Because a ``let`` is a statement, calls nested in an
expression (and in ``if`` conditions, loop bounds, store indices and values, atomic operands)
are hoisted in front of their statement; so that evaluation order stays left to right, every
operand evaluated before a hoisted call is bound to a fresh ``let`` first. Calls of primitive
ops (``OpDef(reference=...)``) stay calls: backends evaluate their arguments in order themselves.

``expand_calls(program)`` returns the program unchanged when it calls no composed op. The
oracle (``vyre.reference.interpreter``) and the PTX emitter (``vyre_cuda._codegen``) run the
expanded program; nothing else substitutes argument expressions. The expanded program is
validated again, so what an expansion brings in (a wrong type, subgroup ops under varying
control flow, ...) is a ``ValidationError`` too.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from vyre.driver.errors import Finding, ValidationError
from vyre.ir.expr import Expr, name_of
from vyre.ir.node import Assign, Block, If, Let, Loop, Node, Region, Store
from vyre.ir.op import Op
from vyre.ir.program import Program
from vyre.ir.shape import MAX_NODES
from vyre.ir.typing import ExprTyper, IRTypeError
from vyre.ir.walk import iter_all_exprs, iter_nodes, iter_subexprs
from vyre.ops import get_op

#: most composed calls nested inside one another's expansions (a recursive op hits this)
MAX_EXPANSION_DEPTH = 32
#: operands that need no binding to keep their place in the evaluation order
_CONSTANT_OPS = frozenset({Op.LIT, Op.BUF_LEN, Op.INVOCATION_ID, Op.WORKGROUP_ID, Op.LOCAL_ID, Op.SUBGROUP_LOCAL_ID,
                           Op.SUBGROUP_SIZE})
_FIX = "make the op's expand function build valid IR of its result type from its argument expressions"


def expand_calls(program: Program) -> Program:
    """``program`` with every call of a composed op expanded, call by value (see the module docstring).

    Expects a validated program; raises ``ValidationError`` when an expansion fails (it raises,
    returns something other than an ``Expr`` of the op's result type, recurses too deeply or
    grows the program past the size limit) or the expanded program breaks a rule.
    """
    if not any(_is_composed_call(e) for e in iter_all_exprs(program.body)):
        return program
    return _expand(program)


@lru_cache(maxsize=256)
def _expand(program: Program) -> Program:
    expanded = Program(program.buffers, program.workgroup_size, _Expander(program).body(program.body, "body"),
                       program.name)
    from vyre.ir.validate import findings

    found = findings(expanded)
    if found:
        raise ValidationError([Finding(f.code, f"after expanding composed ops: {f.message}", f.fix, f.path)
                               for f in found])
    return expanded


def _is_composed_call(e: Expr) -> bool:
    if e.op != Op.CALL:
        return False
    op = get_op(name_of(e))
    return op is None or op.expand is not None  # an unknown op is reported by the expander


def _has_composed_call(e: Expr) -> bool:
    return any(_is_composed_call(x) for x in iter_subexprs(e))


class _Expander:
    """Rewrites one program's statements; holds the fresh-name counter and the size budget."""

    def __init__(self, program: Program) -> None:
        self.typer = ExprTyper(program)
        self.taken = _names(program)
        self.counter = 0
        self.budget = MAX_NODES
        self.path = "body"

    def fresh(self, hint: str) -> str:
        """A variable name used nowhere in the program (nor by an earlier ``fresh``)."""
        while True:
            self.counter += 1
            name = f"__{hint}{self.counter}"
            if name not in self.taken:
                self.taken.add(name)
                return name

    def fail(self, code: str, message: str, fix: str = _FIX) -> ValidationError:
        return ValidationError([Finding(code, message, fix, self.path)])

    # ---- statements ---------------------------------------------------------------------------
    def body(self, nodes: tuple[Node, ...], path: str) -> tuple[Node, ...]:
        out: list[Node] = []
        for i, node in enumerate(nodes):
            out += self.statement(node, f"{path}[{i}]")
        return tuple(out)

    def statement(self, node: Node, path: str) -> list[Node]:
        self.path = path
        if isinstance(node, (Let, Assign)):
            pre, (value,) = self.operands((node.value,), 0)
            return [*pre, type(node)(node.name, value)]
        if isinstance(node, Store):
            pre, (index, value) = self.operands((node.index, node.value), 0)
            return [*pre, Store(node.buffer, index, value)]
        if isinstance(node, If):
            pre, (cond,) = self.operands((node.cond,), 0)
            then, otherwise = self.body(node.then, path + ".then"), self.body(node.otherwise, path + ".otherwise")
            return [*pre, If(cond, then, otherwise)]
        if isinstance(node, Loop):
            pre, (start, end) = self.operands((node.start, node.end), 0)
            return [*pre, Loop(node.var, start, end, self.body(node.body, path + ".body"))]
        if isinstance(node, Block):
            return [Block(self.body(node.body, path + ".body"))]
        if isinstance(node, Region):
            return [Region(node.generator, self.body(node.body, path + ".body"))]
        return [node]

    # ---- expressions ----------------------------------------------------------------------------
    def operands(self, exprs: Iterable[Expr], depth: int) -> tuple[list[Node], list[Expr]]:
        """Expand operands evaluated left to right: the ``let``s to run first and the operands left.

        An operand evaluated before one whose expansion needs ``let``s is bound to a ``let`` of
        its own, in order, unless it is a constant or a variable (nothing in an expression can
        change either)."""
        done = [self.expr(e, depth) for e in exprs]
        pre: list[Node] = []
        out: list[Expr] = []
        for i, (lets, e) in enumerate(done):
            pre += lets
            if any(later for later, _ in done[i + 1:]) and e.op != Op.VAR and e.op not in _CONSTANT_OPS:
                name = self.fresh("t")
                pre.append(Let(name, e))
                e = Expr.var(name)
            out.append(e)
        return pre, out

    def expr(self, e: Expr, depth: int) -> tuple[list[Node], Expr]:
        """``e`` with its composed calls expanded: the ``let``s to run first, and what is left."""
        if not _has_composed_call(e):
            return [], e
        pre, args = self.operands(e.args, depth)
        if not _is_composed_call(e):
            return pre, Expr(e.op, tuple(args), e.dtype, e.value, e.name)
        bound = []
        for arg in args:  # each argument once, left to right, under a fresh name
            if arg.op == Op.LIT:
                bound.append(arg)
                continue
            name = self.fresh("arg")
            pre.append(Let(name, arg))
            bound.append(Expr.var(name))
        lets, result = self.expr(self.instantiate(name_of(e), bound, depth), depth + 1)
        return pre + lets, result

    def instantiate(self, op_id: str, args: list[Expr], depth: int) -> Expr:
        """The op's expansion over ``args`` (literals and fresh variables), checked."""
        op = get_op(op_id)
        if op is None:
            raise self.fail("unknown_op", f"op {op_id!r} is not registered",
                            "install the op pack that provides it, or check the op id")
        if depth >= MAX_EXPANSION_DEPTH:
            raise self.fail("expansion_too_deep", f"op {op_id!r} expands through more than {MAX_EXPANSION_DEPTH} "
                            "nested composed calls (is it recursive?)", "compose the op without calling itself")
        try:
            body = op.expand(*args)
        except Exception as exc:  # noqa: BLE001 - an op pack's bug becomes a finding naming the op
            raise self.fail("bad_expansion", f"op {op_id!r}: expand raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(body, Expr):
            raise self.fail("bad_expansion", f"op {op_id!r}: expand returned {type(body).__name__}, not an Expr")
        scope = {name_of(a): t for a, t in zip(args, op.arg_types) if a.op == Op.VAR}
        try:
            got = self.typer.type_of(body, scope)
        except IRTypeError as err:
            raise self.fail("bad_expansion",
                            f"op {op_id!r}: its expansion is not valid: [{err.code}] {err.message}") from None
        if got is not op.result_type:
            raise self.fail("bad_expansion", f"op {op_id!r}: its expansion is {got.name}, the op declares "
                            f"{op.result_type.name}")
        self.budget -= sum(1 for _ in iter_subexprs(body))
        if self.budget < 0:
            raise self.fail("program_too_large", f"expanding composed ops makes more than {MAX_NODES} expression "
                            "nodes", "split the work into several programs, or use ops that expand to less IR")
        return body


def _names(program: Program) -> set[str]:
    """Every variable name the program declares or reads."""
    names = {name_of(e) for e in iter_all_exprs(program.body) if e.op == Op.VAR}
    for node in iter_nodes(program.body):
        if isinstance(node, (Let, Assign)):
            names.add(node.name)
        elif isinstance(node, Loop):
            names.add(node.var)
    return names
