"""Resident sequences, repeats and fixed points, with CUDA graphs on and off.

The reference backend (resident buffers emulated on the host) runs the same steps and is the
judge; graphs on and off must agree bit for bit, and the graph metrics show what was captured.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from conftest import random_array

from tests.graph_oracle import components
from vyre.driver.config import DispatchConfig
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.reference import ReferenceBackend

pytestmark = pytest.mark.gpu

U32 = DataType.U32
u = Expr.u32
N = 3000
i, v = Expr.var("i"), Expr.var("v")


# ---- programs over resident buffers: x, y (runtime-sized u32) and o (output) -------------------------
@functools.cache
def step_a(k: int) -> Program:
    """``x = x * (2k + 3) + y``."""
    return Program([BufferDecl.read_write("x", 0, U32), BufferDecl.read("y", 1, U32)], (128, 1, 1),
                   [Node.let("i", Expr.invocation_id(0)),
                    Node.store("x", i, Expr.add(Expr.mul(Expr.load("x", i), Expr.u32(2 * k + 3)), Expr.load("y", i)))],
                   name=f"a{k}")


@functools.cache
def step_b() -> Program:
    """``y = y ^ (x >> 7) ^ i``."""
    return Program([BufferDecl.read("x", 0, U32), BufferDecl.read_write("y", 1, U32)], (64, 1, 1),
                   [Node.let("i", Expr.invocation_id(0)),
                    Node.let("v", Expr.bitxor(Expr.load("y", i), Expr.shr(Expr.load("x", i), Expr.u32(7)))),
                    Node.store("y", i, Expr.bitxor(v, i))],
                   name="b")


@functools.cache
def step_c() -> Program:
    """``o = x + y`` into an output buffer (zeroed before each dispatch), first 1000 words."""
    return Program([BufferDecl.read("x", 0, U32), BufferDecl.read("y", 1, U32), BufferDecl.output("o", 2, U32, 1000)],
                   (256, 1, 1),
                   [Node.let("i", Expr.invocation_id(0)),
                    Node.if_(Expr.eq(Expr.rem(i, Expr.u32(3)), Expr.u32(0)),
                             Node.store("o", i, Expr.add(Expr.load("x", i), Expr.load("y", i))))],
                   name="c")


class Buffers:
    """The same resident buffers on the CUDA backend and on the reference backend."""

    def __init__(self, backend, rng, data: list[np.ndarray] | None = None) -> None:
        self.backend, self.ref = backend, ReferenceBackend()
        data = data or [random_array(rng, U32, N), random_array(rng, U32, N), random_array(rng, U32, 1000)]
        self.cuda = [self._alloc(backend, d) for d in data]
        self.host = [self._alloc(self.ref, d) for d in data]

    @staticmethod
    def _alloc(be, data: np.ndarray):
        h = be.allocate_resident(data.nbytes)
        be.upload_resident(h, data)
        return h

    def steps(self, handles, count: int) -> list[tuple]:
        x, y, o = handles
        kinds = [lambda k: (step_a(k % 5), [x, y], None), lambda k: (step_b(), [x, y]),
                 lambda k: (step_c(), [x, y, o], None),
                 lambda k: (step_a(7), [x, y], DispatchConfig(grid=(3, 1, 1)))]
        return [kinds[k % len(kinds)](k) for k in range(count)]

    def reads(self, handles) -> list[tuple]:
        x, y, o = handles
        return [(x, 0, x.nbytes), (y, 4, 400), (o, 0, o.nbytes)]

    def free(self) -> None:
        for h in self.cuda:
            self.backend.free_resident(h)


def _equal(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == np.uint8 and np.array_equal(x, y)


@pytest.mark.parametrize("count", [1, 2, 64])
def test_sequences_graphs_on_and_off_match_the_oracle(backend, rng, monkeypatch, count) -> None:
    data = [random_array(rng, U32, N), random_array(rng, U32, N), random_array(rng, U32, 1000)]
    results = {}
    for mode in ("1", "0"):
        monkeypatch.setenv("VYRE_CUDA_GRAPHS", mode)
        bufs = Buffers(backend, rng, data)
        before = backend.metrics()
        for run in range(3):  # the first run captures, the next two replay
            if run == 1:
                syncs = backend.metrics()["cuda_sync_points"]
            out = backend.dispatch_sequence(bufs.steps(bufs.cuda, count), bufs.reads(bufs.cuda))
            expected = bufs.ref.dispatch_sequence(bufs.steps(bufs.host, count), bufs.reads(bufs.host))
            _equal(expected, out)
        after = backend.metrics()
        captures = after["cuda_graph_captures"] - before["cuda_graph_captures"]
        replays = after["cuda_graph_replays"] - before["cuda_graph_replays"]
        assert (captures, replays) == ((1, 3) if mode == "1" else (0, 0))
        assert after["cuda_sync_points"] - syncs == 2  # one per sequence
        results[mode] = out
        bufs.free()
    _equal(results["1"], results["0"])


@pytest.mark.parametrize("count", [0, 1, 37, 300])
def test_dispatch_repeated(backend, rng, monkeypatch, count) -> None:
    for mode in ("1", "0"):
        monkeypatch.setenv("VYRE_CUDA_GRAPHS", mode)
        bufs = Buffers(backend, rng)
        prefix = bufs.steps(bufs.cuda, 3)
        body = bufs.steps(bufs.cuda, 4)[1:]
        out = backend.dispatch_repeated(prefix, body, count, bufs.reads(bufs.cuda))
        expected = bufs.ref.dispatch_repeated(bufs.steps(bufs.host, 3), bufs.steps(bufs.host, 4)[1:], count,
                                              bufs.reads(bufs.host))
        _equal(expected, out)
        bufs.free()


# ---- fixed point: connected components by min-label propagation -----------------------------------------
def relax() -> Program:
    """``new[u] = min(old[u], old[w] for neighbours w)``; set the flag when it changed."""
    u, m, e = Expr.var("u"), Expr.var("m"), Expr.var("e")
    return Program(
        [BufferDecl.read("row", 0, U32), BufferDecl.read("col", 1, U32), BufferDecl.read("old", 2, U32),
         BufferDecl.read_write("new", 3, U32), BufferDecl.read_write("flag", 4, U32)],
        (128, 1, 1),
        [Node.let("u", Expr.invocation_id(0)),
         Node.if_(Expr.lt(u, Expr.buf_len("old")), [
             Node.let("m", Expr.load("old", u)),
             Node.loop("e", Expr.load("row", u), Expr.load("row", Expr.add(u, Expr.u32(1))), [
                 Node.assign("m", Expr.min(m, Expr.load("old", Expr.load("col", e))))]),
             Node.store("new", u, m),
             Node.if_(Expr.ne(m, Expr.load("old", u)), Node.store("flag", Expr.u32(0), Expr.u32(1)))])],
        name="relax")


def copy_back() -> Program:
    """``old = new``."""
    u = Expr.var("u")
    return Program([BufferDecl.read("new", 0, U32), BufferDecl.read_write("old", 1, U32)], (128, 1, 1),
                   [Node.let("u", Expr.invocation_id(0)), Node.store("old", u, Expr.load("new", u))],
                   name="copy_back")


def random_graph(rng: np.random.Generator, n: int, edges: int) -> tuple[np.ndarray, np.ndarray]:
    """An undirected random graph in CSR form (row offsets, column indices)."""
    src = rng.integers(0, n, edges)
    dst = rng.integers(0, n, edges)
    a, b = np.concatenate([src, dst]), np.concatenate([dst, src])
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    row = np.zeros(n + 1, np.uint32)
    np.add.at(row, a + 1, 1)
    return np.cumsum(row).astype(np.uint32), b.astype(np.uint32)


@pytest.mark.parametrize("graphs", ["1", "0"])
def test_dispatch_until_reaches_the_fixed_point(backend, rng, monkeypatch, graphs) -> None:
    monkeypatch.setenv("VYRE_CUDA_GRAPHS", graphs)
    n = 5000
    row, col = random_graph(rng, n, 2600)  # sparse: many components, long chains
    labels = rng.permutation(n).astype(np.uint32) * np.uint32(7) + np.uint32(11)
    results = []
    for be in (backend, ReferenceBackend()):
        hs = [be.allocate_resident(a.nbytes) for a in (row, col, labels, labels, np.zeros(1, np.uint32))]
        for h, a in zip(hs, (row, col, labels, labels, np.full(1, 5, np.uint32))):
            be.upload_resident(h, a)
        r, c, old, new, flag = hs
        steps = [(relax(), [r, c, old, new, flag]), (copy_back(), [new, old])]
        iterations = be.dispatch_until(steps, flag, 1000)
        results.append((iterations, be.download_resident(old).view(np.uint32)))
        assert be.dispatch_until(steps, flag, 1000) == 1  # already converged: one iteration says so
        assert be.dispatch_until(steps, flag, 0) == 0
        if be is backend:
            for h in hs:
                be.free_resident(h)
    (it_gpu, got), (it_ref, expected) = results
    assert it_gpu == it_ref > 3
    assert np.array_equal(got, expected)
    assert np.array_equal(got, components(row, col, labels))


def test_dispatch_until_stops_at_max_iterations(backend) -> None:
    n = 4000  # a path 0-1-...-(n-1) labelled n..1: the minimum moves one hop per iteration
    row = np.concatenate([[0], np.cumsum([1] + [2] * (n - 2) + [1])]).astype(np.uint32)
    col = np.array([w for u in range(n) for w in (u - 1, u + 1) if 0 <= w < n], np.uint32)
    labels = np.arange(n, 0, -1, dtype=np.uint32)
    hs = []
    for a in (row, col, labels, labels, np.zeros(1, np.uint32)):
        h = backend.allocate_resident(a.nbytes)
        backend.upload_resident(h, a)
        hs.append(h)
    r, c, old, new, flag = hs
    steps = [(relax(), [r, c, old, new, flag]), (copy_back(), [new, old])]
    assert backend.dispatch_until(steps, flag, 100) == 100
    got = backend.download_resident(old).view(np.uint32)
    hops = np.minimum(np.arange(n) + 100, n - 1)
    assert np.array_equal(got, labels[hops])  # exactly 100 iterations ran, no more
    for h in hs:
        backend.free_resident(h)


# ---- capture hygiene -------------------------------------------------------------------------------------
def test_a_buffer_used_by_a_live_graph_is_not_reused(backend, rng, monkeypatch) -> None:
    from vyre_cuda.testing import sequence

    monkeypatch.setenv("VYRE_CUDA_GRAPHS", "1")
    nbytes = 3 << 20  # a capacity class (4 MiB) no other test uses
    x, y = backend.allocate_resident(nbytes), backend.allocate_resident(nbytes)
    backend.upload_resident(x, random_array(rng, U32, nbytes // 4))
    backend.upload_resident(y, random_array(rng, U32, nbytes // 4))
    before = backend.metrics()["cuda_graph_captures"]
    backend.dispatch_sequence([(step_a(1), [x, y]), (step_b(), [x, y])])
    assert backend.metrics()["cuda_graph_captures"] == before + 1
    ptr = backend.resident.resolve(x).ptr
    backend.free_resident(x)
    z = backend.allocate_resident(nbytes)
    assert backend.resident.resolve(z).ptr != ptr  # still pinned by the live graph
    sequence.release(backend)  # drop the graphs (and bindings): the block goes back to the heap
    w = backend.allocate_resident(nbytes)
    assert backend.resident.resolve(w).ptr == ptr
    for h in (y, z, w):
        backend.free_resident(h)


def test_capture_failure_leaves_the_backend_usable(backend, rng, monkeypatch) -> None:
    import cupy

    from vyre_cuda.testing import ResidentBinding

    monkeypatch.setenv("VYRE_CUDA_GRAPHS", "1")
    original = ResidentBinding.enqueue

    def sync_inside_capture(self, stream_ptr: int | None = None, capturing: bool = False, *args: bool) -> bool:
        if capturing:  # illegal while capturing: invalidates it
            cupy.cuda.runtime.streamSynchronize(stream_ptr)
        return original(self, stream_ptr, capturing, *args)

    def broken(self, stream_ptr: int | None = None, capturing: bool = False, *args: bool) -> bool:
        if capturing:
            raise RuntimeError("injected failure")
        return original(self, stream_ptr, capturing, *args)

    for patch, raises in ((sync_inside_capture, None), (broken, RuntimeError)):
        bufs = Buffers(backend, rng)
        steps = bufs.steps(bufs.cuda, 5)
        before = backend.metrics()
        with monkeypatch.context() as m:
            m.setattr(ResidentBinding, "enqueue", patch)
            if raises is None:  # the capture fails, the same work runs eagerly once and is correct
                out = backend.dispatch_sequence(steps, bufs.reads(bufs.cuda))
                _equal(bufs.ref.dispatch_sequence(bufs.steps(bufs.host, 5), bufs.reads(bufs.host)), out)
                failures = backend.metrics()["cuda_graph_capture_failures"]
                assert failures == before.get("cuda_graph_capture_failures", 0) + 1
            else:  # a genuine error surfaces and nothing is cached
                with pytest.raises(raises):
                    backend.dispatch_sequence(steps, bufs.reads(bufs.cuda))
        assert not backend.stream.is_capturing()
        assert backend.metrics()["cuda_graph_captures"] == before["cuda_graph_captures"]
        # the backend still works: a fresh sequence on the same buffers captures and matches the oracle
        bufs2 = Buffers(backend, rng)
        out = backend.dispatch_sequence(bufs2.steps(bufs2.cuda, 3), bufs2.reads(bufs2.cuda))
        _equal(bufs2.ref.dispatch_sequence(bufs2.steps(bufs2.host, 3), bufs2.reads(bufs2.host)), out)
        assert backend.metrics()["cuda_graph_captures"] == before["cuda_graph_captures"] + 1
        bufs.free()
        bufs2.free()


def test_compiled_sequence_replays_one_graph(backend, rng, monkeypatch) -> None:
    from vyre_cuda.testing import compile_sequence

    monkeypatch.setenv("VYRE_CUDA_GRAPHS", "1")
    bufs = Buffers(backend, rng)
    seq = compile_sequence(backend, bufs.steps(bufs.cuda, 64))
    before = backend.metrics()
    for _ in range(10):
        seq.launch()
    out = seq.run(bufs.reads(bufs.cuda))
    after = backend.metrics()
    assert after["cuda_graph_captures"] - before["cuda_graph_captures"] == 1
    assert after["cuda_graph_replays"] - before["cuda_graph_replays"] == 11
    for _ in range(11):
        expected = bufs.ref.dispatch_sequence(bufs.steps(bufs.host, 64), bufs.reads(bufs.host))
    _equal(expected, out)
    seq.close()
    bufs.free()


@functools.cache
def step_gather(n: int) -> Program:
    """``y[i] = y[i] + x[(i * 7919 + 13) % n]``: reads words other workgroups wrote in the previous step."""
    j = Expr.rem(Expr.add(Expr.mul(i, Expr.u32(7919)), Expr.u32(13)), Expr.u32(n))
    return Program([BufferDecl.read("x", 0, U32), BufferDecl.read_write("y", 1, U32)], (256, 1, 1),
                   [Node.let("i", Expr.invocation_id(0)),
                    Node.store("y", i, Expr.add(Expr.load("y", i), Expr.load("x", j)))],
                   name=f"gather{n}")


@pytest.mark.parametrize("pdl", ["1", "0"])
@pytest.mark.parametrize("n", [3000, 1 << 21])
def test_dependent_steps_overlapped_in_a_graph_match_the_oracle(backend, rng, monkeypatch, pdl, n) -> None:
    """Each step reads what the previous one wrote (own and other words); with programmatic launches
    (``VYRE_CUDA_PDL=1``, sm_90+) a kernel that touched a buffer before its predecessor finished
    would differ from the oracle. 2**21 words makes the kernels long and coarsened."""
    monkeypatch.setenv("VYRE_CUDA_GRAPHS", "1")
    monkeypatch.setenv("VYRE_CUDA_PDL", pdl)
    data = [random_array(rng, U32, n), random_array(rng, U32, n), random_array(rng, U32, 1000)]
    bufs = Buffers(backend, rng, data)
    try:
        def steps(handles) -> list[tuple]:
            x, y, _ = handles
            kinds = [(step_a(1), [x, y]), (step_gather(n), [x, y]), (step_a(2), [x, y]), (step_b(), [x, y])]
            return [kinds[k % 4] for k in range(12)]
        before = backend.metrics()["cuda_graph_captures"]
        for _ in range(2):  # capture, then replay
            out = backend.dispatch_sequence(steps(bufs.cuda), bufs.reads(bufs.cuda))
            expected = bufs.ref.dispatch_sequence(steps(bufs.host), bufs.reads(bufs.host))
            _equal(expected, out)
        assert backend.metrics()["cuda_graph_captures"] - before == 1
    finally:
        bufs.free()


@functools.cache
def step_set_words(k: int) -> Program:
    """``w[j] = w[j] * 3 + k + j`` for the four words of ``w`` (one long workgroup per word)."""
    j = Expr.workgroup_id(0)
    spin = [Node.assign("v", Expr.add(Expr.mul(Expr.var("v"), u(3)), Expr.var("t")))]
    return Program([BufferDecl.read_write("w", 0, U32)], (32, 1, 1),
                   [Node.let("v", Expr.load("w", j)), Node.loop("t", u(0), u(20000), spin),
                    Node.if_(Expr.eq(Expr.local_id(0), u(0)),
                             Node.store("w", j, Expr.add(Expr.add(Expr.var("v"), u(k)), j)))],
                   name=f"set_words{k}")


@functools.cache
def step_use_words(n: int) -> Program:
    """``y[i] = y[i] + w[0] * w[3] + w[1]``: ``w`` bound as a uniform buffer, read at literal indices."""
    i, w = Expr.var("i"), [Expr.load("w", u(j)) for j in range(4)]
    return Program([BufferDecl.uniform("w", 0, U32, 4), BufferDecl.read_write("y", 1, U32)], (256, 1, 1),
                   [Node.let("i", Expr.invocation_id(0)),
                    Node.if_(Expr.lt(i, u(n)), Node.store("y", i, Expr.add(Expr.load("y", i),
                                                                            Expr.add(Expr.mul(w[0], w[3]), w[1]))))],
                   name=f"use_words{n}")


@pytest.mark.parametrize("pdl", ["1", "0"])
def test_uniform_words_written_by_the_step_before_are_read_after_it(backend, rng, monkeypatch, pdl) -> None:
    """Codegen 5 loads a uniform buffer's literal-index words once before the body, after the
    grid dependency wait: the next step must still see what a slow previous step wrote there."""
    monkeypatch.setenv("VYRE_CUDA_GRAPHS", "1")
    monkeypatch.setenv("VYRE_CUDA_PDL", pdl)
    n = 1 << 20
    data = [random_array(rng, U32, 4), random_array(rng, U32, n), random_array(rng, U32, 4)]
    bufs = Buffers(backend, rng, data)
    try:
        def steps(handles) -> list[tuple]:
            w, y, _ = handles
            return [(step_set_words(k), [w], DispatchConfig(grid=(4, 1, 1))) if k % 2 == 0
                    else (step_use_words(n), [w, y]) for k in range(8)]

        reads = lambda handles: [(handles[0], 0, 16), (handles[1], 0, 4 * n)]  # noqa: E731
        for _ in range(2):  # capture, then replay
            out = backend.dispatch_sequence(steps(bufs.cuda), reads(bufs.cuda))
            expected = bufs.ref.dispatch_sequence(steps(bufs.host), reads(bufs.host))
            _equal(expected, out)
    finally:
        bufs.free()
