"""``vyre.lib`` primitives against torch, CuPy and the copy and read bandwidths, at 2^20, 2^24 and 2^28 u32.

On a GPU machine: ``python3 benchmarks/bench_lib.py [--sizes 20 24 28] [--json PATH]`` runs every
primitive once per size (one run: every column of a table shares the card and clocks) and writes
JSON (default ``$OUT/bench_lib.json`` or ``bench_lib.json``). Anywhere with matplotlib:
``python3 benchmarks/bench_lib.py --chart bench_lib.json --png docs/lib_bench.png`` draws the chart
and prints the markdown tables for docs/lib.md (the main one and the bandwidth shares).

Each implementation is timed the same way: wall clock from the call to a full device
synchronisation, median of ``--reps`` calls after two warm-up calls. vyre is timed twice:
``vyre`` on ``ResidentArray``s (data stays in place; results handed back with ``lib.recycle``
between calls, so each call reuses the result handles and replays its captured graph) and
``vyre_cupy`` on CuPy arrays in and out (adds a device copy of the input into scratch and of
the result out); the table adds vyre on numpy arrays in and out (``vyre_numpy``: both host
copies) and on torch tensors in and out (``vyre_torch``: int32 views; every input value is below
2^31, so the order and the result bits are vyre's on u32). Copy bandwidth: a device-to-device
``cudaMemcpyAsync`` of the input into an array made once (bytes read + written).
Read bandwidth: a CuPy ``RawKernel`` that reads every byte of the input with 16-byte vector loads
(grid-stride, four loads in flight per iteration) and writes one word per block (the XOR of what
it read, checked against the input's, so the reads cannot be optimised away); bytes read.
After the main table, ``bandwidth_table`` prints for ``reduce``, ``transform_reduce`` and
``segmented_reduce`` the GB/s their bytes read imply as a share of the read bandwidth, and for
the scans the GB/s of their bytes read + written as a share of the copy bandwidth.

With Triton installed (the GPU machine), ``triton`` times ``reduce``, the scans, ``histogram`` and
``transform_reduce`` written in Triton on the torch views (``benchmarks/triton_peers.py``; the
table's "vs triton" column).

``sort_pairs`` sorts u32 keys with u32 values (``lib.sort(keys, values)``) against what a CuPy
user writes (``idx = cupy.argsort(keys); keys[idx], values[idx]``) and ``torch.sort`` (sorted
keys and their indices). ``segmented_reduce`` uses 1,024-element segments (CSR offsets from
``linspace``); torch's ``segment_reduce`` sums the same data as float32.

``transform_reduce`` sums ``(x & 0xFFFF)**2`` (u32, wrapping) with the function applied on load
(``@vyre.func`` ``low_square``), next to the two-pass form (a CuPy elementwise kernel writing the
squares, then ``lib.reduce``), CuPy's fused ``ReductionKernel``, CuPy's two passes and torch;
``fused_table`` prints those rows. The ``unique`` row also times ``vyre_key_range``: the sort-free
``unique(x, key_range=(0, 256))`` on the same resident keys (in the JSON and the printed lines).

``--small`` (sizes default to 16 and 20) times instead the host cost of small calls: per primitive
and implementation (vyre on ``ResidentArray``s, vyre on CuPy arrays, CuPy, torch), microseconds
per call as "wall with a device sync each call / host time per call in a loop of ``LOOP`` calls
without syncs", printed as one markdown table per size; JSON default ``$OUT/bench_lib_small.json``.

``--wide`` (sizes default to 27) times instead the sort of u64 keys: vyre on a ``ResidentArray``,
on CuPy arrays, on numpy arrays (host in and out: adds both copies) and on torch tensors (int64:
the keys are below 2^62, so the order is the same) against ``cupy.sort`` and ``torch.sort`` on the
same keys, after checking that all give the same keys; JSON default ``$OUT/bench_lib_wide.json``.

``--dists`` (sizes default to 28) times instead ``sort``, ``argsort`` and ``sort_pairs`` of u32 keys
of five distributions (``DISTS``, made on the device by ``dist_keys``): uniform over [0, 2^32),
sorted ascending, reverse sorted, 16 distinct random values picked uniformly, and Zipf ranks
(``a = ZIPF_A``, clipped to 2^32 - 1). vyre on ``ResidentArray``s, CuPy (``cupy.sort``,
``cupy.argsort``, ``_cupy_sort_pairs``) and torch (``torch.sort``, ``torch.argsort(stable=True)``,
on the keys with the top bit flipped as int32: the same order) on the same keys, after checking
vyre's results against CuPy's stable order (an ``AssertionError`` if any differs). The table gives
CuPy/vyre and torch/vyre and whether the target is met (``DIST_TARGETS``: sort at most 0.75x CuPy's
time, argsort and sort_pairs at least 1.2x CuPy's speed); ``--chart`` with ``--dists`` draws CuPy/vyre
per distribution (default ``docs/lib_dists.png``); JSON default ``$OUT/bench_lib_dists.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import vyre  # noqa: E402
from vyre_cuda.bench import add_chart_arguments, redraw_if_asked  # noqa: E402

PRIMITIVES = ("reduce", "inclusive_scan", "exclusive_scan", "select", "select_if", "histogram", "sort", "sort_pairs",
              "argsort", "unique", "segmented_reduce", "segmented_sort", "run_length_encode", "transform_reduce")
FUSED_IMPLS = ("vyre", "vyre_cupy", "vyre_two_pass", "cupy", "cupy_two_pass", "torch")
# bytes a primitive must move at least, per element (u32: read the input once, write the output once)
SEGMENT = 1024  # elements per segment of the segmented_reduce and segmented_sort rows
MIN_BYTES = {"reduce": 4, "inclusive_scan": 8, "exclusive_scan": 8, "select": 5 + 2, "select_if": 4 + 2,
             "histogram": 4, "sort": 8, "sort_pairs": 16, "argsort": 8, "unique": 4,
             "segmented_reduce": 4 + 8 / SEGMENT,  # the elements, an offset pair and a result per segment
             "segmented_sort": 16,  # key-value: read and write each key and value once
             "run_length_encode": 4, "transform_reduce": 4}
DISTS = ("uniform", "sorted", "reversed", "few_distinct", "zipf")  # the key distributions of ``--dists``
DIST_ROWS = ("sort", "argsort", "sort_pairs")
DIST_TARGETS = {"sort": 4 / 3, "argsort": 1.2, "sort_pairs": 1.2}  # CuPy's time / vyre's time needed
DIST_IMPLS = ("vyre", "vyre_cupy", "vyre_numpy", "vyre_torch", "cupy", "torch")  # vyre: on ResidentArrays
ZIPF_A = 1.2
READ_BOUND = ("reduce", "transform_reduce", "segmented_reduce")  # compared with the read bandwidth
COPY_BOUND = ("inclusive_scan", "exclusive_scan")  # compared with the copy bandwidth
LIB_PNG = ROOT / "docs" / "lib_bench.png"  # the main chart; ``--dists`` draws docs/lib_dists.png by default
READ_SOURCE = r"""
extern "C" __global__ void vyre_bench_read(const uint4* __restrict__ x, unsigned long long n4, unsigned int* out) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int acc = 0;
    for (; i + 3 * stride < n4; i += 4 * stride) {
        uint4 a = x[i], b = x[i + stride], c = x[i + 2 * stride], d = x[i + 3 * stride];
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < n4; i += stride) {
        uint4 a = x[i];
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    for (int d = 16; d > 0; d >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, d);
    __shared__ unsigned int warps[32];
    if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned int total = 0;
        for (unsigned int w = 0; w < blockDim.x / 32; ++w) total ^= warps[w];
        out[blockIdx.x] = total;
    }
}
"""


@vyre.func
def low_square(v):
    """``(v & 0xFFFF)**2``, the function ``transform_reduce`` applies to each element as it loads it."""
    w = v & 65535
    return w * w


def _sync() -> None:
    import cupy

    cupy.cuda.runtime.deviceSynchronize()


def wall_ms(fn: Callable[[], object], reps: int) -> float:
    """Median ms from the call to a device synchronisation, after two warm-up calls."""
    for _ in range(2):
        fn()
    _sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        _sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


LOOP = 200  # calls per host-time loop of ``--small``
SMALL_ROWS = ("reduce", "inclusive_scan", "exclusive_scan", "histogram", "sort", "argsort", "segmented_reduce",
              "run_length_encode", "select", "select_if", "unique", "transform_reduce")
SMALL_IMPLS = ("vyre", "vyre_cupy", "cupy", "torch")  # vyre on ResidentArrays, vyre on CuPy arrays, baselines


def host_us(fn: Callable[[], object], calls: int = LOOP) -> float:
    """Microseconds of host time per call over ``calls`` calls with no synchronisation between them
    (one sync before the loop and one after it, not timed)."""
    fn()
    _sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - t0
    _sync()
    return elapsed / calls * 1e6


def run_small(sizes: list[int], reps: int) -> dict[str, Any]:
    """``--small``: wall (a sync each call, median of ``reps``) and host loop microseconds per call."""
    import cupy

    from vyre import lib
    from vyre_cuda.backend import CudaBackend

    backend = CudaBackend()
    props = cupy.cuda.runtime.getDeviceProperties(0)
    report: dict[str, Any] = {"device": props["name"].decode(), "sizes": sizes, "loop": LOOP, "results": []}
    for log2n in sizes:
        for primitive, impls in workloads(backend, 1 << log2n).items():
            if primitive not in SMALL_ROWS:
                continue
            for impl in SMALL_IMPLS:
                fn = impls.get(impl)
                if fn is None:
                    continue
                try:
                    wall, host = wall_ms(fn, reps) * 1e3, host_us(fn)
                except Exception as exc:  # noqa: BLE001 - a missing baseline must not stop the run
                    print(f"2^{log2n} {primitive} {impl}: failed ({type(exc).__name__}: {exc})", flush=True)
                    continue
                report["results"].append({"primitive": primitive, "log2n": log2n, "impl": impl,
                                          "wall_us": wall, "host_us": host})
                print(f"2^{log2n} {primitive:18s} {impl:10s} {wall:8.1f} / {host:8.1f} us", flush=True)
        lib.release_scratch(backend)
    backend.shutdown()
    return report


def small_table(report: dict[str, Any]) -> str:
    """Markdown per size: "wall with sync / host loop" microseconds per call of each implementation."""
    by = {(r["log2n"], r["primitive"], r["impl"]): r for r in report["results"]}
    out = []
    for log2n in report["sizes"]:
        out += [f"2^{log2n} ({report['device']}; us per call: wall with a sync each call / host time per call "
                f"in a loop of {report['loop']} without syncs)", "",
                "| primitive | vyre on ResidentArray | vyre on CuPy arrays | CuPy | torch |", "|---|---|---|---|---|"]
        for p in SMALL_ROWS:
            cells = []
            for impl in SMALL_IMPLS:
                r = by.get((log2n, p, impl))
                cells.append(f"{r['wall_us']:.0f} / {r['host_us']:.0f}" if r else "-")
            out.append(f"| {p} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def _recycle(backend: Any, result: object) -> None:
    """Hand a call's ``ResidentArray`` results back to vyre.lib, so the next call reuses their handles."""
    from vyre import lib

    lib.recycle(*[r for r in (result if isinstance(result, tuple) else (result,))
                  if isinstance(r, lib.ResidentArray)], backend=backend)


def _recycled(backend: Any, call: Callable[[], object]) -> Callable[[], object]:
    """``call`` with its ``ResidentArray`` results handed back (``_recycle``) each time."""
    return lambda: _recycle(backend, call())


def _resident(backend: Any, a: Any) -> Any:
    """A ``ResidentArray`` holding a copy of the CuPy array ``a``."""
    from vyre.lib import ResidentArray

    handle = backend.allocate_resident(a.nbytes)
    backend.upload_resident(handle, a)
    return ResidentArray(handle, a.dtype.str, a.size)


def _torch() -> Any:
    """torch, or None where it is not installed (its columns are then left out)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def workloads(backend: Any, n: int) -> dict[str, dict[str, Callable[[], object]]]:
    """For each primitive, the callables of each implementation on the same data: vyre on
    ``ResidentArray``s, on CuPy arrays, numpy arrays and torch tensors in and out (``vyre_cupy``,
    ``vyre_numpy``, ``vyre_torch``), CuPy and torch."""
    import cupy

    from vyre import lib

    torch = _torch()
    rng = cupy.random.default_rng(1)
    x = rng.integers(0, 2**31, n, dtype=cupy.int64).astype(cupy.uint32)
    small = (x & 255).astype(cupy.uint32)
    runs = (x >> 29).astype(cupy.uint32)  # 4 values: long-ish runs for RLE
    mask = (x & 1).astype(cupy.bool_)  # 1-byte flags for every implementation
    offsets = cupy.linspace(0, n, n // SEGMENT + 1).astype(cupy.uint32)
    values = cupy.arange(n, dtype=cupy.uint32)
    segment_ids = cupy.arange(n, dtype=cupy.uint32) // SEGMENT  # the segments of ``offsets`` (n a multiple)

    arrays = {"x": x, "small": small, "runs": runs, "mask": mask, "offsets": offsets, "values": values}
    r = {name: _resident(backend, a) for name, a in arrays.items()}
    lo, hi = 0, 2**30
    calls: dict[str, Callable[[dict[str, Any]], object]] = {  # each vyre call, on one caller's set of arrays
        "reduce": lambda a: lib.reduce(a["x"], backend=backend),
        "inclusive_scan": lambda a: lib.inclusive_scan(a["x"], backend=backend),
        "exclusive_scan": lambda a: lib.exclusive_scan(a["x"], backend=backend),
        "select": lambda a: lib.select(a["x"], a["mask"], backend=backend),
        "select_if": lambda a: lib.select_if(a["x"], lo, hi, backend=backend),
        "histogram": lambda a: lib.histogram(a["small"], 256, backend=backend),
        "sort": lambda a: lib.sort(a["x"], backend=backend),
        "sort_pairs": lambda a: lib.sort(a["x"], a["values"], backend=backend),
        "argsort": lambda a: lib.argsort(a["x"], backend=backend),
        "unique": lambda a: lib.unique(a["small"], backend=backend),
        "segmented_reduce": lambda a: lib.segmented_reduce(a["x"], a["offsets"], backend=backend),
        "segmented_sort": lambda a: lib.segmented_sort(a["x"], a["offsets"], a["values"], backend=backend),
        "run_length_encode": lambda a: lib.run_length_encode(a["runs"], backend=backend),
        "transform_reduce": lambda a: lib.transform_reduce(a["x"], low_square, backend=backend),
    }
    callers = {"vyre_cupy": arrays, "vyre_numpy": {k: cupy.asnumpy(v) for k, v in arrays.items()}}
    if torch is not None:  # int32 views (every value is below 2^31: the same order and the same bits out)
        callers["vyre_torch"] = {k: torch.as_tensor(v.view(cupy.int32) if v.dtype == cupy.uint32 else v,
                                                    device="cuda") for k, v in arrays.items()}
    impls: dict[str, dict[str, Callable[[], object]]] = {
        p: {"vyre": _recycled(backend, lambda call=call: call(r)),
            **{name: (lambda call=call, a=a: call(a)) for name, a in callers.items()}}
        for p, call in calls.items()}
    impls["unique"]["vyre_key_range"] = _recycled(
        backend, lambda: lib.unique(r["small"], key_range=(0, 256), backend=backend))
    cupy_impls = {
        "reduce": lambda: x.sum(), "inclusive_scan": lambda: cupy.cumsum(x), "exclusive_scan": lambda: cupy.cumsum(x),
        "select": lambda: x[mask], "select_if": lambda: x[(x >= lo) & (x < hi)],
        "histogram": lambda: cupy.bincount(small, minlength=256), "sort": lambda: cupy.sort(x),
        "sort_pairs": lambda: _cupy_sort_pairs(x, values), "argsort": lambda: cupy.argsort(x),
        "unique": lambda: cupy.unique(small, return_counts=True),
        "segmented_sort": lambda: _cupy_segmented_sort(x, segment_ids, values)}
    for name, fn in cupy_impls.items():
        impls[name]["cupy"] = fn
    impls["transform_reduce"].update(_transform_reduce(backend, x, impls["transform_reduce"]["vyre_cupy"]))
    if torch is not None:
        tx, tsmall, truns = (callers["vyre_torch"][k] for k in ("x", "small", "runs"))
        tfloat = tx.float()  # torch's segment_reduce takes floating data
        tmask = callers["vyre_torch"]["mask"]
        toff = torch.as_tensor(offsets.astype(cupy.int64), device="cuda")
        # a segmented sort as a torch user writes it: one sort of (segment << 32 | key), values gathered
        tsegkey = torch.as_tensor((segment_ids.astype(cupy.int64) << 32) | x.astype(cupy.int64), device="cuda")
        tvalues = callers["vyre_torch"]["values"]
        torch_impls = {
            "reduce": lambda: tx.sum(), "inclusive_scan": lambda: torch.cumsum(tx, 0, dtype=torch.int32),
            "exclusive_scan": lambda: torch.cumsum(tx, 0, dtype=torch.int32),
            "select": lambda: torch.masked_select(tx, tmask), "select_if": lambda: tx[(tx >= lo) & (tx < hi)],
            "histogram": lambda: torch.bincount(tsmall, minlength=256), "sort": lambda: torch.sort(tx),
            "sort_pairs": lambda: torch.sort(tx),  # the sorted keys and their indices (int64)
            "argsort": lambda: torch.argsort(tx, stable=True),
            "unique": lambda: torch.unique(tsmall, return_counts=True),
            "segmented_reduce": lambda: torch.segment_reduce(tfloat, "sum", offsets=toff),
            "segmented_sort": lambda: _torch_segmented_sort(torch, tsegkey, tvalues),
            "run_length_encode": lambda: torch.unique_consecutive(truns, return_counts=True),
            "transform_reduce": lambda: ((tx & 65535) * (tx & 65535)).sum(dtype=torch.int32),
        }
        for name, fn in torch_impls.items():
            impls[name]["torch"] = fn
        from benchmarks.triton_peers import peers

        for name, fn in peers(tx, tsmall, x, small).items():  # none without Triton
            impls[name]["triton"] = fn
    impls["_copy"] = {"cupy": _copy_into(x)}
    impls["_read"] = {"cupy": _read_all(x)}
    return impls


def _cupy_segmented_sort(keys: Any, segment_ids: Any, values: Any) -> tuple[Any, Any]:
    """A segmented key-value sort as a CuPy user writes it: the order of (segment, key), both gathered by it."""
    import cupy

    order = cupy.lexsort(cupy.stack((keys, segment_ids)))
    return keys[order], values[order]


def _torch_segmented_sort(torch: Any, segment_keys: Any, values: Any) -> tuple[Any, Any]:
    """torch's segmented sort: a stable sort of the composite keys, the values gathered by its order."""
    ordered, order = torch.sort(segment_keys, stable=True)
    return ordered, values[order]


def _cupy_sort_pairs(keys: Any, values: Any) -> tuple[Any, Any]:
    """A key-value sort as a CuPy user writes it: the keys' order, then both gathered by it."""
    import cupy

    idx = cupy.argsort(keys)
    return keys[idx], values[idx]


def _copy_into(x: Any) -> Callable[[], object]:
    """A device-to-device ``cudaMemcpyAsync`` of ``x`` into an array made once (checked once): the
    copy engine's path, faster than ``x.copy()``, which allocates and runs an elementwise kernel."""
    import cupy

    out = cupy.empty_like(x)
    runtime = cupy.cuda.runtime

    def copy() -> object:
        runtime.memcpyAsync(out.data.ptr, x.data.ptr, x.nbytes, runtime.memcpyDeviceToDevice,
                            cupy.cuda.get_current_stream().ptr)
        return out

    copy()
    if not bool((out == x).all()):
        raise AssertionError("the copy-bandwidth baseline did not copy the input")
    return copy


def _read_all(x: Any) -> Callable[[], object]:
    """The read-bandwidth kernel over ``x`` (its size a multiple of 16 bytes), checked once: the
    XOR of the words it writes is the XOR of ``x``'s words."""
    import cupy

    kernel = cupy.RawKernel(READ_SOURCE, "vyre_bench_read")
    blocks = cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"] * 8
    out = cupy.empty(blocks, dtype=cupy.uint32)
    words = x.view(cupy.uint32)
    assert words.nbytes % 16 == 0, "the read kernel takes whole 16-byte vectors"

    def read() -> object:
        kernel((blocks,), (256,), (words, cupy.uint64(words.nbytes // 16), out))
        return out

    read()
    xor_all = cupy.ReductionKernel("uint32 x", "uint32 y", "x", "a ^ b", "y = a", "0", "vyre_bench_xor")
    if int(xor_all(out)) != int(xor_all(words)):  # CuPy's bitwise_xor has no reduce
        raise AssertionError("the read-bandwidth kernel did not read every word")
    return read


def _transform_reduce(backend: Any, x: Any, fused_vyre: Callable[[], Any]) -> dict[str, Callable[[], object]]:
    """``transform_reduce``'s other forms: in two passes (CuPy elementwise, then ``lib.reduce``) and
    CuPy's fused and two-pass forms; checked to agree with ``fused_vyre`` (vyre's fused call)."""
    import cupy

    from vyre import lib

    square = cupy.ElementwiseKernel("uint32 v", "uint32 y", "unsigned int w = v & 65535u; y = w * w;",
                                    "vyre_bench_low_square")
    fused = cupy.ReductionKernel("uint32 v", "uint32 y", "(v & 65535u) * (v & 65535u)", "a + b", "y = a", "0",
                                 "vyre_bench_low_square_sum")
    impls: dict[str, Callable[[], Any]] = {
        "vyre_two_pass": lambda: lib.reduce(square(x), backend=backend),
        "cupy": lambda: fused(x), "cupy_two_pass": lambda: square(x).sum(dtype=cupy.uint32)}
    results = {name: int(fn()) for name, fn in (("vyre_cupy", fused_vyre), *impls.items())}
    if len(set(results.values())) != 1:
        raise AssertionError(f"transform_reduce results differ: {results}")
    return impls


def fused_table(report: dict[str, Any]) -> str:
    """Markdown of the ``transform_reduce`` rows: each implementation's time, fused and two-pass."""
    by = {(r["log2n"], r["impl"]): r["ms"] for r in report["results"] if r["primitive"] == "transform_reduce"}
    rows = ["| n | " + " | ".join(f"{impl} ms" for impl in FUSED_IMPLS) + " |", "|---" * (len(FUSED_IMPLS) + 1) + "|"]
    for log2n in report["sizes"]:
        cells = [f"{by[(log2n, impl)]:.3f}" if (log2n, impl) in by else "-" for impl in FUSED_IMPLS]
        rows.append(f"| 2^{log2n} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def wide_sort(backend: Any, n: int) -> dict[str, Callable[[], object]]:
    """The sort of ``n`` u64 keys by each implementation, after checking they agree bit for bit."""
    import cupy

    from vyre import lib

    keys = cupy.random.default_rng(2).integers(0, 2**62, n, dtype=cupy.int64).view(cupy.uint64)
    resident = _resident(backend, keys)
    host = cupy.asnumpy(keys)
    impls: dict[str, Callable[[], object]] = {
        "vyre": lambda: _recycle(backend, lib.sort(resident, backend=backend)),
        "vyre_cupy": lambda: lib.sort(keys, backend=backend), "vyre_numpy": lambda: lib.sort(host, backend=backend),
        "cupy": lambda: cupy.sort(keys)}
    want = cupy.sort(keys)
    out = lib.sort(resident, backend=backend)
    got = {"vyre": cupy.asarray(backend.download_resident(out.handle, 0, keys.nbytes).view(cupy.uint64)),
           "vyre_cupy": lib.sort(keys, backend=backend), "vyre_numpy": cupy.asarray(lib.sort(host, backend=backend))}
    backend.free_resident(out.handle)
    torch = _torch()
    if torch is not None:
        tkeys = torch.as_tensor(keys.view(cupy.int64), device="cuda")
        impls["vyre_torch"] = lambda: lib.sort(tkeys, backend=backend)
        impls["torch"] = lambda: torch.sort(tkeys)
        got["vyre_torch"] = cupy.asarray(lib.sort(tkeys, backend=backend)).view(cupy.uint64)
        got["torch"] = cupy.asarray(torch.sort(tkeys).values).view(cupy.uint64)
    for impl, result in got.items():
        if not bool(cupy.array_equal(result, want)):
            raise AssertionError(f"{impl}'s sort of {n} u64 keys differs from cupy.sort")
    return impls


def run_wide(sizes: list[int], reps: int) -> dict[str, Any]:
    """``--wide``: the u64 sort rows."""
    import cupy

    from vyre import lib
    from vyre_cuda.backend import CudaBackend

    backend = CudaBackend()
    props = cupy.cuda.runtime.getDeviceProperties(0)
    report: dict[str, Any] = {"device": props["name"].decode(), "sizes": sizes, "results": []}
    for log2n in sizes:
        n = 1 << log2n
        for impl, fn in wide_sort(backend, n).items():
            ms = wall_ms(fn, reps)
            report["results"].append({"primitive": "sort_u64", "log2n": log2n, "impl": impl, "ms": ms,
                                      "gelem_s": n / ms / 1e6})
            print(f"2^{log2n} sort_u64 {impl:10s} {ms:9.3f} ms {n / ms / 1e6:8.2f} Gelem/s", flush=True)
        lib.release_scratch(backend)
    backend.shutdown()
    return report


def wide_table(report: dict[str, Any]) -> str:
    """Markdown of the ``--wide`` rows: vyre's time and its throughput as a ratio of each baseline."""
    rows = ["| n | keys | vyre resident ms | vyre CuPy ms | vyre numpy ms | vyre torch ms | CuPy ms | torch ms "
            "| vs cupy | vs torch |", "|---|---|---|---|---|---|---|---|---|---|"]
    by = {(r["log2n"], r["impl"]): r["ms"] for r in report["results"]}
    for log2n in report["sizes"]:
        ms = by[(log2n, "vyre")]
        cells = [f"{by[(log2n, i)]:.3f}" if (log2n, i) in by else "-"
                 for i in ("vyre_cupy", "vyre_numpy", "vyre_torch", "cupy", "torch")]
        rows.append(f"| 2^{log2n} | u64 | {ms:.3f} | {' | '.join(cells)} | "
                    f"{_ratio(by.get((log2n, 'cupy')), ms)} | {_ratio(by.get((log2n, 'torch')), ms)} |")
    return "\n".join(rows)


def dist_keys(name: str, n: int, seed: int = 3) -> Any:
    """``n`` u32 keys of the distribution ``name`` (``DISTS``), made on the device by CuPy from ``seed``."""
    import cupy

    rng = cupy.random.default_rng(seed)
    if name == "few_distinct":
        pool = rng.integers(0, 2**32, 16, dtype=cupy.int64).astype(cupy.uint32)
        return pool[rng.integers(0, 16, n, dtype=cupy.int64)]
    if name == "zipf":
        ranks = cupy.random.RandomState(seed).zipf(ZIPF_A, n, dtype=cupy.int64)
        return cupy.clip(ranks, 1, 2**32 - 1).astype(cupy.uint32)
    keys = rng.integers(0, 2**32, n, dtype=cupy.int64).astype(cupy.uint32)
    if name == "uniform":
        return keys
    keys.sort()
    if name == "sorted":
        return keys
    if name == "reversed":
        return keys[::-1].copy()
    raise ValueError(f"unknown key distribution {name!r}; pick one of {DISTS}")


def dist_workloads(backend: Any, name: str, n: int) -> tuple[dict[str, dict[str, Callable[[], object]]], list[Any]]:
    """``sort``, ``argsort`` and ``sort_pairs`` (u32 values ``arange(n)``) of ``n`` keys of distribution
    ``name`` by each implementation, vyre on ``ResidentArray``s of the same data, after checking vyre's
    results against CuPy's stable order; and the ``ResidentArray`` inputs, for the caller to free."""
    import cupy

    from vyre import lib

    keys, values = dist_keys(name, n), cupy.arange(n, dtype=cupy.uint32)
    rk, rv = _resident(backend, keys), _resident(backend, values)
    vyre_calls: dict[str, Callable[[], Any]] = {
        "sort": lambda: lib.sort(rk, backend=backend), "argsort": lambda: lib.argsort(rk, backend=backend),
        "sort_pairs": lambda: lib.sort(rk, rv, backend=backend)}
    order = cupy.argsort(keys)  # CuPy's argsort is stable
    want = {"sort": (cupy.sort(keys),), "argsort": (order,), "sort_pairs": (keys[order], values[order])}
    for primitive, call in vyre_calls.items():
        result = call()
        got = result if isinstance(result, tuple) else (result,)
        if not all(bool(cupy.array_equal(cupy.asarray(g), w)) for g, w in zip(got, want[primitive], strict=True)):
            raise AssertionError(f"vyre's {primitive} of {n} {name} u32 keys differs from CuPy's (stable) result")
        _recycle(backend, result)
    impls = {p: {"vyre": _recycled(backend, call)} for p, call in vyre_calls.items()}
    host_keys, host_values = cupy.asnumpy(keys), cupy.asnumpy(values)
    callers = {"vyre_cupy": (keys, values), "vyre_numpy": (host_keys, host_values)}  # the arrays users have
    torch = _torch()
    if torch is not None:
        tkeys = torch.as_tensor((keys ^ cupy.uint32(1 << 31)).view(cupy.int32), device="cuda")  # u32 order as i32
        callers["vyre_torch"] = (tkeys, torch.as_tensor(values.view(cupy.int32), device="cuda"))
    for impl, (k, v) in callers.items():
        impls["sort"][impl] = lambda k=k: lib.sort(k, backend=backend)
        impls["argsort"][impl] = lambda k=k: lib.argsort(k, backend=backend)
        impls["sort_pairs"][impl] = lambda k=k, v=v: lib.sort(k, v, backend=backend)
        # the same order from every caller's arrays (torch's keys are the flipped bits: compare indices)
        if not bool(cupy.array_equal(cupy.asarray(lib.argsort(k, backend=backend)), order)):
            raise AssertionError(f"vyre's argsort of {n} {name} keys from {impl} differs from CuPy's (stable) order")
    impls["sort"]["cupy"] = lambda: cupy.sort(keys)
    impls["argsort"]["cupy"] = lambda: cupy.argsort(keys)
    impls["sort_pairs"]["cupy"] = lambda: _cupy_sort_pairs(keys, values)
    if torch is not None:
        impls["sort"]["torch"] = lambda: torch.sort(tkeys)
        impls["argsort"]["torch"] = lambda: torch.argsort(tkeys, stable=True)
        impls["sort_pairs"]["torch"] = lambda: torch.sort(tkeys)  # the sorted keys and their indices, as workloads()
    return impls, [rk, rv]


def run_dists(sizes: list[int], reps: int) -> dict[str, Any]:
    """``--dists``: the sort rows of each key distribution, checked, then timed."""
    import cupy

    from vyre import lib
    from vyre_cuda.backend import CudaBackend

    backend = CudaBackend()
    props = cupy.cuda.runtime.getDeviceProperties(0)
    report: dict[str, Any] = {"device": props["name"].decode(), "sizes": sizes, "reps": reps, "zipf_a": ZIPF_A,
                              "targets": DIST_TARGETS, "results": []}
    for log2n in sizes:
        for dist in DISTS:
            impls, inputs = dist_workloads(backend, dist, 1 << log2n)
            for primitive, by_impl in impls.items():
                for impl, fn in by_impl.items():
                    ms = wall_ms(fn, reps)
                    report["results"].append({"dist": dist, "primitive": primitive, "log2n": log2n, "impl": impl,
                                              "ms": ms})
                    print(f"2^{log2n} {dist:12s} {primitive:10s} {impl:6s} {ms:9.3f} ms", flush=True)
            for r in inputs:
                backend.free_resident(r.handle)
        lib.release_scratch(backend)
    backend.shutdown()
    report["rows"] = dist_rows(report)
    return report


def dist_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Per size, distribution and primitive: each implementation's ms, CuPy/vyre and torch/vyre (their
    time over vyre's), and whether CuPy/vyre reaches the primitive's target (``DIST_TARGETS``)."""
    by = {(r["log2n"], r["dist"], r["primitive"], r["impl"]): r["ms"] for r in report["results"]}
    rows = []
    for log2n in report["sizes"]:
        for dist in DISTS:
            for p in DIST_ROWS:
                ms = {impl: by.get((log2n, dist, p, impl)) for impl in DIST_IMPLS}
                vyre_ms = ms["vyre"]
                if vyre_ms is None:
                    continue
                speed = {impl: ms[impl] / vyre_ms if ms[impl] else None for impl in ("cupy", "torch")}
                rows.append({"log2n": log2n, "dist": dist, "primitive": p, **{f"{i}_ms": v for i, v in ms.items()},
                             "cupy_over_vyre": speed["cupy"], "torch_over_vyre": speed["torch"],
                             "target": DIST_TARGETS[p], "met": (speed["cupy"] or 0.0) >= DIST_TARGETS[p]})
    return rows


def dists_table(report: dict[str, Any]) -> str:
    """Markdown of ``dist_rows``: the target is CuPy's time over vyre's (4/3: vyre at most 0.75x CuPy's time)."""
    rows = ["| n | keys | primitive | vyre resident ms | vyre CuPy ms | vyre numpy ms | vyre torch ms | CuPy ms "
            "| torch ms | CuPy/vyre | torch/vyre | target met |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in dist_rows(report):
        cells = [f"{r[f'{i}_ms']:.3f}" if r.get(f"{i}_ms") else "-" for i in DIST_IMPLS]
        rows.append(f"| 2^{r['log2n']} | {r['dist']} | {r['primitive']} | {' | '.join(cells)} | "
                    f"{_ratio(r['cupy_ms'], r['vyre_ms'])} | {_ratio(r['torch_ms'], r['vyre_ms'])} | "
                    f"{'yes' if r['met'] else 'no'} (>= {r['target']:.2f}x) |")
    return "\n".join(rows)


def plot_dists(report: dict[str, Any], png: Path) -> None:
    """One panel per size: CuPy's time over vyre's per primitive, grouped by key distribution; a
    dashed line over each bar marks its target."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = dist_rows(report)
    width = 0.8 / len(DIST_ROWS)
    fig, axes = plt.subplots(len(report["sizes"]), 1, figsize=(9, 3.4 * len(report["sizes"])), squeeze=False)
    for ax, log2n in zip(axes[:, 0], report["sizes"]):
        speed = {(r["dist"], r["primitive"]): r["cupy_over_vyre"] or 0.0 for r in rows if r["log2n"] == log2n}
        for k, p in enumerate(DIST_ROWS):
            xs = [i + (k - (len(DIST_ROWS) - 1) / 2) * width for i in range(len(DISTS))]
            ax.bar(xs, [speed.get((d, p), 0.0) for d in DISTS], width=width, label=p)
            ax.hlines([DIST_TARGETS[p]] * len(xs), [x - width / 2 for x in xs], [x + width / 2 for x in xs],
                      colors="black", linestyles="dashed", linewidth=1)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(DISTS)), DISTS, fontsize=8)
        ax.set_ylabel("CuPy time / vyre time")
        ax.set_title(f"{report['device']}, 2^{log2n} u32 keys (dashed: targets)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=120)


def run(sizes: list[int], reps: int) -> dict[str, Any]:
    import cupy

    from vyre import lib
    from vyre_cuda.backend import CudaBackend

    backend = CudaBackend()
    props = cupy.cuda.runtime.getDeviceProperties(0)
    report: dict[str, Any] = {"device": props["name"].decode(), "sizes": sizes, "results": [], "copy_gbps": {},
                              "read_gbps": {}}
    for log2n in sizes:
        n = 1 << log2n
        for primitive, impls in workloads(backend, n).items():
            for impl, fn in impls.items():
                try:
                    ms = wall_ms(fn, reps)
                except Exception as exc:  # noqa: BLE001 - a missing baseline must not stop the run
                    print(f"2^{log2n} {primitive} {impl}: failed ({type(exc).__name__}: {exc})", flush=True)
                    continue
                if primitive == "_copy":
                    report["copy_gbps"][str(log2n)] = 8 * n / ms / 1e6
                    print(f"2^{log2n} copy: {ms:.3f} ms, {8 * n / ms / 1e6:.0f} GB/s", flush=True)
                    continue
                if primitive == "_read":
                    report["read_gbps"][str(log2n)] = 4 * n / ms / 1e6
                    print(f"2^{log2n} read: {ms:.3f} ms, {4 * n / ms / 1e6:.0f} GB/s", flush=True)
                    continue
                report["results"].append({"primitive": primitive, "log2n": log2n, "impl": impl, "ms": ms,
                                          "gelem_s": n / ms / 1e6})
                print(f"2^{log2n} {primitive:18s} {impl:10s} {ms:9.3f} ms {n / ms / 1e6:8.2f} Gelem/s", flush=True)
        lib.release_scratch(backend)
    backend.shutdown()
    return report


def _ratio(other: float | None, ms: float) -> str:
    return f"{other / ms:.2f}x" if other else "-"


def table(report: dict[str, Any]) -> str:
    """Markdown: per size and primitive, vyre's time and its throughput as a ratio of each baseline.

    The last column is the time a copy-bandwidth-bound kernel moving the primitive's minimum bytes
    would take, as a share of vyre's time (100% = at the copy bandwidth).
    """
    rows = ["| n | primitive | vyre ms | vs torch | vs cupy | vs triton | vyre_cupy ms | vyre_torch ms | vyre_numpy ms "
            "| min bytes at copy speed |", "|---|---|---|---|---|---|---|---|---|---|"]
    by = {(r["log2n"], r["primitive"], r["impl"]): r["ms"] for r in report["results"]}
    for log2n in report["sizes"]:
        copy = report["copy_gbps"].get(str(log2n))
        for p in PRIMITIVES:
            ms = by.get((log2n, p, "vyre"))
            if ms is None:
                continue
            ideal = MIN_BYTES[p] * (1 << log2n) / (copy * 1e6) if copy else None
            bound = f"{ideal / ms:.0%}" if ideal else "-"
            callers = [by.get((log2n, p, impl)) for impl in ("vyre_cupy", "vyre_torch", "vyre_numpy")]
            via = " | ".join(f"{c:.3f}" if c else "-" for c in callers)
            rows.append(f"| 2^{log2n} | {p} | {ms:.3f} | {_ratio(by.get((log2n, p, 'torch')), ms)} | "
                        f"{_ratio(by.get((log2n, p, 'cupy')), ms)} | {_ratio(by.get((log2n, p, 'triton')), ms)} | "
                        f"{via} | {bound} |")
    return "\n".join(rows)


def bandwidth_table(report: dict[str, Any]) -> str:
    """Markdown: GB/s of vyre's bytes for the read-bound rows (bytes read, against the read
    bandwidth) and the scans (bytes read + written, against the copy bandwidth). Reports from
    before the read baseline have no ``read_gbps``: their read-bound shares show "-"."""
    rows = ["| n | primitive | vyre ms | GB/s | baseline | baseline GB/s | share |", "|---|---|---|---|---|---|---|"]
    by = {(r["log2n"], r["primitive"], r["impl"]): r["ms"] for r in report["results"]}
    for log2n in report["sizes"]:
        for p in READ_BOUND + COPY_BOUND:
            ms = by.get((log2n, p, "vyre"))
            if ms is None:
                continue
            kind = "read" if p in READ_BOUND else "copy"
            base = report.get(f"{kind}_gbps", {}).get(str(log2n))
            gbps = MIN_BYTES[p] * (1 << log2n) / ms / 1e6
            share = f"{gbps / base:.0%}" if base else "-"
            rows.append(f"| 2^{log2n} | {p} | {ms:.3f} | {gbps:.0f} | {kind} | "
                        f"{f'{base:.0f}' if base else '-'} | {share} |")
    return "\n".join(rows)


def plot(report: dict[str, Any], png: Path) -> None:
    """One panel per size: throughput of each implementation relative to torch's, per primitive."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by = {(r["log2n"], r["primitive"], r["impl"]): r["gelem_s"] for r in report["results"]}
    impls = ["vyre", "vyre_cupy", "vyre_torch", "cupy", "triton"]  # vyre_numpy adds two host copies: off this scale
    width = 0.8 / len(impls)
    fig, axes = plt.subplots(len(report["sizes"]), 1, figsize=(12, 3.2 * len(report["sizes"])), squeeze=False)
    for ax, log2n in zip(axes[:, 0], report["sizes"]):
        for k, impl in enumerate(impls):
            heights = []
            for p in PRIMITIVES:
                base, mine = by.get((log2n, p, "torch")), by.get((log2n, p, impl))
                heights.append(mine / base if base and mine else 0.0)
            ax.bar([i + (k - (len(impls) - 1) / 2) * width for i in range(len(PRIMITIVES))], heights, width=width,
                   label=impl)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(PRIMITIVES)), PRIMITIVES, rotation=20, fontsize=8)
        ax.set_ylabel("throughput / torch")
        ax.set_title(f"{report['device']}, 2^{log2n} u32")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=None,
                        help="log2 of the element counts (default 20 24 28; 27 with --wide, 28 with --dists)")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--wide", action="store_true", help="time the sort of u64 keys instead")
    parser.add_argument("--small", action="store_true",
                        help="time the host cost of small calls instead (default sizes 16 20): wall / host loop us")
    parser.add_argument("--dists", action="store_true",
                        help="time sort, argsort and sort_pairs of u32 keys of five distributions instead")
    add_chart_arguments(parser, LIB_PNG)
    args = parser.parse_args()
    if args.dists and args.png == str(LIB_PNG):
        args.png = str(ROOT / "docs" / "lib_dists.png")
    if redraw_if_asked(args, plot_dists if args.dists else plot):
        report = json.loads(Path(args.chart).read_text())
        print(dists_table(report) if args.dists else table(report) + "\n\n" + bandwidth_table(report))
        print(f"chart: {args.png}")
        return
    if args.small:
        report = run_small(args.sizes or [16, 20], max(args.reps, 50))
    elif args.wide:
        report = run_wide(args.sizes or [27], args.reps)
    elif args.dists:
        report = run_dists(args.sizes or [28], args.reps)
    else:
        report = run(args.sizes or [20, 24, 28], args.reps)
    mode = "_small" if args.small else "_wide" if args.wide else "_dists" if args.dists else ""
    path = Path(args.json or Path(os.environ.get("OUT", ".")) / f"bench_lib{mode}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1))
    if args.small:
        print(small_table(report))
    elif args.dists:
        print(dists_table(report))
    else:
        print(wide_table(report) if args.wide else
              table(report) + "\n\n" + bandwidth_table(report) + "\n\n" + fused_table(report))
    print(f"results: {path}")


if __name__ == "__main__":
    main()
