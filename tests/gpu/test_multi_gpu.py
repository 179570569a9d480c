"""Several GPUs of one host: one backend per device from its own thread, ``multi.map``, NCCL, Dask.

Skipped unless at least two CUDA devices are listed. The oracle judges every result.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from conftest import NO_GPU, random_array

import vyre
from vyre import DispatchConfig
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.lib import multi
from vyre.reference import run

U32 = DataType.U32
gid, lid = Expr.invocation_id(0), Expr.local_id(0)


def _gpus() -> list:
    return [] if NO_GPU else [d for d in vyre.devices() if d.backend == "cuda"]


GPUS = _gpus()
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(len(GPUS) < 2, reason=f"needs >= 2 CUDA devices, {len(GPUS)} listed")]


def thread_program(t: int) -> Program:
    i = Expr.var("i")
    return Program([BufferDecl.read("a", 0, U32), BufferDecl.read_write("x", 1, U32)], (64 * (1 + t % 4), 1, 1),
                   [Node.let("i", gid),
                    Node.store("x", i, Expr.add(Expr.mul(Expr.load("x", i), Expr.u32(2 * t + 1)),
                                                Expr.bitxor(Expr.load("a", i), Expr.u32(t))))],
                   name=f"device_thread{t}")


def histogram() -> Program:
    return Program(
        [BufferDecl.read("data", 0, U32), BufferDecl.output("bins", 1, U32, 256),
         BufferDecl.workgroup("local", 256, U32)],
        (256, 1, 1),
        [Node.if_(Expr.lt(gid, Expr.buf_len("data")), [
            Node.let("o", Expr.atomic(AtomicOp.ADD, "local", Expr.bitand(Expr.load("data", gid), Expr.u32(255)),
                                      Expr.u32(1)))]),
         Node.barrier(),
         Node.let("o2", Expr.atomic(AtomicOp.ADD, "bins", lid, Expr.load("local", lid)))],
        name="histogram")


def test_devices_lists_every_gpu_without_starting_backends() -> None:
    import cupy

    assert len(GPUS) == cupy.cuda.runtime.getDeviceCount()
    assert [d.index for d in GPUS] == list(range(len(GPUS)))
    assert all(d.name and d.memory_bytes for d in GPUS)


def test_one_backend_per_device_each_driven_from_its_own_thread(rng) -> None:
    backends = [vyre.acquire(d.id) for d in GPUS]
    assert [b.device_profile()["index"] for b in backends] == [d.index for d in GPUS]
    cases = []
    for t in range(len(backends)):
        n = 5000 + 777 * t
        a, x = random_array(rng, U32, n), random_array(rng, U32, n)
        cases.append((thread_program(t), a, x, run(thread_program(t), [a, x])[0]))
    errors: list[BaseException] = []
    start = threading.Barrier(len(backends))

    def work(t: int) -> None:
        be, (program, a, x, want) = backends[t], cases[t]
        try:
            start.wait()
            for k in range(200):
                if k % 2:
                    (got,) = be.dispatch(program, [a, x])
                else:
                    ha, hx = be.allocate_resident(a.nbytes), be.allocate_resident(x.nbytes)
                    be.upload_resident(ha, a)
                    be.upload_resident(hx, x)
                    be.dispatch_resident(program, [ha, hx])
                    got = be.download_resident(hx).view(np.uint32)
                    be.free_resident(ha)
                    be.free_resident(hx)
                assert np.array_equal(got, want), f"device {t}, round {k}"
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(len(backends))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for be in backends:
        be.shutdown()
    assert not errors, errors[0]


@pytest.mark.parametrize("n", [1, 255, 100_003, 1 << 22])
def test_multi_map_over_every_gpu_equals_the_oracle(rng, n: int) -> None:
    program = thread_program(3)
    a, x = random_array(rng, U32, n), random_array(rng, U32, n)
    stats: dict = {}
    (got,) = multi.map(program, [a, x], stats=stats)
    assert np.array_equal(got, run(program, [a, x])[0])
    assert len(stats["devices"]) == min(len(GPUS), -(-n // program.workgroup_size[0]))


def test_histogram_reduced_over_every_gpu(rng) -> None:
    from vyre_cuda.collectives import nccl_module

    data = random_array(rng, U32, (1 << 24) + 12345)
    stats: dict = {}
    (bins,) = multi.map(histogram(), [data], reduce={"bins": "add"}, config=DispatchConfig(elements=data.size),
                        stats=stats)
    assert np.array_equal(bins, np.bincount(data & 255, minlength=256).astype(np.uint32))
    assert stats["reduction"] == ("nccl" if nccl_module() is not None else "peer")
    for op in ("max", "xor"):  # xor has no NCCL op: peer copies and a ufunc on the first device
        program = Program(histogram().buffers, (256, 1, 1),
                          [Node.let("o", Expr.atomic(AtomicOp.MAX if op == "max" else AtomicOp.XOR, "bins",
                                                     Expr.bitand(Expr.load("data", gid), Expr.u32(255)),
                                                     Expr.load("data", gid)))], name=f"bins_{op}")
        want = run(program, [data], DispatchConfig(elements=data.size))[0]
        (got,) = multi.map(program, [data], reduce={"bins": op}, config=DispatchConfig(elements=data.size),
                           stats=stats)
        assert np.array_equal(got, want), op
        assert stats["reduction"] == ("peer" if op == "xor" or nccl_module() is None else "nccl")


def test_dask_cluster_has_one_gpu_per_worker(rng) -> None:
    distributed = pytest.importorskip("distributed")
    da = pytest.importorskip("dask.array")
    import vyre.dask as vdask

    a, b = random_array(rng, U32, 1 << 20), random_array(rng, U32, 1 << 20)
    cluster = vdask.local_cluster()
    try:
        with distributed.Client(cluster) as client:
            seen = client.run(lambda: (os.environ.get("CUDA_VISIBLE_DEVICES"), vdask.worker_backend().id))
            assert sorted(v for v, _ in seen.values()) == sorted(str(d.index) for d in GPUS)
            assert {b for _, b in seen.values()} == {"cuda"}
            program = Program([BufferDecl.read_write("a", 0, U32), BufferDecl.read("b", 1, U32)], (256, 1, 1),
                              [Node.store("a", gid, Expr.bitxor(Expr.load("a", gid), Expr.load("b", gid)))])
            out = vdask.map_blocks(program, da.from_array(a, chunks=1 << 16), da.from_array(b, chunks=1 << 16))
            assert np.array_equal(out.compute(), a ^ b)
            counts = vdask.histogram(da.from_array(a & 1023, chunks=1 << 16), 1024).compute()
            assert np.array_equal(counts, np.bincount(a & 1023, minlength=1024))
    finally:
        cluster.close()
