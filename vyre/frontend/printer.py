"""``to_python(program)``: any ``Program`` as the text of an equivalent ``@vyre.kernel`` function.

Lowering the printed text (``vyre.frontend.kernel_from_source``) gives back a structurally equal
program, which a CI test checks on the random program generator's output. Every literal is
printed with its type (``vyre.u32(7)``), every operation parenthesised, names that are not
Python identifiers are renamed and listed in the decorator's ``names=``, bindings that differ
from the parameter position in ``bindings=``.
"""

from __future__ import annotations

import keyword
import math
import unicodedata

from vyre.frontend.annotations import TYPE_NAMES
from vyre.ir.expr import AtomicOp, Expr, dtype_of, literal_value, name_of
from vyre.ir.node import Assign, Barrier, Block, If, Let, Loop, Node, Region, Return, Store
from vyre.ir.op import Op
from vyre.ir.program import Access, Program
from vyre.ir.types import DataType
from vyre.ir.walk import iter_nodes, iter_subexprs

#: names the printed text itself uses, so program names must not take them
_RESERVED = frozenset({"vyre", "len", "range", "min", "max", "abs"})
#: infix op -> (operator, Python precedence); operands are parenthesised only where Python needs it
_INFIX = {
    "add": ("+", 10), "sub": ("-", 10), "mul": ("*", 11), "div": ("/", 11), "rem": ("%", 11),
    "bitand": ("&", 8), "bitor": ("|", 6), "bitxor": ("^", 7), "shl": ("<<", 9), "shr": (">>", 9),
    "eq": ("==", 5), "ne": ("!=", 5), "lt": ("<", 5), "gt": (">", 5), "le": ("<=", 5), "ge": (">=", 5),
    "and_": ("and", 3), "or_": ("or", 2),
}
_PREFIX = {"neg": ("-", 12), "bitnot": ("~", 12), "not_": ("not ", 4)}
_COMPARE_PREC, _TERNARY_PREC, _ATOM = 5, 1, 14
_IDS = {"invocation_id": "gid", "workgroup_id": "wid", "local_id": "lid"}
_ACCESS = {Access.READ: "In", Access.READ_WRITE: "InOut", Access.OUTPUT: "Out", Access.UNIFORM: "Uniform"}


def to_python(program: Program) -> str:
    """The source of a ``@vyre.kernel`` function whose program equals ``program``; a program nested
    deeper than the validator allows is a ``ValidationError`` (``nesting_too_deep``), as for ``to_text``."""
    from vyre.driver.errors import Finding, ValidationError
    from vyre.ir.shape import MAX_DEPTH, deeper_than

    if deeper_than(program.body, MAX_DEPTH):
        raise ValidationError([Finding("nesting_too_deep", f"the program nests deeper than {MAX_DEPTH} levels",
                                       "run vyre.validate(program) and correct the findings")])
    return _Printer(program).text()


def type_name(dtype: DataType) -> str:
    return f"vyre.{TYPE_NAMES[dtype].name}"


def _is_plain_identifier(name: str) -> bool:
    return (name.isidentifier() and not keyword.iskeyword(name) and name not in _RESERVED
            and unicodedata.normalize("NFKC", name) == name)


class _Printer:
    def __init__(self, program: Program) -> None:
        self.program = program
        self.renamed: dict[str, str] = {}  # Python identifier -> IR name
        self.buffer_ids: dict[str, str] = {}
        self.var_ids: dict[str, str] = {}
        self._taken: set[str] = set()
        for b in program.buffers:
            self.buffer_ids[b.name] = self._identifier(b.name)
        for node in iter_nodes(program.body):
            name = node.name if isinstance(node, Let) else node.var if isinstance(node, Loop) else None
            if name is not None and name not in self.var_ids:
                self.var_ids[name] = self._identifier(name)

    def _identifier(self, name: str) -> str:
        ident = name if _is_plain_identifier(name) and name not in self._taken else None
        if ident is None:
            k = len(self.renamed)
            while f"_n{k}" in self._taken or f"_n{k}" in self._all_names():
                k += 1
            ident = f"_n{k}"
            self.renamed[ident] = name
        self._taken.add(ident)
        return ident

    def _all_names(self) -> set[str]:
        names = {b.name for b in self.program.buffers}
        for node in iter_nodes(self.program.body):
            if isinstance(node, (Let, Assign)):
                names.add(node.name)
            elif isinstance(node, Loop):
                names.add(node.var)
        return names

    # ---- the function ---------------------------------------------------------------------------------
    def text(self) -> str:
        p = self.program
        bound = [b for b in p.buffers if not b.is_workgroup]
        shared = [b for b in p.buffers if b.is_workgroup]
        if p.buffers[: len(bound)] != tuple(bound):
            raise ValueError("workgroup buffers declared before bound buffers cannot be printed as a kernel. "
                             "Fix: declare workgroup buffers last.")
        params = []
        bindings = {}
        for position, b in enumerate(bound):
            ident = self.buffer_ids[b.name]
            count = f", {b.count}" if b.count or b.access is Access.UNIFORM else ""
            params.append(f"{ident}: vyre.{_ACCESS[b.access]}[{type_name(b.dtype)}{count}]")
            if b.binding != position:
                bindings[ident] = b.binding
        options = [f"workgroup_size={tuple(p.workgroup_size)!r}", f"name={p.name!r}"]
        if self.renamed:
            options.append(f"names={self.renamed!r}")
        if bindings:
            options.append(f"bindings={bindings!r}")
        fn = p.name if p.name is not None and _is_plain_identifier(p.name) else "kernel"
        lines = ["import vyre", "", "", f"@vyre.kernel({', '.join(options)})", f"def {fn}({', '.join(params)}):"]
        for b in shared:
            lines.append(f"    {self.buffer_ids[b.name]} = vyre.shared({type_name(b.dtype)}, {b.count})")
        body = self.body(p.body, 1)
        lines += body if body or shared else ["    pass"]
        return "\n".join(lines) + "\n"

    def body(self, nodes: tuple[Node, ...], depth: int) -> list[str]:
        out: list[str] = []
        for node in nodes:
            out += self.statement(node, "    " * depth, depth)
        return out

    def block(self, nodes: tuple[Node, ...], depth: int) -> list[str]:
        return self.body(nodes, depth) or ["    " * depth + "pass"]

    def statement(self, node: Node, pad: str, depth: int) -> list[str]:
        if isinstance(node, (Let, Assign)):
            return [f"{pad}{self.var_ids[node.name]} = {self.expr(node.value)}"]
        if isinstance(node, Store):
            return [f"{pad}{self.buffer_ids[node.buffer]}[{self.expr(node.index)}] = {self.expr(node.value)}"]
        if isinstance(node, If):
            lines = [f"{pad}if {self.expr(node.cond)}:", *self.block(node.then, depth + 1)]
            if node.otherwise:
                lines += [f"{pad}else:", *self.block(node.otherwise, depth + 1)]
            return lines
        if isinstance(node, Loop):
            head = f"{pad}for {self.var_ids[node.var]} in range({self.expr(node.start)}, {self.expr(node.end)}):"
            return [head, *self.block(node.body, depth + 1)]
        if isinstance(node, Barrier):
            return [f"{pad}vyre.barrier()"]
        if isinstance(node, Block):
            return [f"{pad}with vyre.block():", *self.block(node.body, depth + 1)]
        if isinstance(node, Region):
            return [f"{pad}with vyre.region({node.generator!r}):", *self.block(node.body, depth + 1)]
        if isinstance(node, Return):
            return [f"{pad}return"]
        raise ValueError(f"cannot print statement {node!r}. Fix: build statements with the Node constructors.")

    # ---- expressions ------------------------------------------------------------------------------------
    def expr(self, e: Expr) -> str:
        return self._expr(e)[0]

    def _expr(self, e: Expr) -> tuple[str, int]:
        """The text of ``e`` and its Python precedence."""
        op = e.op
        if op in _LAZY_IN_PYTHON and _has_atomic(e.args[1:]):  # `a if c else b`, `and`, `or` refuse effects there
            return f"vyre.{op}({', '.join(self.expr(a) for a in e.args)})", _ATOM
        if op in _INFIX:
            sym, prec = _INFIX[op]
            strict = prec == _COMPARE_PREC  # comparisons chain in Python: parenthesise both sides
            left = self._operand(e.args[0], prec + 1 if strict else prec)
            return f"{left} {sym} {self._operand(e.args[1], prec + 1)}", prec
        if op in _PREFIX:
            sym, prec = _PREFIX[op]
            return f"{sym}{self._operand(e.args[0], prec)}", prec
        if op == Op.SELECT:
            c, a, b = (self._operand(x, _TERNARY_PREC + 1) for x in e.args)
            return f"{a} if {c} else {b}", _TERNARY_PREC
        return self._atom(e), _ATOM

    def _operand(self, e: Expr, min_prec: int) -> str:
        text, prec = self._expr(e)
        return text if prec >= min_prec else f"({text})"

    def _atom(self, e: Expr) -> str:
        op, args = e.op, [self.expr(a) for a in e.args]
        if op == Op.LIT:
            return _literal(e)
        if op == Op.VAR:
            return self.var_ids.get(name_of(e), name_of(e))
        if op == Op.LOAD:
            return f"{self.buffer_ids.get(name_of(e), name_of(e))}[{args[0]}]"
        if op == Op.BUF_LEN:
            return f"len({self.buffer_ids.get(name_of(e), name_of(e))})"
        if op in _IDS:
            return f"vyre.{_IDS[op]}({e.value})"
        if op == Op.CAST:
            return f"{type_name(dtype_of(e))}({args[0]})"
        if op == Op.ATOMIC:
            if e.value.base is AtomicOp.COMPARE_EXCHANGE:
                args = [args[0], args[2], args[1]]  # vyre.atomic_compare_exchange(buf, i, expected, value)
            return f"vyre.atomic_{e.value.value}({', '.join([self.buffer_ids.get(name_of(e), name_of(e)), *args])})"
        if op == Op.CALL:
            return f"vyre.call({', '.join([repr(e.name), *args])})"
        return f"vyre.{op}({', '.join(args)})"


def _literal(e: Expr) -> str:
    value = literal_value(e)
    if e.dtype is DataType.BOOL:
        return repr(value)
    if e.dtype in (DataType.F32, DataType.F64):
        name = type_name(dtype_of(e))
        if math.isfinite(value):
            return f"{name}({value!r})"
        return f"{name}_from_bits({e.value:#0{2 + 2 * e.dtype.size}x})"
    return f"{type_name(dtype_of(e))}({value})"


__all__ = ["to_python"]


#: ops printed as Python constructs that evaluate an operand after the first only sometimes
_LAZY_IN_PYTHON = frozenset({"select", "and_", "or_"})


def _has_atomic(exprs: tuple[Expr, ...]) -> bool:
    """Whether an atomic occurs in ``exprs``: printed lazily, the front end would refuse it."""
    return any(sub.op == Op.ATOMIC for e in exprs for sub in iter_subexprs(e))
