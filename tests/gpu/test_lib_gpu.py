"""``vyre.lib`` on ``cuda``: every function at 2**24 against numpy, bit-for-bit agreement with the
oracle, device arrays in and out, graph reuse per capacity class, and a 2**28 smoke test."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.lib import expected as E
from vyre import lib
from vyre.lib._scan import lookback
from vyre.lib._sort import onesweep
from vyre.lib.blocks import WG
from vyre.reference import ReferenceBackend

pytestmark = pytest.mark.gpu
N = 1 << 24


@pytest.fixture(scope="module")
def oracle():
    be = ReferenceBackend()
    yield be
    be.shutdown()


def test_scans_and_reductions_2_24(backend, rng):
    x = E.data(rng, np.uint32, N + 3)
    E.assert_same(lib.inclusive_scan(x, backend=backend), np.cumsum(x, dtype=np.uint32))
    E.assert_same(lib.exclusive_scan(x, "max", 5, backend=backend), E.exclusive_scan(x, "max", 5))
    assert lib.reduce(x, backend=backend) == x.sum(dtype=np.uint32)
    y = E.data(rng, np.int32, N)
    for op in ("min", "max", "and", "or", "xor"):
        assert lib.reduce(y, op, backend=backend) == E.reduce(y, op), op
    E.assert_same(lib.inclusive_scan(y, "min", backend=backend), E.inclusive_scan(y, "min"))
    f = E.data(rng, np.float32, N)
    E.assert_same(lib.inclusive_scan(f, "max", backend=backend), E.inclusive_scan(f, "max"))


@pytest.mark.parametrize("n", [1, 255, 256, 257, 1025, 2**16 + 1, 2**20 + 1])
def test_float_sums_match_the_oracle_bit_for_bit(backend, oracle, rng, n):
    """Fixed tree order: cuda and the oracle round float32 sums identically."""
    x = E.data(rng, np.float32, n, finite=True)
    assert lib.reduce(x, backend=backend).tobytes() == lib.reduce(x, backend=oracle).tobytes()
    assert lib.inclusive_scan(x, backend=backend).tobytes() == lib.inclusive_scan(x, backend=oracle).tobytes()
    offsets = E.random_offsets(rng, n, 33)
    got = lib.segmented_reduce(x, offsets, backend=backend)
    assert got.tobytes() == lib.segmented_reduce(x, offsets, backend=oracle).tobytes()


@pytest.mark.parametrize("n", [0, 1, 255, 256, 257, 2**16 + 1])
def test_every_function_matches_the_oracle(backend, oracle, rng, n):
    x = E.data(rng, np.uint32, n)
    flags = x & 3
    calls = [
        lambda b: lib.exclusive_scan(x, "xor", 9, backend=b),
        lambda b: lib.select(x, flags, backend=b),
        lambda b: lib.select_if(x, 100, 2**31, backend=b),
        lambda b: lib.histogram(x % 3000, 2500, backend=b),
        lambda b: lib.histogram(x % 30000, 20000, backend=b),
        lambda b: lib.sort(x.view(np.float32), x, backend=b),
        lambda b: lib.argsort(x.view(np.int32), backend=b),
        lambda b: lib.unique(x % 50, backend=b),
        lambda b: lib.run_length_encode(x >> 31, backend=b),
    ]
    for call in calls:
        got, want = call(backend), call(oracle)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            E.assert_same_bits(g, w)


def test_select_histogram_segmented_2_24(backend, rng):
    x = E.data(rng, np.int32, N)
    flags = rng.random(N) < 0.5
    E.assert_same(lib.select(x, flags, backend=backend), x[flags])
    E.assert_same(lib.select_if(x, -(2**30), 2**30, backend=backend), x[(x >= -(2**30)) & (x < 2**30)])
    small = (x & 0xFFFF).astype(np.uint32)
    for values, bins in ((small, 1 << 16), (small & 255, 256)):
        want = np.bincount(values, minlength=bins).astype(np.uint32)
        E.assert_same(lib.histogram(values, bins, backend=backend), want)
    offsets = E.random_offsets(rng, N, 5000)
    E.assert_same(lib.segmented_reduce(x, offsets, "min", backend=backend), E.segmented_reduce(x, offsets, "min"))


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.float32])
def test_sort_family_2_24(backend, rng, dtype):
    keys = E.data(rng, dtype, N)
    order = E.sort_order(keys)
    got_k, got_v = lib.sort(keys, np.arange(N, dtype=np.uint32), backend=backend)
    E.assert_same_bits(got_k, keys[order])
    E.assert_same(got_v, order.astype(np.uint32))
    E.assert_same(lib.argsort(keys, backend=backend), order.astype(np.uint32))
    few = keys[rng.integers(0, 1000, N)]
    values, counts = lib.unique(few, backend=backend)
    want_values, want_counts = E.unique(few)
    E.assert_same_bits(values, want_values)
    E.assert_same(counts, want_counts)
    runs = E.runs(rng, dtype, N)
    values, lengths = lib.run_length_encode(runs, backend=backend)
    want_values, want_lengths = E.run_length_encode(runs)
    E.assert_same_bits(values, want_values)
    E.assert_same(lengths, want_lengths)


KEYS_TILE = WG * onesweep.ONESWEEP_ITEMS
ONESWEEP_SIZES = [1, 255, 257, WG * onesweep.ONESWEEP_VALUE_ITEMS + 1, KEYS_TILE - 1, KEYS_TILE, 3 * KEYS_TILE + 5,
                  2**16 + 1, 2**20 + 3]


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.float32])
@pytest.mark.parametrize("n", ONESWEEP_SIZES)
def test_single_pass_sort_across_tile_edges(backend, rng, dtype, n):
    """The single-pass sort on the device: sizes around its tile sizes, ties, edge values, keys,
    pairs and argsort against numpy's stable order; and keys with one busy digit (every tile's
    look-back walks the same counters)."""
    keys = E.data(rng, dtype, n)
    keys[: n // 4] = keys[n // 4: 2 * (n // 4)]
    order = E.sort_order(keys)
    values = E.data(rng, np.int32, n)
    E.assert_same_bits(lib.sort(keys, backend=backend), keys[order])
    E.assert_same(lib.argsort(keys, backend=backend), order.astype(np.uint32))
    got_k, got_v = lib.sort(keys, values, backend=backend)
    E.assert_same_bits(got_k, keys[order])
    E.assert_same(got_v, values[order])
    low = keys.view(np.uint32) & np.uint32(255)
    E.assert_same(lib.argsort(low, backend=backend), np.argsort(low, kind="stable").astype(np.uint32))


@pytest.mark.parametrize("dist", E.KEY_DISTS)
@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.float32])
@pytest.mark.parametrize("n", [3 * 2**16 + 1, 2**20 + 3])
def test_sort_family_on_key_distributions(backend, rng, dist, dtype, n):
    """The key distributions ``benchmarks/bench_lib.py --dists`` times, over many tiles: keys,
    argsort and pairs on ``ResidentArray``s and on CuPy arrays are numpy's stable order."""
    cupy = pytest.importorskip("cupy")
    keys, values = E.key_distribution(rng, dist, dtype, n), E.data(rng, np.uint32, n)
    order = E.sort_order(keys)
    want = {"sort": (keys[order],), "argsort": (order.astype(np.uint32),), "pairs": (keys[order], values[order])}
    resident = [E.put_resident(backend, a) for a in (keys, values)]
    for (k, v), fetch in ((resident, functools.partial(E.get_resident, backend)),
                          ((cupy.asarray(keys), cupy.asarray(values)), cupy.asnumpy)):
        got = {"sort": lib.sort(k, backend=backend), "argsort": lib.argsort(k, backend=backend),
               "pairs": lib.sort(k, v, backend=backend)}
        for name, result in got.items():
            parts = result if isinstance(result, tuple) else (result,)
            for part, expected in zip(parts, want[name], strict=True):
                E.assert_same_bits(fetch(part), expected)
            if isinstance(parts[0], lib.ResidentArray):
                lib.recycle(*parts, backend=backend)
    for r in resident:
        backend.free_resident(r.handle)


def test_bench_dists_keys_and_mode():
    """``bench_lib.py --dists`` end to end at 2^16 (its exactness checks, every column, the rows),
    and its device-made keys: reproducible, and each distribution what its name says."""
    cupy = pytest.importorskip("cupy")
    from benchmarks import bench_lib

    keys = {d: cupy.asnumpy(bench_lib.dist_keys(d, 100_003)) for d in bench_lib.DISTS}
    E.assert_same(cupy.asnumpy(bench_lib.dist_keys("zipf", 100_003)), keys["zipf"])
    assert all(k.dtype == np.uint32 and k.size == 100_003 for k in keys.values())
    assert keys["uniform"].max() >= 2**31 and np.unique(keys["uniform"]).size > 99_000
    E.assert_same(keys["sorted"], np.sort(keys["uniform"]))
    E.assert_same(keys["reversed"], keys["sorted"][::-1])
    assert np.unique(keys["few_distinct"]).size == 16
    values, counts = np.unique(keys["zipf"], return_counts=True)
    assert values[0] == 1 and counts[0] > 100_003 // 10 and values.size > 1000
    report = bench_lib.run_dists([16], 1)
    assert {(r["dist"], r["primitive"]) for r in report["rows"]} == {
        (d, p) for d in bench_lib.DISTS for p in bench_lib.DIST_ROWS}
    assert all(r["vyre_ms"] > 0 and r["cupy_ms"] > 0 for r in report["rows"])
    assert all(r["vyre_cupy_ms"] > 0 and r["vyre_numpy_ms"] > 0 for r in report["rows"])  # the caller's arrays


def test_bench_segmented_sort_rows_agree(backend):
    """The ``segmented_sort`` row of ``bench_lib.py`` at 2^16 (1,024-key segments): vyre on CuPy
    arrays, CuPy's lexsort of (segment, key) and torch's sort of composite keys give the same keys
    and values (the row times equal work), each segment ascending."""
    cupy = pytest.importorskip("cupy")
    from benchmarks import bench_lib

    impls = bench_lib.workloads(backend, 1 << 16)["segmented_sort"]
    keys, values = (cupy.asnumpy(a) for a in impls["vyre_cupy"]())
    for name in ("cupy", "torch"):
        if name not in impls:
            continue
        k, v = impls[name]()
        k, v = (a.cpu().numpy() if hasattr(a, "cpu") else cupy.asnumpy(a) for a in (k, v))
        E.assert_same((k & 0xFFFFFFFF).astype(np.uint32), keys)
        E.assert_same(v.view(np.uint32), values)
    rows = keys.reshape(-1, bench_lib.SEGMENT)
    assert (np.diff(rows.astype(np.int64), axis=1) >= 0).all()


def _on_host(result):
    """A bench call's result as numpy int64 (a tuple as a tuple): CuPy, numpy, torch or a scalar;
    int32 (torch's view of u32) read as u32."""
    if isinstance(result, tuple):
        return tuple(_on_host(r) for r in result)
    a = result.cpu().numpy() if hasattr(result, "cpu") else getattr(result, "get", lambda: result)()
    a = np.asarray(a)
    return (a.view(np.uint32) if a.dtype == np.int32 else a).astype(np.int64)


def test_bench_caller_columns_agree(backend):
    """Every row of ``bench_lib.py`` at 2^16: vyre on numpy arrays and on torch tensors (int32
    views) returns the caller's kind and the same values as vyre on CuPy arrays, so the columns
    time equal work."""
    cupy = pytest.importorskip("cupy")
    from benchmarks import bench_lib

    impls = bench_lib.workloads(backend, 1 << 16)
    for primitive in bench_lib.PRIMITIVES:
        want = _on_host(impls[primitive]["vyre_cupy"]())
        for caller in ("vyre_numpy", "vyre_torch"):
            if caller not in impls[primitive]:
                continue
            result = impls[primitive][caller]()
            first = result[0] if isinstance(result, tuple) else result
            if caller == "vyre_numpy":
                assert not isinstance(first, cupy.ndarray), f"{primitive}: numpy in gave a CuPy array"
            elif getattr(first, "ndim", 0):
                assert type(first).__module__.startswith("torch"), f"{primitive}: torch in gave {type(first)}"
            got = _on_host(result)
            pairs = zip(got, want, strict=True) if isinstance(want, tuple) else [(got, want)]
            for g, w in pairs:
                E.assert_same(g, w)


def test_bench_triton_column_agrees(backend):
    """``bench_lib.py``'s Triton column at 2^16: every Triton row gives vyre's values (on CuPy
    arrays) bit for bit, so it times equal work; at an odd size (2^16 + 3) the rows that need
    whole blocks (the histogram) are left out and the others are built and checked."""
    cupy = pytest.importorskip("cupy")
    pytest.importorskip("triton", reason="the Triton column needs Triton")
    from benchmarks import bench_lib

    impls = bench_lib.workloads(backend, 1 << 16)
    rows = [p for p in bench_lib.PRIMITIVES if "triton" in impls[p]]
    assert rows == ["reduce", "inclusive_scan", "exclusive_scan", "histogram", "transform_reduce"]
    for primitive in rows:
        got = cupy.asarray(impls[primitive]["triton"]()).view(cupy.uint32)
        want = _on_host(impls[primitive]["vyre_cupy"]())
        E.assert_same(cupy.asnumpy(got).reshape(np.shape(want)), np.asarray(want).astype(np.uint32))
    from benchmarks.triton_peers import peers

    torch = pytest.importorskip("torch")
    host = np.random.default_rng(5).integers(0, 2**31, 2**16 + 3).astype(np.uint32)
    x = cupy.asarray(host)
    small = x & 255
    odd = peers(*(torch.as_tensor(a.view(cupy.int32), device="cuda") for a in (x, small)), x, small)
    assert sorted(odd) == ["exclusive_scan", "inclusive_scan", "reduce", "transform_reduce"]  # checked in peers
    assert int(odd["reduce"]().item()) & 0xFFFFFFFF == int(host.sum(dtype=np.uint32))


def test_device_arrays_in_cupy_out(backend, rng):
    cupy = pytest.importorskip("cupy")
    x = E.data(rng, np.uint32, 100_003)
    dx = cupy.asarray(x)
    got = lib.inclusive_scan(dx, backend=backend)
    assert isinstance(got, cupy.ndarray)
    E.assert_same(cupy.asnumpy(got), np.cumsum(x, dtype=np.uint32))
    picked = lib.select(dx, cupy.asarray(x & 1), backend=backend)
    assert isinstance(picked, cupy.ndarray)
    E.assert_same(cupy.asnumpy(picked), x[(x & 1) != 0])
    keys, values = lib.sort(dx, dx, backend=backend)
    E.assert_same(cupy.asnumpy(keys), np.sort(x))
    assert int(lib.reduce(dx, "max", backend=backend)) == int(x.max())
    d2h = backend.metrics()["cuda_d2h_bytes"]
    lib.inclusive_scan(dx, backend=backend)
    assert backend.metrics()["cuda_d2h_bytes"] - d2h < 1024, "device in, device out: no result crossed to the host"


def test_torch_tensors_in(backend, rng):
    torch = pytest.importorskip("torch")
    cupy = pytest.importorskip("cupy")
    x = E.data(rng, np.int32, 50_001)
    t = torch.from_numpy(x).cuda()
    E.assert_same(cupy.asnumpy(lib.inclusive_scan(t, "max", backend=backend)), E.inclusive_scan(x, "max"))
    E.assert_same(cupy.asnumpy(lib.sort(t, backend=backend)), np.sort(x))


def test_one_graph_per_capacity_class(backend, rng):
    """Sizes within one capacity class replay the same captured graph."""
    lib.inclusive_scan(E.data(rng, np.uint32, 600_000), backend=backend)
    before = backend.metrics()
    for n in (600_001, 700_000, 1_000_000):
        x = E.data(rng, np.uint32, n)
        E.assert_same(lib.inclusive_scan(x, backend=backend), np.cumsum(x, dtype=np.uint32))
    after = backend.metrics()
    assert after["cuda_graph_captures"] == before["cuda_graph_captures"]
    assert after["cuda_graph_replays"] >= before["cuda_graph_replays"] + 3


def test_recycled_results_replay_the_graph(backend, rng):
    """ResidentArray results handed back with lib.recycle are reused: once warm (the compiled call
    captures its graph on the third sight of its handles), each call replays its graph."""
    x = E.data(rng, np.uint32, 300_000)
    handle = backend.allocate_resident(x.nbytes)
    backend.upload_resident(handle, x)
    rx = lib.ResidentArray(handle, np.uint32, x.size)
    first = lib.inclusive_scan(rx, backend=backend)
    lib.recycle(first, backend=backend)
    for _ in range(4):
        lib.recycle(lib.inclusive_scan(rx, backend=backend), backend=backend)
    before = backend.metrics()
    for _ in range(3):
        out = lib.inclusive_scan(rx, backend=backend)
        assert out.handle is first.handle
        got = backend.download_resident(out.handle, 0, x.nbytes).view(np.uint32)
        E.assert_same(got, np.cumsum(x, dtype=np.uint32))
        lib.recycle(out, backend=backend)
    assert backend.metrics()["cuda_graph_captures"] == before["cuda_graph_captures"]
    backend.free_resident(handle)


def test_resident_offsets_of_a_backend_that_is_not_the_default(backend, rng):
    """``segmented_reduce`` and a scan ``init=`` given as ``ResidentArray``s of the call's own backend
    (the array names no backend): the argument checks must not ask the default backend about the
    handle (they did, through ``__cuda_array_interface__``: "belongs to another backend instance")."""
    x = E.data(rng, np.uint32, 5000)
    offsets = np.array([0, 7, 7, 4000, 5000], np.uint32)

    def resident(a: np.ndarray) -> lib.ResidentArray:
        handle = backend.allocate_resident(a.nbytes)
        backend.upload_resident(handle, a)
        return lib.ResidentArray(handle, a.dtype, a.size)

    rx, ro, rinit = resident(x), resident(offsets), resident(np.array([9], np.uint32))
    out = lib.segmented_reduce(rx, ro, backend=backend)
    got = backend.download_resident(out.handle, 0, 4 * 4).view(np.uint32)
    E.assert_same(got, np.array([x[a:b].sum(dtype=np.uint32) for a, b in zip(offsets[:-1], offsets[1:])], np.uint32))
    scan = lib.inclusive_scan(rx, init=rinit, backend=backend)
    E.assert_same(backend.download_resident(scan.handle, 0, x.nbytes).view(np.uint32),
                  np.cumsum(x, dtype=np.uint32) + np.uint32(9))
    for handle in (rx.handle, ro.handle, rinit.handle, out.handle, scan.handle):
        backend.free_resident(handle)


@pytest.mark.parametrize("spin, width, n", [(lookback.SCAN_SPIN, lookback.SCAN_LOOKBACK_WIDTH, 2**20 + 3),
                                           (lookback.SCAN_SPIN, 1, 2**20 + 3),
                                           ((1, 0), lookback.SCAN_LOOKBACK_WIDTH,
                                            16 * WG * lookback.SCAN_LOOKBACK_ITEMS + 5)])
@pytest.mark.parametrize("wide", [True, False])
def test_single_pass_scan_on_the_device(backend, rng, monkeypatch, spin, width, n, wide):
    """The look-back scan with its 129 tiles in flight at once (so tiles meet aggregates,
    prefixes and unpublished totals) for every integer op, and with no wait at all (every
    tile folds the input below it): numpy's results, wide (the default for these grids) or
    walking back (``width`` tiles a trip)."""
    single_pass = functools.partial(lookback.scan_lookback.__wrapped__, spin=spin, width=width)
    monkeypatch.setattr(lookback, "scan_lookback", single_pass)
    monkeypatch.setattr(lookback, "WIDE_FROM", lookback.WIDE_FROM if wide else WG + 1)
    for dtype in (np.uint32, np.int32):
        x = E.data(rng, dtype, n)
        for op in ("add", "min", "max", "and", "or", "xor"):
            E.assert_same(lib.inclusive_scan(x, op, backend=backend), E.inclusive_scan(x, op))
            E.assert_same(lib.exclusive_scan(x, op, x[7], backend=backend), E.exclusive_scan(x, op, x[7]))


def test_smoke_2_28(backend):
    """2**28 u32 on the device: scan, reduce, select, histogram and sort give consistent answers."""
    cupy = pytest.importorskip("cupy")
    n = 1 << 28
    x = cupy.random.randint(0, 2**31, n, dtype=cupy.int64).astype(cupy.uint32)
    total = int(x.sum(dtype=cupy.uint64)) & 0xFFFFFFFF
    assert int(lib.reduce(x, backend=backend)) == total
    scanned = lib.inclusive_scan(x, backend=backend)
    assert int(scanned[-1]) == total and bool(cupy.all(scanned == cupy.cumsum(x, dtype=cupy.uint32)))
    del scanned
    mask = (x & 1).astype(cupy.uint32)
    picked = lib.select(x, mask, backend=backend)
    assert picked.size == int(mask.sum()) and bool(cupy.all(picked & 1))
    del picked, mask
    counts = lib.histogram(x & 1023, 1024, backend=backend)
    assert bool(cupy.all(counts == cupy.bincount((x & 1023).astype(cupy.int64), minlength=1024).astype(cupy.uint32)))
    ordered = lib.sort(x, backend=backend)
    assert bool(cupy.all(ordered[1:] >= ordered[:-1]))
    assert int(ordered.sum(dtype=cupy.uint64)) & 0xFFFFFFFF == total
    del ordered
    lib.release_scratch(backend)


SEGMENTED_TYPES = (np.uint32, np.int32, np.float32, np.uint64, np.int64, np.float64)


def _segment_ops(dtype) -> tuple[str, ...]:
    return ("add", "min", "max") if np.dtype(dtype).kind == "f" else ("add", "min", "max", "and", "or", "xor")


@pytest.mark.parametrize("dtype", SEGMENTED_TYPES)
@pytest.mark.parametrize("layout", list(E.segment_layouts(5 * E.SEGMENT_LONG + 1234)))
def test_segmented_reduce_long_segments_match_the_oracle(backend, oracle, rng, dtype, layout):
    """Segments split into tiles over many workgroups (heads, tails, tile edges), next to tiny and
    empty ones: every op, bit for bit against the oracle and exactly against the model."""
    n = 5 * E.SEGMENT_LONG + 1234
    x = E.data(rng, dtype, n, finite=True)
    offsets = E.segment_layouts(n)[layout].astype(np.uint32)
    for op in _segment_ops(dtype):
        got = lib.segmented_reduce(x, offsets, op, backend=backend)
        E.assert_same_bits(got, lib.segmented_reduce(x, offsets, op, backend=oracle))
        if not (op == "add" and dtype == np.float32):
            E.assert_same_bits(got, E.segmented_reduce(x, offsets, op))


def test_segmented_reduce_device_offsets_out_of_order_repeated(backend, rng):
    """Device offsets in order, out of order (tiles the holder search misses) and overlapping,
    each layout twice in a row (the per-segment tile counts are zeroed between calls): every
    segment's sum and max exact against the clamped model."""
    cupy = pytest.importorskip("cupy")
    from vyre.lib._scan.segmented import LONG

    n = 5 * LONG + 1234
    x = E.data(rng, np.uint32, n)
    dx = cupy.asarray(x)
    layouts = [np.array([0, 3 * LONG + 7, n], np.uint32), np.array([0, 2 * LONG + 5, 0, 1, LONG, n], np.uint32),
               np.array([100, 100 + 2 * LONG, 50, n, LONG], np.uint32), np.array([0, n], np.uint32)]
    for raw in layouts:
        spans = [(min(int(raw[s]), n), min(max(int(raw[s + 1]), min(int(raw[s]), n)), n)) for s in range(raw.size - 1)]
        for _ in range(2):
            sums = cupy.asnumpy(lib.segmented_reduce(dx, cupy.asarray(raw), backend=backend))
            E.assert_same(sums, np.array([x[b:e].sum(dtype=np.uint32) for b, e in spans], np.uint32))
            top = cupy.asnumpy(lib.segmented_reduce(dx, cupy.asarray(raw), "max", backend=backend))
            E.assert_same(top, np.array([x[b:e].max() if e > b else 0 for b, e in spans], np.uint32))


def _sums_u32(x: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Each segment's u32 sum (wrapping), from a 64-bit prefix sum: fast for millions of segments."""
    prefix = np.concatenate([np.zeros(1, np.uint64), np.cumsum(x, dtype=np.uint64)])
    return (prefix[offsets[1:]] - prefix[offsets[:-1]]).astype(np.uint32)


@pytest.mark.parametrize("length", [0, 1, 3, 32, 1000, 2**15, 2**15 + 1, 2**20, N])
def test_segmented_reduce_2_24_uniform_and_skewed(backend, rng, length):
    """2**24 u32 elements in segments of one length (the rest in the last segment), then the same
    with every other segment empty, and one segment of everything after a million empty ones."""
    x = E.data(rng, np.uint32, N)
    cuts = np.arange(0, N, length) if length else np.zeros(1 << 16, np.int64)
    offsets = np.concatenate([cuts, [N]]).astype(np.uint32)
    E.assert_same(lib.segmented_reduce(x, offsets, backend=backend), _sums_u32(x, offsets))
    doubled = np.repeat(offsets, 2)[1:]
    E.assert_same(lib.segmented_reduce(x, doubled, "xor", backend=backend), _xor_by_prefix(x, doubled))
    late = np.concatenate([np.zeros(1 << 20, np.uint32), [N]]).astype(np.uint32)
    got = lib.segmented_reduce(x, late, "max", backend=backend)
    assert not got[:-1].any() and got[-1] == x.max()


def _xor_by_prefix(x: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Each segment's XOR, from a prefix XOR."""
    prefix = np.concatenate([np.zeros(1, np.uint32), np.bitwise_xor.accumulate(x)])
    return prefix[offsets[1:]] ^ prefix[offsets[:-1]]


def test_segmented_reduce_2_28_one_segment_and_many(backend, rng):
    """2**28 u32 elements: one segment (all of it split into tiles) and 2**18 of 1024 (the
    benchmark's shape), against numpy."""
    cupy = pytest.importorskip("cupy")
    n = 1 << 28
    dx = cupy.random.default_rng(int(rng.integers(2**31))).integers(0, 2**32, n, dtype=cupy.int64).astype(cupy.uint32)
    one = lib.segmented_reduce(dx, cupy.asarray(np.array([0, n], np.uint32)), backend=backend)
    assert int(one[0]) == int(dx.sum(dtype=cupy.uint32))
    offsets = cupy.arange(0, n + 1, 1024, dtype=cupy.uint32)
    got = lib.segmented_reduce(dx, offsets, "min", backend=backend)
    assert bool(cupy.array_equal(got, dx.reshape(-1, 1024).min(axis=1)))


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.float32])
@pytest.mark.parametrize(("n", "segments"), [(1000, 3), ((1 << 20) + 5, 4099), ((1 << 22) + 1, 2)])
def test_segmented_sort_on_numpy_cupy_and_resident_arrays(backend, oracle, rng, dtype, n, segments):
    """Equal to each segment's stable order from numpy, CuPy (CuPy out, on the current stream) and
    ``ResidentArray`` input; at 1000 keys equal to the oracle's run of the same programs."""
    cupy = pytest.importorskip("cupy")
    keys, offsets, values, order = E.segmented_sort_case(rng, dtype, n, segments)
    got_k, got_v = lib.segmented_sort(keys, offsets, values, backend=backend)
    E.assert_same_bits(got_k, keys[order])
    E.assert_same(got_v, values[order])
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        dk, dv = lib.segmented_sort(cupy.asarray(keys), cupy.asarray(offsets), cupy.asarray(values), backend=backend)
        assert isinstance(dk, cupy.ndarray) and isinstance(dv, cupy.ndarray)
        host_k, host_v = cupy.asnumpy(dk, stream=stream), cupy.asnumpy(dv, stream=stream)
    E.assert_same_bits(host_k, keys[order])
    E.assert_same(host_v, values[order])
    handles = [backend.allocate_resident(a.nbytes) for a in (keys, offsets)]
    try:
        for h, a in zip(handles, (keys, offsets)):
            backend.upload_resident(h, a)
        out = lib.segmented_sort(lib.ResidentArray(handles[0], dtype, n, backend),
                                 lib.ResidentArray(handles[1], np.uint32, offsets.size, backend), backend=backend)
        E.assert_same_bits(backend.download_resident(out.handle, 0, 4 * n).view(dtype), keys[order])
        lib.recycle(out, backend=backend)
    finally:
        for h in handles:
            backend.free_resident(h)
    if n <= 1000:
        E.assert_same_bits(lib.segmented_sort(keys, offsets, backend=oracle), keys[order])
