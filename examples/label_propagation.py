"""Connected components by label propagation: one step per dispatch, repeated with dispatch_until.

Each step lowers both ends of every edge to the smaller label (atomic MIN) and raises the
``changed`` flag; ``dispatch_until`` zeroes the flag, runs the step, and repeats while it is set,
all on resident buffers.
"""

from __future__ import annotations

import numpy as np
from _example import main

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program


def build() -> Program:
    """One label propagation step over an edge list (src[i], dst[i])."""
    i = Expr.invocation_id(0)
    lu, lv = Expr.var("lu"), Expr.var("lv")

    def lower(node: Expr, label: Expr, tag: str) -> list[Node]:
        return [
            Node.let(f"old_{tag}", Expr.atomic(AtomicOp.MIN, "labels", node, label)),
            Node.let(f"flag_{tag}", Expr.atomic(AtomicOp.OR, "changed", Expr.u32(0), Expr.u32(1))),
        ]

    return Program(
        [
            BufferDecl.read("src", 0, DataType.U32),
            BufferDecl.read("dst", 1, DataType.U32),
            BufferDecl.read_write("labels", 2, DataType.U32),
            BufferDecl.read_write("changed", 3, DataType.U32, 1),
        ],
        (256, 1, 1),
        [
            Node.if_(Expr.lt(i, Expr.buf_len("src")), [
                Node.let("u", Expr.load("src", i)),
                Node.let("v", Expr.load("dst", i)),
                Node.let("lu", Expr.load("labels", Expr.var("u"))),
                Node.let("lv", Expr.load("labels", Expr.var("v"))),
                Node.if_(Expr.lt(lu, lv), lower(Expr.var("v"), lu, "v")),
                Node.if_(Expr.lt(lv, lu), lower(Expr.var("u"), lv, "u")),
            ]),
        ],
        name="label_propagation",
    )


def components(n_nodes: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Smallest node id of each node's component (union-find), the expected fixed point."""
    parent = np.arange(n_nodes)

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for u, v in zip(src.tolist(), dst.tolist()):
        ru, rv = find(u), find(v)
        if ru != rv:
            parent[max(ru, rv)] = min(ru, rv)
    return np.array([find(x) for x in range(n_nodes)], dtype=np.uint32)


def demo(backend, program: Program, n: int) -> None:
    n_nodes = max(n // 4, 2)
    rng = np.random.default_rng(4)
    src = rng.integers(0, n_nodes, n_nodes // 2, dtype=np.uint32)
    dst = rng.integers(0, n_nodes, n_nodes // 2, dtype=np.uint32)
    arrays = [src, dst, np.arange(n_nodes, dtype=np.uint32), np.zeros(1, dtype=np.uint32)]
    handles = [backend.allocate_resident(a.nbytes) for a in arrays]
    try:
        for handle, array in zip(handles, arrays):
            backend.upload_resident(handle, array)
        iterations = backend.dispatch_until([(program, handles, None)], handles[3], max_iterations=n_nodes)
        labels = backend.download_resident(handles[2]).view(np.uint32)
    finally:
        for handle in handles:
            backend.free_resident(handle)
    assert np.array_equal(labels, components(n_nodes, src, dst)), "labels differ from union-find"
    print(f"converged after {iterations} steps")


if __name__ == "__main__":
    main(build, demo, __file__, default_n=1 << 12)
