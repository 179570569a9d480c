"""Several GPUs of one host: one backend per device from its own thread, ``multi.map``, NCCL, Dask.

Skipped unless at least two CUDA devices are listed. The oracle judges every result.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

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
    from vyre_cuda.testing import nccl_module

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
            # each worker's first visible GPU is its own (dask-cuda lists the others after it)
            assert sorted(v.split(",")[0] for v, _ in seen.values()) == sorted(str(d.index) for d in GPUS)
            assert {b for _, b in seen.values()} == {"cuda"}
            program = Program([BufferDecl.read_write("a", 0, U32), BufferDecl.read("b", 1, U32)], (256, 1, 1),
                              [Node.store("a", gid, Expr.bitxor(Expr.load("a", gid), Expr.load("b", gid)))])
            out = vdask.map_blocks(program, da.from_array(a, chunks=1 << 16), da.from_array(b, chunks=1 << 16))
            assert np.array_equal(out.compute(), a ^ b)
            counts = vdask.histogram(da.from_array(a & 1023, chunks=1 << 16), 1024).compute()
            assert np.array_equal(counts, np.bincount(a & 1023, minlength=1024))
    finally:
        cluster.close()


# ---- sharded device arrays, concurrency, failures ---------------------------------------------------------------
def _cupy_parts(rng, n: int, align: int = 256) -> tuple[np.ndarray, list]:
    import cupy

    from vyre.lib.multi_ops import bounds

    host = random_array(rng, U32, n)
    parts = []
    for d, (lo, hi) in zip(GPUS, bounds(n, len(GPUS), align)):
        with cupy.cuda.Device(d.index):
            parts.append(cupy.asarray(host[lo:hi]))
    return host, parts


@pytest.mark.parametrize("n", [1, 256, 100_003, (1 << 22) + 5])
def test_multi_map_on_per_device_cupy_arrays_stays_on_the_devices(rng, n: int) -> None:
    import cupy

    program = thread_program(0)  # workgroup 64
    a, a_parts = _cupy_parts(rng, n, 64)
    x, x_parts = _cupy_parts(rng, n, 64)
    (got,) = multi.map(program, [a_parts, x_parts])
    assert isinstance(got, list) and len(got) == len(GPUS)
    for part, original in zip(got, x_parts):
        assert isinstance(part, cupy.ndarray) and part.device.id == original.device.id
        assert part.size == original.size
    assert np.array_equal(np.concatenate([p.get() for p in got]), run(program, [a, x])[0])
    assert np.array_equal(np.concatenate([p.get() for p in x_parts]), x)  # inputs untouched
    sharded = multi.map(program, [multi.Sharded(a_parts), multi.Sharded(x_parts)])[0]
    assert isinstance(sharded, multi.Sharded) and np.array_equal(sharded.gather(), run(program, [a, x])[0])


def test_multi_map_from_several_threads_at_once_finishes(rng) -> None:
    """Concurrent multi.map calls over the same GPUs: every one finishes (no deadlock) and is right."""
    program = thread_program(1)
    cases = [(random_array(rng, U32, 300_000 + t), random_array(rng, U32, 300_000 + t)) for t in range(6)]
    results: dict[int, object] = {}

    def work(t: int) -> None:
        a, x = cases[t]
        try:
            for _ in range(5):
                results[t] = multi.map(program, [a, x])[0]
        except BaseException as exc:  # noqa: BLE001 - checked below
            results[t] = exc

    threads = [threading.Thread(target=work, args=(t,), daemon=True) for t in range(len(cases))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not any(th.is_alive() for th in threads), "a multi.map call did not finish"
    for t, (a, x) in enumerate(cases):
        assert np.array_equal(results[t], run(program, [a, x])[0]), t


def _on_device(p, work):
    import cupy

    with cupy.cuda.Device(p.device.id):
        return work(p)


class _FailsAfterUpload:
    """A real cuda backend whose dispatch fails after its inputs were uploaded (a device failing mid-call)."""

    def __init__(self, backend) -> None:
        self.inner = backend

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def dispatch_resident(self, *args, **kwargs) -> None:
        raise RuntimeError("device lost mid-call")


def test_one_device_failing_mid_call_leaves_every_buffer_freed(rng) -> None:
    backends = multi.backends_for([d.id for d in GPUS])
    before = [len(b.resident.handles()) for b in backends]
    a, x = random_array(rng, U32, 1 << 22), random_array(rng, U32, 1 << 22)
    devices = [*backends[:-1], _FailsAfterUpload(backends[-1])]
    with pytest.raises(RuntimeError, match="mid-call"):
        multi.map(thread_program(2), [a, x], devices=devices)
    assert [len(b.resident.handles()) for b in backends] == before
    (got,) = multi.map(thread_program(2), [a, x], devices=backends)  # the others still work
    assert np.array_equal(got, run(thread_program(2), [a, x])[0])


@pytest.mark.parametrize("n", [0, 1, 1000, (1 << 22) + 3])
def test_multi_library_calls_on_host_and_sharded_arrays_equal_numpy(rng, n: int) -> None:
    import cupy

    x, parts = _cupy_parts(rng, n)
    sx = multi.Sharded(parts)
    assert multi.reduce(x) == np.add.reduce(x, dtype=np.uint32)
    assert multi.reduce(sx, "max") == (x.max() if n else 0)
    low = multi.Sharded([_on_device(p, lambda q: q & np.uint32(4095)) for p in parts])
    assert np.array_equal(cupy.asnumpy(multi.histogram(low, 4096)), np.bincount(x & 4095, minlength=4096))
    assert np.array_equal(multi.histogram(x & np.uint32(4095), 4096), np.bincount(x & 4095, minlength=4096))
    scan = multi.inclusive_scan(sx)
    assert isinstance(scan, multi.Sharded) and np.array_equal(scan.gather(), np.cumsum(x, dtype=np.uint32))
    assert np.array_equal(multi.inclusive_scan(x), np.cumsum(x, dtype=np.uint32))
    ordered = multi.sort(sx)
    assert isinstance(ordered, multi.Sharded) and np.array_equal(ordered.gather(), np.sort(x))
    assert [p.device.id for p in ordered.parts] == [p.device.id for p in parts]
    assert np.array_equal(multi.sort(x), np.sort(x))
    as_list = multi.sort(parts)
    assert isinstance(as_list, list) and np.array_equal(np.concatenate([p.get() for p in as_list]), np.sort(x))


def test_multi_sort_of_i32_and_f32_with_duplicates(rng) -> None:
    ints = rng.integers(-50, 50, 1 << 20).astype(np.int32)
    assert np.array_equal(multi.sort(ints), np.sort(ints))
    floats = rng.standard_normal(1 << 20).astype(np.float32)
    floats[::1001] = -0.0
    got = multi.sort(floats)
    assert np.array_equal(got, np.sort(floats))


def test_shard_puts_each_part_on_its_device(rng) -> None:
    x = random_array(rng, U32, 1_000_003)
    sx = multi.shard(x, [d.id for d in GPUS], align=256)
    assert [p.device.id for p in sx.parts] == [d.index for d in GPUS]
    assert all(size % 256 == 0 for size in sx.sizes[:-1])
    assert np.array_equal(sx.gather(), x)


def test_multi_map_from_torch_tensors_per_device(rng) -> None:
    torch = pytest.importorskip("torch")
    n = 100_000
    a = random_array(rng, U32, n).view(np.int32)
    from vyre.lib.multi_ops import bounds

    parts = [torch.from_numpy(a[lo:hi].copy()).to(f"cuda:{d.index}")
             for d, (lo, hi) in zip(GPUS, bounds(n, len(GPUS), 64))]
    program = Program([BufferDecl.read_write("v", 0, DataType.I32)], (64, 1, 1),
                      [Node.store("v", gid, Expr.add(Expr.load("v", gid), Expr.i32(1)))], name="inc")
    (got,) = multi.map(program, [parts])
    assert all(isinstance(part, torch.Tensor) and part.device == given.device for part, given in zip(got, parts))
    assert np.array_equal(np.concatenate([part.cpu().numpy() for part in got]), a + 1)
    assert np.array_equal(np.concatenate([part.cpu().numpy() for part in parts]), a)  # the inputs stay as they were


def test_multi_map_from_fresh_host_arrays_again_and_again(rng) -> None:
    """Every call page-locks new host arrays while the other devices' threads allocate: the
    registrations and the allocations must never collide (a 4-GPU host once failed a cudaMalloc
    with cudaErrorAlreadyMapped here). The arrays are over glibc's largest mmap threshold (32 MiB),
    so each is a mapping of its own and is registered, not staged."""
    from vyre_cuda.testing import DIRECT_MIN, exclusive_pages

    ids = [d.id for d in GPUS]
    n = max(DIRECT_MIN * len(ids), 33 << 20) // 4 + 999
    program = thread_program(1)
    for _ in range(6):
        a = rng.integers(0, 2**32, n, dtype=np.uint32)
        x = rng.integers(0, 2**32, n, dtype=np.uint32)
        assert exclusive_pages(a) is not None and exclusive_pages(x) is not None, "registered, not staged"
        (out,) = multi.map(program, [a, x], devices=ids)
        assert np.array_equal(out, x * np.uint32(3) + (a ^ np.uint32(1)))


# ---- compiled calls: repeated sharded calls bind new arrays and launch, stream-ordered --------------------------
def scaled_odd_program(n: int) -> Program:
    """``out[i] = 3 a[i] + k`` at odd ``i`` only (even elements must come back zero), ``x += a``."""
    i = Expr.var("i")
    return Program([BufferDecl.read("a", 0, U32), BufferDecl.read_write("x", 1, U32),
                    BufferDecl.uniform("k", 2, U32, 1), BufferDecl.output("out", 3, U32, n)], (128, 1, 1),
                   [Node.let("i", gid),
                    Node.if_(Expr.lt(i, Expr.buf_len("a")), [
                        Node.store("x", i, Expr.add(Expr.load("x", i), Expr.load("a", i))),
                        Node.if_(Expr.eq(Expr.bitand(i, Expr.u32(1)), Expr.u32(1)), [
                            Node.store("out", i, Expr.add(Expr.mul(Expr.load("a", i), Expr.u32(3)),
                                                          Expr.load("k", Expr.u32(0))))])])],
                   name="scaled_odd")


def _poison_pools(nbytes: int) -> None:
    """Fill a block of every device's CuPy pool with 0xAB and give it back, so new outputs are likely
    to land on stale bytes (every element must be written or zeroed)."""
    import cupy

    for d in GPUS:
        with cupy.cuda.Device(d.index):
            block = cupy.full(nbytes, 0xAB, cupy.uint8)
            cupy.cuda.get_current_stream().synchronize()
            del block


@pytest.mark.parametrize("n", [1000, (1 << 22) + 77])
def test_repeated_sharded_calls_on_fresh_data_equal_numpy(rng, n: int) -> None:
    """Each call: fresh random shards, poisoned pools; results equal numpy; every call after the
    first reuses the compiled call, launches every device in place and waits for none."""
    import cupy

    program = scaled_odd_program(n)
    ids = [d.id for d in GPUS]
    backends = multi.backends_for(ids)
    for call in range(5):
        a, x = random_array(rng, U32, n), random_array(rng, U32, n)
        k = np.array([rng.integers(0, 2**32)], np.uint32)
        sa, sx = multi.shard(a, ids, align=128), multi.shard(x, ids, align=128)
        _poison_pools(4 * n)
        syncs = [b.metrics()["cuda_sync_points"] for b in backends]
        stats: dict = {}
        x_out, out = multi.map(program, [sa, sx, k], stats=stats)
        if call:
            assert stats["compiled"] == "hit" and stats["path"] == "direct"
            assert [b.metrics()["cuda_sync_points"] for b in backends] == syncs  # no host wait
        assert [p.device.id for p in out.parts] == [d.index for d in GPUS]
        want = np.where(np.arange(n) % 2 == 1, a * np.uint32(3) + k[0], np.uint32(0))
        assert np.array_equal(out.gather(), want)
        assert np.array_equal(x_out.gather(), x + a)
        assert np.array_equal(sx.gather(), x)  # the read_write input is left as it was
        assert isinstance(out.parts[0], cupy.ndarray)


def test_sharded_results_are_ordered_on_the_current_stream(rng) -> None:
    """Work the caller queues on each device's current stream right after the call sees its results
    (no synchronisation in between)."""
    import cupy

    program = thread_program(0)
    n = (1 << 23) + 5
    a, a_parts = _cupy_parts(rng, n, 64)
    x, x_parts = _cupy_parts(rng, n, 64)
    want = run(program, [a, x])[0]
    for _ in range(3):
        (got,) = multi.map(program, [a_parts, x_parts])
        lo = 0
        for part in got:
            with cupy.cuda.Device(part.device.id):
                total = int(part.astype(cupy.uint64).sum())  # a CuPy kernel queued on the current stream
            assert total == int(want[lo:lo + part.size].astype(np.uint64).sum())
            lo += part.size


def test_compiled_call_on_new_shards_equals_numpy(rng) -> None:
    program = thread_program(3)  # workgroup 256
    ids = [d.id for d in GPUS]
    n = 1_000_003
    like = multi.shard(random_array(rng, U32, n), ids)
    call = multi.compile(program, [like, like])
    for _ in range(3):
        a, x = random_array(rng, U32, n), random_array(rng, U32, n)
        (got,) = call([multi.shard(a, ids), multi.shard(x, ids)])
        assert np.array_equal(got.gather(), run(program, [a, x])[0])


# ---- multi.histogram / multi.reduce: partials combined on the first device ------------------------------------------
def _values(rng, n: int, dtype: type, bins: int) -> np.ndarray:
    """Mostly values in ``[0, bins)``, the rest edges of the type and of the bins (-1, bins, min, max)."""
    info = np.iinfo(dtype)
    edges = np.array([0, 1, -1, bins - 1, bins, info.min, info.max], np.int64)
    edges = edges[(edges >= info.min) & (edges <= info.max)]
    return np.where(rng.random(n) < 0.75, rng.integers(0, max(bins, 1), n), rng.choice(edges, n)).astype(dtype)


def _counts(x: np.ndarray, bins: int) -> np.ndarray:
    wide = x.astype(np.int64)
    return np.bincount(wide[(wide >= 0) & (wide < bins)], minlength=bins).astype(np.uint32)


def _d2h(ids: list[str]) -> list[int]:
    """Bytes each device's backend has copied to the host so far."""
    return [b.metrics()["cuda_d2h_bytes"] for b in multi.backends_for(ids)]


@pytest.mark.parametrize("dtype", [np.uint32, np.int32])
@pytest.mark.parametrize("n", [0, 1, 1000, (1 << 22) + 3])
@pytest.mark.parametrize("bins", [1, 256, 5000])
def test_multi_histogram_of_a_host_array_downloads_only_the_final_counts(rng, dtype: type, n: int, bins: int) -> None:
    ids = [d.id for d in GPUS]
    x = _values(rng, n, dtype, bins)
    before = _d2h(ids)
    got = multi.histogram(x, bins, devices=ids)
    moved = [after - b for after, b in zip(_d2h(ids), before)]
    assert isinstance(got, np.ndarray) and got.dtype == np.uint32 and np.array_equal(got, _counts(x, bins))
    assert moved == [4 * bins] + [0] * (len(ids) - 1)  # no device's partial counts went to the host


@pytest.mark.parametrize("n", [0, 1, 300, (1 << 22) + 3])
def test_multi_histogram_of_sharded_values_stays_on_the_first_device(rng, n: int) -> None:
    import cupy

    ids = [d.id for d in GPUS]
    for dtype in (np.uint32, np.int32):
        for bins in (0, 1, 256, 5000):
            x = _values(rng, n, dtype, bins)
            sx = multi.shard(x, ids)
            before = _d2h(ids)
            got = multi.histogram(sx, bins)
            assert _d2h(ids) == before
            assert isinstance(got, cupy.ndarray) and got.device.id == GPUS[0].index and got.dtype == np.uint32
            assert np.array_equal(got.get(), _counts(x, bins))


def _parts_on_own_streams(n: int, make: Callable[[Any], Any]) -> tuple[list[Any], list[Any]]:
    """``make(i)`` of each device's share of ``i = 0 .. n-1`` (CuPy u32), computed on a new non-blocking
    stream made that device's current one (``_back_to_null_streams`` undoes it); the parts and the streams."""
    import cupy

    from vyre.lib.multi_ops import bounds

    parts, streams = [], []
    for d, (lo, hi) in zip(GPUS, bounds(n, len(GPUS), 256)):
        with cupy.cuda.Device(d.index):
            streams.append(cupy.cuda.Stream(non_blocking=True))
            streams[-1].use()
            parts.append(make(cupy.arange(lo, hi, dtype=cupy.uint32)))
    return parts, streams


def _back_to_null_streams() -> None:
    """Wait for every device, then make each device's null stream current again."""
    import cupy

    for d in GPUS:
        with cupy.cuda.Device(d.index):
            cupy.cuda.Device(d.index).synchronize()
            cupy.cuda.Stream.null.use()


def test_multi_histogram_follows_each_device_current_stream() -> None:
    """Parts made on each device's own non-blocking stream, the histogram called with no wait, its
    result read on the first device's stream: every device's counts arrive in full."""
    import cupy

    n, bins, golden = (1 << 25) + 11, 4096, np.uint32(2654435761)
    try:
        parts, _streams = _parts_on_own_streams(n, lambda i: (i * golden) >> cupy.uint32(20))
        counts = multi.histogram(multi.Sharded(parts), bins)
        with cupy.cuda.Device(GPUS[0].index):
            got = counts.get()  # on the first device's current stream
    finally:
        _back_to_null_streams()
    i = np.arange(n, dtype=np.uint32)
    assert np.array_equal(got, np.bincount((i * golden) >> np.uint32(20), minlength=bins))


def test_multi_histogram_of_torch_tensors_per_device(rng) -> None:
    torch = pytest.importorskip("torch")
    from vyre.lib.multi_ops import bounds

    n, bins = 100_003, 300
    x = _values(rng, n, np.int32, bins)
    parts = [torch.from_numpy(x[lo:hi].copy()).to(f"cuda:{d.index}")
             for d, (lo, hi) in zip(GPUS, bounds(n, len(GPUS), 256))]
    got = multi.histogram(parts, bins)
    assert got.device.id == GPUS[0].index
    assert np.array_equal(got.get(), _counts(x, bins))


def test_combine_on_the_first_device_wraps_and_skips_nan(rng) -> None:
    import cupy

    from vyre.lib.sharded import device_ops

    ids = [d.id for d in GPUS]
    ops = device_ops(multi.backends_for(ids)[0])
    devices = [d.index for d in GPUS]
    cases = {
        "add": [np.array([0xFFFFFFFF, 1, 0x80000000, 7], np.uint32)] + [rng.integers(0, 2**32, 4, np.uint32)
                                                                       for _ in devices[1:]],
        "minimum": [_values(rng, 5, np.int32, 9) for _ in devices],
        "bitwise_xor": [_values(rng, 5, np.uint32, 9) for _ in devices],
        "fmin": [np.array([np.nan, 1.5, -0.0, np.nan], np.float32)] + [np.array([2.0, np.nan, 0.0, np.nan], np.float32)
                                                                       for _ in devices[1:]],
    }
    for name, rows in cases.items():
        pieces = []
        for d, row in zip(devices, rows):
            with cupy.cuda.Device(d):
                pieces.append(cupy.asarray(row))
        got = ops.combine_on(pieces, devices, name)
        with cupy.cuda.Device(devices[0]):
            host = got.get()
        assert got.device.id == devices[0]
        want = getattr(np, name).reduce(np.stack(rows), axis=0, dtype=rows[0].dtype)  # wrapping, like the device
        assert host.dtype == rows[0].dtype and np.array_equal(host, want, equal_nan=True), name


@pytest.mark.parametrize("op", ["add", "min", "max", "or", "and", "xor"])
def test_multi_reduce_combines_partials_on_the_first_device(rng, op: str) -> None:
    from vyre.lib.multi_devices import UFUNCS

    ids = [d.id for d in GPUS]
    for dtype in (np.uint32, np.int32):
        x = _values(rng, (1 << 20) + 3, dtype, 1000)
        want = UFUNCS[op].reduce(x, dtype=dtype)
        before = _d2h(ids)
        got = multi.reduce(x, op, devices=ids)
        moved = [after - b for after, b in zip(_d2h(ids), before)]
        assert isinstance(got, np.generic) and got.dtype == dtype and got == want
        assert moved == [4] + [0] * (len(ids) - 1)  # only the combined value crossed
        assert multi.reduce(multi.shard(x, ids), op) == want


def test_multi_reduce_float_min_max_skip_a_device_of_nans(rng) -> None:
    ids = [d.id for d in GPUS]
    x = rng.standard_normal(1 << 20).astype(np.float32)
    x[: x.size // len(ids)] = np.nan  # the first device's part is all NaN
    assert multi.reduce(x, "min", devices=ids) == np.nanmin(x)
    assert multi.reduce(multi.shard(x, ids), "max") == np.nanmax(x)


# ---- multi.inclusive_scan: carries combined on the devices ----------------------------------------------------------
def _scan(x: np.ndarray, op: str) -> np.ndarray:
    from vyre.lib.multi_devices import UFUNCS

    return UFUNCS[op].accumulate(x, dtype=x.dtype) if x.size else x.copy()


@pytest.mark.parametrize("n", [0, 1, 1000, (1 << 22) + 3])
@pytest.mark.parametrize("dtype", [np.uint32, np.int32])
def test_multi_scan_of_sharded_values_never_crosses_to_the_host(rng, n: int, dtype: type) -> None:
    import cupy

    ids = [d.id for d in GPUS]
    for op in ("add", "min", "max", "or", "and", "xor"):
        x = _values(rng, n, dtype, 1000)
        sx = multi.shard(x, ids)
        before = _d2h(ids)
        got = multi.inclusive_scan(sx, op)
        assert _d2h(ids) == before, op  # no total or carry went through the host
        assert isinstance(got, multi.Sharded) and got.sizes == sx.sizes
        assert all(isinstance(p, cupy.ndarray) and p.device.id == d.index for p, d in zip(got.parts, GPUS))
        assert np.array_equal(got.gather(), _scan(x, op)), op


@pytest.mark.parametrize("n", [0, 1, 1000, (1 << 22) + 3])
def test_multi_scan_of_a_host_array_downloads_only_the_result(rng, n: int) -> None:
    from vyre.lib.multi_ops import bounds

    ids = [d.id for d in GPUS]
    for dtype, op in ((np.uint32, "add"), (np.int32, "max"), (np.uint32, "xor")):
        x = _values(rng, n, dtype, 1 << 16)
        before = _d2h(ids)
        got = multi.inclusive_scan(x, op, devices=ids)
        moved = [after - b for after, b in zip(_d2h(ids), before)]
        assert isinstance(got, np.ndarray) and got.dtype == dtype and np.array_equal(got, _scan(x, op)), op
        assert moved == [4 * (hi - lo) for lo, hi in bounds(n, len(ids), 1)], op  # each device: its part only


def test_multi_scan_with_empty_parts_and_a_list_of_parts(rng) -> None:
    import cupy

    x = _values(rng, 300_001, np.uint32, 1 << 20)
    for cut in (0, 1, 150_000, x.size - 1, x.size):  # the first or the last part empty, or one element
        pieces = [x[:cut]] + [x[cut:]] + [x[:0]] * (len(GPUS) - 2)
        parts = []
        for d, piece in zip(GPUS, pieces):
            with cupy.cuda.Device(d.index):
                parts.append(cupy.asarray(piece))
        got = multi.inclusive_scan(parts, "add")
        assert isinstance(got, list) and [int(p.size) for p in got] == [p.size for p in pieces]
        host = []
        for d, p in zip(GPUS, got):
            with cupy.cuda.Device(d.index):
                host.append(p.get())
        assert np.array_equal(np.concatenate(host), np.cumsum(x, dtype=np.uint32)), cut


def test_multi_scan_follows_each_device_current_stream() -> None:
    """Parts made on each device's own non-blocking stream, the scan called with no wait, each
    result read on its device's stream: every carry arrives before the scan that reads it."""
    import cupy

    n, golden = (1 << 25) + 11, np.uint32(2654435761)
    host = []
    try:
        parts, _streams = _parts_on_own_streams(n, lambda i: i * golden)
        scanned = multi.inclusive_scan(multi.Sharded(parts), "add")
        for d, p in zip(GPUS, scanned.parts):
            with cupy.cuda.Device(d.index):
                host.append(p.get())  # on that device's current stream
    finally:
        _back_to_null_streams()
    i = np.arange(n, dtype=np.uint32)
    assert np.array_equal(np.concatenate(host), np.cumsum(i * golden, dtype=np.uint32))


def test_multi_scan_of_torch_tensors_per_device(rng) -> None:
    """torch parts: totals, carries and scans ordered on torch's streams; the results torch tensors."""
    torch = pytest.importorskip("torch")
    from vyre.lib.multi_ops import bounds

    n = (1 << 20) + 7
    x = _values(rng, n, np.int32, 1 << 20)
    parts = [torch.from_numpy(x[lo:hi].copy()).to(f"cuda:{d.index}")
             for d, (lo, hi) in zip(GPUS, bounds(n, len(GPUS), 256))]
    for op in ("add", "min", "xor"):
        got = multi.inclusive_scan(parts, op)
        assert all(isinstance(p, torch.Tensor) and p.device.index == d.index for p, d in zip(got, GPUS))
        assert np.array_equal(np.concatenate([p.cpu().numpy() for p in got]), _scan(x, op)), op


def test_combine_on_another_device_and_stream(rng) -> None:
    """``combine_on(..., to=, like=)``: the pieces of every device combined in order on the last
    device, on the stream of ``like`` (a non-blocking stream there), read on that stream."""
    import cupy

    from vyre.lib.sharded import device_ops

    ids = [d.id for d in GPUS]
    ops = device_ops(multi.backends_for(ids)[0])
    devices = [d.index for d in GPUS]
    rows = [np.array([0xFFFFFFFF, 5, 0x80000000], np.uint32)] + [rng.integers(0, 2**32, 3, np.uint32)
                                                                  for _ in devices[1:]]
    pieces = []
    for d, row in zip(devices, rows):
        with cupy.cuda.Device(d):
            pieces.append(cupy.asarray(row))
    last = devices[-1]
    with cupy.cuda.Device(last):
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            like = cupy.zeros(1, np.uint32)
            got = ops.combine_on(pieces, devices, "add", to=last, like=like)
            host = got.get()
        stream.synchronize()
    assert got.device.id == last
    assert np.array_equal(host, np.add.reduce(np.stack(rows), axis=0, dtype=np.uint32))


def test_a_scan_init_on_another_device_is_refused() -> None:
    """A device array on another GPU than the backend's is refused before CuPy sees it: ``cupy.asarray``
    copies an array of another device to the current one, which made the check pass while the
    kernel read the other device's pointer (an illegal address on 2 H100s)."""
    import cupy

    from vyre import lib
    from vyre.driver.errors import InvalidProgram

    backend = multi.backends_for([GPUS[0].id])[0]
    with cupy.cuda.Device(GPUS[0].index):
        x = cupy.arange(1000, dtype=cupy.uint32)
    with cupy.cuda.Device(GPUS[1].index):
        init = cupy.ones(1, cupy.uint32)
    with pytest.raises(InvalidProgram, match="Fix:"):
        lib.inclusive_scan(x, init=init, backend=backend)


def test_a_repeated_call_with_an_array_moved_to_another_device_is_refused() -> None:
    """A loop's repeated library call skips the argument checks only while every array is on the
    device the compiled call was made for: the same shapes and dtypes on another device are checked
    again (and refused), never bound as a pointer of the other device."""
    import cupy

    from vyre import lib
    from vyre.driver.errors import InvalidProgram

    backend = multi.backends_for([GPUS[0].id])[0]
    with cupy.cuda.Device(GPUS[0].index):
        x = cupy.arange(1000, dtype=cupy.uint32)
        here = cupy.full(1, 5, cupy.uint32)
        for _ in range(3):  # the repeat path takes over from the second call
            got = lib.inclusive_scan(x, init=here, backend=backend)
        assert int(got[-1]) == 5 + 999 * 1000 // 2
    with cupy.cuda.Device(GPUS[1].index):
        there = cupy.full(1, 5, cupy.uint32)
    with cupy.cuda.Device(GPUS[0].index), pytest.raises(InvalidProgram, match="Fix:"):
        lib.inclusive_scan(x, init=there, backend=backend)
