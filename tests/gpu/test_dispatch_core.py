"""The dispatch core: skipped zero fills, reused sequence bodies, zero-copy views and device outputs,
and a shutdown that releases everything. The oracle judges every result; outputs start poisoned."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest
from conftest import poisoned, random_array

from vyre.driver.config import DispatchConfig
from vyre.driver.errors import BackendUnavailable, InvalidHandle, InvalidProgram
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.reference import ReferenceBackend, run

pytestmark = pytest.mark.gpu

U32 = DataType.U32
i = Expr.var("i")


def _xor(n: int, guarded: bool = False, partial: bool = False) -> Program:
    """``c = a ^ b`` into an ``output`` buffer: whole (the fill is skipped) or under a data-dependent
    condition (``partial``: the fill must stay)."""
    value = Expr.bitxor(Expr.load("a", i), Expr.load("b", i))
    store = Node.store("c", i, value)
    if partial:
        store = Node.if_(Expr.eq(Expr.bitand(Expr.load("a", i), Expr.u32(1)), Expr.u32(0)), store)
    elif guarded:
        store = Node.if_(Expr.lt(i, Expr.buf_len("c")), store)
    return Program([BufferDecl.read("a", 0, U32), BufferDecl.read("b", 1, U32), BufferDecl.output("c", 2, U32, n)],
                   (256, 1, 1), [Node.let("i", Expr.invocation_id(0)), store],
                   name=f"xor_{'partial' if partial else 'guarded' if guarded else 'whole'}")


@pytest.mark.parametrize("shape", ["whole", "guarded", "partial"])
@pytest.mark.parametrize("n", [1, 255, 4099, 1 << 20])
def test_output_fills_only_where_they_matter(backend, rng, shape: str, n: int) -> None:
    """A poisoned resident output ends exactly as the oracle's (zero-filled) one, on every path."""
    program = _xor(n, guarded=shape == "guarded", partial=shape == "partial")
    a, b = random_array(rng, U32, n), random_array(rng, U32, n)
    (expected,) = run(program, [a, b])
    handles = [backend.allocate_resident(n * 4) for _ in range(3)]
    pipeline = backend.compile(program)
    try:
        for h, data in zip(handles, (a, b, poisoned(n, U32))):
            backend.upload_resident(h, data)
        backend.dispatch_resident(program, handles)
        assert np.array_equal(backend.download_resident(handles[2]).view(np.uint32), expected)
        assert (backend.residents.last.kernel.zero == ()) == (shape != "partial")
        backend.upload_resident(handles[2], poisoned(n, U32))
        pipeline.dispatch_resident(handles)
        pipeline.dispatch_resident(handles)  # the pre-packed fast path
        assert np.array_equal(backend.download_resident(handles[2]).view(np.uint32), expected)
        backend.upload_resident(handles[2], poisoned(n, U32))
        backend.dispatch_sequence([(program, handles)])
        assert np.array_equal(backend.download_resident(handles[2]).view(np.uint32), expected)
        (host,) = backend.dispatch(program, [a, b])
        assert np.array_equal(host, expected)
        (piped,) = pipeline.dispatch([a, b])
        assert np.array_equal(piped, expected)
    finally:
        pipeline.close()
        for h in handles:
            backend.free_resident(h)


def test_a_grid_that_does_not_cover_the_output_keeps_its_fill(backend, rng) -> None:
    n = 4096
    program = _xor(n)
    config = DispatchConfig(grid=(3, 1, 1))  # 768 invocations for 4096 elements
    a, b = random_array(rng, U32, n), random_array(rng, U32, n)
    (expected,) = run(program, [a, b], config)
    handles = [backend.allocate_resident(n * 4) for _ in range(3)]
    try:
        for h, data in zip(handles, (a, b, poisoned(n, U32))):
            backend.upload_resident(h, data)
        backend.dispatch_resident(program, handles, config)
        assert np.array_equal(backend.download_resident(handles[2]).view(np.uint32), expected)
        assert not expected[768:].any()
    finally:
        for h in handles:
            backend.free_resident(h)


def _bump() -> Program:
    return Program([BufferDecl.read_write("x", 0, U32)], (256, 1, 1),
                   [Node.let("i", Expr.invocation_id(0)),
                    Node.store("x", i, Expr.add(Expr.mul(Expr.load("x", i), Expr.u32(3)), Expr.u32(1)))], name="bump")


def test_repeated_sequences_reuse_one_bound_body(backend, rng) -> None:
    n = 10_000
    program, ref = _bump(), ReferenceBackend()
    data = random_array(rng, U32, n)
    h, r = backend.allocate_resident(n * 4), ref.allocate_resident(n * 4)
    backend.upload_resident(h, data)
    ref.upload_resident(r, data)
    try:
        for call in range(5):
            steps = [(program, [h]) for _ in range(64)]  # a new list of new tuples each call
            out = backend.dispatch_sequence(steps, [(h, 0, n * 4)])
            expected = ref.dispatch_sequence([(program, [r]) for _ in range(64)], [(r, 0, n * 4)])
            assert np.array_equal(out[0], expected[0])
            if call == 0:
                body = backend.sequences.bodies[0]
            assert backend.sequences.bodies[0] is body
        spare = backend.allocate_resident(4)
        backend.free_resident(spare)  # a free elsewhere: the body stays
        backend.dispatch_sequence(steps)
        assert backend.sequences.bodies[0] is body
    finally:
        backend.free_resident(h)
    with pytest.raises(InvalidHandle):
        backend.dispatch_sequence(steps)
    assert all(b is not body for b in backend.sequences.bodies)


def test_view_and_device_uploads(backend, rng) -> None:
    import cupy

    n = 3000
    data = random_array(rng, U32, n)
    h = backend.allocate_resident(n * 4)
    try:
        backend.upload_resident(h, cupy.asarray(data))  # device to device
        view = backend.view(h, np.uint32)
        assert isinstance(view, cupy.ndarray) and view.shape == (n,)
        assert np.array_equal(cupy.asnumpy(view), data)
        backend.dispatch_resident(_bump(), [h])
        (expected,) = run(_bump(), [data])
        assert np.array_equal(cupy.asnumpy(backend.view(h, np.uint32)), expected)
        view[:5] = 7  # writes through the view land in the resident buffer
        cupy.cuda.get_current_stream().synchronize()
        assert backend.download_resident(h, 0, 20).view(np.uint32).tolist() == [7] * 5
        assert backend.view(h).dtype == np.uint8 and backend.view(h).size == n * 4
        with pytest.raises(InvalidProgram):
            backend.view(h, np.dtype("V7"))
    finally:
        backend.free_resident(h)
    with pytest.raises(InvalidHandle):
        backend.view(h, np.uint32)
    assert ReferenceBackend().view.__doc__


def test_device_outputs_are_cupy_arrays_that_own_their_memory(backend, rng) -> None:
    import cupy

    n = 5000
    program = Program([BufferDecl.read("a", 0, U32), BufferDecl.read_write("d", 1, U32),
                       BufferDecl.output("c", 2, U32, n)], (128, 1, 1),
                      [Node.let("i", Expr.invocation_id(0)),
                       Node.store("d", i, Expr.add(Expr.load("d", i), Expr.load("a", i))),
                       Node.if_(Expr.lt(Expr.load("a", i), Expr.u32(1 << 31)), Node.store("c", i, Expr.load("a", i)))],
                      name="device_out")
    a, d = random_array(rng, U32, n), random_array(rng, U32, n)
    expected = run(program, [a, d])
    config = DispatchConfig(outputs="device")
    for inputs in ([a, d], [cupy.asarray(a), cupy.asarray(d)]):
        got = backend.dispatch(program, inputs, config)
        assert all(isinstance(x, cupy.ndarray) and x.base is None for x in got)
        for want, have in zip(expected, got):
            assert np.array_equal(want, cupy.asnumpy(have))
    with pytest.raises(InvalidProgram):
        backend.dispatch(program, [a, d], DispatchConfig(outputs="gpu"))


def test_shutdown_releases_device_memory_and_graphs(monkeypatch, rng) -> None:
    import cupy

    from vyre_cuda.backend import CudaBackend

    monkeypatch.setenv("VYRE_CUDA_GRAPHS", "1")

    cupy.cuda.runtime.deviceSynchronize()
    free_before = cupy.cuda.runtime.memGetInfo()[0]
    be = CudaBackend()

    def graphs() -> int:  # captured CUDA graphs the backend and its pipeline hold
        return be.metrics()["cuda_graphs_live"]

    n = 64 << 20  # 256 MiB per buffer: a leak would show
    handles = [be.allocate_resident(n * 4) for _ in range(3)]
    for h in handles[:2]:
        be.upload_resident(h, random_array(rng, U32, 1024))
    program = _xor(n)
    be.dispatch_sequence([(program, handles), (_bump(), [handles[0]])] * 3)
    be.dispatch_repeated([], [(_bump(), [handles[0]])], 10)
    assert be.dispatch_until([(_bump(), [handles[0]])], handles[2], 5) == 1  # batched loop
    pipe = be.compile(_bump())
    pipe.dispatch([random_array(rng, U32, 1000)])
    pipe.dispatch_resident([handles[1]])
    be.dispatch(program, [np.ones(n, np.uint32), np.ones(n, np.uint32)])
    assert graphs() >= 3  # the sequence, the repeated body and the pipeline's dispatch
    assert be.metrics()["cuda_reserved_bytes"] >= 3 * n * 4
    be.shutdown()
    assert be.heap.reserved == 0 and be.metrics()["cuda_param_blocks"] == 0
    assert be.sequences.bindings == {} and len(be.sequences.graphs) == 0 and be.sequences.control is None
    assert graphs() == 0
    gc.collect()
    cupy.cuda.runtime.deviceSynchronize()
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) <= 1:  # free memory is the device's, shared
        assert cupy.cuda.runtime.memGetInfo()[0] >= free_before - (64 << 20)  # with other test processes
    with pytest.raises(BackendUnavailable):
        be.dispatch_resident(program, handles)
    with pytest.raises(BackendUnavailable):
        pipe.dispatch_resident([handles[1]])
