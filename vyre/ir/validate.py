"""The program validator: every rule of docs/semantics.md, every finding reported at once.

``validate(program)`` raises ``ValidationError`` whose ``findings`` list each problem with a
stable code (catalogued in docs/semantics.md, "Validator codes"), a message, a ``Fix:`` sentence
and a path such as ``body[2].then[0].value``. ``findings(program)`` returns the same list.

A program is immutable, so one found valid stays valid: the last ``MAX_KNOWN_VALID`` such program
objects are remembered by identity (and held, so an id is not reused) and not walked again, which
spares a ``@vyre.kernel`` program the second walk when a backend validates it at dispatch. Programs
that call registered ops are not remembered: their validity depends on the op registry.
"""

from __future__ import annotations

from dataclasses import dataclass

from vyre.driver.errors import Finding, ValidationError
from vyre.ir.expr import Expr, name_of
from vyre.ir.layout import (
    MAX_BINDING,
    MAX_BOUND_BUFFERS,
    MAX_PARAM_BYTES,
    MAX_WORKGROUP_BYTES,
    PORTABLE_WORKGROUP_BYTES,
    workgroup_bytes,
)
from vyre.ir.node import Assign, Barrier, Block, If, Let, Loop, Node, Region, Return, Store
from vyre.ir.op import Op
from vyre.ir.program import Access, BufferDecl, Program
from vyre.ir.shape import (
    MAX_DEPTH,
    MAX_NODES,
    SUBGROUP_COLLECTIVES,
    buffer_well_formed,
    name_problem,
    node_well_formed,
    shape_problem,
)
from vyre.ir.types import INT_TYPES, DataType
from vyre.ir.typing import ExprTyper, IRTypeError
from vyre.ir.uniformity import Branches, LoopEvent, ReturnEvent, SyncOp, UniformityGraph, sync_findings

U32, BOOL = DataType.U32, DataType.BOOL
#: per-axis workgroup size limits and the limit on their product (invocations per workgroup)
WORKGROUP_AXIS_LIMITS = (1024, 1024, 64)
MAX_WORKGROUP_INVOCATIONS = 1024
MAX_BUFFER_COUNT = 0xFFFFFFFF  # indices are U32

#: expression ops whose value can differ between the invocations of a workgroup
_VARYING_OPS = frozenset({Op.INVOCATION_ID, Op.LOCAL_ID, Op.SUBGROUP_LOCAL_ID, Op.ATOMIC, *SUBGROUP_COLLECTIVES})
_SUBGROUP_OPS = frozenset({Op.SUBGROUP_LOCAL_ID, Op.SUBGROUP_SIZE, *SUBGROUP_COLLECTIVES})
_NEEDS_COUNT = (Access.OUTPUT, Access.UNIFORM, Access.WORKGROUP)
_READ_ONLY = (Access.READ, Access.UNIFORM)


#: how many valid program objects ``findings`` remembers (by identity)
MAX_KNOWN_VALID = 512
_known_valid: dict[int, Program] = {}


def validate(program: Program) -> None:
    """Raise ``ValidationError`` listing every finding when ``program`` breaks a rule."""
    found = findings(program)
    if found:
        raise ValidationError(found)


def findings(program: Program) -> list[Finding]:
    """Every finding for ``program`` (empty when it is valid)."""
    if not isinstance(program, Program):
        return [Finding("not_a_program", f"expected a Program, got {type(program).__name__}",
                        "build the program with vyre.ir.Program(buffers, workgroup_size, body)")]
    if _known_valid.get(id(program)) is program:
        return []
    validator = _Validator(program)
    found = validator.run()
    if not found and not validator.calls:
        while len(_known_valid) >= max(MAX_KNOWN_VALID, 1):
            del _known_valid[next(iter(_known_valid))]  # the oldest
        _known_valid[id(program)] = program
    return found


class _TooLarge(Exception):
    """Raised to stop walking once a program exceeds ``MAX_NODES``."""


@dataclass
class _Var:
    dtype: DataType | None  # None: its defining expression had a finding already
    node: int  # uniformity graph node
    loop: bool


@dataclass
class _ExprInfo:
    """What checking one expression tree learned: its type and what it reads."""

    dtype: DataType | None
    source: bool  # reads something invocation-dependent itself
    deps: set[int]  # uniformity nodes of the variables it reads


class _Validator:
    def __init__(self, program: Program) -> None:
        self.program = program
        self.out: list[Finding] = []
        self.typer: ExprTyper | None = None
        self.buffers: dict[str, BufferDecl] = {}
        self.graph = UniformityGraph()
        self.scope: dict[str, _Var] = {}
        self.events: list = []
        self.nodes = 0
        self.subgroup_path: str | None = None
        self.calls = False  # the program calls a registered op
        self._placeholders: list[Expr] = []

    def add(self, code: str, message: str, fix: str, path: str = "") -> None:
        self.out.append(Finding(code, message, fix, path))

    def run(self) -> list[Finding]:
        self._check_workgroup_size()
        self._check_name(self.program.name, "name", allow_empty=True)
        self._check_buffers()
        # type against the well-formed, first-declared buffers only
        self.typer = ExprTyper(Program(tuple(self.buffers.values()), self.program.workgroup_size, ()))
        try:
            self._body(self.program.body, "body", UniformityGraph.ROOT, 1, self.events)
        except _TooLarge:
            self.add("program_too_large", f"the program has more than {MAX_NODES} statements and expressions",
                     "split the work into several programs or bind repeated sub-expressions with Node.let", "body")
        self.graph.propagate()
        self.out += sync_findings(self.events, self.graph)
        wx = self.program.workgroup_size[0]
        if self.subgroup_path is not None and wx % 32:
            self.add("subgroup_workgroup_size",
                     f"subgroup ops need a workgroup x-size that is a multiple of 32, got {wx}",
                     "use a workgroup size such as (32, 1, 1), (64, 1, 1) or (128, 1, 1)", self.subgroup_path)
        return self.out

    # ---- program-level rules ------------------------------------------------------------------
    def _check_workgroup_size(self) -> None:
        wg = self.program.workgroup_size
        fix = "use 1..1024 invocations per axis (z at most 64) and at most 1024 in total, e.g. (256, 1, 1)"
        before = len(self.out)
        for axis, (v, limit) in enumerate(zip(wg, WORKGROUP_AXIS_LIMITS)):
            if v < 1:
                self.add("workgroup_size_invalid", f"workgroup size axis {axis} is {v}, must be at least 1", fix,
                         "workgroup_size")
            elif v > limit:
                self.add("workgroup_size_too_large", f"workgroup size axis {axis} is {v}, over the limit {limit}",
                         fix, "workgroup_size")
        total = wg[0] * wg[1] * wg[2]
        if len(self.out) == before and total > MAX_WORKGROUP_INVOCATIONS:
            self.add("workgroup_size_too_large",
                     f"workgroup size {tuple(wg)} has {total} invocations, over {MAX_WORKGROUP_INVOCATIONS}",
                     fix, "workgroup_size")

    def _check_name(self, name: object, path: str, allow_empty: bool = False) -> bool:
        if name is None and allow_empty:
            return True
        problem = name_problem(name)
        if problem is None or (allow_empty and problem[0] == "empty_name"):
            return True
        self.add(problem[0], problem[1], "use a non-empty str of at most 4096 UTF-8 bytes without lone surrogates",
                 path)
        return False

    def _check_buffers(self) -> None:
        bindings: dict[int, str] = {}
        for i, b in enumerate(self.program.buffers):
            path = f"buffers[{i}]"
            if not buffer_well_formed(b):
                self.add("malformed_buffer", f"buffer declaration {i} has fields of the wrong type",
                         "declare buffers with BufferDecl.read/read_write/output/uniform/workgroup", path)
                continue
            self._check_name(b.name, path)
            if b.name in self.buffers:
                self.add("duplicate_name", f"buffer name {b.name!r} is declared twice",
                         "give every buffer its own name", path)
            else:
                self.buffers[b.name] = b
            if not b.is_workgroup:
                self._check_binding(b, bindings, path)
            self._check_count(b, path)
        self._check_memory_spaces()

    def _check_memory_spaces(self) -> None:
        """Workgroup memory (with its alignment padding) and kernel parameter space must fit."""
        well_formed = [b for b in self.program.buffers if buffer_well_formed(b)]
        shared_bytes = workgroup_bytes(well_formed)
        if shared_bytes > MAX_WORKGROUP_BYTES:
            self.add("workgroup_memory_too_large",
                     f"workgroup buffers use {shared_bytes} bytes (each starts on a 4-byte boundary), "
                     f"over the limit {MAX_WORKGROUP_BYTES} (the most any device gives a workgroup; "
                     f"over {PORTABLE_WORKGROUP_BYTES} runs only where the backend's device opts in to it)",
                     "shrink the workgroup buffers or use a smaller element type", "buffers")
        bound = sum(not b.is_workgroup for b in well_formed)
        if bound > MAX_BOUND_BUFFERS:
            self.add("too_many_buffers",
                     f"the program declares {bound} non-workgroup buffers, over the limit {MAX_BOUND_BUFFERS} "
                     f"(one 8-byte kernel parameter each plus the parameter block must fit in {MAX_PARAM_BYTES} bytes)",
                     "pack several arrays into one buffer and index it with an offset", "buffers")

    def _check_binding(self, b: BufferDecl, bindings: dict[int, str], path: str) -> None:
        if b.binding < 0:
            self.add("negative_binding", f"buffer {b.name!r} has negative binding {b.binding}",
                     "number bindings 0, 1, 2, ... in declaration order", path)
        elif b.binding > MAX_BINDING:
            self.add("binding_too_large", f"buffer {b.name!r} has binding {b.binding}, over {MAX_BINDING} (u32)",
                     "number bindings 0, 1, 2, ... in declaration order", path)
        elif b.binding in bindings:
            self.add("duplicate_binding", f"buffers {bindings[b.binding]!r} and {b.name!r} share binding {b.binding}",
                     "give every non-workgroup buffer its own binding", path)
        else:
            bindings[b.binding] = b.name

    def _check_count(self, b: BufferDecl, path: str) -> None:
        if b.count < 0:
            self.add("negative_count", f"buffer {b.name!r} has negative count {b.count}",
                     "pass a count >= 1, or 0 for an input sized at dispatch time", path)
        elif b.count > MAX_BUFFER_COUNT:
            self.add("count_too_large", f"buffer {b.name!r} count {b.count} is over {MAX_BUFFER_COUNT} (U32 indices)",
                     "split the data over several buffers", path)
        elif b.count == 0 and b.access in _NEEDS_COUNT:
            fix = "declare its element count (only read and read_write inputs may be sized at dispatch)"
            if b.access is Access.OUTPUT:
                fix += (f"; for a @vyre.kernel whose Out parameter {b.name!r} is sized at dispatch, use "
                        f"kernel.specialise(output_counts={{{b.name!r}: n}}) (the program with that count) "
                        "wherever kernel.program is validated, run on the oracle, dispatched or written as text; "
                        "a kernel call takes output_counts= or elements= itself")
            self.add("count_required", f"{b.access.value} buffer {b.name!r} has count 0", fix, path)

    # ---- statements -------------------------------------------------------------------------------
    def _count(self) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _TooLarge

    def _body(self, body: tuple[Node, ...], path: str, ctx: int, depth: int, events: list) -> None:
        """Check a statement list in its own scope (its lets end with it)."""
        declared: list[str] = []
        for i, node in enumerate(body):
            self._stmt(node, f"{path}[{i}]", ctx, depth, events, declared)
        for name in declared:
            del self.scope[name]

    def _stmt(self, node: Node, path: str, ctx: int, depth: int, events: list, declared: list[str]) -> None:
        self._count()
        if depth > MAX_DEPTH:
            self.add("nesting_too_deep", f"statements nest deeper than {MAX_DEPTH} levels",
                     "flatten the nesting: move inner parts into separate blocks or programs", path)
            return
        if not node_well_formed(node):
            self.add("malformed_node", f"statement {type(node).__name__} has fields of the wrong type",
                     "build statements with the Node.* constructors", path)
            return
        if isinstance(node, Let):
            self._let(node, path, ctx, depth, events, declared)
        elif isinstance(node, Assign):
            self._assign(node, path, ctx, depth, events)
        elif isinstance(node, Store):
            self._store(node, path, ctx, depth, events)
        elif isinstance(node, If):
            self._if(node, path, ctx, depth, events)
        elif isinstance(node, Loop):
            self._loop(node, path, ctx, depth, events)
        elif isinstance(node, Barrier):
            events.append(SyncOp("barrier", ctx, path))
        elif isinstance(node, (Block, Region)):
            if isinstance(node, Region):
                self._check_name(node.generator, path + ".generator", allow_empty=True)
            self._body(node.body, path + ".body", ctx, depth + 1, events)
        elif isinstance(node, Return):
            events.append(ReturnEvent(ctx))

    def _declare(self, name: str, path: str, info: _ExprInfo | None, ctx: int, loop: bool) -> bool:
        if not self._check_name(name, path):
            return False
        if name in self.scope:
            kind = "loop variable" if self.scope[name].loop else "variable"
            self.add("shadowed_name", f"{name!r} is already declared as a {kind} in an enclosing scope",
                     f"choose a new name instead of re-declaring {name!r}", path)
            return False
        if info is None:  # loop variable: uniform exactly when its loop's bounds are
            self.scope[name] = _Var(U32, self.graph.add_node(parents=(ctx,)), True)
        else:
            node = self.graph.add_node(info.source, (ctx, *info.deps))
            self.scope[name] = _Var(info.dtype, node, False)
        return True

    def _let(self, node: Let, path: str, ctx: int, depth: int, events: list, declared: list[str]) -> None:
        info = self._expr(node.value, path + ".value", ctx, depth, events)
        if self._declare(node.name, path, info, ctx, loop=False):
            declared.append(node.name)

    def _assign(self, node: Assign, path: str, ctx: int, depth: int, events: list) -> None:
        info = self._expr(node.value, path + ".value", ctx, depth, events)
        var = self.scope.get(node.name)
        if var is None:
            self.add("assign_undeclared", f"assignment to {node.name!r}, which is not declared here",
                     f"declare it first with Node.let({node.name!r}, ...) in this or an enclosing scope", path)
            return
        if var.loop:
            self.add("assign_loop_var", f"assignment to loop variable {node.name!r}",
                     "loop variables are read-only: copy it into a let and update that", path)
            return
        self._expect(info.dtype, (var.dtype,), f"value assigned to {node.name!r}", path + ".value")
        for dep in (ctx, *info.deps):
            self.graph.add_edge(dep, var.node)
        if info.source:
            self.graph.mark_source(var.node)

    def _store(self, node: Store, path: str, ctx: int, depth: int, events: list) -> None:
        index = self._expr(node.index, path + ".index", ctx, depth, events)
        value = self._expr(node.value, path + ".value", ctx, depth, events)
        buf = self._buffer(node.buffer, path, "store to")
        self._expect(index.dtype, (U32,), f"index of store to {node.buffer!r}", path + ".index")
        if buf is not None:
            self._expect(value.dtype, (buf.dtype.arith,), f"value stored to {buf.dtype.name} buffer {buf.name!r}",
                         path + ".value")

    def _if(self, node: If, path: str, ctx: int, depth: int, events: list) -> None:
        cond = self._expr(node.cond, path + ".cond", ctx, depth, events)
        self._expect(cond.dtype, (BOOL,), "if condition", path + ".cond")
        inner = self.graph.add_node(cond.source, (ctx, *cond.deps))
        branches = Branches()
        events.append(branches)
        self._body(node.then, path + ".then", inner, depth + 1, branches.then)
        self._body(node.otherwise, path + ".otherwise", inner, depth + 1, branches.otherwise)

    def _loop(self, node: Loop, path: str, ctx: int, depth: int, events: list) -> None:
        start = self._expr(node.start, path + ".start", ctx, depth, events)
        end = self._expr(node.end, path + ".end", ctx, depth, events)
        self._expect(start.dtype, (U32,), "loop start", path + ".start")
        self._expect(end.dtype, (U32,), "loop end", path + ".end")
        inner = self.graph.add_node(start.source or end.source, (ctx, *start.deps, *end.deps))
        loop = LoopEvent()
        events.append(loop)
        declared = self._declare(node.var, path + ".var", None, inner, loop=True)
        self._body(node.body, path + ".body", inner, depth + 1, loop.body)
        if declared:
            del self.scope[node.var]

    def _buffer(self, name: str, path: str, what: str) -> BufferDecl | None:
        buf = self.buffers.get(name)
        if buf is None:
            self.add("unknown_buffer", f"{what} buffer {name!r}, which is not declared",
                     f"add a BufferDecl named {name!r} to the program's buffers", path)
        elif buf.access in _READ_ONLY:
            self.add("read_only_write", f"{what} {buf.access.value} buffer {name!r}",
                     "declare the buffer read_write or output to write it", path)
        return buf

    def _expect(self, got: DataType | None, allowed: tuple[DataType | None, ...], what: str, path: str) -> None:
        if got is None or None in allowed or got in allowed:
            return
        want = "/".join(t.name for t in allowed)
        fix = "cast it with Expr.cast(DataType.U32, ...)" if allowed == (U32,) else \
            f"cast it with Expr.cast(DataType.{want}, ...) or build it as {want}"
        if allowed == (BOOL,):
            fix = "compare it instead, e.g. Expr.ne(x, Expr.u32(0)), or cast it to BOOL"
        self.add("type_mismatch", f"{what} is {got.name}, expected {want}", fix, path)

    # ---- expressions ------------------------------------------------------------------------------
    def _expr(self, root: Expr, path: str, ctx: int, depth: int, events: list) -> _ExprInfo:
        """Check one expression tree (iteratively: no recursion however deep it is)."""
        info = _ExprInfo(None, False, set())
        types: dict[int, DataType | None] = {}
        too_deep = False
        stack: list[tuple[Expr, int, bool]] = [(root, depth + 1, False)]
        while stack:
            e, d, children_done = stack.pop()
            if children_done:
                types[id(e)] = self._expr_node(e, types, info, path, ctx, events)
                continue
            self._count()
            problem = shape_problem(e)
            if d > MAX_DEPTH or problem:
                if problem:
                    self.add("malformed_expr", problem, "build expressions with the Expr.* constructors", path)
                elif not too_deep:
                    too_deep = True
                    self.add("nesting_too_deep", f"expression nests deeper than {MAX_DEPTH} levels (with statements)",
                             "bind intermediate values with Node.let to flatten the expression", path)
                types[id(e)] = None
                continue
            stack.append((e, d, True))
            stack.extend((a, d + 1, False) for a in e.args)
        info.dtype = types[id(root)]
        return info

    def _expr_node(self, e: Expr, types: dict, info: _ExprInfo, path: str, ctx: int, events: list) -> DataType | None:
        """Per-node rules, uniformity bookkeeping and the node's type (children already typed)."""
        op = e.op
        if op in _VARYING_OPS or (op == Op.LOAD and e.name in self.buffers and self.buffers[e.name].access.writable):
            info.source = True
        if op in _SUBGROUP_OPS and self.subgroup_path is None:
            self.subgroup_path = path
        if op == Op.CALL:
            self.calls = True
        if op in SUBGROUP_COLLECTIVES:
            events.append(SyncOp(op, ctx, path))
        elif op == Op.ATOMIC and e.name in self.buffers and self.buffers[e.name].access in _READ_ONLY:
            self._buffer(e.name, path, "atomic on")
        elif op in (Op.DIV, Op.REM) and _is_int_zero(e.args[1]):
            self.add("zero_divisor", f"{op} by a literal zero",
                     "divide by a non-zero literal, or guard a computed divisor with Expr.select", path)
        elif op == Op.VAR:
            var = self.scope.get(name_of(e))
            if var is None:
                self.add("unknown_var", f"variable {e.name!r} is not declared here",
                         f"declare it with Node.let({e.name!r}, ...) before this use", path)
                return None
            info.deps.add(var.node)
            return var.dtype
        child_types = [types[id(a)] for a in e.args]
        if None in child_types:
            return None  # an operand already has a finding: do not cascade
        return self._type_of(e, child_types, path)

    def _type_of(self, e: Expr, child_types: list[DataType], path: str) -> DataType | None:
        """Type ``e`` with ExprTyper on a shallow copy whose operands are typed placeholders (common
        well-typed ops directly from their operands' types: ``ExprTyper.quick_type``)."""
        quick = self.typer.quick_type(e, child_types)
        if quick is not None:
            return quick
        while len(self._placeholders) < len(child_types):
            self._placeholders.append(Expr.var(f"\0{len(self._placeholders)}"))
        holders = tuple(self._placeholders[: len(child_types)])
        shallow = Expr(e.op, holders, e.dtype, e.value, e.name) if holders else e
        try:
            return self.typer.type_of(shallow, {name_of(h): t for h, t in zip(holders, child_types)})
        except IRTypeError as err:
            self.add(err.code, err.message, err.fix, path)
            return None


def _is_int_zero(e: Expr) -> bool:
    return e.op == Op.LIT and e.dtype in INT_TYPES and e.value == 0
