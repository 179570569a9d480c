"""A kernel is emitted for one workgroup size and states it (``.reqntid``), which bounds the local
id that lets workgroup-memory accesses go unguarded (``vyre_cuda._codegen.ranges``): a dispatch
with another size gets its own kernel, and the driver refuses to launch a kernel with a size
other than the one it states."""

from __future__ import annotations

import numpy as np
import pytest

from vyre.driver.config import DispatchConfig
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.reference import ReferenceBackend
from vyre_cuda import emit_ptx, entry_name

pytestmark = pytest.mark.gpu
U32 = DataType.U32
LID, GID = Expr.local_id(0), Expr.invocation_id(0)


def _tile_program() -> Program:
    """``t[lid] = x[gid] + 1`` into a 64-word workgroup buffer, then ``o[gid] = t[lid ^ 1]``: every
    index is proven below 64 for a 64-invocation workgroup, and not for a larger one."""
    body = [Node.store("t", LID, Expr.add(Expr.load("x", GID), Expr.u32(1))), Node.barrier(),
            Node.store("o", GID, Expr.load("t", Expr.bitxor(LID, Expr.u32(1))))]
    return Program([BufferDecl.read("x", 0, U32), BufferDecl.output("o", 1, U32, 512),
                    BufferDecl.workgroup("t", 64, U32)], (64, 1, 1), body, name="reqntid_tile")


@pytest.mark.parametrize("block", [None, (128, 1, 1), (32, 1, 1)])
def test_a_dispatch_with_another_workgroup_size_runs_its_own_kernel(backend, rng, block) -> None:
    program = _tile_program()
    x = rng.integers(0, 2**32, 512, dtype=np.uint64).astype(np.uint32)
    config = DispatchConfig(grid=(512 // (block or (64,))[0], 1, 1),
                            workgroup_override=block)
    got = backend.dispatch(program, [x], config)[-1]
    want = ReferenceBackend().dispatch(program, [x], config)[-1]
    assert np.array_equal(np.asarray(got).view(np.uint32), np.asarray(want).view(np.uint32))


def test_the_driver_refuses_a_launch_with_another_size(tmp_path) -> None:
    import cupy

    program = Program([BufferDecl.output("o", 0, U32, 1)], (64, 1, 1), [], name="reqntid_empty")
    major, minor = cupy.cuda.Device().compute_capability
    path = tmp_path / "reqntid.ptx"
    path.write_text(emit_ptx(program, sm=f"{major}{minor}"))
    fn = cupy.RawModule(path=str(path)).get_function(entry_name(program))
    scratch = cupy.zeros(1024, np.uint32)  # valid memory for both pointers (the output, the parameter block)
    fn((1, 1, 1), (64, 1, 1), (scratch, scratch))  # its own size runs
    cupy.cuda.Device().synchronize()
    with pytest.raises(cupy.cuda.driver.CUDADriverError):
        fn((1, 1, 1), (128, 1, 1), (scratch, scratch))
        cupy.cuda.Device().synchronize()
