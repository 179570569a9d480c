"""Large host transfers through the pinned chunk ring: exact at every size around the chunk and
pipelining thresholds, in dispatch (inputs and outputs), pipelines, dispatch_async and resident
uploads/downloads, with the byte counters unchanged in meaning. The oracle or numpy judges."""

from __future__ import annotations

import numpy as np
import pytest

from vyre import DispatchConfig
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.reference import run
from vyre_cuda.testing import CHUNK, PIPELINE_MIN, RING

pytestmark = pytest.mark.gpu

U32 = DataType.U32
gid = Expr.invocation_id(0)
BYTE_SIZES = [1, 4095, PIPELINE_MIN - 1, PIPELINE_MIN, PIPELINE_MIN + 1, CHUNK - 1, CHUNK, CHUNK + 1,
              RING * CHUNK - 3, RING * CHUNK + 5, 2 * RING * CHUNK + 7]
WORD_COUNTS = sorted({max(1, b // 4) for b in BYTE_SIZES} | {PIPELINE_MIN // 4 - 1, PIPELINE_MIN // 4,
                                                             CHUNK // 4 + 1, RING * CHUNK // 4 + 3})


def mix_program(n: int) -> Program:
    """A large read, a read_write and an output of ``n`` elements: ``o = a * 3 + x; x ^= a``."""
    i = Expr.var("i")
    return Program([BufferDecl.read("a", 0, U32), BufferDecl.read_write("x", 1, U32),
                    BufferDecl.output("o", 2, U32, n)], (256, 1, 1),
                   [Node.let("i", gid),
                    Node.if_(Expr.lt(i, Expr.buf_len("a")), [
                        Node.store("o", i, Expr.add(Expr.mul(Expr.load("a", i), Expr.u32(3)), Expr.load("x", i))),
                        Node.store("x", i, Expr.bitxor(Expr.load("x", i), Expr.load("a", i)))])],
                   name=f"mix{n}")


def mix_expected(a: np.ndarray, x: np.ndarray) -> list[np.ndarray]:
    """What ``mix_program`` gives (checked against the oracle below), for sizes the oracle is slow at."""
    return [x ^ a, a * np.uint32(3) + x]


def test_mix_expected_is_the_oracle(rng) -> None:
    a, x = rng.integers(0, 2**32, 5000, dtype=np.uint32), rng.integers(0, 2**32, 5000, dtype=np.uint32)
    want = run(mix_program(a.size), [a, x])
    assert all(np.array_equal(e, w) for e, w in zip(mix_expected(a, x), want))


def host(rng: np.random.Generator, nbytes: int) -> np.ndarray:
    return rng.integers(0, 256, nbytes, dtype=np.uint8)


@pytest.mark.parametrize("nbytes", BYTE_SIZES)
def test_resident_upload_and_download_are_exact_at_every_size(backend, rng, nbytes: int) -> None:
    data = host(rng, nbytes)
    handle = backend.allocate_resident(nbytes + 3)
    try:
        before = backend.metrics()
        backend.upload_resident(handle, data, 3)  # an odd offset
        got = backend.download_resident(handle, 3, nbytes)
        after = backend.metrics()
        assert np.array_equal(got, data)
        assert after["cuda_h2d_bytes"] - before["cuda_h2d_bytes"] == nbytes
        assert after["cuda_d2h_bytes"] - before["cuda_d2h_bytes"] == nbytes
        out = np.empty(nbytes // 2, np.uint8)
        backend.residents.download_into(handle, out, 3 + nbytes - out.size)
        assert np.array_equal(out, data[nbytes - out.size:])
    finally:
        backend.free_resident(handle)


@pytest.mark.parametrize("n", WORD_COUNTS)
def test_dispatch_with_large_inputs_and_outputs_equals_the_oracle(backend, rng, n: int) -> None:
    program = mix_program(n)
    a = rng.integers(0, 2**32, n, dtype=np.uint32)
    x = rng.integers(0, 2**32, n, dtype=np.uint32)
    config = DispatchConfig(elements=n)
    before = backend.metrics()
    got = backend.dispatch(program, [a, x], config)
    after = backend.metrics()
    want = mix_expected(a, x)
    for g, w in zip(got, want):
        assert g.dtype == np.uint32 and np.array_equal(g, w)
    assert after["cuda_h2d_bytes"] - before["cuda_h2d_bytes"] >= 2 * 4 * n  # every input byte, counted once
    assert after["cuda_d2h_bytes"] - before["cuda_d2h_bytes"] == 2 * 4 * n
    assert after["cuda_transient_bytes_in_use"] == before["cuda_transient_bytes_in_use"]  # large outputs given back


def test_back_to_back_large_dispatches_do_not_share_chunks(backend, rng) -> None:
    """The ring is reused by every call: each result must still be its own inputs'."""
    n = (RING * CHUNK) // 4 + 777
    program = mix_program(n)
    cases = [(rng.integers(0, 2**32, n, dtype=np.uint32), rng.integers(0, 2**32, n, dtype=np.uint32))
             for _ in range(4)]
    results = [backend.dispatch(program, [a, x], DispatchConfig(elements=n)) for a, x in cases]
    for (a, x), got in zip(cases, results):
        assert all(np.array_equal(g, w) for g, w in zip(got, mix_expected(a, x)))


def test_dispatch_async_and_timed_with_large_arrays(backend, rng) -> None:
    n = CHUNK // 4 * 2 + 5
    program = mix_program(n)
    a, x = rng.integers(0, 2**32, n, dtype=np.uint32), rng.integers(0, 2**32, n, dtype=np.uint32)
    want = mix_expected(a, x)
    config = DispatchConfig(elements=n)
    pending = backend.dispatch_async(program, [a, x], config)
    timed = backend.dispatch_timed(program, [a, x], config)
    for got in (pending.result(), timed.outputs):
        assert all(np.array_equal(g, w) for g, w in zip(got, want))


def test_pipeline_with_large_inputs(backend, rng) -> None:
    n = RING * CHUNK // 4 + 11
    program = mix_program(n)
    with backend.compile(program, DispatchConfig(elements=n)) as pipe:
        for _ in range(2):
            a, x = rng.integers(0, 2**32, n, dtype=np.uint32), rng.integers(0, 2**32, n, dtype=np.uint32)
            got = pipe.dispatch([a, x])
            assert all(np.array_equal(g, w) for g, w in zip(got, mix_expected(a, x)))


def test_device_arrays_to_and_from_the_host_through_the_ring(backend, rng) -> None:
    import cupy

    for n in (0, 3, PIPELINE_MIN + 1, RING * CHUNK // 4 + 9):
        data = rng.integers(0, 2**32, n, dtype=np.uint32)
        arr = backend.residents.to_device(data)
        assert isinstance(arr, cupy.ndarray) and arr.device.id == backend.device_id and arr.dtype == np.uint32
        assert np.array_equal(arr.get(), data)
        out = np.empty_like(data)
        backend.residents.to_host(arr * np.uint32(5), out)
        assert np.array_equal(out, data * np.uint32(5))


def test_dask_keeps_cupy_blocks_on_the_gpu(rng) -> None:
    da = pytest.importorskip("dask.array")
    import cupy

    import vyre.dask as vdask

    a, b = rng.integers(0, 2**32, 1 << 18, dtype=np.uint32), rng.integers(0, 2**32, 1 << 18, dtype=np.uint32)
    x = da.from_array(cupy.asarray(a), chunks=1 << 15)
    y = da.from_array(cupy.asarray(b), chunks=1 << 15)
    program = Program([BufferDecl.read_write("a", 0, U32), BufferDecl.read("b", 1, U32)], (256, 1, 1),
                      [Node.store("a", gid, Expr.bitxor(Expr.load("a", gid), Expr.load("b", gid)))], name="xor")
    out = vdask.map_blocks(program, x, y)
    assert isinstance(out._meta, cupy.ndarray)  # noqa: SLF001 - the kind of the result's blocks
    got = out.compute(scheduler="threads")
    assert isinstance(got, cupy.ndarray) and np.array_equal(got.get(), a ^ b)
    assert np.array_equal(x.compute(scheduler="threads").get(), a)  # the read_write input's blocks are not written
    small = da.from_array(cupy.asarray(a & np.uint32(1023)), chunks=1 << 15)
    counts = vdask.histogram(small, 1024).compute(scheduler="threads")
    assert np.array_equal(cupy.asnumpy(counts), np.bincount(a & 1023, minlength=1024))
    total = vdask.reduce(x, "add").compute(scheduler="threads")
    assert int(total) == int(np.add.reduce(a, dtype=np.uint32))
    scan = vdask.inclusive_scan(x, "add").compute(scheduler="threads")
    assert np.array_equal(cupy.asnumpy(scan), np.cumsum(a, dtype=np.uint32))
