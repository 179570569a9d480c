"""saxpy: y = a * x + y in f32 (mul then add, each rounded: no contraction)."""

from __future__ import annotations

import numpy as np
from _example import main

from vyre.ir import BufferDecl, DataType, Expr, Node, Program


def build() -> Program:
    """y[i] = a * x[i] + y[i] for every i < len(y)."""
    i = Expr.invocation_id(0)
    return Program(
        [
            BufferDecl.uniform("a", 0, DataType.F32, 1),
            BufferDecl.read("x", 1, DataType.F32),
            BufferDecl.read_write("y", 2, DataType.F32),
        ],
        (256, 1, 1),
        [
            Node.if_(Expr.lt(i, Expr.buf_len("y")), [
                Node.store("y", i, Expr.add(Expr.mul(Expr.load("a", Expr.u32(0)), Expr.load("x", i)),
                                            Expr.load("y", i))),
            ]),
        ],
        name="saxpy",
    )


def demo(backend, program: Program, n: int) -> None:
    rng = np.random.default_rng(2)
    a = np.array([1.5], dtype=np.float32)
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    (out,) = backend.dispatch(program, [a, x, y])
    assert np.array_equal(out, a[0] * x + y), "saxpy differs from numpy"


if __name__ == "__main__":
    main(build, demo, __file__)
