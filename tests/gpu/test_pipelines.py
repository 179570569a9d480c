"""Compiled pipelines (``backend.compile``): dispatch, dispatch_resident and dispatch_batch.

Every result is compared bit for bit with ``backend.dispatch`` and the reference oracle, on fresh
random data (random bit patterns for F32: NaNs, infinities and subnormals included).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_array

from vyre.driver.config import DispatchConfig
from vyre.driver.errors import InvalidHandle
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.reference import run
from vyre.reference.ulp import assert_outputs_equal

pytestmark = pytest.mark.gpu

U32, F32 = DataType.U32, DataType.F32
OUT = 2048
i, v = Expr.var("i"), Expr.var("v")


def mix() -> Program:
    """read ``a``, read_write ``x`` (runtime-sized), output ``o`` of ``OUT`` words."""
    return Program(
        [BufferDecl.read("a", 0, U32), BufferDecl.read_write("x", 1, U32), BufferDecl.output("o", 2, U32, OUT)],
        (128, 1, 1),
        [Node.let("i", Expr.invocation_id(0)),
         Node.let("v", Expr.add(Expr.mul(Expr.load("a", i), Expr.u32(2654435761)), Expr.load("x", i))),
         Node.store("x", i, Expr.bitxor(v, Expr.shr(v, Expr.u32(13)))),
         Node.store("o", i, Expr.add(v, Expr.buf_len("a")))],
        name="mix")


def fma4() -> Program:
    """The tiny 4-buffer kernel of the benchmarks: ``y = fma(a, b, y) + c[0]`` on F32."""
    return Program(
        [BufferDecl.read("a", 0, F32), BufferDecl.read("b", 1, F32), BufferDecl.uniform("c", 2, F32, 1),
         BufferDecl.read_write("y", 3, F32)],
        (128, 1, 1),
        [Node.let("i", Expr.invocation_id(0)),
         Node.store("y", i, Expr.add(Expr.fma(Expr.load("a", i), Expr.load("b", i), Expr.load("y", i)),
                                     Expr.load("c", Expr.u32(0))))],
        name="fma4")


def mix_inputs(rng: np.random.Generator, n: int, m: int | None = None) -> list[np.ndarray]:
    return [random_array(rng, U32, n), random_array(rng, U32, n if m is None else m)]


def fma_inputs(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    return [random_array(rng, F32, n), random_array(rng, F32, n), random_array(rng, F32, 1),
            random_array(rng, F32, n)]


def assert_same(expected: list[np.ndarray], actual: list[np.ndarray], program: Program) -> None:
    assert_outputs_equal(expected, actual, program)


@pytest.fixture(params=["graphs", "eager"])
def graphs_mode(request, monkeypatch) -> str:
    monkeypatch.setenv("VYRE_CUDA_GRAPHS", "1" if request.param == "graphs" else "0")
    return request.param


def test_dispatch_matches_backend_and_oracle(backend, rng, graphs_mode) -> None:
    for program, make in ((mix(), mix_inputs), (fma4(), fma_inputs)):
        with backend.compile(program) as pipe:
            for n in (1000, 1024, 700, 4096, 1, 3000, 1000):
                inputs = make(rng, n)
                expected = run(program, inputs)
                assert_same(expected, pipe.dispatch(inputs), program)
                assert_same(expected, backend.dispatch(program, inputs), program)


def test_dispatch_with_config_and_device_inputs(backend, rng, graphs_mode) -> None:
    import cupy

    config = DispatchConfig(grid=(5, 1, 1), workgroup_override=(64, 1, 1))
    program = mix()
    with backend.compile(program, config) as pipe:
        for n in (900, 320, 4000):
            a, x = mix_inputs(rng, n)
            expected = run(program, [a, x], config)
            assert_same(expected, pipe.dispatch([cupy.asarray(a), cupy.asarray(x)]), program)
            assert_same(expected, pipe.dispatch([a.tobytes(), memoryview(x)]), program)
            assert_same(expected, backend.dispatch(program, [a, x], config), program)


def test_dispatch_batch_one_sync(backend, rng, graphs_mode) -> None:
    program = mix()
    batch = [mix_inputs(rng, n) for n in (1000, 900, 4000, 17, 1000, 2048)]
    with backend.compile(program) as pipe:
        pipe.dispatch(batch[0])  # warm: buffers, plans and graphs made
        before = backend.metrics()["cuda_sync_points"]
        outs = pipe.dispatch_batch(batch)
        syncs = backend.metrics()["cuda_sync_points"] - before
        assert syncs == 1 or syncs == 2 and backend.ring._pos < 64  # 2 only if the parameter ring wrapped
    assert len(outs) == len(batch)
    for inputs, out in zip(batch, outs):
        assert_same(backend.dispatch(program, inputs), out, program)
        assert_same(run(program, inputs), out, program)
    assert pipe.dispatch_batch([]) == []


def _resident(backend, arrays: list[np.ndarray], extra: list[int]) -> list:
    handles = []
    for arr in arrays:
        h = backend.allocate_resident(arr.nbytes)
        backend.upload_resident(h, arr)
        handles.append(h)
    return handles + [backend.allocate_resident(n) for n in extra]


def test_dispatch_resident_matches_backend_and_oracle(backend, rng) -> None:
    from vyre.reference import ReferenceBackend

    program = mix()
    a, x = mix_inputs(rng, 3000)
    ref = ReferenceBackend()
    mine = _resident(backend, [a, x], [OUT * 4])
    theirs = _resident(backend, [a, x], [OUT * 4])
    oracle = _resident(ref, [a, x], [OUT * 4])
    with backend.compile(program) as pipe:
        for _ in range(5):
            pipe.dispatch_resident(mine)
            backend.dispatch_resident(program, theirs)
            ref.dispatch_resident(program, oracle)
        for h_mine, h_theirs, h_ref in zip(mine, theirs, oracle):
            expected = ref.download_resident(h_ref)
            assert np.array_equal(backend.download_resident(h_mine), expected)
            assert np.array_equal(backend.download_resident(h_theirs), expected)
        # other handles rebind the pipeline; a freed handle is an error, never a silent write
        other = _resident(backend, [a, x], [OUT * 4])
        fresh = _resident(ref, [a, x], [OUT * 4])
        pipe.dispatch_resident(other)
        backend.free_resident(mine[1])
        with pytest.raises(InvalidHandle):
            pipe.dispatch_resident(mine)
        pipe.dispatch_resident(other)
        with pytest.raises(InvalidHandle):
            pipe.dispatch_resident([other[0], mine[1], other[2]])
    for _ in range(2):
        ref.dispatch_resident(program, fresh)
    for h_other, h_ref in zip(other, fresh):
        assert np.array_equal(backend.download_resident(h_other), ref.download_resident(h_ref))
    for h in mine[:1] + mine[2:] + theirs + other:
        backend.free_resident(h)


def test_dispatch_resident_fast_path_is_one_launch(backend, rng) -> None:
    program = fma4()
    inputs = fma_inputs(rng, 4096)
    handles = _resident(backend, inputs, [])
    with backend.compile(program) as pipe:
        pipe.dispatch_resident(handles)
        before = backend.metrics()
        for _ in range(100):
            pipe.dispatch_resident(handles)
        after = backend.metrics()
        assert after["cuda_kernel_launches"] - before["cuda_kernel_launches"] == 100
        assert after["cuda_h2d_bytes"] == before["cuda_h2d_bytes"]  # parameter words never rewritten
        assert after["cuda_sync_points"] == before["cuda_sync_points"]
        y = inputs[3]
        for _ in range(101):
            y = run(program, [*inputs[:3], y])[0]
        assert_same([y], [backend.download_resident(handles[3]).view(np.float32)], program)
    for h in handles:
        backend.free_resident(h)


def test_sizes_within_a_class_reuse_one_graph(backend, rng, monkeypatch) -> None:
    monkeypatch.setenv("VYRE_CUDA_GRAPHS", "1")
    program = mix()
    with backend.compile(program) as pipe:
        before = backend.metrics()
        for n in (1000, 900, 800, 1024, 1000, 513):  # all in the 4096-byte class, grid OUT / 128
            inputs = mix_inputs(rng, n)
            assert_same(run(program, inputs), pipe.dispatch(inputs), program)
        after = backend.metrics()
        assert after["cuda_graph_captures"] - before["cuda_graph_captures"] == 1
        assert after["cuda_graph_replays"] - before["cuda_graph_replays"] == 6
        inputs = mix_inputs(rng, 1500)  # the next class: a second graph
        assert_same(run(program, inputs), pipe.dispatch(inputs), program)
        assert backend.metrics()["cuda_graph_captures"] - before["cuda_graph_captures"] == 2


def test_graphs_off_captures_nothing(backend, rng, monkeypatch) -> None:
    monkeypatch.setenv("VYRE_CUDA_GRAPHS", "0")
    program = mix()
    with backend.compile(program) as pipe:
        before = backend.metrics()
        for n in (1000, 1500):
            inputs = mix_inputs(rng, n)
            assert_same(run(program, inputs), pipe.dispatch(inputs), program)
        after = backend.metrics()
    assert after["cuda_graph_captures"] == before["cuda_graph_captures"]
    assert after["cuda_graph_replays"] == before["cuda_graph_replays"]


def test_ten_thousand_dispatches_leave_memory_at_the_starting_level(backend, rng, monkeypatch) -> None:
    monkeypatch.setenv("VYRE_CUDA_GRAPHS", "1")
    program = mix()
    cases = [mix_inputs(rng, n) for n in (1000, 700, 1024, 1500, 3000)]
    expected = [run(program, c) for c in cases]
    start = backend.metrics()
    pipe = backend.compile(program)
    resident_pipe = backend.compile(fma4())
    handles = _resident(backend, fma_inputs(rng, 512), [])
    for c in cases:  # warm: one buffer set per capacity class, plans and graphs
        pipe.dispatch(c)
    resident_pipe.dispatch_resident(handles)
    warm = backend.metrics()
    for k in range(10_000):
        if k % 4 == 3:
            resident_pipe.dispatch_resident(handles)
        else:
            out = pipe.dispatch(cases[k % len(cases)])
            if k % 997 == 0:
                assert_same(expected[k % len(cases)], out, program)
    backend.download_resident(handles[0], 0, 4)
    end = backend.metrics()
    for key in ("cuda_transient_bytes_in_use", "cuda_resident_bytes_in_use"):
        assert end[key] == warm[key], key
    for h in handles:
        backend.free_resident(h)
    pipe.close()
    resident_pipe.close()
    final = backend.metrics()
    for key in ("cuda_transient_bytes_in_use", "cuda_resident_bytes_in_use"):
        assert final[key] == start[key], key
