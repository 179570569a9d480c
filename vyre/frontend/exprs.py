"""Lowering Python expressions of a kernel body to typed ``Expr`` values.

``ExprLowering`` is the expression half of the front end (``lower.py`` holds the statements):
names, literals typed by context, operators, comparisons, ``a if c else b``, builtins
(``len min max abs``), casts and the ``vyre.*`` intrinsics. Each new node is typed at once with
the IR's own type rules, so a type error names the line that made it.
"""

from __future__ import annotations

import ast
import builtins
import numbers
from typing import Any

from vyre.driver.errors import ValidationError
from vyre.frontend.annotations import LITERAL_TYPES, ScalarType
from vyre.frontend.intrinsics import F32_OPERAND_OPS, Intrinsic
from vyre.frontend.names import short_text
from vyre.frontend.source import SourceFile, kernel_fix
from vyre.frontend.values import (
    BOOL,
    F32,
    U32,
    Buffer,
    Number,
    PyObject,
    Typed,
    Untyped,
    Value,
    int_text,
    number_expr,
    peer_type,
)
from vyre.ir.expr import AtomicOp, Expr, name_of
from vyre.ir.op import Op
from vyre.ir.program import Access, BufferDecl, Program
from vyre.ir.shape import MAX_DEPTH, MAX_NODES
from vyre.ir.types import DataType
from vyre.ir.typing import SHIFT_OPS, ExprTyper, IRTypeError
from vyre.ir.walk import iter_subexprs

_BINOPS = {
    ast.Add: Op.ADD, ast.Sub: Op.SUB, ast.Mult: Op.MUL, ast.Div: Op.DIV, ast.FloorDiv: Op.DIV, ast.Mod: Op.REM,
    ast.BitAnd: Op.BITAND, ast.BitOr: Op.BITOR, ast.BitXor: Op.BITXOR, ast.LShift: Op.SHL, ast.RShift: Op.SHR,
}
_COMPARES = {ast.Eq: Op.EQ, ast.NotEq: Op.NE, ast.Lt: Op.LT, ast.Gt: Op.GT, ast.LtE: Op.LE, ast.GtE: Op.GE}
_NO_OPERATOR = {
    ast.Pow: "`**` is not supported: multiply (x * x) or use vyre.exp2(y * vyre.log2(x))",
    ast.MatMult: "`@` is not supported: write the loop with `for k in range(n)`",
}
_UNSUPPORTED_EXPRS = {
    "Lambda": ("lambdas are not supported", "define a module-level helper with @vyre.func"),
    "NamedExpr": ("`:=` is not supported", "assign the value on its own line first"),
    "JoinedStr": ("strings are not supported in kernels", "kernels compute on numbers and True/False"),
    "List": ("lists are not supported in kernels", "use buffers (parameters or vyre.shared) for arrays"),
    "Tuple": ("tuples are not supported in kernels", "use one variable per value"),
    "Dict": ("dicts are not supported in kernels", "use buffers (parameters or vyre.shared) for tables"),
    "Set": ("sets are not supported in kernels", "use buffers (parameters or vyre.shared) for tables"),
    "ListComp": ("comprehensions are not supported", "write a `for k in range(n)` loop"),
    "GeneratorExp": ("generator expressions are not supported", "write a `for k in range(n)` loop"),
    "Starred": ("`*args` is not supported", "pass each argument by position"),
}
_BUILTIN_CASTS = {"int": "vyre.i32(x) or vyre.u32(x)", "float": "vyre.f32(x)", "bool": "vyre.boolean(x) or x != 0"}
_COMPARE_OPS = frozenset(_COMPARES.values()) | {Op.AND_, Op.OR_}
_PLACEHOLDERS: list[Expr] = []  # typed stand-ins for operands (grown on demand: vyre.call takes any number)
#: the most IR expressions and statements one kernel may make, helpers inlined (the validator's limit too)
EXPANSION_BUDGET = MAX_NODES


class ExprLowering:
    """Expression lowering against a frame of names; subclasses provide ``frame`` and ``emit``."""

    source: SourceFile
    typer: ExprTyper

    def __init__(self, source: SourceFile, buffers: list[BufferDecl]) -> None:
        self.source = source
        self.typer = ExprTyper(Program(buffers, (1, 1, 1), ()))
        self.depth = 0  # Python expressions being lowered, one inside the other
        self.made = 0  # IR nodes made so far (see ``spend``)

    # ---- entry points ------------------------------------------------------------------------------
    def error(self, node: ast.AST | None, message: str, fix: str, code: str = "unsupported_syntax") -> ValidationError:
        return self.source.error(node, message, fix, code)

    def typed(self, node: ast.expr, dtype: DataType | None = None, what: str = "value") -> Typed:
        """Lower ``node`` to a typed expression (numbers take ``dtype``, else their default type)."""
        return self.coerce(node, self.value(node), dtype, what)

    def coerce(self, node: ast.expr, v: Value, dtype: DataType | None = None, what: str = "value") -> Typed:
        """The lowered value ``v`` of ``node`` as a typed expression of ``dtype`` (any type when None)."""
        if isinstance(v, Number):
            target = dtype or v.default_type()
            try:
                return Typed(number_expr(v, target), target)
            except (TypeError, ValueError) as exc:
                msg, _, fix = str(exc).partition(". Fix: ")
                raise self.error(node, msg, fix or "write a literal that fits", "type_mismatch") from None
        if isinstance(v, Untyped):
            return v.build(dtype or v.default)
        if isinstance(v, Typed):
            if dtype is not None and v.dtype is not dtype:
                raise self.error(node, f"{what} is {v.dtype.name}, expected {dtype.name}",
                                 f"cast it: {cast_name(dtype)}(...)", "type_mismatch")
            return v
        raise self.not_a_value(node, v)

    def not_a_value(self, node: ast.AST, v: Value) -> ValidationError:
        if isinstance(v, Buffer):
            return self.error(node, f"buffer {v.decl.name!r} is used as a value",
                              f"index it ({ast.unparse(node)}[i]) or take its length with len(...)")
        return self.error(node, f"{ast.unparse(node)} ({_describe(getattr(v, 'obj', v))}) is not a value in a kernel",
                          "use kernel variables, parameters, number constants and vyre.* functions")

    def value(self, node: ast.expr) -> Value:
        """Lower ``node`` to a Value (typed expression, number, buffer or Python object)."""
        if self.depth >= MAX_DEPTH:  # the IR's limit: refused here, before Python's recursion limit
            raise self.error(node, f"the expression nests deeper than {MAX_DEPTH} levels",
                             "assign parts of it to variables (t = a + b + c) and combine those", "nesting_too_deep")
        self.depth += 1
        try:
            return self.handler(node, "_", _UNSUPPORTED_EXPRS,
                                "use arithmetic, comparisons, indexing, `a if c else b` and vyre.* calls")(node)
        finally:
            self.depth -= 1

    def spend(self, node: ast.AST | None) -> None:
        """Count one IR node made; past ``EXPANSION_BUDGET`` the kernel is refused, in time linear in the budget."""
        self.made += 1
        if self.made > EXPANSION_BUDGET:
            raise self.budget_error(node)

    def budget_error(self, node: ast.AST | None) -> ValidationError:
        return self.error(node, f"the kernel makes more than {EXPANSION_BUDGET:,} expressions and statements",
                          "split the work over several kernels, or compute repeated parts in a loop",
                          "program_too_large")

    def handler(self, node: ast.AST, prefix: str, unsupported: dict[str, tuple[str, str]], instead: str) -> Any:
        """The method lowering ``node`` (``prefix`` + its class name); an error naming what to use instead."""
        kind = type(node).__name__
        if kind in unsupported:
            message, fix = unsupported[kind]
            raise self.error(node, message, fix)
        method = getattr(self, prefix + kind, None)
        if method is None:
            raise self.error(node, f"`{ast.unparse(node).splitlines()[0]}` ({kind}) is not supported in kernels",
                             instead)
        return method

    def build(self, node: ast.AST, op: Op, args: list[Typed], **attrs: Any) -> Typed:
        """``Expr(op, args, **attrs)`` typed by the IR's rules; a type error names ``node``'s line."""
        self.spend(node)
        expr = Expr(op, tuple(a.expr for a in args), **attrs)
        while len(_PLACEHOLDERS) < len(args):
            _PLACEHOLDERS.append(Expr.var(f"\0{len(_PLACEHOLDERS)}"))
        holders = tuple(_PLACEHOLDERS[: len(args)])
        shallow = Expr(op, holders, **attrs) if args else expr
        try:
            dtype = self.typer.type_of(shallow, {name_of(h): a.dtype for h, a in zip(holders, args)})
        except IRTypeError as err:
            raise self.error(node, err.message, _frontend_fix(err), err.code) from None
        return Typed(expr, dtype)

    def peers(self, nodes: list[ast.expr]) -> list[Typed]:
        """Lower operands that must share a type: untyped numbers take the typed operands' type."""
        return self.peer_values(nodes, [self.value(n) for n in nodes])

    def peer_values(self, nodes: list[ast.expr], values: list[Value]) -> list[Typed]:
        """``peers`` for operands already lowered."""
        for n, v in zip(nodes, values):
            if not isinstance(v, (Typed, Number, Untyped)):
                raise self.not_a_value(n, v)
        dtype = peer_type(values)
        return [v if isinstance(v, Typed) else self.coerce(n, v, dtype) for n, v in zip(nodes, values)]

    def combine(self, node: ast.AST, op: Op, nodes: list[ast.expr], values: list[Value],
                prefix: tuple[Typed, ...] = (), **attrs: Any) -> Value:
        """``op`` over operands of one type; with only untyped operands the result is typed by its context."""
        if values and all(isinstance(v, (Number, Untyped)) for v in values):
            default = peer_type(values)

            def build(t: DataType) -> Typed:
                return self.build(node, op, [*prefix, *(self.coerce(n, v, t) for n, v in zip(nodes, values))], **attrs)

            return Untyped(build, default)
        return self.build(node, op, [*prefix, *self.peer_values(nodes, values)], **attrs)

    def untyped_unary(self, node: ast.AST, op: Op, operand_node: ast.expr, v: Value) -> Value:
        """A unary op of an untyped operand stays untyped; of a typed one it is built now."""
        if isinstance(v, (Number, Untyped)):
            return Untyped(lambda t: self.build(node, op, [self.coerce(operand_node, v, t)]), v.default_type())
        return self.build(node, op, [self.coerce(operand_node, v)])

    # ---- leaves -------------------------------------------------------------------------------------
    def _Constant(self, node: ast.Constant) -> Value:
        v = node.value
        if isinstance(v, bool):
            return Typed(Expr.bool(v), BOOL)
        if isinstance(v, (int, float)):
            return Number(v)
        raise self.error(node, f"the constant {v!r} is not a number", "kernels compute on numbers and True/False")

    def _Name(self, node: ast.Name) -> Value:
        found = self.lookup(node)
        return found if found is not None else self.python_value(node, self.global_value(node))

    def _Attribute(self, node: ast.Attribute) -> Value:
        base = self.value(node.value)
        if not isinstance(base, PyObject):
            raise self.error(node, f"`.{node.attr}` on a kernel value is not supported",
                             "values have no attributes in kernels; call vyre.* functions instead")
        try:
            obj = getattr(base.obj, node.attr)
        except AttributeError:
            raise self.error(node, f"{ast.unparse(node.value)} has no attribute {node.attr!r}",
                             "check the name (vyre functions are listed in docs/kernels.md)") from None
        return self.python_value(node, obj)

    def python_value(self, node: ast.AST, obj: object) -> Value:
        """A Python object seen by a kernel: numbers become literals, the rest stays an object."""
        if isinstance(obj, bool):
            return Typed(Expr.bool(obj), BOOL)
        if isinstance(obj, numbers.Integral):
            return Number(int(obj))
        if isinstance(obj, numbers.Real):
            return Number(float(obj))
        return PyObject(obj)

    def _Subscript(self, node: ast.Subscript) -> Value:
        buf = self.buffer(node.value)
        index = self.index(node.slice)
        return self.build(node, Op.LOAD, [index], name=buf.name)

    def buffer(self, node: ast.expr) -> BufferDecl:
        v = self.value(node)
        if not isinstance(v, Buffer):
            raise self.error(node, f"`{ast.unparse(node)}` is not a buffer", "index buffer parameters or vyre.shared "
                             "buffers; scalar parameters are read by name")
        return v.decl

    def index(self, node: ast.expr) -> Typed:
        if isinstance(node, (ast.Slice, ast.Tuple)):
            raise self.error(node, "slices and multi-dimensional indices are not supported",
                             "index with one U32 value, e.g. buf[y * width + x]")
        return self.typed(node, U32, "index")

    # ---- operators ----------------------------------------------------------------------------------
    def _BinOp(self, node: ast.BinOp) -> Value:
        return self.binop(node, node.op, node.left, self.value(node.left), node.right, self.value(node.right))

    def binop(self, node: ast.AST, op_node: ast.operator, left_node: ast.expr, left: Value,
              right_node: ast.expr, right: Value) -> Value:
        """``left <op> right`` of two lowered operands (also used by augmented assignment)."""
        if type(op_node) in _NO_OPERATOR:
            message, fix = _NO_OPERATOR[type(op_node)].split(": ")
            raise self.error(node, message, fix)
        op = _BINOPS[type(op_node)]
        if op in SHIFT_OPS:
            amount = self.coerce(right_node, right, U32, "shift amount")
            if isinstance(left, (Number, Untyped)):
                return Untyped(lambda t: self.build(node, op, [self.coerce(left_node, left, t), amount]),
                               left.default_type())
            return self.build(node, op, [self.coerce(left_node, left), amount])
        result = self.combine(node, op, [left_node, right_node], [left, right])
        if isinstance(op_node, ast.FloorDiv) and peer_type([left, right]) is F32:
            raise self.error(node, "`//` on F32 is not supported", "write vyre.floor(a / b)", "type_mismatch")
        return result

    def _UnaryOp(self, node: ast.UnaryOp) -> Value:
        if isinstance(node.op, ast.USub):
            v = self.value(node.operand)
            if isinstance(v, Number):
                return Number(-v.value)
            return self.untyped_unary(node, Op.NEG, node.operand, v)
        if isinstance(node.op, ast.Invert):
            return self.untyped_unary(node, Op.BITNOT, node.operand, self.value(node.operand))
        if isinstance(node.op, ast.Not):
            return self.build(node, Op.NOT_, [self.typed(node.operand, BOOL, "operand of `not`")])
        raise self.error(node, "unary `+` is not supported", "drop the `+`")

    def _BoolOp(self, node: ast.BoolOp) -> Value:
        op = Op.AND_ if isinstance(node.op, ast.And) else Op.OR_
        word = "and" if op == Op.AND_ else "or"
        values = [self.typed(node.values[0], BOOL, f"operand of `{word}`")]
        values += [self.coerce(v, self.lazy_operand(v, f"`{word}`"), BOOL, f"operand of `{word}`")
                   for v in node.values[1:]]
        acc = values[0]
        for v in values[1:]:
            acc = self.build(node, op, [acc, v])
        return acc

    def _Compare(self, node: ast.Compare) -> Value:
        if len(node.ops) != 1:
            raise self.error(node, "chained comparisons are not supported", "write `a < b and b < c`")
        op = _COMPARES.get(type(node.ops[0]))
        if op is None:
            raise self.error(node, f"`{ast.unparse(node)}` is not supported in kernels",
                             "compare numbers with == != < <= > >=")
        return self.build(node, op, self.peers([node.left, node.comparators[0]]))

    def _IfExp(self, node: ast.IfExp) -> Value:
        cond = self.typed(node.test, BOOL, "condition of `a if c else b`")
        nodes = [node.body, node.orelse]
        return self.combine(node, Op.SELECT, nodes, [self.lazy_operand(n, "`a if c else b`") for n in nodes], (cond,))

    def lazy_operand(self, node: ast.expr, construct: str) -> Value:
        """An operand Python evaluates only sometimes: IR expressions evaluate it always, so effects are refused."""
        mark = self.effects_mark()
        v = self.value(node)
        if isinstance(v, Typed) and any(e.op == Op.ATOMIC for e in iter_subexprs(v.expr)) or self.effects_since(mark):
            raise self.error(node, f"`{short_text(node)}` has a side effect (an atomic or a store), and {construct} "
                             "evaluates both sides in a kernel, so it would run in every invocation",
                             "use an `if` statement: `if c:` then `old = vyre.atomic_add(buf, i, v)` on its own line",
                             "side_effect_in_expression")
        return v

    def effects_mark(self) -> int:
        """Where the statements made from here on start (statements come from inlined helpers)."""
        return 0

    def effects_since(self, mark: int) -> bool:
        """Whether statements made since ``mark`` store, synchronise or run atomics."""
        return False

    # ---- calls --------------------------------------------------------------------------------------
    def _Call(self, node: ast.Call) -> Value:
        target = self.value(node.func)
        obj = target.obj if isinstance(target, PyObject) else None
        if isinstance(obj, ScalarType):
            self.no_keywords(node)
            return self.cast(node, obj)
        if isinstance(obj, Intrinsic):
            return self.intrinsic(node, obj)
        if obj is builtins.len:
            self.arity(node, 1)
            return self.build(node, Op.BUF_LEN, [], name=self.buffer(node.args[0]).name)
        if obj is builtins.min or obj is builtins.max:
            name = "min" if obj is builtins.min else "max"
            if len(node.args) < 2:
                raise self.error(node, f"{name}() needs at least two values", f"write {name}(a, b)")
            self.no_keywords(node)
            values = [self.value(a) for a in node.args]
            acc = values[0]
            for arg, v in zip(node.args[1:], values[1:]):
                acc = self.combine(node, Op(name), [node.args[0], arg], [acc, v])
            return acc
        if obj is builtins.abs:
            self.arity(node, 1)
            return self.untyped_unary(node, Op.ABS, node.args[0], self.value(node.args[0]))
        name = getattr(obj, "__name__", None)
        if name in _BUILTIN_CASTS and obj is getattr(builtins, name):
            raise self.error(node, f"{name}() is not supported in kernels", f"cast with {_BUILTIN_CASTS[name]}")
        return self.call_other(node, target)

    def call_other(self, node: ast.Call, target: Value) -> Value:
        """Calls the expression half does not know (``@vyre.func`` helpers: see ``lower.py``)."""
        raise self.error(node, f"`{ast.unparse(node.func)}` cannot be called in a kernel",
                         "call vyre.* functions, len/min/max/abs, or a helper decorated with @vyre.func")

    def no_keywords(self, node: ast.Call, allowed: tuple[str, ...] = ()) -> None:
        for kw in node.keywords:
            if kw.arg not in allowed:
                raise self.error(node, f"keyword argument {kw.arg}= is not supported here",
                                 "pass the arguments by position")

    def arity(self, node: ast.Call, *counts: int) -> None:
        self.no_keywords(node)
        if len(node.args) not in counts:
            want = " or ".join(str(c) for c in counts)
            raise self.error(node, f"`{ast.unparse(node.func)}` takes {want} argument(s), got {len(node.args)}",
                             "pass the documented arguments (docs/kernels.md)")

    def cast(self, node: ast.Call, t: ScalarType) -> Typed:
        self.arity(node, 1)
        v = self.value(node.args[0])
        if isinstance(v, (Number, Untyped)):  # untyped numbers take the named type: a typed literal
            if t.dtype not in LITERAL_TYPES:
                raise self.error(node, f"{t!r}({ast.unparse(node.args[0])}) has no literal form",
                                 "write True/False for BOOL; storage types have no literals", "type_mismatch")
            return self.coerce(node.args[0], v, t.dtype)
        return self.build(node, Op.CAST, [self.coerce(node.args[0], v)], dtype=t.dtype)

    def constant_int(self, node: ast.expr, what: str) -> int:
        v = self.value(node)
        if not isinstance(v, Number) or not isinstance(v.value, int):
            raise self.error(node, f"{what} must be an int constant, got `{ast.unparse(node)}`",
                             "write a number or a module-level int constant")
        return v.value

    def intrinsic(self, node: ast.Call, f: Intrinsic) -> Value:
        kind = f.kind
        if kind == "id":
            self.no_keywords(node, ("axis",))
            args = [*node.args, *(kw.value for kw in node.keywords)]
            if len(args) > 1:
                raise self.error(node, f"{f!r}() takes one axis", f"write {f!r}(0), {f!r}(1) or {f!r}(2)")
            axis = self.constant_int(args[0], "the axis") if args else 0
            if axis not in (0, 1, 2):
                raise self.error(node, f"axis {int_text(axis)} is not 0, 1 or 2",
                                 f"write {f!r}(0), {f!r}(1) or {f!r}(2)")
            return self.build(node, f.op, [], value=axis)
        if kind == "unary":
            self.arity(node, 1)
            if f.op in F32_OPERAND_OPS:  # a float operand: F64 when typed so, else F32 (numbers too)
                v = self.value(node.args[0])
                wide = isinstance(v, Typed) and v.dtype is DataType.F64
                return self.build(node, f.op, [self.coerce(node.args[0], v, DataType.F64 if wide else F32)])
            return self.untyped_unary(node, f.op, node.args[0], self.value(node.args[0]))
        if kind == "binary":
            self.arity(node, 2)
            if f.op in SHIFT_OPS:
                args = [self.typed(node.args[0]), self.typed(node.args[1], U32, "shift amount")]
                return self.build(node, f.op, args)
            if f.op in _COMPARE_OPS:
                return self.build(node, f.op, self.peers(list(node.args)))
            return self.combine(node, f.op, list(node.args), [self.value(a) for a in node.args])
        if kind == "leaf":
            self.arity(node, 0)
            return self.build(node, f.op, [])
        if kind == "select":
            self.arity(node, 3)
            cond = self.typed(node.args[0], BOOL, "condition of select")
            nodes = list(node.args[1:])
            return self.combine(node, Op.SELECT, nodes, [self.value(n) for n in nodes], (cond,))
        if kind == "fma":
            self.arity(node, 3)
            return self.combine(node, Op.FMA, list(node.args), [self.value(a) for a in node.args])
        if kind == "atomic":
            return self.atomic(node, f.op)
        if kind == "ballot":
            self.arity(node, 1)
            return self.build(node, Op.SUBGROUP_BALLOT, [self.typed(node.args[0], BOOL, "condition of ballot")])
        if kind == "shuffle":
            self.arity(node, 2)
            value = self.typed(node.args[0])
            return self.build(node, Op.SUBGROUP_SHUFFLE, [value, self.typed(node.args[1], U32, "lane")])
        if kind == "subgroup_add":
            self.arity(node, 1)
            return self.build(node, Op.SUBGROUP_ADD, [self.typed(node.args[0])])
        if kind == "call":
            return self.op_call(node)
        if kind in ("bits", "bits64"):
            self.arity(node, 1)
            bits = self.constant_int(node.args[0], "the bit pattern")
            wide = kind == "bits64"
            top = "0xFFFFFFFFFFFFFFFF" if wide else "0xFFFFFFFF"
            if not 0 <= bits <= int(top, 16):
                raise self.error(node, f"bit pattern {int_text(bits)} is not a {'u64' if wide else 'u32'}",
                                 f"pass 0 .. {top}")
            return Typed(Expr.f64_from_bits(bits), DataType.F64) if wide else Typed(Expr.f32_from_bits(bits), F32)
        raise self.error(node, f"{f!r}() is a statement, not a value",
                         f"call it on its own line{' with `with`' if kind in ('block', 'region') else ''}")

    def atomic(self, node: ast.Call, op: AtomicOp) -> Typed:
        cas = op.base is AtomicOp.COMPARE_EXCHANGE
        self.arity(node, 4 if cas else 3)
        buf = self.buffer(node.args[0])
        if buf.access in (Access.READ, Access.UNIFORM):
            raise self.error(node, f"atomic on {buf.access.value} buffer {buf.name!r}",
                             "annotate it vyre.InOut[...] or vyre.Out[...] to update it", "read_only_write")
        index = self.index(node.args[1])
        dtype = buf.dtype if buf.dtype.is_arith else None
        if cas:
            expected = self.typed(node.args[2], dtype, "expected value")
            value = self.typed(node.args[3], dtype, "atomic value")
            args = [index, value, expected]
        else:
            args = [index, self.typed(node.args[2], dtype, "atomic value")]
        return self.build(node, Op.ATOMIC, args, value=op, name=buf.name)

    def op_call(self, node: ast.Call) -> Typed:
        from vyre.ops import get_op

        self.no_keywords(node)
        if not node.args or not isinstance(node.args[0], ast.Constant) or not isinstance(node.args[0].value, str):
            raise self.error(node, "vyre.call needs the op id as a string first", 'write vyre.call("pack.op", a, b)')
        op_id = node.args[0].value
        registered = get_op(op_id)
        types = list(registered.arg_types) if registered is not None else []
        args = [self.typed(a, types[i] if i < len(types) else None) for i, a in enumerate(node.args[1:])]
        return self.build(node, Op.CALL, args, name=op_id)

    # ---- names (provided by the statement half) -------------------------------------------------------
    def lookup(self, node: ast.Name) -> Value | None:
        raise NotImplementedError

    def global_value(self, node: ast.Name) -> object:
        raise NotImplementedError


def cast_name(dtype: DataType) -> str:
    return "vyre.boolean" if dtype is BOOL else f"vyre.{dtype.value}"


def _frontend_fix(err: IRTypeError) -> str:
    """The IR's Fix sentence in front-end words (casts are ``vyre.u32(x)``, not ``Expr.cast``)."""
    fix = err.fix
    if "Expr.cast" in fix or "cast" in fix and err.code == "type_mismatch":
        return "there is no implicit conversion: cast with vyre.u32(x), vyre.i32(x), vyre.f32(x) or vyre.boolean(x)"
    return kernel_fix(fix)


def _describe(obj: object) -> str:
    return getattr(obj, "__name__", type(obj).__name__)
