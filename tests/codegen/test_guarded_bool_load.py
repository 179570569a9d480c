"""A bool load's flag comes from a select on its bounds guard (ptxas 13.0 and the driver's JIT
miscompiled ``if`` on the plain guarded load: tests/fuzz/corpus/fuzz_jit_guarded_bool_load)."""

from __future__ import annotations

import re

from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre_cuda import emit_ptx


def test_bool_load_selects_on_its_guard() -> None:
    i = Expr.var("i")
    body = [Node.let("i", Expr.invocation_id(0)),
            Node.if_(Expr.load("flags", Expr.u32(3)), [Node.store("o", i, Expr.f32(2.5))])]
    program = Program([BufferDecl.read("flags", 0, DataType.BOOL), BufferDecl.output("o", 1, DataType.F32, 4)],
                      (32, 1, 1), body, name="flag")
    ptx = emit_ptx(program)
    load = re.search(r"@(%p\d+) ld\.global\.nc\.u32 (%r\d+), ", ptx)
    assert load, ptx
    guard, loaded = load.groups()
    select = re.search(rf"selp\.b32 (%r\d+), {re.escape(loaded)}, 0, {re.escape(guard)};", ptx)
    assert select, ptx
    assert re.search(rf"setp\.ne\.u32 %p\d+, {re.escape(select.group(1))}, 0;", ptx), ptx
