"""Host data at the link's speed, and work over the GPUs of one host that gets faster with more GPUs.

Run on a multi-GPU machine: ``python benchmarks/bench_scale.py [--quick] [--no-dask]``. Prints
tables headed by the card names, writes ``$OUT/bench_scale.json`` (or ``--json PATH``) and, with
``--chart JSON``, draws ``docs/scale_xor.png`` and ``docs/scale_speedups.png`` from it. With no GPU
it runs the same code on two oracle backends at toy sizes (a smoke test, not a measurement).

1. The host link: a pinned CuPy copy of the bytes (H2D and D2H, the link's speed measured in this
   run), then a plain ``dispatch`` of SAXPY on 2^28 f32 numpy arrays (x and y in, y out) and
   ``upload_resident``/``download_resident`` of 1 GiB: seconds and the fraction of the pinned
   copy's speed they reach.
2. XOR over 2^30 U32 per GPU, resident, one backend and thread per GPU, on 1..N GPUs (aggregate
   GB/s, speed-up over one GPU).
3. ``multi.map`` SAXPY with 2^28 f32 per GPU, from numpy arrays and from sharded device arrays
   (``multi.shard``), on 1 GPU and on all: speed-up = N x (time on 1) / (time on N). The sharded
   rows time the plain ``multi.map`` call (its compiled call comes from the cache after the warm-up
   call), and next to it the same call made once with ``multi.compile``.
4. ``multi.sort`` of 2^31 u32 keys over the GPUs (sharded in and out, checked sorted, same sum and
   xor as the input) against one GPU's ``lib.sort`` of 2^30 keys, N times; ``multi.inclusive_scan``
   and ``multi.histogram`` (256 bins of the top byte) of 2^31 values the same way (checked against CuPy).
5. ``vyre.dask.map_blocks`` of XOR over 200 blocks of 2^20 on a ``local_cluster`` of 1 and of N GPU
   workers (inputs placed with ``vyre.dask.persist``, block i of x and y on one worker; results
   persisted there: the clock sees dispatches, not the transfer of 800 MiB to the client); overhead
   per block = worker time per block minus the same blocks dispatched in this process, printed with
   its breakdown (tasks per block, bytes moved between workers, the workers' own time per block).
   Then the same against the in-process dispatches with their results kept (a persisted block is
   new memory, touched for the first time), and Dask's own floor: ``dask.array.map_blocks`` of
   ``np.bitwise_xor`` on the same placed inputs, less the same numpy calls in this process; vyre's
   part is what remains beyond that floor. Results checked against numpy after the clock.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import vyre  # noqa: E402
from vyre import lib  # noqa: E402
from vyre.ir import BufferDecl, DataType, Expr, Node, Program  # noqa: E402
from vyre.lib import multi  # noqa: E402

U32, F32 = DataType.U32, DataType.F32
GOLDEN = np.uint32(2654435761)
GiB = 1 << 30


def xor_program() -> Program:
    i = Expr.invocation_id(0)
    return Program([BufferDecl.read_write("a", 0, U32), BufferDecl.read("b", 1, U32)], (256, 1, 1),
                   [Node.store("a", i, Expr.bitxor(Expr.load("a", i), Expr.load("b", i)))], name="xor")


def saxpy_program() -> Program:
    i = Expr.invocation_id(0)
    return Program([BufferDecl.read("x", 0, F32), BufferDecl.read_write("y", 1, F32),
                    BufferDecl.uniform("a", 2, F32, 1)], (256, 1, 1),
                   [Node.if_(Expr.lt(i, Expr.buf_len("y")), [
                       Node.store("y", i, Expr.add(Expr.mul(Expr.load("a", Expr.u32(0)), Expr.load("x", i)),
                                                   Expr.load("y", i)))])],
                   name="saxpy")


def saxpy_inputs(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x = 1.5, y = i % 1024, a = 2: every result (3 + i % 1024) is exact in f32."""
    y = np.empty(n, np.float32)
    step = 1 << 24
    for lo in range(0, n, step):
        y[lo:lo + step] = (np.arange(lo, min(n, lo + step), dtype=np.uint32) & np.uint32(1023)).astype(np.float32)
    return np.full(n, 1.5, np.float32), y, np.array([2.0], np.float32)


def check_saxpy(out: np.ndarray | multi.Sharded, n: int) -> bool:
    """Spot checks of a SAXPY result (host array or sharded) against 3 + i % 1024."""
    parts = out.parts if isinstance(out, multi.Sharded) else [out]
    start = 0
    for part in parts:
        size = int(part.shape[0])
        for lo in {0, size // 2, max(0, size - 4096)}:
            hi = min(size, lo + 4096)
            got = np.asarray(part[lo:hi].get() if hasattr(part, "get") else part[lo:hi])
            want = 3 + ((np.arange(start + lo, start + hi) & 1023).astype(np.float32))
            if not np.array_equal(got, want):
                return False
        start += size
    return start == n


def best_of(reps: int, work) -> float:
    """The shortest wall time of ``reps`` runs of ``work()``, every GPU synchronised before the clock
    stops (calls on device arrays return before their work is done)."""
    times = []
    for _ in range(reps):
        _sync_all()
        began = time.perf_counter()
        work()
        _sync_all()
        times.append(time.perf_counter() - began)
    return min(times)


def _sync_all() -> None:
    try:
        import cupy
    except ImportError:
        return
    for d in range(cupy.cuda.runtime.getDeviceCount()):
        with cupy.cuda.Device(d):
            cupy.cuda.Device(d).synchronize()


def values(start: int, n: int, seed: int) -> np.ndarray:
    """Cheap, well-spread u32 values of positions ``start .. start + n`` (a multiplicative hash)."""
    i = np.arange(start, start + n, dtype=np.uint64).astype(np.uint32)
    return (i * GOLDEN + np.uint32(seed)) ^ (i >> np.uint32(7))


# ---- 1. XOR on resident data -----------------------------------------------------------------------------------
def xor_scaling(backends: list, n: int, reps: int) -> list[dict]:
    program = xor_program()
    a_host, b_host = values(0, n, 1), values(0, n, 2)
    expected = a_host ^ b_host if reps % 2 else a_host
    handles = []
    for be in backends:
        a, b = be.allocate_resident(a_host.nbytes), be.allocate_resident(b_host.nbytes)
        be.upload_resident(a, a_host)
        be.upload_resident(b, b_host)
        be.dispatch_repeated([], [(program, [a, b], None)], reps, reads=[(a, 0, 4)])  # compile, capture, warm up
        be.upload_resident(a, a_host)
        handles.append((a, b))
    rows = []
    try:
        for count in range(1, len(backends) + 1):
            for be, (a, _) in zip(backends, handles):
                be.upload_resident(a, a_host)
            seconds = _run_together(backends[:count], handles[:count], program, reps)
            for be, (a, _) in zip(backends[:count], handles[:count]):
                _check_sample(be, a, expected)
            moved = 12 * n * reps * count
            rows.append({"gpus": count, "seconds": seconds, "gb_per_s": moved / seconds / 1e9})
    finally:
        for be, (a, b) in zip(backends, handles):
            be.free_resident(a)
            be.free_resident(b)
    base = rows[0]["gb_per_s"]
    for row in rows:
        row["speedup"] = row["gb_per_s"] / base
    return rows


def _run_together(backends: list, handles: list, program: Program, reps: int) -> float:
    """Wall seconds until the slowest device finished ``reps`` launches, all started at one barrier."""
    barrier = threading.Barrier(len(backends) + 1)
    errors: list[BaseException] = []

    def work(be, a, b) -> None:
        barrier.wait()
        try:
            be.dispatch_repeated([], [(program, [a, b], None)], reps, reads=[(a, 0, 4)])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(be, a, b)) for be, (a, b) in zip(backends, handles)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    if errors:
        raise errors[0]
    return seconds


def _check_sample(be, handle, expected: np.ndarray) -> None:
    n = expected.size
    for lo in (0, n // 2, max(0, n - (1 << 20))):
        hi = min(n, lo + (1 << 20))
        got = be.download_resident(handle, lo * 4, (hi - lo) * 4).view(np.uint32)
        if not np.array_equal(got, expected[lo:hi]):
            raise AssertionError(f"XOR differs from numpy on {be!r} in elements {lo}..{hi}")


# ---- 1. the host link --------------------------------------------------------------------------------------------
def pinned_link(nbytes: int, device: int) -> dict:
    """GB/s of a pinned CuPy copy of ``nbytes`` host -> device and back (best of 3)."""
    import cupy

    with cupy.cuda.Device(device):
        mem = cupy.cuda.alloc_pinned_memory(nbytes)
        host = np.frombuffer(mem, np.uint8, nbytes)
        host[:] = 7
        dev = cupy.empty(nbytes, np.uint8)
        stream = cupy.cuda.Stream(non_blocking=True)
        copy = cupy.cuda.runtime.memcpyAsync

        def h2d() -> None:
            copy(dev.data.ptr, host.ctypes.data, nbytes, 1, stream.ptr)
            stream.synchronize()

        def d2h() -> None:
            copy(host.ctypes.data, dev.data.ptr, nbytes, 2, stream.ptr)
            stream.synchronize()

        h2d()
        result = {"bytes": nbytes, "h2d_gb_per_s": nbytes / best_of(3, h2d) / 1e9,
                  "d2h_gb_per_s": nbytes / best_of(3, d2h) / 1e9}
        return result


def host_link(backend, n: int, link: dict | None) -> dict:
    """``dispatch`` of SAXPY from numpy and resident upload/download, against the pinned copy."""
    x, y, a = saxpy_inputs(n)
    program = saxpy_program()
    (out,) = backend.dispatch(program, [x, y, a])  # compile, warm the staging ring and pools
    seconds = best_of(3, lambda: backend.dispatch(program, [x, y, a]))
    row = {"elements": n, "dispatch_seconds": seconds, "dispatch_equals": check_saxpy(out, n)}
    fresh = [(x.copy(), y.copy()) for _ in range(2)]  # arrays never seen: each call page-locks them first
    row["fresh_arrays_dispatch_seconds"] = best_of(2, lambda: backend.dispatch(program, [*fresh.pop(), a]))
    nbytes = min(GiB, x.nbytes)
    handle = backend.allocate_resident(nbytes)
    try:
        backend.upload_resident(handle, x.view(np.uint8)[:nbytes])
        back = backend.download_resident(handle)
        row["resident_equals"] = bool(np.array_equal(back, x.view(np.uint8)[:nbytes]))

        def upload() -> None:
            backend.upload_resident(handle, x.view(np.uint8)[:nbytes])
            backend.download_resident(handle, 0, 4)  # the upload finished

        row["upload_gb_per_s"] = nbytes / best_of(3, upload) / 1e9
        row["download_gb_per_s"] = nbytes / best_of(3, lambda: backend.download_resident(handle)) / 1e9
    finally:
        backend.free_resident(handle)
    if link is not None:
        ideal = 2 * x.nbytes / (link["h2d_gb_per_s"] * 1e9) + y.nbytes / (link["d2h_gb_per_s"] * 1e9)
        row["dispatch_link_fraction"] = ideal / seconds
        row["fresh_arrays_link_fraction"] = ideal / row["fresh_arrays_dispatch_seconds"]
        row["upload_link_fraction"] = row["upload_gb_per_s"] / link["h2d_gb_per_s"]
        row["download_link_fraction"] = row["download_gb_per_s"] / link["d2h_gb_per_s"]
    return row


# ---- 3. multi.map SAXPY ------------------------------------------------------------------------------------------
def multi_saxpy(ids: list[str], per_gpu: int, counts: list[int]) -> list[dict]:
    """``multi.map`` SAXPY on 1 GPU and on each of ``counts`` GPUs, from numpy and from sharded
    device arrays (``per_gpu`` elements on each GPU: speed-up = k x one GPU's time / k GPUs' time)."""
    program = saxpy_program()
    rows: list[dict] = []
    for k in counts:
        devices = ids[:k]
        n = per_gpu * k
        row: dict = {"elements_per_gpu": per_gpu, "gpus": k}
        x, y, a = saxpy_inputs(n)
        row["host_seconds"], row["host_equals"] = _timed_map(program, [x, y, a], devices, n)
        inputs = [multi.shard(x, devices), multi.shard(y, devices), a]
        x = y = None  # the host copies are not needed any more
        row["sharded_seconds"], row["sharded_equals"] = _timed_map(program, inputs, None, n)
        compiled = multi.compile(program, inputs)  # the same call set up by the caller once
        row["compiled_seconds"] = best_of(3, lambda call=compiled, given=inputs: call(given))
        rows.append(row)
    for row in rows:
        row["host_speedup"] = row["gpus"] * rows[0]["host_seconds"] / row["host_seconds"]
        row["sharded_speedup"] = row["gpus"] * rows[0]["sharded_seconds"] / row["sharded_seconds"]
    return rows


def _timed_map(program: Program, inputs: list, devices: list[str] | None, n: int) -> tuple[float, bool]:
    """Best of 3 wall seconds of ``multi.map`` after a warm-up call, and whether its result checks."""
    (out,) = multi.map(program, inputs, devices=devices)
    return best_of(3, lambda: multi.map(program, inputs, devices=devices)), check_saxpy(out, n)


# ---- 4. multi.sort / inclusive_scan / histogram -------------------------------------------------------------------
def device_values(devices: list[str], per_gpu: int, seed: int, on_gpu: bool) -> multi.Sharded:
    """Hashed u32 values, ``per_gpu`` on each device, made where they live."""
    if not on_gpu:
        return multi.Sharded([values(k * per_gpu, per_gpu, seed) for k in range(len(devices))], devices)
    import cupy

    parts = []
    for k, dev in enumerate(devices):
        with cupy.cuda.Device(int(dev.split(":")[1])):
            i = cupy.arange(per_gpu, dtype=cupy.uint32) + cupy.uint32(k * per_gpu)
            parts.append((i * cupy.uint32(GOLDEN) + cupy.uint32(seed)) ^ (i >> cupy.uint32(7)))
            cupy.cuda.get_current_stream().synchronize()
    return multi.Sharded(parts, devices)


def on_device(p):
    """A context making ``p``'s device current (CuPy kernels run on the current device)."""
    if isinstance(p, np.ndarray):
        return contextlib.nullcontext()
    import cupy

    return cupy.cuda.Device(p.device.id)


def _each_part(parts, work) -> list:
    out = []
    for p in parts:
        with on_device(p):
            out.append(work(p))
    return out


def _sum_xor(parts: list) -> tuple[int, int]:
    def one(p) -> tuple[int, int]:
        if not int(p.shape[0]):
            return 0, 0
        if isinstance(p, np.ndarray):
            return int(p.sum(dtype=np.uint64)), int(np.bitwise_xor.reduce(p))
        import cupy  # CuPy has no bitwise_xor.reduce

        xor = cupy.ReductionKernel("T x", "T y", "x", "a ^ b", "y = a", "0", "vyre_bench_xor")
        return int(p.sum(dtype=np.uint64)), int(xor(p))

    sums = _each_part(parts, one)
    xor = 0
    for _, x in sums:
        xor ^= x
    return sum(t for t, _ in sums), xor


def _sorted_ok(parts: list, like: tuple[int, int], n: int) -> bool:
    def check(p) -> tuple[int, bool, tuple[int, int] | None]:
        size = int(p.shape[0])
        ordered = size < 2 or bool((p[1:] >= p[:-1]).all())
        return size, ordered, (int(p[0]), int(p[-1])) if size else None

    info = _each_part(parts, check)
    tails = [t for _, _, t in info if t is not None]
    return (sum(s for s, _, _ in info) == n and all(o for _, o, _ in info)
            and all(a[1] <= b[0] for a, b in zip(tails, tails[1:])) and _sum_xor(parts) == like)


def lib_calls(backends: list, devices: list[str], per_gpu: int, on_gpu: bool) -> list[dict]:
    """multi.sort / inclusive_scan / histogram over every GPU against one GPU's lib call, n times."""
    k = len(devices)
    keys = device_values(devices, per_gpu, 9, on_gpu)
    first = keys.parts[0]
    rows = []
    bins = 256
    high = multi.Sharded(_each_part(keys.parts, lambda p: p >> np.uint32(24)), devices)
    calls = {
        "sort": (lambda: multi.sort(keys), lambda: lib.sort(first, backend=backends[0])),
        "inclusive_scan": (lambda: multi.inclusive_scan(keys), lambda: lib.inclusive_scan(first, backend=backends[0])),
        "histogram": (lambda: multi.histogram(high, bins), lambda: lib.histogram(high.parts[0], bins,
                                                                                   backend=backends[0])),
    }
    like = _sum_xor(list(keys.parts))
    for name, (many, one) in calls.items():
        one()  # compile and size the scratch
        one_seconds = best_of(2, one) * k
        result = many()
        many_seconds = best_of(2, many)
        if name == "sort":
            ok = _sorted_ok(list(result.parts), like, per_gpu * k)
        elif name == "inclusive_scan":
            ok = _scan_ok(keys, result)
        else:
            ok = _histogram_ok(high, result, bins)
        del result
        rows.append({"call": name, "elements": per_gpu * k, "gpus": k, "multi_seconds": many_seconds,
                     "one_gpu_seconds_x_n": one_seconds, "speedup": one_seconds / many_seconds, "equals": ok})
    return rows


def _scan_ok(keys: multi.Sharded, scan: multi.Sharded) -> bool:
    """Each part's first and last value equal the running sums (mod 2^32) of the input."""
    running = 0
    for x, s in zip(keys.parts, scan.parts):
        if int(x.shape[0]) == 0:
            continue
        with on_device(x):
            first = (running + int(x[0])) & 0xFFFFFFFF
            running = (running + int(x.sum(dtype=np.uint64))) & 0xFFFFFFFF
            if int(s[0]) != first or int(s[-1]) != running:
                return False
    return True


def _histogram_ok(high: multi.Sharded, counts, bins: int) -> bool:
    want = np.zeros(bins, np.uint64)
    for p in high.parts:
        if isinstance(p, np.ndarray):
            want += np.bincount(p, minlength=bins).astype(np.uint64)
        else:
            import cupy

            with cupy.cuda.Device(p.device.id):
                want += cupy.bincount(p, minlength=bins).get().astype(np.uint64)
    got = counts.get() if hasattr(counts, "get") else np.asarray(counts)
    return bool(np.array_equal(got.astype(np.uint64), want))


# ---- 3. Dask ---------------------------------------------------------------------------------------------------
def dask_overhead(workers: int, blocks: int, block: int, backend: str | None, *, colocate: bool = True,
                  threads: int | None = None) -> dict:
    """Worker time per block of ``vyre.dask.map_blocks`` over inputs persisted as docs/scale.md says
    (``vdask.persist``: block i of x and y on one worker), with the breakdown: tasks per block in the
    graph, blocks whose inputs share a worker, bytes moved between workers and the workers' own
    compute time per block while the clock ran; then Dask's own floor on the same inputs:
    ``dask.array.map_blocks(np.bitwise_xor, x, y)`` timed the same way (warmed on other keys just
    before, results kept on the workers, so both runs write their results to memory never touched)."""
    import dask.array as da
    from distributed import Client, get_task_stream, wait

    import vyre.dask as vdask

    a, b = values(0, blocks * block, 4), values(0, blocks * block, 5)
    cluster = vdask.local_cluster(workers, backend=backend, threads_per_worker=threads)
    try:
        with Client(cluster) as client:
            client.wait_for_workers(workers)
            threads = max(client.nthreads().values())
            client.run(_start_backend, backend)  # every worker starts its backend
            x, y = da.from_array(a, chunks=block), da.from_array(b, chunks=block)
            x, y = vdask.persist(x, y) if colocate else client.persist([x, y])
            wait([x, y])  # the inputs live on the workers before the clock starts
            together = _blocks_together(client, x, y)
            # warm on (y, x): modules loaded, programs decoded, and keys other than the timed run's
            wait(vdask.map_blocks(xor_program(), y, x).persist())
            timed = vdask.map_blocks(xor_program(), x, y)
            held = {*x.__dask_keys__(), *y.__dask_keys__()}  # in memory already: no task
            tasks = sum(1 for key in dict(timed.__dask_graph__()) if key not in held)
            moved = _bytes_between_workers(client)
            with get_task_stream(client) as stream:
                seconds, result = _persisted(timed)  # results stay on the workers
            moved = _bytes_between_workers(client) - moved
            compute = sum(s["stop"] - s["start"] for t in stream.data for s in t["startstops"]
                          if s["action"] == "compute")
            wait(da.map_blocks(np.bitwise_xor, y, x, dtype=np.uint32).persist())
            numpy_seconds, numpy_result = _persisted(da.map_blocks(np.bitwise_xor, x, y, dtype=np.uint32))
            out = result.compute()
            numpy_equals = bool(np.array_equal(numpy_result.compute(), out))
    finally:
        cluster.close()
    return {"workers": workers, "blocks": blocks, "block_elements": block, "seconds": seconds,
            "ms_per_block": seconds / blocks * 1e3, "threads_per_worker": threads, "colocated": colocate,
            "tasks_per_block": tasks / blocks,
            "blocks_with_inputs_together": together, "bytes_between_workers": moved,
            "worker_compute_ms_per_block": compute / blocks * 1e3, "equals_numpy": bool(np.array_equal(out, a ^ b)),
            "numpy_ms_per_block": numpy_seconds / blocks * 1e3, "numpy_equals": numpy_equals}


def _persisted(array) -> tuple[float, Any]:
    """Seconds from ``persist()`` until every block is in memory on the workers, and the persisted array."""
    from distributed import wait

    began = time.perf_counter()
    result = array.persist()
    wait(result)
    return time.perf_counter() - began, result


def _blocks_together(client, *arrays) -> int:
    """How many block indices have every array's block on one common worker."""
    held = [client.who_has(a) for a in arrays]
    keys = [a.__dask_keys__() for a in arrays]
    return sum(1 for i in range(len(keys[0])) if set.intersection(*(set(h[k[i]]) for h, k in zip(held, keys))))


def _bytes_between_workers(client) -> int:
    """Bytes every worker has sent to other workers so far (distributed's own counter)."""
    return sum(client.run(_sent_bytes).values())


def _sent_bytes(dask_worker) -> int:
    return dask_worker.transfer_outgoing_bytes_total


def _start_backend(backend: str | None) -> str:
    import vyre.dask as vdask

    return vdask.worker_backend(backend).id


def block_arrays(blocks: int, block: int, seed: int) -> list[np.ndarray]:
    """``blocks`` separate arrays of ``block`` values, as a worker holds persisted blocks (each its own
    allocation, not views of one big array)."""
    return [values(k * block, block, seed) for k in range(blocks)]


def direct_ms_per_block(backend, blocks: int, block: int, *, keep: bool = False) -> float:
    """The same XOR dispatched in this process over the same ``blocks`` distinct blocks a worker gets
    (not one block again and again, whose bytes would stay in the host's caches), after one untimed
    pass over them, as the Dask run's warm-up passes over its placed inputs. ``keep``: every result
    is kept until the end, as Dask keeps a persisted block, so each lands in memory never touched
    before (dropped, the allocator hands the last result's pages to the next)."""
    a, b = block_arrays(blocks, block, 4), block_arrays(blocks, block, 5)
    ms_per_block(lambda k: backend.dispatch(xor_program(), [a[k], b[k]])[0], blocks, False)
    return ms_per_block(lambda k: backend.dispatch(xor_program(), [a[k], b[k]])[0], blocks, keep)


def numpy_ms_per_block(blocks: int, block: int) -> float:
    """``np.bitwise_xor`` of the same blocks in this process, results kept (the floor's in-process twin)."""
    a, b = block_arrays(blocks, block, 4), block_arrays(blocks, block, 5)
    return ms_per_block(lambda k: np.bitwise_xor(a[k], b[k]), blocks, True)


def ms_per_block(work, blocks: int, keep: bool) -> float:
    """ms per block of ``work(k)`` for every block k in this process, its results kept (as Dask
    keeps a persisted block: new memory for each) or dropped (the allocator hands the same pages back)."""
    kept = []
    began = time.perf_counter()
    for k in range(blocks):
        out = work(k)
        if keep:
            kept.append(out)
    return (time.perf_counter() - began) / blocks * 1e3


# ---- main --------------------------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (2^26 XOR, 2^26 per GPU elsewhere)")
    parser.add_argument("--json", help="where to write the results (default $OUT/bench_scale.json)")
    parser.add_argument("--no-dask", action="store_true", help="skip the Dask section")
    parser.add_argument("--dask-threads", type=int, help="threads per Dask worker (default: local_cluster's)")
    parser.add_argument("--chart", help="draw the charts from this JSON instead of measuring (matplotlib)")
    parser.add_argument("--png", default=str(ROOT / "docs" / "scale_xor.png"), help="XOR chart output")
    parser.add_argument("--png-speedups", default=str(ROOT / "docs" / "scale_speedups.png"),
                        help="speed-up chart output")
    args = parser.parse_args()
    if args.chart:
        result = json.loads(Path(args.chart).read_text(encoding="utf-8"))
        draw(result, Path(args.png))
        draw_speedups(result, Path(args.png_speedups))
        return
    gpus = [d for d in vyre.devices() if d.backend == "cuda"]
    if gpus:
        ids, backend_id = [d.id for d in gpus], "cuda"
        xor_n, reps = (1 << 26, 21) if args.quick else (1 << 30, 21)  # odd: a kernel that does nothing fails the check
        saxpy_n = 1 << 26 if args.quick else 1 << 28
        lib_per_gpu = 1 << 26 if args.quick else 1 << 30  # 2^31 keys over 2 GPUs, 2^32 over 4
        blocks, block = 200, 1 << 20
    else:
        print("no CUDA device is listed: running on two oracle backends at toy sizes (not a measurement)")
        ids, backend_id = ["reference", "reference"], "reference"
        xor_n, reps, saxpy_n, lib_per_gpu, blocks, block = 1 << 14, 3, 1 << 14, 1 << 14, 40, 1 << 12
    backends = multi.backends_for(ids)
    names = [f"{i}: {d.name}" for i, d in enumerate(gpus)] or ["oracle x2"]
    result: dict = {"cards": names, "backend": backend_id}
    link = pinned_link(saxpy_n * 4, gpus[0].index) if gpus else None
    result["pinned_link"] = link
    result["host_link"] = host_link(backends[0], saxpy_n, link)
    result["xor"] = xor_scaling(backends, xor_n, reps)
    result["xor_elements_per_gpu"] = xor_n
    counts = sorted({1, *(k for k in (2, 4, 8) if k < len(ids)), len(ids)})
    result["gpu_counts"] = counts
    result["multi_saxpy"] = multi_saxpy(ids, saxpy_n, counts)
    result["lib"] = [row for k in counts[1:] for row in lib_calls(backends[:k], ids[:k], lib_per_gpu, bool(gpus))]
    if not args.no_dask and len(backends) >= 2:
        direct = direct_ms_per_block(backends[0], blocks, block)
        kept = direct_ms_per_block(backends[0], blocks, block, keep=True)
        numpy_kept = numpy_ms_per_block(blocks, block)
        result["dask"] = [dict(dask_overhead(w, blocks, block, backend_id, threads=args.dask_threads),
                               direct_ms_per_block=direct, direct_kept_ms_per_block=kept,
                               numpy_direct_kept_ms_per_block=numpy_kept)
                          for w in counts]
        for row in result["dask"]:
            # worker time per block beyond the dispatch itself: Dask's bookkeeping around each task, and
            # the block's own run on the worker beyond the same dispatch in this process
            worker_ms = row["ms_per_block"] * row["workers"]
            row["overhead_ms_per_block"] = worker_ms - direct
            # the same against dispatches whose results are kept (each in fresh memory, as on the workers)
            row["overhead_kept_ms_per_block"] = worker_ms - kept
            # Dask's own: the numpy floor's worker time beyond the same numpy calls in this process
            row["dask_floor_ms_per_block"] = row["numpy_ms_per_block"] * row["workers"] - numpy_kept
            row["vyre_beyond_floor_ms_per_block"] = row["overhead_kept_ms_per_block"] - row["dask_floor_ms_per_block"]
            row["speedup"] = result["dask"][0]["seconds"] / row["seconds"]
    report(result)
    path = Path(args.json or Path(os.environ.get("OUT", ".")) / "bench_scale.json")
    path.write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(f"wrote {path}")


def draw(result: dict, png: Path) -> None:
    """Aggregate XOR bandwidth and speed-up against the number of GPUs, with the ideal line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["xor"]
    gpus = [r["gpus"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(gpus, [r["speedup"] for r in rows], "o-", label="vyre: resident XOR, one thread per GPU")
    ax.plot(gpus, gpus, "--", color="grey", label="ideal")
    for r in rows:
        ax.annotate(f"{r['gb_per_s'] / 1000:.1f} TB/s", (r["gpus"], r["speedup"]), textcoords="offset points",
                    xytext=(6, -12), fontsize=8)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("speed-up over one GPU")
    ax.set_xticks(gpus)
    ax.set_title(f"XOR of {result['xor_elements_per_gpu']} u32 per GPU ({result['cards'][0].split(': ')[-1]})")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"wrote {png}")


def draw_speedups(result: dict, png: Path) -> None:
    """Speed-up of every multi-GPU workload over one GPU, one group of bars per GPU count (ideal:
    the count), with the plain host call's share of the pinned link in the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = [k for k in result.get("gpu_counts", [1, 2]) if k > 1]
    work: dict[str, dict[int, float]] = {"multi.map SAXPY\nfrom numpy": {}, "multi.map SAXPY\nsharded": {}}
    for row in result["multi_saxpy"]:
        work["multi.map SAXPY\nfrom numpy"][row["gpus"]] = row["host_speedup"]
        work["multi.map SAXPY\nsharded"][row["gpus"]] = row["sharded_speedup"]
    for row in result["lib"]:
        work.setdefault(f"multi.{row['call']}", {})[row["gpus"]] = row["speedup"]
    for row in result.get("dask", []):
        work.setdefault("dask map_blocks", {})[row["workers"]] = row["speedup"]
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / max(1, len(counts))
    for c, k in enumerate(counts):
        xs = [i + (c - (len(counts) - 1) / 2) * width for i in range(len(work))]
        ys = [speeds.get(k, 0.0) for speeds in work.values()]
        ax.bar(xs, ys, width, label=f"{k} GPUs (ideal {k}x)")
        ax.axhline(k, linestyle="--", color="grey", linewidth=0.8)
        for x, v in zip(xs, ys):
            ax.annotate(f"{v:.2f}", (x, v), textcoords="offset points", xytext=(0, 2), ha="center", fontsize=6)
    ax.set_xticks(range(len(work)))
    ax.set_xticklabels(list(work), fontsize=7)
    ax.set_ylabel("speed-up over one GPU")
    fraction = result["host_link"].get("dispatch_link_fraction")
    note = f"; plain dispatch from numpy at {fraction:.0%} of the pinned link" if fraction else ""
    ax.set_title(f"{len(result['cards'])} x {result['cards'][0].split(': ')[-1]}{note}", fontsize=9)
    ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"wrote {png}")


def report(result: dict) -> None:
    print("cards: " + "; ".join(result["cards"]))
    link, host = result["pinned_link"], result["host_link"]
    if link:
        print(f"\npinned CuPy copy of {link['bytes']} bytes: H2D {link['h2d_gb_per_s']:.1f} GB/s, "
              f"D2H {link['d2h_gb_per_s']:.1f} GB/s")
    print(f"dispatch SAXPY {host['elements']} f32 from numpy: {host['dispatch_seconds']:.4f} s"
          + (f" ({host['dispatch_link_fraction']:.0%} of the pinned link)" if link else "")
          + f", equals: {host['dispatch_equals']}")
    print(f"  the same call on arrays never seen before (page-locked on the way): "
          f"{host['fresh_arrays_dispatch_seconds']:.4f} s"
          + (f" ({host['fresh_arrays_link_fraction']:.0%} of the pinned link)" if link else ""))
    print(f"upload_resident {host['upload_gb_per_s']:.1f} GB/s, download_resident {host['download_gb_per_s']:.1f} GB/s"
          + (f" ({host['upload_link_fraction']:.0%} / {host['download_link_fraction']:.0%} of the pinned link)"
             if link else "") + f", equals: {host['resident_equals']}")
    print(f"\nXOR a ^= b, {result['xor_elements_per_gpu']} U32 per GPU, resident")
    print(f"{'GPUs':>5} {'seconds':>9} {'GB/s':>9} {'speed-up':>9}")
    for row in result["xor"]:
        print(f"{row['gpus']:>5} {row['seconds']:>9.4f} {row['gb_per_s']:>9.1f} {row['speedup']:>9.2f}")
    print(f"\nmulti.map SAXPY, {result['multi_saxpy'][0]['elements_per_gpu']} f32 per GPU")
    for m in result["multi_saxpy"]:
        print(f"  {m['gpus']} GPU(s): from numpy {m['host_seconds']:.4f} s ({m['host_speedup']:.2f}x), sharded "
              f"{m['sharded_seconds']:.4f} s ({m['sharded_speedup']:.2f}x; multi.compile'd "
              f"{m['compiled_seconds']:.4f} s), equals: {m['host_equals']} {m['sharded_equals']}")
    print(f"\n{'call':>15} {'GPUs':>5} {'elements':>11} {'multi s':>9} {'1 GPU x n s':>12} {'speed-up':>9} equals")
    for row in result["lib"]:
        print(f"{row['call']:>15} {row['gpus']:>5} {row['elements']:>11} {row['multi_seconds']:>9.4f} "
              f"{row['one_gpu_seconds_x_n']:>12.4f} {row['speedup']:>9.2f} {row['equals']}")
    for row in result.get("dask", []):
        print(f"dask map_blocks, {row['workers']} worker(s) of {row['threads_per_worker']} thread(s), {row['blocks']} "
              f"blocks of {row['block_elements']}: "
              f"{row['ms_per_block']:.3f} ms/block (in-process dispatch {row['direct_ms_per_block']:.3f} ms), "
              f"overhead {row['overhead_ms_per_block']:.3f} ms/block, {row['speedup']:.2f}x one worker, "
              f"equals numpy: {row['equals_numpy']}")
        print(f"  {row['tasks_per_block']:.2f} tasks per block, {row['blocks_with_inputs_together']} of "
              f"{row['blocks']} blocks with x and y on one worker, {row['bytes_between_workers']} bytes moved between "
              f"workers; block run on the worker {row['worker_compute_ms_per_block']:.3f} ms "
              f"(Dask around it: {row['ms_per_block'] * row['workers'] - row['worker_compute_ms_per_block']:.3f} ms)")
        print(f"  results kept in-process: dispatch {row['direct_kept_ms_per_block']:.3f} ms/block, overhead "
              f"{row['overhead_kept_ms_per_block']:.3f} ms/block; Dask's floor (numpy map_blocks "
              f"{row['numpy_ms_per_block'] * row['workers']:.3f} ms/block of worker time, numpy in-process "
              f"{row['numpy_direct_kept_ms_per_block']:.3f}): {row['dask_floor_ms_per_block']:.3f} ms/block; "
              f"vyre beyond it: {row['vyre_beyond_floor_ms_per_block']:.3f} ms/block, equals: {row['numpy_equals']}")


if __name__ == "__main__":
    main()
