"""Conditional loops on freed and recycled handles, as a script to run under the sanitizer:

    compute-sanitizer --tool memcheck python3 benchmarks/conditional_memcheck.py

Eight ``dispatch_until`` countdown loops in conditional graph nodes, each on fresh handles that
are freed afterwards, so every loop gets recycled memory and a new loop graph. One sanitized
process per GPU runs it cleanly; several sanitized processes sharing a GPU fault WHILE-node loops,
plain CUDA C ones (``benchmarks/while_nodes.cu``) included (docs/resident.md).
"""

from __future__ import annotations

import os

import numpy as np

os.environ["VYRE_CUDA_CONDITIONAL"] = "1"

from vyre.ir import BufferDecl, DataType, Expr, Node, Program  # noqa: E402
from vyre_cuda.backend import CudaBackend  # noqa: E402

I = Expr.invocation_id(0)
C = Expr.load("c", I)
COUNTDOWN = Program([BufferDecl.read_write("c", 0, DataType.U32), BufferDecl.read_write("flag", 1, DataType.U32)],
                    (64, 1, 1),
                    [Node.if_(Expr.gt(C, Expr.u32(0)), [Node.store("c", I, Expr.sub(C, Expr.u32(1))),
                                                        Node.store("flag", Expr.u32(0), Expr.u32(1))])],
                    name="countdown")


def main() -> None:
    backend = CudaBackend()
    for i in range(8):
        n, top = 700 + 97 * i, 3 + i
        start = np.arange(n, dtype=np.uint32) % np.uint32(top + 1)
        c, flag = backend.allocate_resident(start.nbytes), backend.allocate_resident(4)
        backend.upload_resident(c, start)
        iterations = backend.dispatch_until([(COUNTDOWN, [c, flag])], flag, 1000)
        print(f"loop {i}: {n} counters, {iterations} iterations (want {top + 1})", flush=True)
        backend.free_resident(c)
        backend.free_resident(flag)
    backend.shutdown()


if __name__ == "__main__":
    main()
