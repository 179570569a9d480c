"""A ``@vyre.func`` applied to each element where a library kernel loads it (the fused forms).

``element_transform(func, in_type)`` lowers ``func`` once through the front end, as a kernel
calling it on one element of ``in_type`` would, and keeps its statements and result: its result
type is the type the caller accumulates in. ``transformed(program, t)`` rewrites a library
kernel so that every load of its input buffer ``x`` is followed by the function's statements
(hoisted before the statement that uses the load, names made unique per load) and the load's
value is replaced by the function's result; the rest of the program is untouched, so the
un-transformed kernels stay exactly what they were. See docs/lib.md, "Fused forms".
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass

from vyre.driver.errors import InvalidProgram, ValidationError
from vyre.frontend import annotations as kernel_types  # the names a kernel annotation uses (vyre.In, vyre.u32, ...)
from vyre.frontend.kernel import Func
from vyre.frontend.lower import Lowering, Options
from vyre.frontend.names import chain_lookup
from vyre.frontend.source import SourceFile
from vyre.ir import DataType, Expr, Node, Program
from vyre.ir.node import Assign, Barrier, Block, If, Let, Loop, Region, Return, Store
from vyre.ir.op import ID_OPS, SUBGROUP_OPS, Op
from vyre.ir.validate import findings
from vyre.ir.walk import iter_all_exprs, iter_nodes
from vyre.lib.monoid import SCAN_TYPES

INPUT = "x"  # the buffer the transformed kernels read their elements from
_ARG, _RESULT = "xf_arg", "xf_result"
_PROBE = """
def transform_probe(x: vyre.In[vyre.{name}]):
    xf_arg = x[0]
    xf_result = fn(xf_arg)
"""
_IMPURE = frozenset({Op.ATOMIC, Op.LOAD, Op.BUF_LEN, *ID_OPS, *SUBGROUP_OPS})


@dataclass(frozen=True)
class Transform:
    """A function of the loaded element: ``body`` binds ``xf_arg`` (the element) and computes
    ``result`` (of ``out_type``). ``name`` (a ``@vyre.func``'s name) goes into program names."""

    name: str
    in_type: DataType
    out_type: DataType
    body: tuple[Node, ...]
    result: Expr
    func: Func | None = None  # the helper it was lowered from (so each helper is its own transform)

    def at(self, index: Expr, site: int) -> tuple[list[Node], Expr]:
        """The statements applying the function to ``x[index]`` (names suffixed by ``site``) and its value."""
        declared = {n.name for n in iter_nodes(self.body) if isinstance(n, Let)}
        declared |= {n.var for n in iter_nodes(self.body) if isinstance(n, Loop)}
        rename = {name: f"xf{site}_{name}" for name in declared | {_ARG}}

        def expr(e: Expr) -> Expr:
            if e.op is Op.VAR and e.name in rename:
                return Expr.var(rename[e.name])
            return _with_args(e, tuple(map(expr, e.args)))

        nodes = [Node.let(rename[_ARG], Expr.load(INPUT, index))]
        nodes += [_renamed(n, expr, rename) for n in self.body]
        return nodes, expr(self.result)


def _with_args(e: Expr, args: tuple[Expr, ...]) -> Expr:
    return e if args == e.args else dataclasses.replace(e, args=args)


def _renamed(node: Node, expr: Callable[[Expr], Expr], rename: dict[str, str]) -> Node:
    return _rebuild(node, expr, lambda body: [_renamed(s, expr, rename) for s in body], rename)


def _rebuild(node: Node, expr: Callable[[Expr], Expr], body: Callable[[tuple[Node, ...]], list[Node]],
             rename: dict[str, str] | None = None) -> Node:
    """``node`` with ``expr`` applied to its own expressions, ``body`` to its nested statements
    and (with ``rename``) its declared and assigned names renamed."""
    names = rename or {}
    if isinstance(node, Let):
        return Node.let(names.get(node.name, node.name), expr(node.value))
    if isinstance(node, Assign):
        return Node.assign(names.get(node.name, node.name), expr(node.value))
    if isinstance(node, Store):
        return dataclasses.replace(node, index=expr(node.index), value=expr(node.value))
    if isinstance(node, If):
        return dataclasses.replace(node, cond=expr(node.cond), then=tuple(body(node.then)),
                                   otherwise=tuple(body(node.otherwise)))
    if isinstance(node, Loop):
        return dataclasses.replace(node, var=names.get(node.var, node.var), start=expr(node.start),
                                   end=expr(node.end), body=tuple(body(node.body)))
    if isinstance(node, (Block, Region)):
        return dataclasses.replace(node, body=tuple(body(node.body)))
    return node


def element_transform(func: object, in_type: DataType) -> Transform:
    """``func`` (a ``@vyre.func`` of one argument) lowered for elements of ``in_type``, or
    ``InvalidProgram`` saying what to change."""
    if not isinstance(func, Func):
        raise InvalidProgram(f"the transform {func!r} is not a @vyre.func helper",
                             "decorate a module-level function of one argument with @vyre.func and pass it.")
    return _lowered(func, in_type)


@functools.cache
def _lowered(func: Func, in_type: DataType) -> Transform:
    """``func`` lowered once per input type (each lowering parses the helper's file once)."""
    _check_arity(func)
    fndef = ast.parse(_PROBE.format(name=in_type.value)).body[0]
    assert isinstance(fndef, ast.FunctionDef)
    lowering = Lowering(SourceFile("<vyre.lib transform>"), fndef, chain_lookup({"vyre": kernel_types, "fn": func}),
                        Options((1, 1, 1), "transform_probe"))
    try:
        program = lowering.program()
    except ValidationError as exc:
        raise InvalidProgram(f"the transform {func.name}() does not lower for {in_type.value} elements: {exc}",
                             f"make {func.name}() take one {in_type.value} value and return a value "
                             "(docs/kernels.md lists the subset).") from None
    out_type = lowering.frame.types[_RESULT]
    if out_type not in SCAN_TYPES:
        names = ", ".join(t.value for t in SCAN_TYPES)
        raise InvalidProgram(f"the transform {func.name}() returns {out_type.value}, which vyre.lib cannot "
                             f"accumulate", f"return one of {names}: cast the result, e.g. vyre.u32(...).")
    last = program.body[-1]
    if isinstance(last, Let) and last.name == _RESULT:  # without binding the probe's element and naming the result
        body, result = program.body[1:-1], last.value
    else:  # the helper returned its own variable, which the result name took over
        found = lowering.frame.find(_RESULT)
        assert found is not None
        body, result = program.body[1:], Expr.var(found.ir)
    _check_pure(func, body, result)
    return Transform(func.name, in_type, out_type, tuple(body), result, func)


def element(name: str, in_type: DataType, out_type: DataType, result: Callable[[Expr], Expr]) -> Transform:
    """A transform built in the IR: ``result(element)`` (library-internal, may read ``params``)."""
    return Transform(name, in_type, out_type, (), result(Expr.var(_ARG)))


def _check_arity(func: Func) -> None:
    _, fndef = func.parsed()
    params = [*fndef.args.posonlyargs, *fndef.args.args]
    if len(params) != 1 or fndef.args.vararg or fndef.args.kwarg or fndef.args.kwonlyargs:
        raise InvalidProgram(f"the transform {func.name}() takes {len(params)} parameters; it is applied to one "
                             "element at a time", f"give {func.name}() exactly one positional parameter.")


def _check_pure(func: Func, body: tuple[Node, ...], result: Expr) -> None:
    """Refuse what would make the transform depend on more than its element, or act: stores,
    barriers, returns, atomics, ids and subgroup operations."""
    effects = [n for n in iter_nodes(body) if isinstance(n, (Store, Barrier, Return))]
    exprs = [*iter_all_exprs(body), *iter_all_exprs((Node.let(_RESULT, result),))]
    impure = sorted({e.op.value for e in exprs if e.op in _IMPURE})
    if effects or impure:
        what = ", ".join([type(n).__name__.lower() for n in effects[:1]] + impure)
        raise InvalidProgram(f"the transform {func.name}() uses {what}: a transform must be a pure function "
                             "of its element", f"compute {func.name}()'s result from its argument alone "
                             "(no barriers, atomics, ids or subgroup operations).")


def transformed(program: Program, t: Transform) -> Program:
    """``program`` reading ``x`` as ``t.in_type`` elements, each passed through ``t`` where it is
    loaded (the function's statements go right before the statement holding the load)."""
    sites = itertools.count()

    def body(nodes: tuple[Node, ...]) -> list[Node]:
        out: list[Node] = []
        for node in nodes:
            hoisted: list[Node] = []

            def expr(e: Expr, hoisted: list[Node] = hoisted) -> Expr:
                args = tuple(expr(a) for a in e.args)
                if e.op is Op.LOAD and e.name == INPUT:
                    nodes_at, value = t.at(args[0], next(sites))
                    hoisted += nodes_at
                    return value
                return _with_args(e, args)

            rebuilt = _rebuild(node, expr, body)
            out += hoisted
            out.append(rebuilt)
        return out

    buffers = [dataclasses.replace(b, dtype=t.in_type) if b.name == INPUT else b for b in program.buffers]
    name = f"{program.name}_of_{t.in_type.value}_{t.name}"
    result = Program(buffers, program.workgroup_size, body(program.body), name=name)
    found = findings(result)
    if found:
        raise InvalidProgram(f"the transform {t.name}() does not fit the library kernel {program.name}: "
                             + "; ".join(str(f) for f in found[:3]),
                             f"simplify {t.name}() (fewer statements, no loops over large bounds).")
    return result


_FUSED: dict[tuple[int, Transform], tuple[Program, Program]] = {}


def fused(program: Program, t: Transform | None) -> Program:
    """``program`` itself without a transform, else ``transformed(program, t)``, made once per
    (program, transform) pair (the library's builders return one object per variant)."""
    if t is None:
        return program
    key = (id(program), t)
    entry = _FUSED.get(key)
    if entry is None:
        entry = _FUSED[key] = (program, transformed(program, t))  # holding program keeps its id unique
    return entry[1]
