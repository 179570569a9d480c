"""Statement lowering: variables, stores, structured control flow, barriers."""

from __future__ import annotations

from vyre.ir.node import Assign, Barrier, Block, If, Let, Loop, Node, Region, Return, Store
from vyre.ir.op import Op
from vyre.ir.types import DataType
from vyre.ir.walk import iter_nodes
from vyre_cuda._codegen.builder import Builder, Val
from vyre_cuda._codegen.exprs import ExprLowering, Scope
from vyre_cuda._codegen.types import mov, reg_kind


class StmtLowering:
    """Lowers statement lists; each list is a scope (``let`` names end with it).

    Program identifiers never reach the PTX: each ``let`` gets a fresh numbered register.
    """

    def __init__(self, b: Builder, exprs: ExprLowering, body: tuple[Node, ...],
                 return_label: str | None = None) -> None:
        """``body``: the program's statements, whose never-assigned ``let``s of literals stay known
        as literals (``ExprLowering.constant``; required, since an empty body would call every
        ``let`` unassigned). ``return_label``: where ``return_`` branches in a coarsened kernel
        (the end of the logical invocation); without it ``return_`` is ``ret``."""
        self.b = b
        self.exprs = exprs
        self.return_label = return_label
        self.assigned = {n.name for n in iter_nodes(body) if isinstance(n, Assign)}

    def body(self, nodes: tuple[Node, ...], scope: Scope) -> None:
        inner = dict(scope)
        for node in nodes:
            self.node(node, inner)

    def node(self, node: Node, scope: dict[str, Val]) -> None:
        b, lower = self.b, self.exprs.lower
        self.exprs.statement += 1
        if isinstance(node, Let):
            v = lower(node.value, scope)
            scope[node.name] = Val(b.op(mov(v.dtype), reg_kind(v.dtype), v.reg), v.dtype)
            if node.name not in self.assigned:
                self.exprs.constant(scope[node.name].reg, v.reg)
            else:
                self.exprs.mutable.add(scope[node.name].reg)
        elif isinstance(node, Assign):
            v, target = lower(node.value, scope), scope[node.name]
            b.ins(f"{mov(v.dtype)} {target.reg}, {v.reg}")
        elif isinstance(node, Store):
            index = lower(node.index, scope)
            self.exprs.buffers.store(node.buffer, index.reg, lower(node.value, scope), self.exprs.bound(index),
                                     self.exprs.field(index))
        elif isinstance(node, If):
            self._if(node, scope)
        elif isinstance(node, Loop):
            self._loop(node, scope)
        elif isinstance(node, Barrier):
            b.ins("bar.sync 0")  # also orders global and shared memory within the workgroup
        elif isinstance(node, (Block, Region)):
            self.body(node.body, scope)
        elif isinstance(node, Return):
            b.ins(f"bra {self.return_label}" if self.return_label else "ret")
        else:
            raise TypeError(f"unknown statement {type(node).__name__}. Fix: build statements with Node.*.")

    def _if(self, node: If, scope: Scope) -> None:
        b = self.b
        cond = self.exprs.lower(node.cond, scope).reg
        skip, end = b.new_label(), b.new_label()
        b.ins(f"bra {skip}", f"!{cond}")
        self.body(node.then, scope)
        if node.otherwise:
            b.ins(f"bra {end}")
            b.place(skip)
            self.body(node.otherwise, scope)
            b.place(end)
        else:
            b.place(skip)

    def _loop(self, node: Loop, scope: Scope) -> None:
        """Half-open U32 range; bounds are evaluated once and the counter never overflows."""
        b = self.b
        i = b.op("mov.b32", "r", self.exprs.lower(node.start, scope).reg)
        self.exprs.mutable.add(i)
        last = self.exprs.lower(node.end, scope)
        end = b.op("mov.b32", "r", last.reg)  # copy: the body may assign it
        top, done = b.new_label(), b.new_label()
        b.place(top)
        inner = {**scope, node.var: Val(i, DataType.U32)}
        stop = b.op("setp.ge.u32", "p", i, end)
        guard = _trip_guard(node)
        if guard is not None:  # a trip that finds the guard off leaves it off: no later trip does anything
            negated = guard.cond.op == Op.NOT_
            flag = self.exprs.lower(guard.cond.args[0] if negated else guard.cond, inner).reg
            # one exit test per trip: ptxas 13.0 dropped a second, separate exit branch of nested loops
            stop = b.op("or.pred", "p", stop, flag if negated else b.op("not.pred", "p", flag))
        b.ins(f"bra {done}", stop)
        if node.var not in self.assigned:  # in the body (not in the guard above) the counter is below the end
            self.exprs.bounded(inner[node.var], max(self.exprs.bound(last) - 1, 0))
        self.body(node.body if guard is None else guard.then, inner)
        b.ins(f"add.u32 {i}, {i}, 1")
        b.ins(f"bra {top}")
        b.place(done)


def _trip_guard(node: Loop) -> If | None:
    """The loop's only statement when it is ``if (x)`` or ``if (not x)`` with no ``else``, ``x`` a
    variable other than the loop's own. Only that ``if`` can change ``x``, so once a trip finds the
    condition false every later trip does nothing, and the loop can stop there (how
    ``vyre.lib.blocks.bounded_wait`` leaves its nested loops as soon as the wait is over)."""
    if len(node.body) != 1 or not isinstance(node.body[0], If) or node.body[0].otherwise:
        return None
    cond = node.body[0].cond
    read = cond.args[0] if cond.op == Op.NOT_ else cond
    return node.body[0] if read.op == Op.VAR and read.name != node.var else None
