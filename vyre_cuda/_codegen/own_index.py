"""Written buffers whose loads may still go through the non-coherent (read-only) cache.

``ld.global.nc`` tells ptxas a load cannot see any store of the kernel, so it may move the load
above earlier stores. In a coarsened kernel (``_codegen.coarsen``) that lets the loads of the next
logical workgroups start before the stores of the current one (SAXPY: ``y = a * x + y`` reaches
copy bandwidth only this way). It is correct for a written buffer ``B`` only when no invocation
ever loads a word of ``B`` after any store to that word, which ``cached_read_write`` proves from
this shape:

- the program's last top-level statement is the only store to ``B`` (no atomic touches ``B``),
  so nothing runs after it: no value loaded from ``B`` can be used, or re-loaded by the
  compiler, after the store;
- that store and every load of ``B`` use the invocation's own index: ``invocation_id(0)``, or a
  variable bound once by ``let`` to it and never assigned. Each invocation of a 1-D launch then
  reads and writes only its own word; invocations that share an x id (a y or z extent) race on
  ``B`` in any backend, so their outcome is unordered anyway.

Everything else keeps plain ``ld.global`` for written buffers.
"""

from __future__ import annotations

from vyre.ir.expr import Expr
from vyre.ir.node import Store
from vyre.ir.op import Op
from vyre.ir.program import Access, Program
from vyre.ir.shard import is_invocation_x, own_index_names
from vyre.ir.walk import iter_all_exprs, iter_nodes

_WRITTEN = (Access.READ_WRITE, Access.OUTPUT)


def cached_read_write(program: Program) -> frozenset[str]:
    """Names of written global buffers whose loads may use ``ld.global.nc`` (see the module docstring)."""
    if not program.body or not isinstance(program.body[-1], Store):
        return frozenset()
    last = program.body[-1]
    decl = next((d for d in program.buffers if d.name == last.buffer), None)
    if decl is None or decl.is_workgroup or decl.access not in _WRITTEN:
        return frozenset()
    own = own_index_names(program)

    def is_own(e: Expr) -> bool:
        return is_invocation_x(e) or (e.op == Op.VAR and e.name in own)

    if not is_own(last.index):
        return frozenset()
    if any(isinstance(n, Store) and n.buffer == decl.name for n in iter_nodes(program.body[:-1])):
        return frozenset()
    for e in iter_all_exprs(program.body):
        if e.name != decl.name:
            continue
        if e.op == Op.ATOMIC or (e.op == Op.LOAD and not is_own(e.args[0])):
            return frozenset()
    return frozenset({decl.name})
