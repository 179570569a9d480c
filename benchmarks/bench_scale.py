"""Scaling over the GPUs of one host, and the Dask path's cost per block.

Run on a multi-GPU machine: ``python benchmarks/bench_scale.py [--quick]``. Prints a table headed
by the card names and writes ``$OUT/bench_scale.json`` (or ``--json PATH``). With no GPU it runs
the same code on two oracle backends at toy sizes (a smoke test, not a measurement).

1. XOR over 2^30 U32 per GPU (``a ^= b``, 12 bytes moved per element), data resident, on 1..N
   GPUs: one backend per device (``vyre.acquire("cuda:k")``), one thread each, all started
   together; each runs ``dispatch_repeated`` of the kernel. Aggregate GB/s and speed-up over one
   GPU, from the wall time of the slowest device. Results checked on each device.
2. Histogram (256 bins of the low byte) of 2^32 values spread over all GPUs with
   ``vyre.lib.multi.map(..., reduce={"bins": "add"})``, in calls of 2^28 values; the partial
   counts are combined by NCCL where the backend offers it (the table says which path ran) and
   the total is checked against numpy's ``bincount``.
3. ``vyre.dask.map_blocks`` of XOR over B blocks of 2^20 (inputs already on the workers, results
   gathered to the client) on a ``vyre.dask.local_cluster`` of 1 and of 2 GPU workers: wall time
   per block, and the overhead per block: worker time per block (wall x workers / blocks) minus
   the same block dispatched in this process. Results of both clusters are checked against numpy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import vyre  # noqa: E402
from vyre import DispatchConfig  # noqa: E402
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program  # noqa: E402
from vyre.lib import multi  # noqa: E402

U32 = DataType.U32
GOLDEN = np.uint32(2654435761)


def xor_program() -> Program:
    i = Expr.invocation_id(0)
    return Program([BufferDecl.read_write("a", 0, U32), BufferDecl.read("b", 1, U32)], (256, 1, 1),
                   [Node.store("a", i, Expr.bitxor(Expr.load("a", i), Expr.load("b", i)))], name="xor")


def histogram_program() -> Program:
    gid, lid, add = Expr.invocation_id(0), Expr.local_id(0), AtomicOp.ADD
    return Program(
        [BufferDecl.read("data", 0, U32), BufferDecl.output("bins", 1, U32, 256),
         BufferDecl.workgroup("local", 256, U32)],
        (256, 1, 1),
        [Node.if_(Expr.lt(gid, Expr.buf_len("data")), [
            Node.let("v", Expr.bitand(Expr.load("data", gid), Expr.u32(255))),
            Node.let("old", Expr.atomic(add, "local", Expr.var("v"), Expr.u32(1)))]),
         Node.barrier(),
         Node.let("count", Expr.load("local", lid)),
         Node.if_(Expr.ne(Expr.var("count"), Expr.u32(0)), [Node.let("old2", Expr.atomic(add, "bins", lid,
                                                                                         Expr.var("count")))])],
        name="histogram256")


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


# ---- 2. histogram with a reduction ----------------------------------------------------------------------------
def histogram_total(backends: list, total: int, chunk: int) -> dict:
    program = histogram_program()
    counts = np.zeros(256, np.uint64)
    expected = np.zeros(256, np.uint64)
    seconds, how = 0.0, None
    for start in range(0, total, chunk):
        data = values(start, min(chunk, total - start), 3)
        stats: dict = {}
        began = time.perf_counter()
        (bins,) = multi.map(program, [data], devices=backends, reduce={"bins": "add"},
                            config=DispatchConfig(elements=data.size), stats=stats)
        seconds += time.perf_counter() - began
        how = stats["reduction"]
        counts += bins
        expected += np.bincount(data & np.uint32(255), minlength=256).astype(np.uint64)
    return {"values": total, "gpus": len(backends), "seconds": seconds, "reduction": how,
            "values_per_s": total / seconds, "equals_numpy": bool(np.array_equal(counts, expected))}


# ---- 3. Dask ---------------------------------------------------------------------------------------------------
def dask_overhead(workers: int, blocks: int, block: int, backend: str | None) -> dict:
    import dask.array as da
    from distributed import Client, wait

    import vyre.dask as vdask

    a, b = values(0, blocks * block, 4), values(0, blocks * block, 5)
    cluster = vdask.local_cluster(workers, backend=backend)
    try:
        with Client(cluster) as client:
            client.wait_for_workers(workers)
            x, y = da.from_array(a, chunks=block), da.from_array(b, chunks=block)
            client.run(_start_backend, backend)  # every worker starts its backend
            x, y = x.persist(), y.persist()
            wait([x, y])  # the inputs live on the workers before the clock starts
            vdask.map_blocks(xor_program(), x, y).compute()  # warm: modules loaded, code paths imported
            began = time.perf_counter()
            out = vdask.map_blocks(xor_program(), x, y).compute()
            seconds = time.perf_counter() - began
    finally:
        cluster.close()
    return {"workers": workers, "blocks": blocks, "block_elements": block, "seconds": seconds,
            "ms_per_block": seconds / blocks * 1e3, "equals_numpy": bool(np.array_equal(out, a ^ b))}


def _start_backend(backend: str | None) -> str:
    import vyre.dask as vdask

    return vdask.worker_backend(backend).id


def direct_ms_per_block(backend, block: int, reps: int = 20) -> float:
    a, b = values(0, block, 4), values(0, block, 5)
    backend.dispatch(xor_program(), [a, b])
    began = time.perf_counter()
    for _ in range(reps):
        backend.dispatch(xor_program(), [a, b])
    return (time.perf_counter() - began) / reps * 1e3


# ---- main --------------------------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (2^26 XOR, 2^30 histogram values)")
    parser.add_argument("--json", help="where to write the results (default $OUT/bench_scale.json)")
    parser.add_argument("--no-dask", action="store_true", help="skip the Dask section")
    parser.add_argument("--chart", help="draw the scaling chart from this JSON instead of measuring (matplotlib)")
    parser.add_argument("--png", default=str(ROOT / "docs" / "scale_xor.png"), help="chart output")
    args = parser.parse_args()
    if args.chart:
        draw(json.loads(Path(args.chart).read_text(encoding="utf-8")), Path(args.png))
        return
    gpus = [d for d in vyre.devices() if d.backend == "cuda"]
    if gpus:
        ids, backend_id = [d.id for d in gpus], "cuda"
        xor_n, reps = (1 << 26, 21) if args.quick else (1 << 30, 21)  # odd: a kernel that does nothing fails the check
        hist_total, hist_chunk = (1 << 30, 1 << 28) if args.quick else (1 << 32, 1 << 28)
        blocks, block = 200, 1 << 20
    else:
        print("no CUDA device is listed: running on two oracle backends at toy sizes (not a measurement)")
        ids, backend_id = ["reference", "reference"], "reference"
        xor_n, reps, hist_total, hist_chunk, blocks, block = 1 << 14, 3, 1 << 16, 1 << 15, 40, 1 << 12
    backends = multi.backends_for(ids)
    names = [f"{i}: {d.name}" for i, d in enumerate(gpus)] or ["oracle x2"]
    result: dict = {"cards": names, "backend": backend_id}
    result["xor"] = xor_scaling(backends, xor_n, reps)
    result["xor_elements_per_gpu"] = xor_n
    result["histogram"] = histogram_total(backends, hist_total, hist_chunk)
    if not args.no_dask and len(backends) >= 2:
        direct = direct_ms_per_block(backends[0], block)
        result["dask"] = [dict(dask_overhead(w, blocks, block, backend_id), direct_ms_per_block=direct)
                          for w in (1, 2)]
        for row in result["dask"]:
            # worker time per block beyond the dispatch itself (each worker runs its blocks one by one)
            row["overhead_ms_per_block"] = row["ms_per_block"] * row["workers"] - direct
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


def report(result: dict) -> None:
    print("cards: " + "; ".join(result["cards"]))
    print(f"\nXOR a ^= b, {result['xor_elements_per_gpu']} U32 per GPU, resident")
    print(f"{'GPUs':>5} {'seconds':>9} {'GB/s':>9} {'speed-up':>9}")
    for row in result["xor"]:
        print(f"{row['gpus']:>5} {row['seconds']:>9.4f} {row['gb_per_s']:>9.1f} {row['speedup']:>9.2f}")
    h = result["histogram"]
    print(f"\nhistogram of {h['values']} values on {h['gpus']} GPUs: {h['seconds']:.3f} s "
          f"({h['values_per_s'] / 1e9:.2f} G values/s, host in/out included), reduction: {h['reduction']}, "
          f"equals numpy: {h['equals_numpy']}")
    for row in result.get("dask", []):
        print(f"dask map_blocks, {row['workers']} worker(s), {row['blocks']} blocks of {row['block_elements']}: "
              f"{row['ms_per_block']:.3f} ms/block (in-process dispatch {row['direct_ms_per_block']:.3f} ms), "
              f"overhead {row['overhead_ms_per_block']:.3f} ms/block, equals numpy: {row['equals_numpy']}")


if __name__ == "__main__":
    main()
