"""``dispatch_resident``'s memos: each (program, config, handles) binds a ``BoundKernel`` of its own,
relaunched prebound; frees, debug syncs and eviction take the checked path."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import poisoned, random_array

import vyre_cuda._dispatch.resident as resident_module
from vyre.driver.errors import InvalidHandle
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.reference import run

pytestmark = pytest.mark.gpu

U32 = DataType.U32


def xor_add(n: int = 0) -> Program:
    """``c = a ^ b`` over the first 256 x workgroups invocations (an output: zero-filled when the grid
    leaves part of it), ``d += c`` (read_write: accumulates over repeats)."""
    i = Expr.var("i")
    return Program(
        [BufferDecl.read("a", 0, U32, n), BufferDecl.read("b", 1, U32, n), BufferDecl.output("c", 2, U32, 4096),
         BufferDecl.read_write("d", 3, U32, n)],
        (256, 1, 1),
        [Node.let("i", Expr.invocation_id(0)),
         Node.store("c", i, Expr.bitxor(Expr.load("a", i), Expr.load("b", i))),
         Node.store("d", i, Expr.add(Expr.load("d", i), Expr.load("c", i)))],
        name="memo_xor_add")


class Case:
    """Resident handles of one (a, b, c, d) set and the oracle's view of them."""

    def __init__(self, backend, rng: np.random.Generator, n: int) -> None:
        self.inputs = [random_array(rng, U32, n), random_array(rng, U32, n), random_array(rng, U32, n)]
        a, b, d = self.inputs
        self.handles = [backend.allocate_resident(n * 4) for _ in range(2)]
        self.handles += [backend.allocate_resident(4096 * 4), backend.allocate_resident(n * 4)]
        for h, data in zip(self.handles, (a, b, poisoned(4096, U32), d)):
            backend.upload_resident(h, data)
        self.c, self.d = np.zeros(4096, np.uint32), d

    def step(self, program: Program) -> None:
        """The oracle's result of one more dispatch."""
        a, b, _ = self.inputs
        self.c, self.d = run(program, [a, b, self.d])

    def check(self, backend) -> None:
        assert np.array_equal(backend.download_resident(self.handles[2]).view(np.uint32), self.c)
        assert np.array_equal(backend.download_resident(self.handles[3]).view(np.uint32), self.d)

    def free(self, backend) -> None:
        for h in self.handles:
            backend.free_resident(h)


def test_alternating_handle_sets_each_keep_their_own_kernel(backend, rng) -> None:
    """Two handle sets of one program (other sizes) and host dispatches in between: each memo owns
    its plan, so nothing is reconfigured and every repeat is one counted launch."""
    program = xor_add()
    small, large = Case(backend, rng, 1000), Case(backend, rng, 4096)
    try:
        host = [random_array(rng, U32, 333) for _ in range(3)]
        before = backend.metrics()["cuda_kernel_launches"]
        for _ in range(3):
            for case in (small, large):
                backend.dispatch_resident(program, case.handles)
                case.step(program)
            (c, d) = backend.dispatch(program, host)  # the program's default plan, other sizes
            assert np.array_equal(np.concatenate([c, d]), np.concatenate(run(program, host)))
        assert backend.metrics()["cuda_kernel_launches"] - before == 9
        small.check(backend)
        large.check(backend)
        memos = [m for m in backend.residents.memo.values() if m.program is program]
        assert len(memos) == 2 and all(m.kernel is not None for m in memos)
        assert len({id(m.kernel.plan) for m in memos} | {id(backend.prepared(program).plan)}) == 3
    finally:
        small.free(backend)
        large.free(backend)


def test_a_free_elsewhere_keeps_the_memo_and_a_free_of_ours_is_refused(backend, rng) -> None:
    program = xor_add()
    case = Case(backend, rng, 2048)
    backend.dispatch_resident(program, case.handles)
    case.step(program)
    memo = backend.residents.last
    backend.free_resident(backend.allocate_resident(256))  # the pool's generation moves
    for _ in range(2):
        backend.dispatch_resident(program, tuple(case.handles))  # a tuple of the same handles
        case.step(program)
    assert backend.residents.last is memo
    case.check(backend)
    backend.free_resident(case.handles[1])
    with pytest.raises(InvalidHandle):
        backend.dispatch_resident(program, case.handles)
    for h in case.handles[:1] + case.handles[2:]:
        backend.free_resident(h)


def test_evicted_memos_give_their_parameter_blocks_back(backend, rng, monkeypatch) -> None:
    monkeypatch.setattr(resident_module, "MEMO_CAP", 3)
    program = xor_add()
    cases = [Case(backend, rng, 256 * (k + 1)) for k in range(8)]
    try:
        backend.prepared(program)  # its default plan's block is not a memo's
        blocks = len(backend.runtime.param_buffers)
        for _ in range(2):
            for case in cases:
                backend.dispatch_resident(program, case.handles)
                case.step(program)
        assert len(backend.runtime.param_buffers) <= blocks + 3
        for case in cases:
            case.check(backend)
    finally:
        for case in cases:
            case.free(backend)


def test_debug_syncs_launch_every_repeat_through_the_checked_path(monkeypatch, rng) -> None:
    from vyre_cuda.backend import CudaBackend

    monkeypatch.setenv("VYRE_CUDA_SYNC_EACH", "1")
    program = xor_add()
    with CudaBackend() as be:
        case = Case(be, rng, 1500)
        start = be.metrics()
        for _ in range(3):
            be.dispatch_resident(program, case.handles)
            case.step(program)
        end = be.metrics()
        assert end["cuda_kernel_launches"] - start["cuda_kernel_launches"] == 3
        assert end["cuda_sync_points"] - start["cuda_sync_points"] >= 3
        case.check(be)
