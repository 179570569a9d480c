"""Histogram of the low byte of u32 data: workgroup-local bins, a barrier, then global atomics.

By default the grid covers the largest buffer (the data, not the 256 bins); passing
``DispatchConfig(elements=len(data))`` (``vyre run ... --elements data``) says the same explicitly.
"""

from __future__ import annotations

import numpy as np
from _example import main

from vyre import DispatchConfig
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program

BINS = 256


def build() -> Program:
    """256-bin histogram of (data & 255), per-workgroup bins merged with atomics."""
    gid, lid = Expr.invocation_id(0), Expr.local_id(0)
    add = AtomicOp.ADD
    return Program(
        [
            BufferDecl.read("data", 0, DataType.U32),
            BufferDecl.output("bins", 1, DataType.U32, BINS),
            BufferDecl.workgroup("local_bins", BINS, DataType.U32),
        ],
        (BINS, 1, 1),
        [
            Node.if_(Expr.lt(gid, Expr.buf_len("data")), [
                Node.let("bin", Expr.bitand(Expr.load("data", gid), Expr.u32(BINS - 1))),
                Node.let("old_local", Expr.atomic(add, "local_bins", Expr.var("bin"), Expr.u32(1))),
            ]),
            Node.barrier(),
            Node.let("count", Expr.load("local_bins", lid)),
            Node.if_(Expr.ne(Expr.var("count"), Expr.u32(0)), [
                Node.let("old_global", Expr.atomic(add, "bins", lid, Expr.var("count"))),
            ]),
        ],
        name="histogram",
    )


def demo(backend, program: Program, n: int) -> None:
    data = np.random.default_rng(1).integers(0, 2**32, n, dtype=np.uint32)
    (bins,) = backend.dispatch(program, [data], DispatchConfig(elements=n))
    expected = np.bincount(data & (BINS - 1), minlength=BINS).astype(np.uint32)
    assert np.array_equal(bins, expected), "histogram differs from numpy"


if __name__ == "__main__":
    main(build, demo, __file__)
