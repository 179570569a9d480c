"""A kernel is emitted for one workgroup size, which bounds the local id that lets workgroup-memory
accesses go unguarded (``vyre_cuda._codegen.ranges``): the runtime launches it only with that
size, and a dispatch with another size gets its own kernel."""

from __future__ import annotations

import numpy as np
import pytest

from vyre.driver.config import DispatchConfig
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.reference import ReferenceBackend

pytestmark = pytest.mark.gpu
U32 = DataType.U32
LID, GID = Expr.local_id(0), Expr.invocation_id(0)


def _tile_program() -> Program:
    """``t[lid] = x[gid] + 1`` into a 64-word workgroup buffer, then ``o[gid] = t[lid ^ 1]``: every
    index is proven below 64 for a 64-invocation workgroup, and not for a larger one."""
    body = [Node.store("t", LID, Expr.add(Expr.load("x", GID), Expr.u32(1))), Node.barrier(),
            Node.store("o", GID, Expr.load("t", Expr.bitxor(LID, Expr.u32(1))))]
    return Program([BufferDecl.read("x", 0, U32), BufferDecl.output("o", 1, U32, 512),
                    BufferDecl.workgroup("t", 64, U32)], (64, 1, 1), body, name="wg_size_tile")


@pytest.mark.parametrize("block", [None, (128, 1, 1), (32, 1, 1)])
def test_a_dispatch_with_another_workgroup_size_runs_its_own_kernel(backend, rng, block) -> None:
    program = _tile_program()
    x = rng.integers(0, 2**32, 512, dtype=np.uint64).astype(np.uint32)
    config = DispatchConfig(grid=(512 // (block or (64,))[0], 1, 1), workgroup_override=block)
    got = backend.dispatch(program, [x], config)[-1]
    want = ReferenceBackend().dispatch(program, [x], config)[-1]
    assert np.array_equal(np.asarray(got).view(np.uint32), np.asarray(want).view(np.uint32))


@pytest.mark.parametrize("block", [(64, 1, 1), (128, 1, 1), (32, 1, 1)])
def test_each_kernel_is_launched_with_the_size_it_was_emitted_for(backend, block) -> None:
    program = _tile_program()
    config = DispatchConfig(workgroup_override=None if block == program.workgroup_size else block)
    prepared = backend.programs.prepared(program, config)
    assert prepared.block == block
    assert prepared.plan.block == block
    for k in (2, 4):  # the coarsened variants keep the block: they loop over logical workgroups
        assert backend.programs.prepared(program, config, coarsen=k).plan.block == block
