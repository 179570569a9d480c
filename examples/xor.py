"""xor: a ^= b over u32 words, the memory-bound baseline of the benchmarks."""

from __future__ import annotations

import numpy as np
from _example import main

from vyre.ir import BufferDecl, DataType, Expr, Node, Program


def build() -> Program:
    """a[i] ^= b[i]; out-of-bounds loads read 0 and stores do nothing, so no guard is needed."""
    i = Expr.invocation_id(0)
    return Program(
        [BufferDecl.read_write("a", 0, DataType.U32), BufferDecl.read("b", 1, DataType.U32)],
        (256, 1, 1),
        [Node.store("a", i, Expr.bitxor(Expr.load("a", i), Expr.load("b", i)))],
        name="xor",
    )


def demo(backend, program: Program, n: int) -> None:
    rng = np.random.default_rng(3)
    a, b = (rng.integers(0, 2**32, n, dtype=np.uint32) for _ in range(2))
    (out,) = backend.dispatch(program, [a, b])
    assert np.array_equal(out, a ^ b), "xor differs from numpy"


if __name__ == "__main__":
    main(build, demo, __file__)
