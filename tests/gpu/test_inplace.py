"""Kernels and dispatches on the caller's CuPy/torch arrays: bound in place, stream-ordered, no waits.

Every result is compared with the oracle on fresh random inputs; ordering with the caller's
streams is checked by values (work queued before and after on the same stream), never by timing.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_array

import vyre
from vyre.driver.config import DispatchConfig
from vyre.driver.errors import InvalidProgram
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.reference import run
from vyre.reference.ulp import assert_outputs_equal, host_array

pytestmark = pytest.mark.gpu
F32, U32 = DataType.F32, DataType.U32
N = 100_003  # odd: the last workgroup is partial


@vyre.kernel(workgroup_size=256)
def saxpy(a: vyre.f32, x: vyre.In[vyre.f32], y: vyre.InOut[vyre.f32]):
    i = vyre.gid()
    if i < len(x):
        y[i] = a * x[i] + y[i]


def scaled() -> Program:
    """``out[i] = x[i] * 3 + y[i]`` into a new output, and ``y[i] += 1`` in place."""
    i = Expr.invocation_id(0)
    return Program(
        [BufferDecl.read("x", 0, F32), BufferDecl.read_write("y", 1, F32), BufferDecl.output("out", 2, F32, N)],
        (128, 1, 1),
        [Node.if_(Expr.lt(i, Expr.buf_len("x")), [
            Node.store("out", i, Expr.add(Expr.mul(Expr.load("x", i), Expr.f32(3.0)), Expr.load("y", i))),
            Node.store("y", i, Expr.add(Expr.load("y", i), Expr.f32(1.0)))])],
        name="scaled")


def odd_out() -> Program:
    """Writes only the even elements of its output: the rest must be the zero fill."""
    i = Expr.invocation_id(0)
    return Program(
        [BufferDecl.read("x", 0, U32), BufferDecl.output("out", 1, U32, 2 * N)],
        (128, 1, 1),
        [Node.if_(Expr.lt(i, Expr.buf_len("x")), [Node.store("out", Expr.mul(i, Expr.u32(2)), Expr.load("x", i))])],
        name="odd_out")


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    return torch


def test_kernel_updates_cupy_arrays_in_place(rng) -> None:
    import cupy

    x, y = random_array(rng, F32, N), random_array(rng, F32, N)
    want = run(saxpy.program, saxpy.inputs(2.5, x, y))
    gx, gy = cupy.asarray(x), cupy.asarray(y)
    (out,) = saxpy(2.5, gx, gy)
    assert out is gy
    assert_outputs_equal(want, [gy], saxpy.program)


def test_kernel_updates_torch_tensors_in_place(rng) -> None:
    torch = _torch()
    x, y = random_array(rng, F32, N), random_array(rng, F32, N)
    want = run(saxpy.program, saxpy.inputs(-0.75, x, y))
    tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
    (out,) = saxpy(-0.75, tx, ty)
    assert out is ty
    assert_outputs_equal(want, [ty], saxpy.program)


@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_outputs_come_back_as_the_callers_kind(backend, rng, lib: str) -> None:
    x, y = random_array(rng, F32, N), random_array(rng, F32, N)
    want = run(scaled(), [x, y])
    if lib == "torch":
        torch = _torch()
        dx, dy = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
        kind = torch.Tensor
    else:
        import cupy

        dx, dy, kind = cupy.asarray(x), cupy.asarray(y), cupy.ndarray
    got_y, got_out = backend.dispatch(scaled(), [dx, dy])
    assert got_y is dy and isinstance(got_out, kind)
    assert_outputs_equal(want, [got_y, got_out], scaled())


def test_outputs_host_keeps_numpy_and_the_callers_array(backend, rng) -> None:
    import cupy

    x, y = random_array(rng, F32, N), random_array(rng, F32, N)
    dy = cupy.asarray(y)
    got = backend.dispatch(scaled(), [cupy.asarray(x), dy], DispatchConfig(outputs="host"))
    assert all(isinstance(g, np.ndarray) for g in got)
    assert_outputs_equal(run(scaled(), [x, y]), got, scaled())
    assert np.array_equal(cupy.asnumpy(dy).view(np.uint32), y.view(np.uint32))  # "host" works on a copy


def test_new_outputs_are_zero_filled_over_dirty_pool_memory(backend, rng) -> None:
    import cupy

    for _ in range(3):  # leave junk in CuPy's pool where the outputs will be allocated
        junk = cupy.full(2 * N, 0xA5A5A5A5, cupy.uint32)
        del junk
        x = random_array(rng, U32, N)
        (out,) = backend.dispatch(odd_out(), [cupy.asarray(x)])
        assert_outputs_equal(run(odd_out(), [x]), [out], odd_out())


def test_an_array_bound_twice_gives_the_oracles_result(backend, rng) -> None:
    """``x`` and ``y`` the same array: the written buffer runs on a private copy, as in the oracle."""
    import cupy

    x = random_array(rng, F32, N)
    want = run(scaled(), [x, x.copy()])
    dx = cupy.asarray(x)
    got_y, got_out = backend.dispatch(scaled(), [dx, dx])
    assert got_y is dx
    assert_outputs_equal(want, [got_y, got_out], scaled())


def test_a_non_default_cupy_stream_orders_work_before_and_after(rng) -> None:
    import cupy

    x = np.clip(random_array(rng, F32, N), -1e30, 1e30)  # NaNs stay; 2 * (2x + 1) must not overflow
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        for _ in range(5):
            gx = cupy.asarray(x)
            gy = cupy.zeros(N, cupy.float32)
            gy += 1.0  # queued on the stream before the kernel
            saxpy(2.0, gx, gy, stream=stream)
            after = gy * 2.0  # queued after it: must see the kernel's result
        result = cupy.asnumpy(after)
    y = np.ones(N, np.float32)
    (want,) = run(saxpy.program, saxpy.inputs(2.0, x, y))
    assert_outputs_equal([want * np.float32(2.0)], [result])


def test_a_torch_side_stream_orders_work_before_and_after(rng) -> None:
    torch = _torch()
    x = np.clip(random_array(rng, F32, N), -1e30, 1e30)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        tx = torch.from_numpy(x).cuda()
        ty = torch.zeros(N, device="cuda")
        ty += 1.0
        saxpy(2.0, tx, ty)  # default: torch's current stream, the side stream here
        after = ty * 2.0
    side.synchronize()
    (want,) = run(saxpy.program, saxpy.inputs(2.0, x, np.ones(N, np.float32)))
    assert_outputs_equal([want * np.float32(2.0)], [host_array(after)])


def test_new_pointers_rebuild_nothing_and_calls_never_wait(backend, rng) -> None:
    import cupy

    program = scaled()
    x = random_array(rng, F32, N)
    backend.dispatch(program, [cupy.asarray(x), cupy.asarray(x)])  # prepared once
    before = backend.metrics()
    prepared = len(backend.programs.by_key)
    for _ in range(50):
        backend.dispatch(program, [cupy.asarray(x), cupy.zeros(N, cupy.float32)])  # new pointers each call
    after = backend.metrics()
    assert len(backend.programs.by_key) == prepared
    assert after["cuda_sync_points"] == before["cuda_sync_points"]
    assert after["cuda_inplace_dispatches"] - before["cuda_inplace_dispatches"] == 50
    assert after["cuda_h2d_bytes"] == before["cuda_h2d_bytes"] and after["cuda_d2h_bytes"] == before["cuda_d2h_bytes"]
    assert after.get("cuda_d2d_bytes", 0) == before.get("cuda_d2d_bytes", 0)


def test_bad_device_arrays_are_refused_with_a_fix(backend) -> None:
    import cupy

    x = cupy.arange(2 * N, dtype=cupy.float32)
    with pytest.raises(InvalidProgram, match="contiguous") as err:
        backend.dispatch(scaled(), [x[::2], cupy.zeros(N, cupy.float32)])
    assert "Fix:" in str(err.value)
    with pytest.raises(InvalidProgram, match="float64|dtype") as err:
        backend.dispatch(scaled(), [cupy.zeros(N, cupy.float64), cupy.zeros(N, cupy.float32)])
    assert "Fix:" in str(err.value)
    ok = cupy.ones(N, cupy.float32)  # the backend is fine afterwards
    got_y, _ = backend.dispatch(scaled(), [ok, ok.copy()])
    assert float(got_y[0]) == 2.0
