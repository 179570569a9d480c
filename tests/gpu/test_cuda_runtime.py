"""Input kinds (host and device), async and timed dispatch, debug modes, timeouts, threads, lifecycle."""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest
from conftest import check, poisoned, random_array

from vyre.driver.config import DispatchConfig
from vyre.driver.errors import BackendUnavailable, DispatchFailed, InvalidProgram
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

pytestmark = pytest.mark.gpu

U32, F32 = DataType.U32, DataType.F32
i = Expr.var("i")


def saxpy() -> Program:
    return Program(
        [BufferDecl.uniform("alpha", 0, F32, 1), BufferDecl.read("x", 1, F32), BufferDecl.read_write("y", 2, F32),
         BufferDecl.output("copy", 3, F32, 4096)],
        (256, 1, 1),
        [Node.let("i", Expr.invocation_id(0)),
         Node.let("v", Expr.add(Expr.mul(Expr.load("alpha", Expr.u32(0)), Expr.load("x", i)), Expr.load("y", i))),
         Node.store("y", i, Expr.var("v")), Node.store("copy", i, Expr.var("v"))],
        name="saxpy")


def _inputs(rng, n: int = 4096) -> list[np.ndarray]:
    return [np.array([rng.standard_normal()], np.float32), random_array(rng, F32, n), random_array(rng, F32, n)]


def test_host_input_kinds(backend, rng) -> None:
    alpha, x, y = _inputs(rng)
    expected = check(backend, saxpy(), [alpha, x, y])
    for convert in (bytes, bytearray, memoryview, lambda a: a.view(np.uint8)):
        actual = backend.dispatch(saxpy(), [convert(alpha), convert(x), convert(y)])
        assert all(np.array_equal(e, a, equal_nan=True) for e, a in zip(expected, actual))


def test_cupy_inputs(backend, rng) -> None:
    import cupy

    alpha, x, y = _inputs(rng)
    gx, gy = cupy.asarray(x), cupy.asarray(y)
    out, _ = check(backend, saxpy(), [cupy.asarray(alpha), gx, gy], reference_inputs=[alpha, x, y])
    assert out is gy  # read_write device inputs are updated in place and returned as they are
    with pytest.raises(InvalidProgram, match="contiguous"):
        backend.dispatch(saxpy(), [cupy.asarray(alpha), cupy.asarray(np.repeat(x, 2))[::2], gy])


def test_torch_inputs(backend, rng) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    alpha, x, y = _inputs(rng)
    tx = torch.from_numpy(x).cuda()
    ty = torch.from_numpy(y).cuda() * 1.0  # produced by a torch kernel still in flight
    check(backend, saxpy(), [torch.from_numpy(alpha).cuda(), tx, ty], reference_inputs=[alpha, x, y])
    check(backend, saxpy(), [alpha, tx, y], reference_inputs=[alpha, x, y])


def test_dlpack_only_input(backend, rng) -> None:
    import cupy

    class DLPackOnly:
        def __init__(self, arr):
            self._arr = arr

        def __dlpack__(self, *args, **kwargs):
            return self._arr.__dlpack__(*args, **kwargs)

        def __dlpack_device__(self):
            return self._arr.__dlpack_device__()

    alpha, x, y = _inputs(rng)
    check(backend, saxpy(), [alpha, DLPackOnly(cupy.asarray(x)), y], reference_inputs=[alpha, x, y])


def test_async_and_timed(backend, rng) -> None:
    from vyre.reference import run

    cases = [_inputs(rng) for _ in range(8)]
    pending = [backend.dispatch_async(saxpy(), c) for c in cases]
    for c, p in zip(cases, pending):
        out = p.result(timeout=30)
        assert p.done()
        assert all(np.array_equal(e, a, equal_nan=True) for e, a in zip(run(saxpy(), c), out))
    before = backend.metrics()["cuda_timed_dispatches"]
    timed = backend.dispatch_timed(saxpy(), cases[0])
    assert timed.device_ns > 0 and timed.wall_ns >= timed.wait_ns
    assert all(np.array_equal(e, a, equal_nan=True) for e, a in zip(run(saxpy(), cases[0]), timed.outputs))
    assert backend.metrics()["cuda_timed_dispatches"] == before + 1


def test_threads_share_one_backend(backend, rng) -> None:
    from vyre.reference import run

    cases = [_inputs(rng, 1000 + 17 * k) for k in range(8)]
    expected = [run(saxpy(), c) for c in cases]
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for _ in range(25):
                out = backend.dispatch(saxpy(), cases[k])
                assert all(np.array_equal(e, a, equal_nan=True) for e, a in zip(expected[k], out))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def _spin() -> Program:
    acc = Expr.var("acc")
    return Program(
        [BufferDecl.read("n", 0, U32, 1), BufferDecl.output("out", 1, U32, 1)],
        (1, 1, 1),
        [Node.let("acc", Expr.u32(1)),
         Node.loop("k", Expr.u32(0), Expr.load("n", Expr.u32(0)), [
             Node.assign("acc", Expr.add(Expr.mul(acc, Expr.u32(1664525)), Expr.var("k")))]),
         Node.store("out", Expr.u32(0), acc)],
        name="spin")


def test_timeout_then_backend_still_works(rng) -> None:
    from vyre_cuda.backend import CudaBackend

    with CudaBackend() as be:
        with pytest.raises(DispatchFailed, match="timeout") as info:
            be.dispatch(_spin(), [np.array([1 << 30], np.uint32)], DispatchConfig(grid=(1, 1, 1), timeout_s=0.05))
        assert "still be running" in str(info.value) and "Fix:" in str(info.value)
        check(be, _spin(), [np.array([1000], np.uint32)], DispatchConfig(grid=(1, 1, 1), timeout_s=60))
        check(be, saxpy(), _inputs(rng))


def test_sync_each_names_program(rng) -> None:
    code = (
        "import numpy as np\n"
        "from vyre_cuda.backend import CudaBackend\n"
        "from vyre.ir import BufferDecl, DataType, Expr, Node, Program\n"
        "p = Program([BufferDecl.read('a', 0, DataType.U32), BufferDecl.output('o', 1, DataType.U32, 64)], (64,1,1),"
        " [Node.store('o', Expr.local_id(0), Expr.load('a', Expr.local_id(0)))], name='sync_each_probe')\n"
        "be = CudaBackend()\n"
        "assert be.sync_each\n"
        "before = be.metrics()['cuda_sync_points']\n"
        "out = be.dispatch(p, [np.arange(64, dtype=np.uint32)])\n"
        "assert (out[0] == np.arange(64)).all()\n"
        "assert be.metrics()['cuda_sync_points'] >= before + 2\n"
        "print('OK')\n"
    )
    env = {"VYRE_CUDA_SYNC_EACH": "1"}
    import os

    result = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and "OK" in result.stdout, result.stderr


def test_geometry_checked_before_launch(backend) -> None:
    program = Program([BufferDecl.output("o", 0, U32, 4)], (2048, 1, 1),
                      [Node.store("o", Expr.local_id(0), Expr.u32(1))], name="too_wide")
    with pytest.raises((InvalidProgram, Exception), match="Fix:"):
        backend.dispatch(program, [], DispatchConfig(grid=(1, 1, 1)))
    ok = Program([BufferDecl.output("o", 0, U32, 4)], (4, 1, 1),
                 [Node.store("o", Expr.local_id(0), Expr.u32(1))], name="tall_grid")
    with pytest.raises((InvalidProgram, DispatchFailed), match="grid axis 1"):
        backend.dispatch(ok, [], DispatchConfig(grid=(1, 70000, 1)))


def test_profile_metrics_and_shutdown(rng) -> None:
    from vyre_cuda.backend import CudaBackend
    from vyre_cuda.testing import COUNTERS

    be = CudaBackend()
    profile = be.device_profile()
    assert profile["name"] and profile["sm_count"] > 0 and profile["warp_size"] == 32 and profile["limits"]
    assert be.supports_f16() and be.supports_subgroup_ops()
    check(be, saxpy(), _inputs(rng))
    check(be, saxpy(), _inputs(rng))
    m = be.metrics()
    assert set(COUNTERS) <= set(m)
    assert m["cuda_kernel_launches"] == 2 and m["cuda_module_cache_hits"] + m["cuda_module_cache_misses"] >= 1
    assert m["cuda_h2d_bytes"] > 0 and m["cuda_d2h_bytes"] > 0
    h = be.allocate_resident(1024)
    be.shutdown()
    with pytest.raises(BackendUnavailable, match="shut down"):
        be.dispatch(saxpy(), _inputs(rng))
    with pytest.raises(BackendUnavailable):
        be.download_resident(h)
    be.shutdown()  # idempotent


def test_registry_acquires_cuda() -> None:
    import vyre

    be = vyre.acquire("cuda")
    try:
        assert be.id == "cuda"
    finally:
        be.shutdown()
    rows = {r.id: r for r in vyre.registered_backends()}
    assert rows["cuda"].rank == 5


def test_poisoned_read_write_untouched_tail(backend, rng) -> None:
    program = Program([BufferDecl.read_write("rw", 0, U32)], (64, 1, 1),
                      [Node.let("i", Expr.invocation_id(0)),
                       Node.if_(Expr.lt(i, Expr.u32(100)), [Node.store("rw", i, Expr.mul(i, i))])], name="tail")
    check(backend, program, [poisoned(1000, U32)])


def test_cooperative_launch(backend, rng) -> None:
    alpha, x, y = _inputs(rng, 4096)
    if not backend.supports_cooperative():
        pytest.skip("device without cooperative launch")
    check(backend, saxpy(), [alpha, x, y], DispatchConfig(cooperative=True))
    with pytest.raises(DispatchFailed, match="cooperative"):
        backend.dispatch(saxpy(), _inputs(rng, 4096), DispatchConfig(cooperative=True, grid=(1 << 20, 1, 1)))
    check(backend, saxpy(), [alpha, x, y])  # the shared plan is back to a normal launch


def test_workgroup_override(backend, rng) -> None:
    alpha, x, y = _inputs(rng, 5000)
    for wg in ((64, 1, 1), (512, 1, 1)):
        check(backend, saxpy(), [alpha, x, y], DispatchConfig(workgroup_override=wg))


def test_nvtx_ranges(backend, rng, monkeypatch) -> None:
    from vyre_cuda.testing import profiler

    monkeypatch.setenv("VYRE_CUDA_NVTX", "1")
    assert profiler.refresh()
    try:
        check(backend, saxpy(), _inputs(rng))
    finally:
        monkeypatch.delenv("VYRE_CUDA_NVTX")
        assert not profiler.refresh()
    assert profiler.nvtx_range("vyre.cuda.dispatch") is profiler.nvtx_range("vyre.cuda.sequence")
