"""``vyre.dask`` on a real two-process Dask cluster running the oracle, judged by numpy.

One cluster from ``vyre.dask.local_cluster(2)`` serves the module; one test also starts a plain
``distributed.LocalCluster``. No mocks: blocks travel to worker processes and run there.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from vyre import DispatchConfig
from vyre.driver.errors import InvalidProgram
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program

da = pytest.importorskip("dask.array", reason="vyre.dask needs the dask extra")
distributed = pytest.importorskip("distributed", reason="vyre.dask needs dask[distributed]")
vdask = pytest.importorskip("vyre.dask")

U32 = DataType.U32
gid = Expr.invocation_id(0)
EDGES = np.array([0, 1, 2, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF], np.uint32)


@pytest.fixture(scope="module")
def client():
    cluster = vdask.local_cluster(2, backend="reference")  # oracle workers on GPU machines too
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng()


def data(rng: np.random.Generator, n: int, dtype=np.uint32) -> np.ndarray:
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    x[: min(n, EDGES.size)] = EDGES[: min(n, EDGES.size)]
    return x.view(dtype)


def xor_key() -> Program:
    """``a[i] ^= b[i] ^ key[0]``: a split read_write, a split read and a whole uniform."""
    return Program([BufferDecl.read_write("a", 0, U32), BufferDecl.read("b", 1, U32),
                    BufferDecl.uniform("key", 2, U32, 1)], (64, 1, 1),
                   [Node.store("a", gid, Expr.bitxor(Expr.load("a", gid),
                                                     Expr.bitxor(Expr.load("b", gid), Expr.load("key", Expr.u32(0)))))],
                   name="xor_key")


def test_two_worker_processes_each_with_its_own_oracle(client) -> None:
    assert isinstance(client.cluster, distributed.LocalCluster)
    info = client.run(lambda: (os.getpid(), vdask.worker_backend().id, os.environ.get("VYRE_BACKEND")))
    assert len(info) == 2
    pids = {pid for pid, _, _ in info.values()}
    assert len(pids) == 2 and os.getpid() not in pids
    assert {(b, env) for _, b, env in info.values()} == {("reference", "reference")}


def test_map_blocks_matches_numpy(client, rng) -> None:
    a, b = data(rng, 10_001), data(rng, 10_001)
    key = np.array([rng.integers(0, 2**32)], np.uint32)
    out = vdask.map_blocks(xor_key(), da.from_array(a, chunks=1500), da.from_array(b, chunks=4000), key)
    assert out.chunks == ((1500,) * 6 + (1001,),)
    result = out.compute()
    assert np.array_equal(result, a ^ b ^ key[0])


def test_programs_are_decoded_once_per_worker_not_per_block(client, rng) -> None:
    program = Program(xor_key().buffers, (64, 1, 1), xor_key().body, name=f"xor_key_{rng.integers(1 << 30)}")
    before = client.run(vdask.decoded_programs)
    a, b = data(rng, 40 * 257), data(rng, 40 * 257)
    out = vdask.map_blocks(program, da.from_array(a, chunks=257), da.from_array(b, chunks=257),
                           np.zeros(1, np.uint32)).compute()
    assert np.array_equal(out, a ^ b)
    after = client.run(vdask.decoded_programs)
    assert all(after[w] - before[w] <= 1 for w in after)  # 40 blocks, at most one decode per worker
    assert sum(after[w] - before[w] for w in after) >= 1


def test_a_graph_again_decodes_nothing(client, rng) -> None:
    program = Program(xor_key().buffers, (64, 1, 1), xor_key().body, name=f"xor_key_{rng.integers(1 << 30)}")
    before = client.run(vdask.decoded_programs)
    for _ in range(2):  # two graphs of one program: each worker decodes it once, for both
        a, b = data(rng, 20 * 257), data(rng, 20 * 257)
        out = vdask.map_blocks(program, da.from_array(a, chunks=257), da.from_array(b, chunks=257),
                               np.zeros(1, np.uint32)).compute()
        assert np.array_equal(out, a ^ b)
    after = client.run(vdask.decoded_programs)
    assert all(after[w] - before[w] <= 1 for w in after)


def test_a_block_finds_its_program_by_the_wire_header(rng) -> None:
    """Every task unpickles its own ``BlockRun``; all of them share one decoded program per process."""
    program = Program(xor_key().buffers, (64, 1, 1), xor_key().body, name=f"xor_key_{rng.integers(1 << 30)}")
    run = vdask.BlockRun(program.to_wire(), 0, None, "reference")
    before = vdask.decoded_programs()
    key = np.zeros(1, np.uint32)
    for copy in [pickle.loads(pickle.dumps(run)) for _ in range(5)]:  # as the tasks of five blocks get it
        a, b = data(rng, 300), data(rng, 300)
        assert np.array_equal(copy(a, b, key), a ^ b)
        assert vdask.program_of(copy.wire) is vdask.program_of(run.wire)
    assert vdask.decoded_programs() - before == 1
    assert vdask.program_of(run.wire) == program


def test_a_block_task_carries_the_wire_form_and_little_else(rng) -> None:
    """A task is numpy's task for the same blocks plus the program's wire form: no per-task keywords,
    no second digest, no decoded program."""
    x, y = da.from_array(data(rng, 4 * 256), chunks=256), da.from_array(data(rng, 4 * 256), chunks=256)
    out = vdask.map_blocks(xor_key(), x, y, np.zeros(1, np.uint32))
    floor = da.map_blocks(np.bitwise_xor, x, y, np.zeros(1, np.uint32), dtype=np.uint32, name=out.name)

    def task_bytes(array) -> int:
        return len(pickle.dumps(dict(array.__dask_graph__())[array.__dask_keys__()[0]]))

    assert task_bytes(out) <= task_bytes(floor) + len(xor_key().to_wire()) + 50  # BlockRun: a class and 3 fields
    assert b"vyre.ir" not in pickle.dumps(dict(out.__dask_graph__())[out.__dask_keys__()[0]])


def test_map_blocks_adds_one_layer_of_one_task_per_block(rng) -> None:
    x, y = da.from_array(data(rng, 10 * 100 + 1), chunks=100), da.from_array(data(rng, 10 * 100 + 1), chunks=100)
    out = vdask.map_blocks(xor_key(), x, y, np.zeros(1, np.uint32))
    layers = out.__dask_graph__().layers
    assert set(layers) == {out.name, *x.__dask_graph__().layers, *y.__dask_graph__().layers}
    assert len(layers[out.name]) == out.numblocks[0] == 11


def test_a_started_backend_is_found_without_the_lock(rng) -> None:
    """A block's backend lookup does not wait behind another thread decoding a program or starting a backend."""
    import threading

    vdask.worker_backend("reference")
    found: list = []
    with vdask._lock:  # another thread holds it (a decode in progress)
        lookup = threading.Thread(target=lambda: found.append(vdask.worker_backend("reference")), daemon=True)
        lookup.start()
        lookup.join(timeout=10)
        assert found, "the lookup of a started backend waited for the lock"


def test_local_cluster_uses_no_private_dask_api() -> None:
    import inspect

    assert "._" not in inspect.getsource(vdask.local_cluster).replace("__", "")


def test_map_blocks_output_with_declared_count(client, rng) -> None:
    program = Program([BufferDecl.read("x", 0, U32), BufferDecl.output("bins", 1, U32, 16)], (64, 1, 1),
                      [Node.if_(Expr.lt(gid, Expr.buf_len("x")), [
                          Node.let("o", Expr.atomic(AtomicOp.ADD, "bins", Expr.rem(Expr.load("x", gid), Expr.u32(16)),
                                                    Expr.u32(1)))])],
                      name="bins16")
    x = data(rng, 3000)
    # the grid follows the dispatch rule: without elements= it would cover only the 16 bins
    parts = vdask.map_blocks(program, da.from_array(x, chunks=1000), config=DispatchConfig(elements=1000)).compute()
    assert parts.shape == (48,)
    for k in range(3):
        block = x[k * 1000:(k + 1) * 1000]
        assert np.array_equal(parts[k * 16:(k + 1) * 16], np.bincount(block % 16, minlength=16))


@pytest.mark.parametrize("op", vdask.OPS)
@pytest.mark.parametrize("dtype", [np.uint32, np.int32])
def test_reduce(client, rng, op: str, dtype) -> None:
    x = data(rng, 7_777, dtype)
    got = vdask.reduce(da.from_array(x, chunks=1000), op, split_every=3).compute()
    ufunc = {"add": np.add, "min": np.minimum, "max": np.maximum, "or": np.bitwise_or, "and": np.bitwise_and,
             "xor": np.bitwise_xor}[op]
    assert got.dtype == dtype and got == ufunc.reduce(x, dtype=dtype)


def test_reduce_of_nothing_is_the_identity(client) -> None:
    empty = da.from_array(np.zeros(0, np.uint32), chunks=10)
    assert vdask.reduce(empty, "min").compute() == 0xFFFFFFFF
    assert vdask.reduce(empty, "add").compute() == 0


@pytest.mark.parametrize("bins", [1, 256, 1000])
def test_histogram(client, rng, bins: int) -> None:
    x = np.concatenate([rng.integers(0, bins + 50, 20_000).astype(np.uint32), EDGES])
    got = vdask.histogram(da.from_array(x, chunks=3000), bins, split_every=2).compute()
    kept = x[x < bins]
    assert got.dtype == np.uint32 and np.array_equal(got, np.bincount(kept, minlength=bins))


@pytest.mark.parametrize("op", ["add", "max", "xor", "min"])
@pytest.mark.parametrize("dtype", [np.uint32, np.int32])
def test_inclusive_scan(client, rng, op: str, dtype) -> None:
    x = data(rng, 5_000, dtype)
    got = vdask.inclusive_scan(da.from_array(x, chunks=(1, 999, 1000, 3000)), op).compute()
    ufunc = {"add": np.add, "min": np.minimum, "max": np.maximum, "xor": np.bitwise_xor}[op]
    assert got.dtype == dtype and np.array_equal(got, ufunc.accumulate(x, dtype=dtype))


def test_bad_arguments_say_how_to_fix() -> None:
    with pytest.raises(InvalidProgram, match="Fix:"):
        vdask.reduce(da.ones(10, dtype=np.float32), "add")
    with pytest.raises(InvalidProgram, match="Fix:"):
        vdask.reduce(da.ones(10, dtype=np.uint32), "mul")
    with pytest.raises(InvalidProgram, match="Fix:"):
        vdask.histogram(da.ones(10, dtype=np.uint32), 0)
    with pytest.raises(InvalidProgram, match="inputs"):
        vdask.map_blocks(xor_key(), da.ones(10, dtype=np.uint32))
    with pytest.raises(InvalidProgram, match="1-D"):
        vdask.map_blocks(xor_key(), da.ones((2, 2), dtype=np.uint32), da.ones(4, dtype=np.uint32),
                         np.ones(1, np.uint32))


def test_cuda_workers_without_gpus_are_refused_before_starting() -> None:
    import vyre
    from vyre.driver.errors import BackendUnavailable

    if any(d.backend == "cuda" for d in vyre.devices()):
        pytest.skip("this machine lists CUDA devices")
    with pytest.raises(BackendUnavailable, match="Fix:"):
        vdask.worker_environments(2, backend="cuda")
    assert vdask.worker_environments(3, backend="reference") == [{"VYRE_BACKEND": "reference"}] * 3


def test_named_backend_is_used_by_every_block(client, rng) -> None:
    a, b = data(rng, 999), data(rng, 999)
    out = vdask.map_blocks(xor_key(), da.from_array(a, chunks=250), da.from_array(b, chunks=250),
                           np.zeros(1, np.uint32), backend="reference").compute()
    assert np.array_equal(out, a ^ b)
    assert all(client.run(lambda: "reference" in vdask._backends).values())  # acquired by that id on each worker


def _fetches_between_workers(client) -> int:
    """How many times a worker has fetched data from another worker so far (distributed's counter)."""
    return sum(client.run(lambda dask_worker: dask_worker.state.transfer_incoming_count_total).values())


def _blocks_by_worker(client, *arrays) -> list[set[str]]:
    """For each block index, the workers holding that block of any of ``arrays``."""
    held = [client.who_has(a) for a in arrays]
    keys = [a.__dask_keys__() for a in arrays]
    return [set().union(*(h[k[i]] for h, k in zip(held, keys))) for i in range(len(keys[0]))]


def test_persist_puts_block_i_of_every_array_on_one_worker_in_equal_shares(client, rng) -> None:
    a, b, c = data(rng, 9 * 100 + 7), data(rng, 9 * 100 + 7), data(rng, 9 * 100 + 7)
    x, y, z = da.from_array(a, chunks=100), da.from_array(b, chunks=300), da.from_array(c, chunks=100)
    px, py, pz = vdask.persist(x, y, z)
    assert px.chunks == py.chunks == pz.chunks == x.chunks  # rechunked like the first
    where = _blocks_by_worker(client, px, py, pz)
    assert all(len(w) == 1 for w in where)  # all three blocks i on one worker, and only there
    shares = sorted(sum(1 for w in where if w == {worker}) for worker in client.nthreads())
    assert shares == [5, 5]  # 10 blocks over 2 workers
    assert np.array_equal(px.compute(), a) and np.array_equal(py.compute(), b) and np.array_equal(pz.compute(), c)


def test_map_blocks_over_placed_inputs_is_one_task_per_block_and_moves_nothing(client, rng) -> None:
    a, b = data(rng, 24 * 512), data(rng, 24 * 512)
    x, y = vdask.persist(da.from_array(a, chunks=512), da.from_array(b, chunks=512))
    key = np.array([rng.integers(0, 2**32)], np.uint32)
    out = vdask.map_blocks(xor_key(), x, y, key)
    inputs = {*x.__dask_keys__(), *y.__dask_keys__()}
    assert sum(1 for k in dict(out.__dask_graph__()) if k not in inputs) == 24  # one task per block, no extra layer
    before = _fetches_between_workers(client)
    result = out.persist()
    distributed.wait(result)
    assert _fetches_between_workers(client) == before  # every block ran where its inputs were
    assert np.array_equal(result.compute(), a ^ b ^ key[0])


def test_persist_refuses_what_it_cannot_place(client) -> None:
    from tests.refusals import refused

    refused(lambda: vdask.persist(np.zeros(4, np.uint32)), "1-D dask arrays")
    refused(lambda: vdask.persist(), "1-D dask arrays")
    refused(lambda: vdask.persist(da.zeros(4, dtype=np.uint32), da.zeros(5, dtype=np.uint32)), "different lengths")
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as empty, \
            distributed.Client(empty, set_as_default=False) as nobody:
        refused(lambda: vdask.persist(da.zeros(4, dtype=np.uint32), client=nobody), "no worker", "wait_for_workers")


def test_workers_run_two_blocks_at_once_on_their_one_backend(client, rng) -> None:
    assert set(client.nthreads().values()) == {vdask.WORKER_THREADS} == {2}
    a, b = data(rng, 64 * 100), data(rng, 64 * 100)
    x, y = vdask.persist(da.from_array(a, chunks=100), da.from_array(b, chunks=100))
    out = vdask.map_blocks(xor_key(), x, y, np.zeros(1, np.uint32)).compute()
    assert np.array_equal(out, a ^ b)
    assert len(set(client.run(lambda: id(vdask.worker_backend())).values())) == 2  # one backend per worker process


def test_importing_vyre_does_not_import_dask() -> None:
    code = "import sys, vyre, vyre.lib.multi; sys.exit('dask' in sys.modules or 'distributed' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=os.getcwd()).returncode == 0
