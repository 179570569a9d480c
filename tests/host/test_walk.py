"""A warm host dispatch on the oracle walks down its files without climbing back up one."""

from __future__ import annotations

import numpy as np

import vyre
from tests.walk import walk
from vyre.ir import BufferDecl, DataType, Expr, Node, Program


def xor_program() -> Program:
    i = Expr.invocation_id(0)
    return Program([BufferDecl.read_write("a", 0, DataType.U32), BufferDecl.read("b", 1, DataType.U32)], (64, 1, 1),
                   [Node.store("a", i, Expr.bitxor(Expr.load("a", i), Expr.load("b", i)))], name="xor_walk")


def test_a_warm_dispatch_on_the_oracle_never_climbs() -> None:
    backend = vyre.acquire("reference")
    program, a, b = xor_program(), np.arange(300, dtype=np.uint32), np.full(300, 7, np.uint32)
    backend.dispatch(program, [a, b])
    traced = walk(lambda: backend.dispatch(program, [a, b]))
    assert traced.climbs == []
    assert traced.files[:2] == ["vyre/driver/hooked.py", "vyre/reference/backend.py"]
