"""Which ``output`` buffers need their zero fill: the rest are written whole by the kernel.

An ``output`` buffer starts as zeros. The fill can only change a result if some element is read
(loaded, or updated by an atomic) before the program wrote it, or is never written at all. This
analysis proves the opposite for one shape, the common "one element per invocation" kernel:

- a store ``B[own] = value`` that every invocation reaches: a top-level statement (or one inside
  top-level ``Block``/``Region`` scopes, or inside top-level guards ``if own < buf_len(X)``
  without ``else``), with no ``return_`` anywhere before it, ``own`` being ``invocation_id(0)`` or
  a variable bound once to it (``vyre.ir.shard.own_index_names``);
- ``B`` is never loaded or updated atomically before that store, nor at any index other than
  ``own`` after it, and no atomic touches ``B`` at all (so no element is read before it is
  written, even by another invocation);
- the program has no ``Expr.call`` (an op expansion is opaque here);
- at dispatch time the logical grid covers the buffer: ``grid_x * block_x >= count(B)`` with y
  and z non-empty, and every guard buffer ``X`` holds at least ``count(B)`` elements.

``outputs_to_zero`` answers per dispatch (the structural part is cached per program); anything the
analysis cannot prove keeps its zero fill, so results stay exactly those of the reference oracle.
Grids are logical: a coarsened kernel (``_codegen.coarsen``) runs every logical workgroup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from vyre.ir.expr import Expr
from vyre.ir.node import Block, If, Node, Region, Return, Store
from vyre.ir.op import Op
from vyre.ir.program import Access, Program
from vyre.ir.shard import is_invocation_x, own_index_names
from vyre.ir.walk import iter_all_exprs, iter_nodes, iter_subexprs, node_exprs


@dataclass(frozen=True)
class WholeWrite:
    """Buffer ``buffer`` is written at every in-bounds own index below every ``guards`` buffer's length."""

    buffer: str
    guards: frozenset[str]


@lru_cache(maxsize=1024)
def whole_writes(program: Program) -> dict[str, WholeWrite]:
    """``output`` buffers with a store every invocation reaches at its own index (see the module docstring)."""
    if any(e.op == Op.CALL for e in iter_all_exprs(program.body)):
        return {}
    own = own_index_names(program)

    def is_own(e: Expr) -> bool:
        return is_invocation_x(e) or (e.op == Op.VAR and e.name in own)

    found: dict[str, WholeWrite] = {}
    for decl in program.buffers:
        if decl.access is Access.OUTPUT and not decl.is_workgroup:
            guards = _reaching_store(program.body, decl.name, is_own, frozenset())
            if guards is not None and _reads_only_own_after(program.body, decl.name, is_own):
                found[decl.name] = WholeWrite(decl.name, guards)
    return found


def outputs_to_zero(program: Program, block: Sequence[int], grid: Sequence[int],
                    counts: Mapping[str, int]) -> tuple[str, ...]:
    """Names of ``program``'s non-empty ``output`` buffers that still need a zero fill before a
    dispatch of the logical ``grid`` with workgroup size ``block`` and element ``counts``."""
    writes = whole_writes(program)
    invocations_x = grid[0] * block[0]
    runs = grid[1] * grid[2] * block[1] * block[2] > 0
    out = []
    for decl in program.buffers:
        if decl.access is not Access.OUTPUT or decl.is_workgroup:
            continue
        count = counts[decl.name]
        if not count:
            continue
        write = writes.get(decl.name)
        covered = (write is not None and runs and invocations_x >= count
                   and all(counts.get(g, 0) >= count for g in write.guards))
        if not covered:
            out.append(decl.name)
    return tuple(out)


def _reaching_store(body: Sequence[Node], name: str, is_own, guards: frozenset[str]) -> frozenset[str] | None:
    """Guards of the first store ``name[own]`` every invocation reaches in ``body``, or None.

    Walks statements in order; gives up at anything before that store that could end the
    invocation or read ``name``."""
    for node in body:
        if isinstance(node, Store) and node.buffer == name and is_own(node.index):
            return None if _reads(node_exprs(node), name) else guards
        if isinstance(node, (Block, Region)):
            found = _reaching_store(node.body, name, is_own, guards)
            if found is not None:
                return found
        elif isinstance(node, If) and not node.otherwise:
            guard = _length_guard(node.cond, is_own)
            if guard is not None and not _reads((node.cond,), name):
                found = _reaching_store(node.then, name, is_own, guards | {guard})
                if found is not None:
                    return found
        if _may_return_or_read(node, name):
            return None
    return None


def _length_guard(cond: Expr, is_own) -> str | None:
    """``X`` when ``cond`` is ``own < buf_len(X)`` or ``buf_len(X) > own``, else None."""
    if cond.op == Op.LT and is_own(cond.args[0]) and cond.args[1].op == Op.BUF_LEN:
        return cond.args[1].name
    if cond.op == Op.GT and cond.args[0].op == Op.BUF_LEN and is_own(cond.args[1]):
        return cond.args[0].name
    return None


def _may_return_or_read(node: Node, name: str) -> bool:
    """Whether running ``node`` may end the invocation or read buffer ``name``."""
    for n in iter_nodes((node,)):
        if isinstance(n, Return) or _reads(node_exprs(n), name):
            return True
    return False


def _reads(exprs: Sequence[Expr], name: str) -> bool:
    """Whether any of ``exprs`` loads ``name`` or updates it atomically."""
    return any(e.op in (Op.LOAD, Op.ATOMIC) and e.name == name for root in exprs for e in iter_subexprs(root))


def _reads_only_own_after(body: Sequence[Node], name: str, is_own) -> bool:
    """No atomic on ``name`` anywhere, and every load of it is at the invocation's own index."""
    for e in iter_all_exprs(tuple(body)):
        if e.name == name and (e.op == Op.ATOMIC or (e.op == Op.LOAD and not is_own(e.args[0]))):
            return False
    return True
