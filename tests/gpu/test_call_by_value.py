"""Composed ops on cuda are call by value, like the oracle: an atomic argument runs once.

Results that depend on which invocation won an atomic compare as multisets; the counters the
atomics build compare exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

from vyre.driver.config import DispatchConfig
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ops import OpDef, register_op
from vyre.reference import run

pytestmark = pytest.mark.gpu

U32 = DataType.U32
GID = Expr.invocation_id(0)
TWICE = OpDef("gpu_test.cbv.twice", (U32,), U32, expand=lambda x: Expr.add(x, x))
FIRST = OpDef("gpu_test.cbv.first", (U32, U32), U32, expand=lambda a, b: a)
SWAP = OpDef("gpu_test.cbv.swap_sub", (U32, U32), U32, expand=lambda a, b: Expr.sub(b, a))
for _op in (TWICE, FIRST, SWAP):
    register_op(_op)


def _bump(slot: int, by: int = 1) -> Expr:
    """Add ``by`` to ``acc[slot]``; each call site has its own slot, so old values are order-free."""
    return Expr.atomic(AtomicOp.ADD, "acc", Expr.u32(slot), Expr.u32(by))


@pytest.mark.parametrize("n", [1, 31, 1000, 4099])
def test_atomic_arguments_run_once_on_cuda(backend, rng, n: int) -> None:
    a = rng.integers(0, 2**32, n, dtype=np.uint32)
    program = Program(
        [BufferDecl.read("a", 0, U32), BufferDecl.output("acc", 1, U32, 4), BufferDecl.output("out", 2, U32, n),
         BufferDecl.output("keep", 3, U32, n)], (128, 1, 1),
        [Node.if_(Expr.lt(GID, Expr.buf_len("a")), [
            Node.store("out", GID, Expr.call(TWICE.id, Expr.call(TWICE.id, _bump(0)))),
            Node.store("keep", GID, Expr.call(FIRST.id, Expr.load("a", GID), _bump(2, 3))),
            Node.let("old", Expr.atomic(AtomicOp.ADD, "acc", Expr.call(FIRST.id, Expr.u32(1), _bump(3)),
                                        Expr.call(TWICE.id, Expr.load("a", GID)))),
        ])], name="call_by_value")
    want = run(program, [a], DispatchConfig())
    got = backend.dispatch(program, [a], DispatchConfig())
    # call by name would count 4, 6 and 2 per invocation in slots 0, 2 and 3
    assert got[0].tolist() == want[0].tolist() == [n, int((2 * a.astype(np.uint64)).sum() % 2**32), 3 * n, n]
    assert sorted(got[1].tolist()) == sorted(want[1].tolist()) == [4 * k for k in range(n)]
    assert np.array_equal(got[2], want[2]) and np.array_equal(got[2], a)


def test_left_to_right_order_on_cuda(backend) -> None:
    program = Program([BufferDecl.read_write("c", 0, U32), BufferDecl.output("out", 1, U32, 1)], (1, 1, 1),
                      [Node.store("out", Expr.u32(0), Expr.call(SWAP.id, Expr.atomic(
                          AtomicOp.ADD, "c", Expr.u32(0), Expr.u32(10)), Expr.load("c", Expr.u32(0))))])
    c0 = np.array([7], np.uint32)
    want, got = run(program, [c0]), backend.dispatch(program, [c0])
    assert [int(x[0]) for x in got] == [int(x[0]) for x in want] == [17, 10]
