"""Which programs survive splitting their x range over several devices, and the per-device program.

``plan_split`` decides, from the IR alone, how each buffer of a 1-D program travels when its
workgroups are divided into contiguous ranges, one range per device (``vyre.lib.multi.map``):

- ``read_write`` buffers and ``output`` buffers not named in ``reduce`` are *sharded*: device d
  gets the elements of its invocation range and the results are concatenated. Every load, store
  and atomic on them must use the invocation's *own index* (``invocation_id(0)``, or a variable
  bound once by ``let`` to it and never assigned), so no invocation reads or writes an element
  another device holds.
- ``read`` buffers are sharded when every access is an own-index load, else *replicated* (each
  device gets the whole buffer, so any index is fine); ``uniform`` buffers are replicated.
- buffers named in ``reduce`` (``output`` buffers of U32/I32) are *reduced*: each device starts
  from zeros and the partial buffers are combined with the op. The only access allowed is an
  atomic of the matching kind whose old value is bound by ``let`` and never read (the old value
  of a split atomic differs from the one-device value). With zero as the start value, adding,
  or-ing and xor-ing the partials, or taking their min, max or and, equals the one-device result.
- ``call`` of a composed op whose expansion reads ids, buffers or buffer lengths is refused (its
  expansion could index buffers in ways this pass does not see).

``shard_program`` makes device d's program for the invocation offset ``offset``: uses of the x id
as a value become ``invocation_id(0) + offset`` (``workgroup_id(0)`` likewise), ``buf_len`` of a
sharded buffer becomes its whole length, and sharded buffers are sized at run time, so the
device computes exactly what the one-device dispatch computes for those invocations. Ranges
start at workgroup boundaries, so ``local_id``, barriers, workgroup memory and subgroups are
unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from vyre.driver.errors import InvalidProgram
from vyre.ir.expr import ID_OPS, AtomicOp, Expr, _expr, name_of
from vyre.ir.node import Assign, Block, If, Let, Loop, Node, Region, Store
from vyre.ir.op import Op
from vyre.ir.program import Access, Program
from vyre.ir.types import DataType
from vyre.ir.walk import iter_all_exprs, iter_nodes, iter_subexprs

REDUCE_OPS: dict[str, AtomicOp] = {
    "add": AtomicOp.ADD, "min": AtomicOp.MIN, "max": AtomicOp.MAX,
    "or": AtomicOp.OR, "and": AtomicOp.AND, "xor": AtomicOp.XOR,
}
_FIX_OWN = ("access sharded buffers only at the invocation's own index (invocation_id(0) or a variable "
            "bound once to it), or run the program on one device.")


@dataclass(frozen=True)
class SplitPlan:
    """How each non-workgroup buffer travels (see the module docstring)."""

    sharded: frozenset[str]
    replicated: frozenset[str]
    reduced: tuple[tuple[str, str], ...]  # (buffer, op) in declaration order
    own: frozenset[str]  # own-index variable names

    @property
    def reduce_ops(self) -> dict[str, str]:
        return dict(self.reduced)


def own_index_names(program: Program) -> frozenset[str]:
    """Variables bound exactly once, by ``let v = invocation_id(0)``, and never assigned or reused."""
    bindings: dict[str, int] = {}
    own: set[str] = set()
    for node in iter_nodes(program.body):
        if isinstance(node, (Let, Assign)):
            bindings[node.name] = bindings.get(node.name, 0) + 1
            if isinstance(node, Let) and is_invocation_x(node.value):
                own.add(node.name)
        elif isinstance(node, Loop):
            bindings[node.var] = bindings.get(node.var, 0) + 1
    return frozenset(n for n in own if bindings[n] == 1)


def is_invocation_x(e: Expr) -> bool:
    """``invocation_id(0)`` itself."""
    return e.op == Op.INVOCATION_ID and e.value == 0


def _accesses(program: Program) -> list[tuple[str, str, Expr]]:
    """Every (kind, buffer, index) of a load, store or atomic on a global buffer."""
    found: list[tuple[str, str, Expr]] = []
    for node in iter_nodes(program.body):
        if isinstance(node, Store):
            found.append(("store", node.buffer, node.index))
    for e in iter_all_exprs(program.body):
        if e.op in (Op.LOAD, Op.ATOMIC):
            found.append((e.op, name_of(e), e.args[0]))
    return found


def plan_split(program: Program, reduce: Mapping[str, str] | None = None) -> SplitPlan:
    """The split plan of ``program``, or ``InvalidProgram`` naming the first access that forbids it."""
    reduce = dict(reduce or {})
    name = program.name or "<unnamed>"
    decls = {b.name: b for b in program.buffers if not b.is_workgroup}
    _check_reduce_names(program, decls, reduce)
    own = own_index_names(program)

    def is_own(e: Expr) -> bool:
        return is_invocation_x(e) or (e.op == Op.VAR and e.name in own)

    accesses = [a for a in _accesses(program) if a[1] in decls]
    shardable_reads = {n for n, d in decls.items() if d.access is Access.READ}
    for kind, buf, index in accesses:
        decl = decls[buf]
        if buf in reduce:
            if kind != "atomic":
                raise InvalidProgram(f"program {name} {kind}s reduced buffer {buf!r}; a split program may "
                                     f"only update it with atomic {reduce[buf]}",
                                     f"update {buf!r} with Expr.atomic(AtomicOp.{REDUCE_OPS[reduce[buf]].name}, ...) "
                                     "only, or do not name it in reduce=.")
        elif decl.access is Access.READ:
            if not is_own(index):
                shardable_reads.discard(buf)
        elif decl.access.is_output and not is_own(index):
            raise InvalidProgram(f"program {name} {kind}s {decl.access.value} buffer {buf!r} at an index other "
                                 "than the invocation's own, so its elements cannot be split over devices",
                                 f"name {buf!r} in reduce= if it is an atomic accumulator, or {_FIX_OWN}")
    _check_reduced_atomics(program, reduce)
    _check_calls(program)
    sharded = {n for n, d in decls.items() if d.access.is_output and n not in reduce} | shardable_reads
    replicated = set(decls) - sharded - set(reduce)
    reduced = tuple((b.name, reduce[b.name]) for b in program.buffers if b.name in reduce)
    return SplitPlan(frozenset(sharded), frozenset(replicated), reduced, own)


def _check_reduce_names(program: Program, decls: Mapping, reduce: Mapping[str, str]) -> None:
    for buf, op in reduce.items():
        decl = decls.get(buf)
        if decl is None or decl.access is not Access.OUTPUT:
            outputs = ", ".join(b.name for b in program.buffers if b.access is Access.OUTPUT) or "none"
            raise InvalidProgram(f"reduce names {buf!r}, which is not an output buffer of program "
                                 f"{program.name or '<unnamed>'} (outputs: {outputs})",
                                 "name only `output` buffers in reduce= (read_write buffers are split, not reduced).")
        if op not in REDUCE_OPS:
            raise InvalidProgram(f"reduce op {op!r} for buffer {buf!r} is not one of {', '.join(REDUCE_OPS)}",
                                 'use e.g. reduce={"bins": "add"}.')
        if decl.dtype not in (DataType.U32, DataType.I32):
            raise InvalidProgram(f"reduced buffer {buf!r} is {decl.dtype.name}; only U32 and I32 outputs reduce",
                                 f"declare {buf!r} as U32 or I32, or run the program on one device.")


def _check_reduced_atomics(program: Program, reduce: Mapping[str, str]) -> None:
    """Atomics on reduced buffers: the matching op, the whole value of a ``let`` that is never read."""
    if not reduce:
        return
    bound: dict[str, int] = {}
    for node in iter_nodes(program.body):
        if isinstance(node, Let) and node.value.op == Op.ATOMIC and node.value.name in reduce:
            bound[node.name] = bound.get(node.name, 0) + 1
    total = 0
    for e in iter_all_exprs(program.body):
        if e.op == Op.ATOMIC and e.name in reduce:
            total += 1
            if e.value.base is not REDUCE_OPS[reduce[name_of(e)]]:
                raise InvalidProgram(f"reduced buffer {e.name!r} is updated with atomic {e.value.value}, but "
                                     f"reduce= combines it with {reduce[name_of(e)]!r}",
                                     f"give reduce={{{e.name!r}: {e.value.value!r}}} if that op is supported, "
                                     "or run the program on one device.")
    read = {e.name for e in iter_all_exprs(program.body) if e.op == Op.VAR}
    if sum(bound.values()) != total or read & set(bound):
        raise InvalidProgram("the old value of an atomic on a reduced buffer is used; it differs when the "
                             "program is split over devices",
                             "bind the atomic with Node.let to a name that is never read, or run the program "
                             "on one device.")


def _check_calls(program: Program) -> None:
    from vyre.ops import get_op

    for e in iter_all_exprs(program.body):
        if e.op != Op.CALL:
            continue
        op = get_op(name_of(e))
        if op is None or op.expand is None:
            continue  # primitive ops are lane functions of their arguments
        try:
            expansion = op.expand(*(Expr.var(f"__arg{k}") for k in range(len(e.args))))
            subexprs = iter_subexprs(_expr(expansion, "expansion"))
            opaque = any(s.op in (*ID_OPS, Op.LOAD, Op.ATOMIC, Op.BUF_LEN) for s in subexprs)
        except Exception:  # noqa: BLE001 - an expansion that needs typed arguments cannot be checked here
            opaque = True
        if opaque:
            raise InvalidProgram(f"op {e.name!r} expands to ids or buffer accesses, which a split cannot check",
                                 "write the op's work with plain IR in the program, or run it on one device.")


# ---- the per-device program ------------------------------------------------------------------------
class _Rewriter:
    """Rewrites one program for the invocation offset ``offset`` (see the module docstring)."""

    def __init__(self, program: Program, plan: SplitPlan, offset: int, lengths: Mapping[str, int]) -> None:
        self.plan, self.offset, self.lengths = plan, offset, lengths
        self.group_offset = offset // program.workgroup_size[0]

    def expr(self, e: Expr) -> Expr:
        if e.op in (Op.LOAD, Op.ATOMIC) and e.name in self.plan.sharded:
            return dataclasses.replace(e, args=(e.args[0], *map(self.expr, e.args[1:])))
        if e.op == Op.BUF_LEN and e.name in self.plan.sharded:
            return Expr.u32(self.lengths[e.name] & 0xFFFFFFFF)
        if self.offset:
            if is_invocation_x(e) or (e.op == Op.VAR and e.name in self.plan.own):
                return Expr.add(e, Expr.u32(self.offset & 0xFFFFFFFF))
            if e.op == Op.WORKGROUP_ID and e.value == 0:
                return Expr.add(e, Expr.u32(self.group_offset & 0xFFFFFFFF))
        if not e.args:
            return e
        return dataclasses.replace(e, args=tuple(map(self.expr, e.args)))

    def node(self, n: Node) -> Node:
        if isinstance(n, Let):
            return n if n.name in self.plan.own else Node.let(n.name, self.expr(n.value))
        if isinstance(n, Assign):
            return Node.assign(n.name, self.expr(n.value))
        if isinstance(n, Store):
            index = n.index if n.buffer in self.plan.sharded else self.expr(n.index)
            return Node.store(n.buffer, index, self.expr(n.value))
        if isinstance(n, If):
            return Node.if_(self.expr(n.cond), self.body(n.then), self.body(n.otherwise))
        if isinstance(n, Loop):
            return Node.loop(n.var, self.expr(n.start), self.expr(n.end), self.body(n.body))
        if isinstance(n, Block):
            return Node.block(self.body(n.body))
        if isinstance(n, Region):
            return Node.region(n.generator, self.body(n.body))
        return n  # barrier, return

    def body(self, nodes: tuple[Node, ...]) -> list[Node]:
        return [self.node(n) for n in nodes]


def shard_program(program: Program, plan: SplitPlan, offset: int, lengths: Mapping[str, int],
                  output_counts: Mapping[str, int]) -> Program:
    """Device program for invocations from ``offset`` on (a multiple of the workgroup x-size).

    ``lengths`` are the whole (one-device) element counts of the sharded buffers; sharded inputs
    are sized at run time and sharded ``output`` buffers get ``output_counts[name]`` elements.
    """
    if offset % program.workgroup_size[0]:
        raise ValueError(f"offset {offset} is not a multiple of the workgroup x-size {program.workgroup_size[0]}")
    rw = _Rewriter(program, plan, offset, lengths)
    buffers = []
    for b in program.buffers:
        if b.name in plan.sharded:
            b = dataclasses.replace(b, count=output_counts[b.name] if b.access is Access.OUTPUT else 0)
        buffers.append(b)
    return Program(buffers, program.workgroup_size, rw.body(program.body), name=program.name)


__all__ = ["REDUCE_OPS", "SplitPlan", "is_invocation_x", "own_index_names", "plan_split", "shard_program"]
