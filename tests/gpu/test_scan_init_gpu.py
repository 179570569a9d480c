"""The scans' ``init=`` as a 1-element device array on ``cuda`` (CuPy and torch): every op and type
against numpy (integers) and against the same scan with the value given on the host (the same
bits, floats too), in every size class; a 0-d ``lib.reduce`` result as the carry; the init written
on a non-blocking stream just before the call; a wrong type or length refused."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lib import expected as E
from vyre import lib
from vyre.driver.errors import InvalidProgram

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

SIZES = [1, 33, 4097, (1 << 16) + 3, (1 << 20) + 1]  # one workgroup, look-back / segments, many tiles
TYPES = [np.uint32, np.int32, np.float32, np.uint64, np.int64, np.float64]
SCANS = [lib.inclusive_scan, lib.exclusive_scan]


def ops(dtype: type) -> list[str]:
    return ["add", "min", "max", "and", "or", "xor"] if np.dtype(dtype).kind in "iu" else ["add", "min", "max"]


def want_of(scan, x: np.ndarray, op: str, init: np.ndarray) -> np.ndarray:
    """numpy's scan of ``init`` followed by ``x`` (integers)."""
    joined = E.inclusive_scan(np.concatenate([init, x]), op)
    return joined[1:] if scan is lib.inclusive_scan else joined[:-1]


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("n", SIZES)
def test_cupy_init_equals_the_host_init(backend, rng, dtype: type, n: int) -> None:
    """Two init arrays in turn (the second call replays the compiled call with the new array)."""
    for op in ops(dtype):
        x = E.data(rng, dtype, n, finite=True)
        dx = cupy.asarray(x)
        for scan in SCANS:
            for _ in range(2):
                init = E.data(rng, dtype, 1, finite=True)
                got = scan(dx, op, init=cupy.asarray(init), backend=backend)
                assert isinstance(got, cupy.ndarray) and got.dtype == dtype and got.size == n
                host = scan(dx, op, init=init[0], backend=backend)
                E.assert_same_bits(cupy.asnumpy(got), cupy.asnumpy(host))
                if np.dtype(dtype).kind in "iu":
                    E.assert_same(cupy.asnumpy(got), want_of(scan, x, op, init))


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.int64])
def test_torch_init_on_torch_data(backend, rng, dtype: type) -> None:
    torch = pytest.importorskip("torch")
    n = (1 << 18) + 5
    for op in ops(dtype):
        x = E.data(rng, dtype, n, finite=True)
        init = E.data(rng, dtype, 1, finite=True)
        tx, tinit = torch.from_numpy(x).cuda(), torch.from_numpy(init).cuda()
        for scan in SCANS:
            got = scan(tx, op, init=tinit, backend=backend)
            assert isinstance(got, torch.Tensor) and got.is_cuda
            host = scan(cupy.asarray(x), op, init=init[0], backend=backend)
            E.assert_same_bits(got.cpu().numpy(), cupy.asnumpy(host))


def test_a_reduce_result_carries_into_the_next_scan(backend, rng) -> None:
    """``lib.reduce``'s 0-d device result as ``init``: the scan of the second half starts where the
    first half's total left off, with no host read between the calls."""
    x = E.data(rng, np.uint32, (1 << 21) + 7)
    half = x.size // 2
    first, second = cupy.asarray(x[:half]), cupy.asarray(x[half:])
    lib.inclusive_scan(second, init=lib.reduce(first, backend=backend), backend=backend)  # compiled once
    d2h = backend.metrics()["cuda_d2h_bytes"]
    carry = lib.reduce(first, backend=backend)
    got = lib.inclusive_scan(second, init=carry, backend=backend)
    assert backend.metrics()["cuda_d2h_bytes"] == d2h  # the carry never crossed to the host
    E.assert_same(cupy.asnumpy(got), np.cumsum(x, dtype=np.uint32)[half:])


def test_init_written_on_a_non_blocking_stream_just_before(backend, rng) -> None:
    """The init array is written by a kernel on a non-blocking stream and the scan runs on that
    stream (``stream=``) with no wait: it reads the written value."""
    x = E.data(rng, np.int32, (1 << 22) + 1)
    dx = cupy.asarray(x)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        big = cupy.full(1 << 24, 3, np.int32)
        init = (big.sum(dtype=np.int32) - (3 << 24) + 11).reshape(1)  # 11, after a long kernel
        got = lib.inclusive_scan(dx, "add", init=init, stream=stream, backend=backend)
        host = got.get()
    stream.synchronize()
    E.assert_same(host, want_of(lib.inclusive_scan, x, "add", np.array([11], np.int32)))


def test_init_arrays_of_another_type_or_length_are_refused(backend) -> None:
    dx = cupy.arange(100, dtype=np.uint32)
    with pytest.raises(InvalidProgram, match=r"2 elements[\s\S]*Fix:"):
        lib.inclusive_scan(dx, init=cupy.zeros(2, np.uint32), backend=backend)
    with pytest.raises(InvalidProgram, match=r"dtype int32[\s\S]*Fix:"):
        lib.exclusive_scan(dx, init=cupy.zeros(1, np.int32), backend=backend)
