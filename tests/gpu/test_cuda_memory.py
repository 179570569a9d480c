"""Storage types, out-of-bounds rules, runtime-sized/empty buffers and resident handles."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import check, poisoned, random_array

from vyre.driver.config import DispatchConfig
from vyre.driver.errors import DeviceOutOfMemory, InvalidHandle, InvalidProgram
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program

pytestmark = pytest.mark.gpu

U32, I32, F32, BOOL = DataType.U32, DataType.I32, DataType.F32, DataType.BOOL
STORAGE = [DataType.U8, DataType.U16, DataType.U32, DataType.I8, DataType.I16, DataType.I32,
           DataType.F16, DataType.BF16, DataType.F32, DataType.BOOL]


def _bump(dtype: DataType, value: Expr) -> Expr:
    arith = dtype.arith
    if arith is F32:
        return Expr.mul(value, Expr.f32(1.5))
    if arith is BOOL:
        return Expr.not_(value)
    return Expr.add(value, Expr.u32(1) if arith is U32 else Expr.i32(-1))


@pytest.mark.parametrize("dtype", STORAGE, ids=[d.name for d in STORAGE])
def test_storage_load_store(backend, rng, dtype: DataType) -> None:
    """Loads widen, stores narrow, on every storage type; unwritten read_write elements survive."""
    n = 3000
    a = random_array(rng, dtype, n)
    rw = poisoned(n + 37, dtype)
    i = Expr.var("i")
    program = Program(
        [BufferDecl.read("a", 0, dtype), BufferDecl.read_write("rw", 1, dtype),
         BufferDecl.output("out", 2, dtype.arith if dtype.arith is not BOOL else BOOL, n)],
        (64, 1, 1),
        [Node.let("i", Expr.invocation_id(0)),
         Node.let("v", Expr.load("a", i)),
         Node.store("rw", i, _bump(dtype, Expr.var("v"))),
         Node.store("out", i, Expr.var("v"))],
        name=f"storage_{dtype.name}")
    check(backend, program, [a, rw], DispatchConfig(elements=n))


def test_out_of_bounds(backend, rng) -> None:
    """Loads past the end read 0, stores do nothing, atomics return 0: indices up to 0xFFFFFFFF."""
    n = 1024
    a = random_array(rng, U32, n) | 1
    idx = rng.integers(0, 2 * n, n, dtype=np.uint32)
    idx[:6] = [n, n + 1, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, n - 1]
    rw = poisoned(n, U32)
    i = Expr.var("i")
    j = Expr.load("idx", i)
    program = Program(
        [BufferDecl.read("a", 0, U32), BufferDecl.read("idx", 1, U32), BufferDecl.read_write("rw", 2, U32),
         BufferDecl.output("loads", 3, U32, n), BufferDecl.output("olds", 4, U32, n)],
        (128, 1, 1),
        [Node.let("i", Expr.invocation_id(0)),
         Node.store("loads", i, Expr.load("a", j)),
         Node.store("rw", Expr.bitor(j, Expr.u32(0)), Expr.u32(7)),
         Node.let("old", Expr.atomic(AtomicOp.ADD, "rw", Expr.add(j, Expr.u32(2 * n)), Expr.u32(1))),
         Node.store("olds", i, Expr.var("old"))],
        name="oob")
    # stores at j < n race when two invocations pick the same j, but they all store 7
    check(backend, program, [a, idx, rw])


def test_runtime_sized_and_empty_buffers(backend, rng) -> None:
    """count=0 buffers take their size from the input; 0-element inputs and 0-workgroup grids work."""
    i = Expr.var("i")
    program = Program(
        [BufferDecl.read("a", 0, U32), BufferDecl.read_write("rw", 1, U32)],
        (32, 1, 1),
        [Node.let("i", Expr.invocation_id(0)),
         Node.store("rw", i, Expr.add(Expr.load("a", i), Expr.buf_len("a")))],
        name="runtime_sized")
    for n in (1, 31, 33, 1000, 4097):
        check(backend, program, [random_array(rng, U32, n), poisoned(n, U32)])
    out = check(backend, program, [np.zeros(0, np.uint32), np.zeros(0, np.uint32)])
    assert out[0].shape == (0,) and out[0].dtype == np.uint32
    empty_grid = check(backend, program, [random_array(rng, U32, 8), poisoned(8, U32)], DispatchConfig(grid=(0, 1, 1)))
    assert empty_grid[0].view(np.uint8).tolist() == [0xAB] * 32


def test_bad_inputs_are_named(backend) -> None:
    program = Program([BufferDecl.read("a", 0, U32, count=8), BufferDecl.output("o", 1, U32, 8)], (8, 1, 1),
                      [Node.store("o", Expr.local_id(0), Expr.load("a", Expr.local_id(0)))], name="bad_in")
    with pytest.raises(InvalidProgram, match="'a'"):
        backend.dispatch(program, [np.zeros(4, np.uint32)])
    with pytest.raises(InvalidProgram, match="'a'"):
        backend.dispatch(program, [b"\x01\x02\x03"])
    with pytest.raises(InvalidProgram):
        backend.dispatch(program, [])


# ---- resident buffers --------------------------------------------------------------------------------
def _xor_program(n: int = 0) -> Program:
    i = Expr.var("i")
    return Program(
        [BufferDecl.read("a", 0, U32, n), BufferDecl.read("b", 1, U32, n), BufferDecl.output("c", 2, U32, 4096),
         BufferDecl.read_write("d", 3, U32, n)],
        (256, 1, 1),
        [Node.let("i", Expr.invocation_id(0)),
         Node.store("c", i, Expr.bitxor(Expr.load("a", i), Expr.load("b", i))),
         Node.store("d", i, Expr.add(Expr.load("d", i), Expr.load("c", i)))],
        name="xor4")


def test_resident_matches_dispatch(backend, rng) -> None:
    from vyre.reference import run

    n = 4096
    a, b, d = (random_array(rng, U32, n) for _ in range(3))
    program = _xor_program()
    handles = [backend.allocate_resident(n * 4) for _ in range(4)]
    try:
        for h, data in zip(handles, (a, b, poisoned(n, U32), d)):
            backend.upload_resident(h, data)
        backend.dispatch_resident(program, handles)
        backend.dispatch_resident(program, handles)  # c is zeroed again; d accumulates
        expected_c, expected_d = run(program, [a, b, d])
        _, expected_d = run(program, [a, b, expected_d])
        assert backend.download_resident(handles[2]).view(np.uint32).tolist() == expected_c.tolist()
        assert np.array_equal(backend.download_resident(handles[3]).view(np.uint32), expected_d)
        part = backend.download_resident(handles[0], offset=40, nbytes=400)
        assert part.tobytes() == a.tobytes()[40:440]
        backend.upload_resident(handles[0], b"\xff" * 8, offset=16)
        assert backend.download_resident(handles[0], 16, 8).tobytes() == b"\xff" * 8
        with pytest.raises(InvalidHandle):
            backend.upload_resident(handles[0], b"\x00" * 8, offset=n * 4 - 4)
        with pytest.raises(InvalidHandle):
            backend.download_resident(handles[0], offset=n * 4, nbytes=1)
    finally:
        for h in handles:
            backend.free_resident(h)


def test_resident_handle_misuse(backend) -> None:
    from vyre.driver.backend import Resident
    from vyre_cuda.backend import CudaBackend

    h = backend.allocate_resident(64)
    backend.free_resident(h)
    with pytest.raises(InvalidHandle, match="freed"):
        backend.free_resident(h)
    with pytest.raises(InvalidHandle, match="freed"):
        backend.download_resident(h)
    with pytest.raises(InvalidHandle, match="freed"):
        backend.upload_resident(h, b"\x00" * 4)
    live = backend.allocate_resident(256)
    forged = Resident(live.id, live.nbytes, live.owner)
    with pytest.raises(InvalidHandle, match="forged"):
        backend.download_resident(forged)
    with pytest.raises(InvalidHandle):
        backend.download_resident("not a handle")
    with CudaBackend() as other:
        foreign = other.allocate_resident(64)
        with pytest.raises(InvalidHandle, match="another backend"):
            backend.download_resident(foreign)
        with pytest.raises(InvalidHandle):
            other.free_resident(live)
    program = _xor_program()
    hs = [backend.allocate_resident(4096 * 4) for _ in range(3)]
    with pytest.raises(InvalidHandle):
        backend.dispatch_resident(program, [*hs, forged])
    backend.dispatch_resident(program, [*hs, live])
    backend.free_resident(live)
    with pytest.raises(InvalidHandle):
        backend.dispatch_resident(program, [*hs, live])
    for x in hs:
        backend.free_resident(x)


def test_out_of_memory_then_still_works(backend, rng) -> None:
    before = backend.metrics()["cuda_resident_bytes_in_use"]
    with pytest.raises(DeviceOutOfMemory) as info:
        backend.allocate_resident(1 << 50)
    assert info.value.requested == 1 << 50
    assert backend.metrics()["cuda_resident_bytes_in_use"] == before
    h = backend.allocate_resident(1 << 20)
    backend.upload_resident(h, np.arange(1 << 18, dtype=np.uint32))
    assert np.array_equal(backend.download_resident(h).view(np.uint32), np.arange(1 << 18, dtype=np.uint32))
    backend.free_resident(h)
    test_resident_matches_dispatch(backend, rng)


def test_memory_limit(monkeypatch) -> None:
    from vyre_cuda.backend import CudaBackend

    monkeypatch.setenv("VYRE_CUDA_MEMORY_LIMIT", str(1 << 20))
    with CudaBackend() as be:
        h = be.allocate_resident(600 << 10)
        with pytest.raises(DeviceOutOfMemory):
            be.allocate_resident(600 << 10)
        be.free_resident(h)
        be.free_resident(be.allocate_resident(600 << 10))


def test_many_small_dispatches_return_memory(backend, rng) -> None:
    """10,000 small dispatches (host and resident) leave pool bytes where they started."""
    program = _xor_program()
    a, b, d = (random_array(rng, U32, 64) for _ in range(3))
    backend.dispatch(program, [a, b, d])
    start = backend.metrics()
    for _ in range(5000):
        backend.dispatch(program, [a, b, d])
    handles = [backend.allocate_resident(4096 * 4 if k == 2 else 256) for k in range(4)]
    for _ in range(5000):
        backend.dispatch_resident(program, handles)
    for h in handles:
        backend.free_resident(h)
    end = backend.metrics()
    assert end["cuda_resident_bytes_in_use"] == start["cuda_resident_bytes_in_use"]
    assert end["cuda_transient_bytes_in_use"] == start["cuda_transient_bytes_in_use"]
    assert end["cuda_kernel_launches"] - start["cuda_kernel_launches"] == 10000


def test_plan_primitives_for_pipelines(backend, rng) -> None:
    """prepared / resident_layout / plan_for / update_plan / launch / close_plan, as pipelines use them."""
    from vyre.reference import run

    n = 4096
    a, b, d = (random_array(rng, U32, n) for _ in range(3))
    program = _xor_program()
    handles = [backend.allocate_resident(n * 4) for _ in range(4)]
    for h, data in zip(handles, (a, b, poisoned(n, U32), d)):
        backend.upload_resident(h, data)
    with backend.lock:
        prep = backend.prepared(program)
        buffers, counts, grid = backend.resident_layout(prep, handles, None)
        plan = backend.plan_for(prep, buffers, counts, grid)
        assert plan.params is not None and plan.params.ptr != prep.plan.params.ptr
        backend.zero(buffers[2], counts["c"] * 4)
        backend.launch(plan)
        backend.update_plan(plan, prep, counts, grid)  # unchanged words: nothing is copied
        backend.stream.synchronize()
    expected_c, expected_d = run(program, [a, b, d])
    assert np.array_equal(backend.download_resident(handles[2]).view(np.uint32), expected_c)
    assert np.array_equal(backend.download_resident(handles[3]).view(np.uint32), expected_d)
    backend.close_plan(plan)
    assert plan.params is None
    for h in handles:
        backend.free_resident(h)


@pytest.mark.parametrize("words", [1, 3, 4, 5, 17, 1023])
def test_workgroup_memory_starts_zeroed_after_garbage(backend, words: int) -> None:
    """Workgroup memory reads 0 before it is written, whatever a previous kernel left there: the
    zeroing (16-byte stores, then the last 0-3 words) covers sizes that are not a multiple of 16
    bytes, with U16 buffers after a U32 one so the layout has odd word counts too."""
    groups = 264  # two waves of workgroups on any card, so SMs are reused
    buffers = [BufferDecl.workgroup("w", words, U32), BufferDecl.workgroup("h", 3, DataType.U16)]
    lid, wid = Expr.local_id(0), Expr.workgroup_id(0)
    fill = [Node.loop("j", lid, Expr.u32(words), [Node.store("w", Expr.var("j"), Expr.u32(0xDEADBEEF))]),
            Node.store("h", lid, Expr.u32(0xBEEF))]
    garbage = Program([*buffers, BufferDecl.output("sink", 0, U32, 1)], (32, 1, 1),
                      [*fill, Node.barrier(), Node.store("sink", Expr.u32(1), Expr.load("w", Expr.u32(0)))],
                      name="workgroup_garbage")
    seen, j = Expr.var("seen"), Expr.var("j")
    body = [Node.let("seen", Expr.u32(0)),
            Node.loop("j", Expr.u32(0), Expr.u32(words), [Node.assign("seen", Expr.bitor(seen, Expr.load("w", j)))]),
            Node.loop("j", Expr.u32(0), Expr.u32(3), [Node.assign("seen", Expr.bitor(seen, Expr.load("h", j)))]),
            Node.store("out", Expr.add(Expr.mul(wid, Expr.u32(32)), lid), seen)]
    reader = Program([*buffers, BufferDecl.output("out", 0, U32, groups * 32)], (32, 1, 1), body,
                     name="workgroup_reader")
    for _ in range(3):
        backend.dispatch(garbage, [], DispatchConfig(grid=(groups, 1, 1)))
        out = backend.dispatch(reader, [], DispatchConfig(grid=(groups, 1, 1)))[0]
        assert not np.asarray(out).any()
