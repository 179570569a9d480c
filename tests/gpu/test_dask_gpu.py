"""``vyre.dask`` on GPU workers: two threads per worker sharing one backend, and blocks placed with
``vyre.dask.persist`` running where their inputs are. Skipped unless a CUDA device is listed.
The oracle (numpy here: XOR) judges every result.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import NO_GPU, random_array

import vyre
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

U32 = DataType.U32
GPUS = [] if NO_GPU else [d for d in vyre.devices() if d.backend == "cuda"]
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not GPUS, reason="needs a CUDA device")]


def xor_program() -> Program:
    gid = Expr.invocation_id(0)
    return Program([BufferDecl.read_write("a", 0, U32), BufferDecl.read("b", 1, U32)], (256, 1, 1),
                   [Node.store("a", gid, Expr.bitxor(Expr.load("a", gid), Expr.load("b", gid)))], name="dask_gpu_xor")


def test_gpu_workers_run_two_blocks_at_once_on_one_backend_and_placed_blocks_stay_put(rng) -> None:
    distributed = pytest.importorskip("distributed")
    da = pytest.importorskip("dask.array")
    import vyre.dask as vdask

    n, block = 96 * (1 << 16) + 17, 1 << 16  # a short last block too
    a, b = random_array(rng, U32, n), random_array(rng, U32, n)
    cluster = vdask.local_cluster()
    try:
        with distributed.Client(cluster) as client:
            assert set(client.nthreads().values()) == {vdask.WORKER_THREADS}
            x, y = vdask.persist(da.from_array(a, chunks=block), da.from_array(b, chunks=block))
            fetched = client.run(lambda dask_worker: dask_worker.state.transfer_incoming_count_total)
            result = vdask.map_blocks(xor_program(), x, y).persist()
            distributed.wait(result)
            assert client.run(lambda dask_worker: dask_worker.state.transfer_incoming_count_total) == fetched
            assert np.array_equal(result.compute(), a ^ b)
            assert set(client.run(lambda: vdask.worker_backend().id).values()) == {"cuda"}
    finally:
        cluster.close()


def test_gpu_workers_decode_and_compile_a_program_once_for_all_its_blocks(rng) -> None:
    """Every block's task carries the program's wire form; each worker decodes it once and its backend
    loads one module for it, however many blocks (and graphs) run it."""
    distributed = pytest.importorskip("distributed")
    da = pytest.importorskip("dask.array")
    import vyre.dask as vdask

    block = 1 << 16
    cluster = vdask.local_cluster()
    try:
        with distributed.Client(cluster) as client:
            warm = vdask.map_blocks(xor_program(), da.from_array(random_array(rng, U32, 4 * block), chunks=block),
                                    da.from_array(random_array(rng, U32, 4 * block), chunks=block))
            warm.compute()  # helper kernels of the host path loaded, backends started

            def counts() -> tuple[int, int]:
                return vdask.decoded_programs(), vdask.worker_backend().metrics()["cuda_module_cache_entries"]

            before = client.run(counts)
            fresh = Program(xor_program().buffers, (256, 1, 1), xor_program().body, name="dask_gpu_xor_once")
            for _ in range(2):  # two graphs of 16 equal blocks each
                a, b = random_array(rng, U32, 16 * block), random_array(rng, U32, 16 * block)
                out = vdask.map_blocks(fresh, da.from_array(a, chunks=block), da.from_array(b, chunks=block))
                assert np.array_equal(out.compute(), a ^ b)
            after = client.run(counts)
            for worker, (decoded, modules) in after.items():
                assert decoded - before[worker][0] <= 1 and modules - before[worker][1] <= 1, (before, after)
    finally:
        cluster.close()
