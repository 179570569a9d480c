"""Lowering a kernel function's ``ast`` to a ``Program``: parameters, statements, helper inlining.

The statement half of the front end (``exprs.py`` is the expression half). Scoping follows the
IR: the first assignment of a name is a ``let`` in the current block, later ones ``assign``; a
name keeps its type for the whole function; names first assigned inside an ``if``/``for`` body
end with it. ``@vyre.func`` helpers are inlined: each argument is bound once to a fresh ``let``
(buffers are passed through), the body's statements go before the calling statement, and the
final ``return expr`` is the call's value. ``vyre.Const`` parameters (of the kernel or a helper)
are literals; an ``if`` or ``range`` on them is resolved here (only the taken branch, the loop
unrolled), see ``consts.py``.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from vyre.driver.errors import Finding, ValidationError, VyreError
from vyre.frontend.annotations import BY_EXPRESSION, SCALAR_PARAM_TYPES, BufferSpec, ScalarType
from vyre.frontend.consts import MAX_UNROLL, ConstSpec, Scalar, StaticError, fold, static_eval
from vyre.frontend.exprs import EXPANSION_BUDGET, ExprLowering, cast_name
from vyre.frontend.intrinsics import Intrinsic
from vyre.frontend.names import annotation_value, namespace_of, short_text, static_value
from vyre.frontend.source import LineMap, SourceFile
from vyre.frontend.values import BOOL, U32, Buffer, Number, Owned, PyObject, Typed, Untyped, Value
from vyre.ir.expr import Expr, name_of
from vyre.ir.node import Barrier, Node, Return, Store
from vyre.ir.op import Op
from vyre.ir.program import Access, BufferDecl, Program
from vyre.ir.types import DataType
from vyre.ir.typing import ExprTyper
from vyre.ir.validate import findings
from vyre.ir.walk import iter_nodes, iter_subexprs, node_exprs

_UNSUPPORTED = {
    "While": ("`while` is not supported", "use `for _ in range(bound)` with an `if`"),
    "Break": ("`break` is not supported", "guard the rest of the loop body with an `if` on a flag variable"),
    "Continue": ("`continue` is not supported", "guard the rest of the loop body with an `if`"),
    "FunctionDef": ("nested functions are not supported", "define a module-level helper with @vyre.func"),
    "Try": ("`try` is not supported", "kernels cannot raise: guard with `if` instead"),
    "Raise": ("`raise` is not supported", "kernels cannot raise: guard with `if` instead"),
    "Assert": ("`assert` is not supported", "check inputs on the host, or guard with `if`"),
    "Import": ("imports inside kernels are not supported", "import at module level"),
    "ImportFrom": ("imports inside kernels are not supported", "import at module level"),
    "Global": ("`global` is not supported", "pass values in as parameters"),
    "Nonlocal": ("`nonlocal` is not supported", "pass values in as parameters"),
    "Delete": ("`del` is not supported", "names end with their block; just stop using it"),
    "ClassDef": ("classes are not supported in kernels", "define classes outside the kernel"),
}
#: the deepest chain of @vyre.func helpers calling helpers (or themselves) that a kernel may inline
MAX_INLINE_DEPTH = 32


@dataclass(frozen=True)
class Options:
    """What the decorator says about the program besides the function."""

    workgroup_size: tuple[int, int, int]
    name: str | None
    names: Mapping[str, str] = field(default_factory=dict)  # Python identifier -> IR name
    bindings: Mapping[str, int] = field(default_factory=dict)  # parameter -> binding


@dataclass
class _Var:
    ir: str
    dtype: DataType
    loop: bool


@dataclass
class Registers:
    """``vyre.registers(T, n)``: ``n`` variables of type ``T``, ``v[k]`` with ``k`` a compile-time value;
    element ``k`` is declared (a ``let``) where it is first assigned and lives as long as that block."""

    name: str
    dtype: DataType
    count: int
    elements: dict[int, str] = field(default_factory=dict)  # index -> IR name, while declared


@dataclass
class _Frame:
    """The names one function body sees (the kernel, or one inlined call of a helper)."""

    source: SourceFile
    namespace: Callable[[str], Any]  # free names: closure, globals, builtins (KeyError if absent)
    rename: Callable[[str], str]  # Python name -> IR name of a new variable
    is_helper: bool
    buffers: dict[str, BufferDecl] = field(default_factory=dict)
    numbers: dict[str, Number] = field(default_factory=dict)  # helper parameters bound to number literals
    objects: dict[str, PyObject] = field(default_factory=dict)  # helper parameters bound to functions and types
    exprs: dict[str, Typed] = field(default_factory=dict)  # helper parameters passed BY_EXPRESSION
    registers: dict[str, Registers] = field(default_factory=dict)  # vyre.registers() arrays declared here
    consts: dict[str, tuple[Scalar, Value]] = field(default_factory=dict)  # compile-time values: Python, literal
    scalars: set[str] = field(default_factory=set)
    scopes: list[dict[str, _Var]] = field(default_factory=lambda: [{}])
    types: dict[str, DataType] = field(default_factory=dict)
    ended: dict[str, int] = field(default_factory=dict)  # names whose block ended -> file line

    def find(self, name: str) -> _Var | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None


class Lowering(ExprLowering):
    """Lowers one kernel (and the helpers it calls) to a validated ``Program``."""

    def __init__(self, source: SourceFile, fndef: ast.FunctionDef, namespace: Callable[[str], Any],
                 options: Options, code: Any = None, consts: Mapping[str, Scalar] | None = None) -> None:
        super().__init__(source, [])
        self.fndef, self.options = fndef, options
        self.consts = dict(consts or {})  # the values of the kernel's vyre.Const parameters, by name
        self.taken: set[str] | None = None  # every identifier in the sources, collected at the first fresh()
        self.next_suffix: dict[str, int] = {}  # base -> the first suffix fresh() has not tried yet
        self.sources: dict[int, tuple[ast.AST, Any]] = {id(fndef): (fndef, code)}  # (definition, code or None)
        self.assigned: dict[int, set[str]] = {}  # id of a helper's definition -> the names it assigns
        names = options.names
        self.frame = _Frame(source, namespace, lambda n: names.get(n, n), is_helper=False)
        self.lines = LineMap(source, source.line(fndef))
        self.buffers: list[BufferDecl] = []
        self.out: list[Node] = []
        self.site: ast.AST | None = None  # the kernel's call site while a helper is inlined
        self.declared: list[list[tuple[Registers, int]]] = [[]]  # register elements declared per IR block
        self.inlining: list[Any] = []  # the @vyre.func helpers being inlined, outermost first

    # ---- the program --------------------------------------------------------------------------------
    def program(self) -> Program:
        """The kernel's ``Program`` (``Out[T]`` outputs keep count 0), checked by the validator."""
        self._parameters()
        body = self.fndef.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        self.out = []
        for stmt in body:
            try:
                self.statement(stmt)
            except RecursionError:  # a safety net: the depth limits keep lowering well inside the stack
                raise self.error(stmt, "this statement nests too deeply for the front end",
                                 "assign parts of long expressions to variables and flatten helper chains",
                                 "nesting_too_deep") from None
        program = Program(self.buffers, self.options.workgroup_size, self.out, self.options.name)
        self._validate(program)
        return program

    def _validate(self, program: Program) -> None:
        found = kernel_findings(program)
        if found:
            raise ValidationError(self.lines.place(program, tuple(found)))

    def _parameters(self) -> None:
        args = self.fndef.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.defaults:
            raise self.error(self.fndef, "*args, **kwargs, keyword-only parameters and defaults are not supported",
                             "declare one annotated positional parameter per buffer or scalar")
        index = 0  # bindings count the parameters that are buffers or scalars (not the Const ones)
        for arg in [*args.posonlyargs, *args.args]:
            if arg.annotation is None:
                raise self.error(arg, f"parameter {arg.arg!r} has no annotation",
                                 f"annotate it, e.g. {arg.arg}: vyre.In[vyre.f32] or {arg.arg}: vyre.f32")
            spec = annotation_value(arg.annotation, self.frame.namespace, self.source)
            if spec is None:  # Annotated[T, None]: the code making the kernel left it out; the name is None
                self.frame.objects[arg.arg] = PyObject(None)
                continue
            if isinstance(spec, ConstSpec):
                if arg.arg not in self.consts:
                    raise self.error(arg, f"compile-time parameter {arg.arg!r} has no value",
                                     "call the kernel with its value at its position, or take kernel.bind(...)")
                value = self.consts[arg.arg]
                self.frame.consts[arg.arg] = (value, spec.literal(value))
                continue
            binding = self.options.bindings.get(arg.arg, index)
            index += 1
            name = self.frame.rename(arg.arg)
            if isinstance(spec, ScalarType):
                if spec.dtype not in SCALAR_PARAM_TYPES:
                    raise self.error(arg, f"scalar parameter {arg.arg!r} has storage type {spec!r}",
                                     "scalar parameters are vyre.u32, vyre.i32, vyre.f32 or vyre.boolean")
                decl = BufferDecl.uniform(name, binding, spec.dtype, 1)
                self.frame.scalars.add(arg.arg)
            elif isinstance(spec, BufferSpec):
                decl = BufferDecl(name, binding, spec.dtype, spec.count, spec.access)
            else:
                raise self.error(arg, f"parameter {arg.arg!r} has annotation `{ast.unparse(arg.annotation)}`",
                                 "annotate buffers vyre.In/InOut/Out/Uniform[T] and scalars vyre.u32/i32/f32/boolean")
            self._add_buffer(arg.arg, decl, arg)

    def _add_buffer(self, py_name: str, decl: BufferDecl, node: ast.AST) -> None:
        self.frame.buffers[py_name] = decl
        self.buffers.append(decl)
        self.lines.buffer_lines.append(self.source.line(node))
        self.typer = ExprTyper(Program(self.buffers, (1, 1, 1), ()))

    # ---- statements ---------------------------------------------------------------------------------
    def emit(self, node: Node, where: ast.AST) -> None:
        self.spend(where)
        self.out.append(self.lines.record(node, self.site or where))

    def statement(self, stmt: ast.stmt) -> None:
        self.handler(stmt, "_stmt_", _UNSUPPORTED, "use assignments, buf[i] = v, if/elif/else, for ... in range(...), "
                     "return, vyre.barrier() and atomics (docs/kernels.md)")(stmt)

    def block(self, stmts: list[ast.stmt], loop_var: tuple[str, _Var] | None = None, flat: bool = False
              ) -> list[Node]:
        """Lower ``stmts`` in a new scope; returns the statements (the names declared end here).

        ``flat``: the statements go into the enclosing IR block (an unrolled iteration, a resolved
        branch), so their names get fresh IR names and register elements declared there live on."""
        saved, self.out = self.out, []
        scope: dict[str, _Var] = dict([loop_var]) if loop_var else {}
        frame, rename = self.frame, self.frame.rename
        frame.scopes.append(scope)
        if flat:
            frame.rename = self.fresh
        else:
            self.declared.append([])
        try:
            for stmt in stmts:
                self.statement(stmt)
        finally:
            frame.scopes.pop()
            frame.rename = rename
            if not flat:
                for regs, k in self.declared.pop():
                    regs.elements.pop(k, None)
            body, self.out = self.out, saved
        end_line = self.source.line(stmts[-1]) if stmts else 0
        for name in scope:
            self.frame.ended.setdefault(name, end_line)
        return body

    def _stmt_Pass(self, stmt: ast.Pass) -> None:
        pass

    def _stmt_Assign(self, stmt: ast.Assign) -> None:
        if len(stmt.targets) != 1 or isinstance(stmt.targets[0], (ast.Tuple, ast.List)):
            raise self.error(stmt, "multiple assignment is not supported", "assign one name per statement")
        target = stmt.targets[0]
        if isinstance(target, ast.Subscript):
            self._store(stmt, target, stmt.value)
        elif isinstance(target, ast.Name):
            self._assign_name(stmt, target.id, stmt.value)
        else:
            raise self.error(stmt, f"cannot assign to `{ast.unparse(target)}`", "assign a name or buf[i]")

    def _stmt_AnnAssign(self, stmt: ast.AnnAssign) -> None:
        spec = annotation_value(stmt.annotation, self.frame.namespace, self.source)
        if not isinstance(stmt.target, ast.Name) or stmt.value is None or not isinstance(spec, ScalarType) \
                or not spec.dtype.is_arith:
            raise self.error(stmt, f"`{ast.unparse(stmt)}` is not supported",
                             "annotate a new variable with a value: x: vyre.f32 = 0")
        self._assign_name(stmt, stmt.target.id, stmt.value, spec.dtype)

    def _assign_name(self, stmt: ast.stmt, name: str, value: ast.expr, annotated: DataType | None = None) -> None:
        frame = self.frame
        if name in frame.buffers:
            raise self.error(stmt, f"cannot assign to parameter {name!r}",
                             f"store an element ({name}[i] = v) or use a new variable name")
        self._not_a_const(stmt, name)
        if isinstance(value, ast.Constant) and value.value is None and frame.find(name) is None:
            frame.objects[name] = PyObject(None)  # as a parameter left out (Annotated[T, None]) is
            return
        if self._is_call_to(value, "shared"):
            self._shared(stmt, name, value)
            return
        if self._is_call_to(value, "registers"):
            self._registers(stmt, name, value)
            return
        if name in frame.registers:
            raise self.error(stmt, f"cannot assign to {name!r}, a vyre.registers() array",
                             f"assign its elements: {name}[k] = v")
        var = frame.find(name)
        if var is not None:
            if var.loop:
                raise self.error(stmt, f"cannot assign to loop variable {name!r}",
                                 "copy it into a new variable and update that", "assign_loop_var")
            v = self.typed(value, annotated or var.dtype, f"value assigned to {name!r}")
            self.emit(Node.assign(var.ir, v.expr), stmt)
            return
        v = self.typed(value, annotated or frame.types.get(name), f"value assigned to {name!r}")
        if isinstance(v, Owned):  # a helper's own variable, dead after the call: the name takes it over
            ir = name_of(v.expr)
        else:
            ir = frame.rename(name)
            self.emit(Node.let(ir, v.expr), stmt)
        frame.scopes[-1][name] = _Var(ir, v.dtype, False)
        frame.types[name] = v.dtype

    def _store(self, stmt: ast.stmt, target: ast.Subscript, value: ast.expr, op: ast.operator | None = None) -> None:
        regs = self._registers_of(target.value)
        if regs is not None:
            self._store_register(stmt, regs, target, value, op)
            return
        buf = self.buffer(target.value)
        if buf.access in (Access.READ, Access.UNIFORM):
            kind = "scalar" if target.value in self.frame.scalars else buf.access.value
            raise self.error(stmt, f"store to {kind} buffer {buf.name!r}",
                             "annotate it vyre.InOut[...] or vyre.Out[...] to write it", "read_only_write")
        index = self.index(target.slice)
        if op is None:
            v = self.typed(value, buf.dtype.arith, f"value stored to {buf.name!r}")
        else:
            current = Typed(Expr.load(buf.name, index.expr), buf.dtype.arith)
            v = self.binop(stmt, op, target, current, value, self.value(value))
            v = self.coerce(value, v, buf.dtype.arith, f"value stored to {buf.name!r}")
        self.emit(Node.store(buf.name, index.expr, v.expr), stmt)

    def _stmt_AugAssign(self, stmt: ast.AugAssign) -> None:
        target = stmt.target
        if isinstance(target, ast.Subscript):
            self._store(stmt, target, stmt.value, stmt.op)
            return
        if not isinstance(target, ast.Name):
            raise self.error(stmt, f"cannot update `{ast.unparse(target)}`", "update a name or buf[i]")
        if target.id in self.frame.buffers:
            raise self.error(stmt, f"cannot assign to parameter {target.id!r}",
                             f"copy it into a new variable first: v = {target.id}")
        self._not_a_const(stmt, target.id)
        var = self.frame.find(target.id)
        if var is None or var.loop:
            what = "a loop variable" if var else "not assigned yet"
            raise self.error(stmt, f"{target.id!r} is {what}", f"assign it first: {target.id} = 0, then update it")
        v = self.binop(stmt, stmt.op, target, Typed(Expr.var(var.ir), var.dtype), stmt.value, self.value(stmt.value))
        v = self.coerce(stmt.value, v, var.dtype, f"value assigned to {target.id!r}")
        self.emit(Node.assign(var.ir, v.expr), stmt)

    def _not_a_const(self, stmt: ast.stmt, name: str) -> None:
        if name in self.frame.consts:
            raise self.error(stmt, f"cannot assign to {name!r}, a compile-time value",
                             f"copy it into a new variable and update that: v = {name}", "assign_loop_var")

    def _stmt_If(self, stmt: ast.If) -> None:
        taken = self._static_condition(stmt.test)
        if taken is not None:  # resolved at specialisation: only the taken branch is lowered, in place
            for s in stmt.body if taken else stmt.orelse:
                self.statement(s)  # (so a name it assigns first lives on after it, as in Python)
            return
        cond = self.value(stmt.test)
        if isinstance(cond, Typed) and cond.dtype is not BOOL:
            raise self.error(stmt.test, f"if condition is {cond.dtype.name}, expected BOOL",
                             f"compare it: `if {ast.unparse(stmt.test)} != 0:`", "type_mismatch")
        cond = self.coerce(stmt.test, cond, BOOL, "if condition")
        then = self.block(stmt.body)
        otherwise = self.block(stmt.orelse) if stmt.orelse else []
        self.emit(Node.if_(cond.expr, then, otherwise), stmt)

    def _stmt_For(self, stmt: ast.For) -> None:
        it = stmt.iter
        if stmt.orelse:
            raise self.error(stmt, "`for ... else` is not supported", "put the else part after the loop")
        if not isinstance(stmt.target, ast.Name):
            raise self.error(stmt, "the loop variable must be one name", "write `for k in range(n):`")
        target = self.value(it.func) if isinstance(it, ast.Call) else None
        if not (isinstance(it, ast.Call) and isinstance(target, PyObject) and target.obj is builtins.range):
            raise self.error(stmt, f"`for` over `{ast.unparse(it)}` is not supported",
                             "loop over range(n) or range(start, end) and index buffers with the loop variable")
        self.no_keywords(it)
        if len(it.args) == 3:
            raise self.error(stmt, "range() with a step is not supported",
                             "loop over range(count) and compute start + k * step")
        if len(it.args) not in (1, 2):
            raise self.error(stmt, "range() takes one or two arguments here", "write range(n) or range(start, end)")
        name = stmt.target.id
        bounds = [self._static(a) for a in it.args]
        if all(b is not None for b in bounds) and any(b[1] for b in bounds if b is not None):
            self._check_loop_name(stmt, name)
            self._unroll(stmt, name, [self._bound(a, b[0]) for a, b in zip(it.args, bounds) if b is not None])
            return
        start = self.typed(it.args[0], U32, "loop start") if len(it.args) == 2 else Typed(Expr.u32(0), U32)
        end = self.typed(it.args[-1], U32, "loop end")
        self._check_loop_name(stmt, name)
        var = _Var(self.frame.rename(name), U32, True)
        self.frame.types.setdefault(name, U32)
        body = self.block(stmt.body, (name, var))
        self.emit(Node.loop(var.ir, start.expr, end.expr, body), stmt)

    def _check_loop_name(self, stmt: ast.For, name: str) -> None:
        if self.frame.find(name) is not None or name in self.frame.buffers or name in self.frame.consts:
            raise self.error(stmt, f"loop variable {name!r} is already a variable here",
                             "use a new name for the loop variable", "shadowed_name")

    def _unroll(self, stmt: ast.For, name: str, bounds: list[int]) -> None:
        """A loop over compile-time bounds: the body once per iteration, the loop variable a U32 literal."""
        start, end = (0, *bounds) if len(bounds) == 1 else bounds
        if end - start > MAX_UNROLL:
            raise self.error(stmt, f"`for {name} in range(...)` over compile-time bounds unrolls to {end - start} "
                             f"iterations, more than {MAX_UNROLL}",
                             "keep the loop rolled: wrap the bound in a cast (range(vyre.u32(n))) or pass it as a "
                             "scalar parameter (n: vyre.u32)", "program_too_large")
        frame = self.frame
        frame.types.setdefault(name, U32)
        for k in range(start, end):
            frame.consts[name] = (k, Typed(Expr.u32(k), U32))
            try:
                self.out.extend(self.block(stmt.body, flat=True))  # its names end with it, under fresh IR names
            finally:
                del frame.consts[name]

    def _BinOp(self, node: ast.BinOp) -> Value:
        """An operator; on integers whose operands are compile-time values, one a Const (or an
        unrolled loop variable), one literal computed with the IR's arithmetic (``k * WG``)."""
        v = super()._BinOp(node)
        try:
            found = static_eval(node, self._static_name)
        except StaticError:
            return v  # Python cannot evaluate it (a shift past 64 bits ...): the IR arithmetic stays
        if found is None or not found[1] or not isinstance(found[0], int) or isinstance(found[0], bool):
            return v
        if isinstance(v, Untyped):
            build = v.build
            return Untyped(lambda t: fold(build(t)), v.default)
        return fold(v) if isinstance(v, Typed) else v

    def _IfExp(self, node: ast.IfExp) -> Value:
        """``a if c else b``; with a compile-time ``c`` using a Const (as an ``if``'s), only the taken side."""
        taken = self._static_condition(node.test)
        if taken is None:
            return super()._IfExp(node)
        return self.value(node.body if taken else node.orelse)

    def _static(self, node: ast.expr) -> tuple[Scalar, bool] | None:
        """``static_eval`` of ``node`` in this frame; its errors name the line."""
        try:
            return static_eval(node, self._static_name)
        except StaticError as exc:
            raise self.error(node, exc.message, exc.fix) from None

    def _static_name(self, name: str) -> tuple[Scalar, bool] | None:
        """A name's compile-time value: a Const (or unrolled loop variable), a number argument, a global."""
        frame = self.frame
        if name in frame.consts:
            return frame.consts[name][0], True
        if frame.find(name) is not None or name in frame.buffers or name in frame.ended or name in frame.objects \
                or name in frame.registers or name in frame.exprs:
            return None
        if name in frame.numbers:
            return frame.numbers[name].value, False
        try:
            obj = frame.namespace(name)
        except (KeyError, AttributeError):
            return None
        return (obj, False) if isinstance(obj, (bool, int, float)) else None

    def _static_condition(self, test: ast.expr) -> bool | None:
        """An ``if`` test of compile-time values using a Const: its Python value; None to emit an IR ``if``."""
        found = self._static(test)
        if found is None or not found[1]:
            return None
        value = found[0]
        if not isinstance(value, bool):
            raise self.error(test, f"the compile-time condition `{ast.unparse(test)}` is {value!r}, not a bool",
                             f"compare it: `if {ast.unparse(test)} != 0:`", "type_mismatch")
        return value

    def _bound(self, node: ast.expr, value: Scalar) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0xFFFFFFFF:
            raise self.error(node, f"the compile-time loop bound `{ast.unparse(node)}` is {value!r}, not a U32",
                             "compute a bound in 0 .. 4294967295 from int constants", "type_mismatch")
        return value

    def _stmt_Return(self, stmt: ast.Return) -> None:
        if stmt.value is not None or self.frame.is_helper:
            raise self.error(stmt, "a kernel returns nothing" if not self.frame.is_helper else
                             "a @vyre.func may return only as its last statement",
                             "store results into an Out/InOut buffer; `return` alone ends the invocation"
                             if not self.frame.is_helper else "compute the result into a variable and return it last")
        self.emit(Node.return_(), stmt)

    def _stmt_With(self, stmt: ast.With) -> None:
        item = stmt.items[0] if len(stmt.items) == 1 else None
        if item is None or item.optional_vars is not None or not (
                self._is_call_to(item.context_expr, "block") or self._is_call_to(item.context_expr, "region")):
            raise self.error(stmt, "`with` is only supported as `with vyre.block():` or `with vyre.region(name):`",
                             "remove the `with`")
        call = item.context_expr
        if self._is_call_to(call, "block"):
            self.arity(call, 0)
            self.emit(Node.block(self.block(stmt.body)), stmt)
            return
        self.arity(call, 1)
        if not isinstance(call.args[0], ast.Constant) or not isinstance(call.args[0].value, str):
            raise self.error(call, "vyre.region() takes its name as a string", 'write vyre.region("my.pass")')
        self.emit(Node.region(call.args[0].value, self.block(stmt.body)), stmt)

    def _stmt_Expr(self, stmt: ast.Expr) -> None:
        value = stmt.value
        if isinstance(value, ast.Constant) and (isinstance(value.value, str) or value.value is Ellipsis):
            return  # a docstring or `...`
        if not isinstance(value, ast.Call):
            raise self.error(stmt, f"the value of `{ast.unparse(value)}` is not used",
                             "assign it to a name or store it: buf[i] = ...")
        target = self.value(value.func)
        obj = target.obj if isinstance(target, PyObject) else None
        if isinstance(obj, Intrinsic) and obj.kind == "barrier":
            self.arity(value, 0)
            self.emit(Node.barrier(), stmt)
            return
        if isinstance(obj, Intrinsic) and obj.kind == "atomic":
            old = self.intrinsic(value, obj)
            assert isinstance(old, Typed)  # an atomic's result is typed
            self.emit(Node.let(self.fresh("_atomic"), old.expr), stmt)
            return
        from vyre.frontend.kernel import Func

        if isinstance(obj, Func):
            result = self.inline(value, obj, stmt)
            if isinstance(result, Typed) and _has_effect(result.expr):
                self.emit(Node.let(self.fresh("_result"), result.expr), stmt)
            return
        raise self.error(stmt, f"the value of `{ast.unparse(value)}` is not used",
                         "assign it to a name; only vyre.barrier(), atomics and @vyre.func calls stand alone")

    def _registers(self, stmt: ast.stmt, name: str, call: ast.Call) -> None:
        if name in self.frame.types or name in self.frame.registers or name in self.frame.buffers:
            raise self.error(stmt, f"{name!r} is already a variable", "give the registers their own name")
        self.arity(call, 2)
        dtype = static_value(call.args[0], self.frame.namespace, self.source)
        if not isinstance(dtype, ScalarType) or not dtype.dtype.is_arith and dtype.dtype is not BOOL:
            raise self.error(call, "vyre.registers() takes an element type first", "write vyre.registers(vyre.u32, 8)")
        found = self._static(call.args[1])
        count = found[0] if found is not None else None
        if isinstance(count, bool) or not isinstance(count, int) or not 0 < count <= MAX_UNROLL:
            raise self.error(call, f"the registers' count `{ast.unparse(call.args[1])}` is not an int constant in "
                             f"1 .. {MAX_UNROLL}", "write a number, a Const parameter or a module-level int constant")
        self.frame.registers[name] = Registers(name, dtype.dtype, count)

    def _registers_of(self, node: ast.expr) -> Registers | None:
        """The registers array ``node`` names, if it names one."""
        if not isinstance(node, ast.Name):
            return None
        found = self.lookup(node)
        return found.obj if isinstance(found, PyObject) and isinstance(found.obj, Registers) else None

    def _register_index(self, regs: Registers, node: ast.expr) -> int:
        found = self._static(node)
        k = found[0] if found is not None else None
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < regs.count:
            raise self.error(node, f"{regs.name}[{ast.unparse(node)}] is not one of its {regs.count} registers",
                             f"index vyre.registers() with a compile-time value in 0 .. {regs.count - 1} (a "
                             "Const, an unrolled loop variable, a number)", "type_mismatch")
        return k

    def _Subscript(self, node: ast.Subscript) -> Value:
        regs = self._registers_of(node.value)
        if regs is None:
            return super()._Subscript(node)
        k = self._register_index(regs, node.slice)
        if k not in regs.elements:
            raise self.error(node, f"{regs.name}[{k}] is read before it is assigned (or after its block ended)",
                             f"assign {regs.name}[{k}] = ... first, in this block or one around it", "unknown_var")
        return Typed(Expr.var(regs.elements[k]), regs.dtype)

    def _store_register(self, stmt: ast.stmt, regs: Registers, target: ast.Subscript, value: ast.expr,
                        op: ast.operator | None) -> None:
        """``v[k] = value``: the first assignment declares element ``k`` (a ``let``), later ones assign it."""
        k = self._register_index(regs, target.slice)
        what = f"value assigned to {regs.name}[{k}]"
        if op is None:
            v = self.typed(value, regs.dtype, what)
        else:
            v = self.coerce(value, self.binop(stmt, op, target, self._Subscript(target), value, self.value(value)),
                            regs.dtype, what)
        if k in regs.elements:
            self.emit(Node.assign(regs.elements[k], v.expr), stmt)
            return
        ir = self.fresh(f"{regs.name}{k}")
        self.emit(Node.let(ir, v.expr), stmt)
        regs.elements[k] = ir
        self.declared[-1].append((regs, k))

    def _shared(self, stmt: ast.stmt, name: str, call: ast.Call) -> None:
        if self.frame.is_helper or len(self.frame.scopes) != 1:
            raise self.error(stmt, "vyre.shared() is only allowed at the top level of a kernel body",
                             "declare workgroup memory first in the kernel, outside if/for and helpers")
        if name in self.frame.types:
            raise self.error(stmt, f"{name!r} is already a variable", "give the shared buffer its own name")
        self.arity(call, 2)
        dtype = static_value(call.args[0], self.frame.namespace, self.source)
        if not isinstance(dtype, ScalarType):
            raise self.error(call, "vyre.shared() takes an element type first", "write vyre.shared(vyre.f32, 256)")
        found = self._static(call.args[1])  # Const parameters too
        count = found[0] if found is not None else static_value(call.args[1], self.frame.namespace, self.source)
        if isinstance(count, bool) or not isinstance(count, int):
            raise self.error(call, f"the shared buffer's count `{ast.unparse(call.args[1])}` is not an int constant",
                             "write a number or a module-level int constant, e.g. vyre.shared(vyre.f32, TILE)")
        self._add_buffer(name, BufferDecl.workgroup(self.frame.rename(name), count, dtype.dtype), stmt)

    # ---- names --------------------------------------------------------------------------------------
    def lookup(self, node: ast.Name) -> Value | None:
        frame, name = self.frame, node.id
        if name in frame.consts:
            return frame.consts[name][1]
        var = frame.find(name)
        if var is not None:
            return Typed(Expr.var(var.ir), var.dtype)
        if name in frame.numbers:
            return frame.numbers[name]
        if name in frame.exprs:
            return frame.exprs[name]
        if name in frame.objects:
            return frame.objects[name]
        if name in frame.registers:
            return PyObject(frame.registers[name])
        decl = frame.buffers.get(name)
        if decl is not None:
            if name in frame.scalars:
                return Typed(Expr.load(decl.name, Expr.u32(0)), decl.dtype.arith)
            return Buffer(decl)
        if name in frame.ended:
            raise self.error(node, f"{name!r} was assigned only inside a block that ended (line {frame.ended[name]})",
                             f"assign it before the if/for (e.g. `{name} = 0`) and update it inside", "unknown_var")
        return None

    def buffer(self, node: ast.expr) -> BufferDecl:
        if isinstance(node, ast.Name) and node.id in self.frame.consts:
            raise self.error(node, f"{node.id!r} is a compile-time value (vyre.Const), used as an array",
                             f"a Const parameter holds one number or bool; pass arrays to a buffer parameter "
                             f"({node.id}: vyre.In[vyre.u32]) and index that", "type_mismatch")
        return super().buffer(node)

    def global_value(self, node: ast.Name) -> object:
        try:
            return self.frame.namespace(node.id)
        except (KeyError, AttributeError):
            raise self.error(node, f"name {node.id!r} is not defined", "assign it first, or define it at module "
                             "level (numbers become literals)", "unknown_var") from None

    def fresh(self, base: str) -> str:
        """A new IR name that no identifier of the kernel or its helpers (or an earlier fresh name) uses."""
        if self.taken is None:
            self.taken = set(self.options.names.values())
            for tree, code in self.sources.values():
                self._take_identifiers(tree, code)
        k = self.next_suffix.get(base, 0)  # suffixes below k are taken: each fresh() is amortised O(1)
        while f"{base}_{k}" in self.taken:
            k += 1
        self.next_suffix[base] = k + 1
        name = f"{base}_{k}"
        self.taken.add(name)
        return name

    def _take_identifiers(self, tree: ast.AST, code: Any = None) -> None:
        if code is not None:  # the compiler's lists of names: no tree walk
            self.taken.update(code.co_varnames, code.co_names, code.co_freevars, code.co_cellvars)
            return
        for n in ast.walk(tree):
            if isinstance(n, ast.Name):
                self.taken.add(n.id)
            elif isinstance(n, ast.arg):
                self.taken.add(n.arg)

    def effects_mark(self) -> int:
        return len(self.out)

    def effects_since(self, mark: int) -> bool:
        return any(_node_has_effect(n) for n in iter_nodes(tuple(self.out[mark:])))

    def budget_error(self, node: ast.AST | None) -> ValidationError:
        """Past the expansion budget while inlining: the error names the kernel's calling line."""
        if not self.inlining:
            return super().budget_error(node)
        return self.lines.source.error(
            self.site, f"inlining @vyre.func helpers ({self.inlining[0].name}() ...) expands the kernel past "
            f"{EXPANSION_BUDGET:,} expressions and statements",
            "call a helper once and reuse its value (t = h(x)) instead of calling it again, or loop with "
            "`for k in range(n)`", "program_too_large")

    def _is_call_to(self, node: ast.expr, kind: str) -> TypeGuard[ast.Call]:
        if not isinstance(node, ast.Call) or not isinstance(node.func, (ast.Name, ast.Attribute)):
            return False
        try:
            target = self.value(node.func)
        except ValidationError:
            return False
        return isinstance(target, PyObject) and isinstance(target.obj, Intrinsic) and target.obj.kind == kind

    # ---- helpers ------------------------------------------------------------------------------------
    def call_other(self, node: ast.Call, target: Value) -> Value:
        from vyre.frontend.kernel import Func

        if isinstance(target, PyObject) and isinstance(target.obj, Func):
            result = self.inline(node, target.obj, node)
            if result is None:
                raise self.error(node, f"{target.obj.name}() returns nothing, so it has no value",
                                 "end the helper with `return value`, or call it as a statement")
            return result
        return super().call_other(node, target)

    def inline(self, node: ast.Call, func: Any, stmt: ast.AST) -> Value | None:
        """Inline a ``@vyre.func`` call: bind arguments once, emit its statements, return its value."""
        if len(self.inlining) >= MAX_INLINE_DEPTH and func in self.inlining:
            raise self.error(node, f"{func.name}() calls itself more than {MAX_INLINE_DEPTH} deep",
                             "end the recursion with a compile-time `if` on a Const parameter (`if levels == 1: "
                             "... else: f(levels - 1)`), or write a loop", "nesting_too_deep")
        if len(self.inlining) >= MAX_INLINE_DEPTH:
            chain = " -> ".join(f.name for f in self.inlining[:3])
            raise self.error(node, f"helpers nest deeper than {MAX_INLINE_DEPTH} calls ({chain} -> ...)",
                             "flatten the chain: merge small helpers, or call them one after another from the kernel",
                             "nesting_too_deep")
        self.spend(node)
        self.no_keywords(node)
        source, fndef = func.parsed()
        params = [*fndef.args.posonlyargs, *fndef.args.args]
        if len(params) != len(node.args) or fndef.args.vararg or fndef.args.kwarg or fndef.args.kwonlyargs:
            raise self.error(node, f"{func.name}() takes {len(params)} positional arguments, got {len(node.args)}",
                             "pass one argument per parameter, by position")
        code = getattr(func.fn, "__code__", None)
        if id(fndef) not in self.sources:
            self.sources[id(fndef)] = (fndef, code)
            if self.taken is not None:
                self._take_identifiers(fndef, code)
        namespace = namespace_of(func.fn)
        frame = _Frame(source, namespace, self.fresh, is_helper=True)
        assigned = self.assigned.get(id(fndef))
        if assigned is None:  # once per helper and kernel: a helper may be inlined hundreds of times
            assigned = self.assigned[id(fndef)] = _assigned_names(fndef)
        aliased: set[str] = set()  # parameters that are the caller's variables themselves
        for param, arg in zip(params, node.args):
            spec = annotation_value(param.annotation, namespace, source) if param.annotation is not None else None
            if isinstance(spec, ConstSpec):
                value = self._const_argument(arg, spec, f"argument {param.arg!r} of {func.name}()")
                frame.consts[param.arg] = (value, spec.literal(value))
                continue
            v = self.value(arg)
            want = spec.dtype if isinstance(spec, ScalarType) else None
            if isinstance(v, Buffer):
                frame.buffers[param.arg] = v.decl
                continue
            if isinstance(v, PyObject):
                frame.objects[param.arg] = v  # a Python object of the caller (a function, a type ...)
                continue
            if isinstance(v, Number) and want is None:
                frame.numbers[param.arg] = v  # a literal has no effect: it stays untyped, typed where used
                continue
            v = self.coerce(arg, v, want, f"argument {param.arg!r} of {func.name}()")
            if spec is BY_EXPRESSION:
                self._by_expression(arg, v, f"argument {param.arg!r} of {func.name}()")
                frame.exprs[param.arg] = v
                frame.types[param.arg] = v.dtype
                continue
            if v.expr.op == Op.VAR and param.arg not in assigned:  # nothing can change it during the call
                frame.scopes[0][param.arg] = _Var(name_of(v.expr), v.dtype, False)
                frame.types[param.arg] = v.dtype
                aliased.add(param.arg)
                continue
            ir = self.fresh(param.arg)
            self.emit(Node.let(ir, v.expr), stmt)
            frame.scopes[0][param.arg] = _Var(ir, v.dtype, False)
            frame.types[param.arg] = v.dtype
        body = list(fndef.body)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        ret = body.pop() if body and isinstance(body[-1], ast.Return) else None
        saved = (self.frame, self.source, self.site)
        self.frame, self.source, self.site = frame, source, self.site or stmt
        self.inlining.append(func)
        try:
            for s in body:
                self.statement(s)
            result = self.value(ret.value) if ret is not None and ret.value is not None else None
            if isinstance(result, Owned):  # a nested helper's own variable: as dead as ours
                return result
            if isinstance(result, Typed) and result.expr.op == Op.VAR:
                own = {var.ir for name, var in frame.scopes[0].items() if name not in aliased}
                if name_of(result.expr) in own:
                    return Owned(result.expr, result.dtype)
            return result
        finally:
            self.inlining.pop()
            self.frame, self.source, self.site = saved


    def _by_expression(self, arg: ast.expr, v: Typed, what: str) -> None:
        """Refuse an argument passed ``BY_EXPRESSION`` that has an effect: it would run at each use."""
        if _has_effect(v.expr):
            raise self.error(arg, f"{what} is passed BY_EXPRESSION, and `{short_text(arg)}` has a side effect (an "
                             "atomic or a call), which would run at each use",
                             "bind it to a name first (v = ...) and pass the name", "side_effect_in_expression")

    def _const_argument(self, arg: ast.expr, spec: ConstSpec, what: str) -> Scalar:
        """The compile-time value passed to a helper's Const parameter (evaluated in the caller's frame)."""
        found = self._static(arg)
        if found is None:
            raise self.error(arg, f"{what} is {spec!r}, and `{ast.unparse(arg)}` is not a compile-time value",
                             "pass a Const parameter of the kernel, a number, or a module-level constant",
                             "type_mismatch")
        try:
            return spec.check(what, found[0])
        except VyreError as exc:
            raise self.error(arg, exc.message, exc.fix.rstrip("."), "type_mismatch") \
                from None


def _assigned_names(fndef: ast.FunctionDef) -> set[str]:
    """The names a function assigns or updates (or loops over) anywhere in its body."""
    names: set[str] = set()
    for n in ast.walk(fndef):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(
            n, (ast.AugAssign, ast.AnnAssign, ast.For)) else []
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _node_has_effect(node: Node) -> bool:
    """A statement that stores, synchronises, ends the invocation or runs an atomic (not counting nested ones)."""
    if isinstance(node, (Store, Barrier, Return)):
        return True
    return any(e.op == Op.ATOMIC for top in node_exprs(node) for e in iter_subexprs(top))


def _has_effect(e: Expr) -> bool:
    stack = [e]
    while stack:
        cur = stack.pop()
        if cur.op in (Op.ATOMIC, Op.CALL):
            return True
        stack.extend(cur.args)
    return False


def kernel_findings(program: Program) -> list[Finding]:
    """The validator's findings for a kernel's program, its ``Out[T]`` outputs sized later counted as 1."""
    sized_later = {b.name for b in program.buffers if b.access is Access.OUTPUT and b.count == 0}
    return findings(with_output_counts(program, dict.fromkeys(sized_later, 1)) if sized_later else program)


def with_output_counts(program: Program, counts: Mapping[str, int]) -> Program:
    """``program`` with the named ``Out[T]`` outputs (count 0) given element counts."""
    buffers = [BufferDecl(b.name, b.binding, b.dtype, counts[b.name], b.access) if b.name in counts else b
               for b in program.buffers]
    return Program(buffers, program.workgroup_size, program.body, program.name)


__all__ = ["Lowering", "Options", "cast_name", "kernel_findings", "with_output_counts"]
