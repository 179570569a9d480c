"""Compiled library calls that read words back (counts, a reduction's value) on ``cuda``: the words
are stored into pinned host memory by a last step of the compiled sequence, so once the call is
compiled no copy goes through the copy engine, and every value is the oracle's on fresh data,
with the previous result poisoned; closing the compiled calls frees the readout's handle."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lib import expected as E
from vyre import lib

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")


@pytest.fixture
def backend(own_backend):
    return own_backend


def _put(be, x: np.ndarray) -> lib.ResidentArray:
    handle = be.allocate_resident(max(x.nbytes, 4))
    be.upload_resident(handle, x)
    return lib.ResidentArray(handle, x.dtype, x.size, be)


def _host(be, r: lib.ResidentArray) -> np.ndarray:
    return be.download_resident(r.handle, 0, r.n * r.dtype.itemsize).view(r.dtype)


def _d2h(be) -> int:
    return int(be.metrics().get("cuda_d2h_bytes", 0))


@pytest.mark.parametrize("n", [33, 70_001, (1 << 20) + 3])
def test_exact_counts_come_from_the_readout_step(backend, rng, n) -> None:
    """select, select_if, run_length_encode and unique on resident data, six calls each over new
    data in the same handles: exact results, and from the third call on no read-back bytes."""
    rx, rf, rs = (_put(backend, np.zeros(n, t)) for t in (np.uint32, np.uint8, np.uint32))
    calls = {
        "select": (lambda: lib.select(rx, rf, backend=backend), lambda h: (h["x"][h["f"] != 0],)),
        "select_if": (lambda: lib.select_if(rx, 1000, 2**31, backend=backend),
                      lambda h: (h["x"][(h["x"] >= 1000) & (h["x"] < 2**31)],)),
        "run_length_encode": (lambda: lib.run_length_encode(rs, backend=backend),
                              lambda h: E.run_length_encode(h["s"])),
        "unique": (lambda: lib.unique(rs, backend=backend), lambda h: E.unique(h["s"])),
    }
    for name, (call, want) in calls.items():
        for i in range(6):
            h = {"x": rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32),
                 "f": (rng.random(n) < 0.3).astype(np.uint8),
                 "s": np.repeat(rng.integers(0, 256, n), rng.integers(1, 5, n))[:n].astype(np.uint32)}
            for r, key in ((rx, "x"), (rf, "f"), (rs, "s")):
                backend.upload_resident(r.handle, h[key])
            before = _d2h(backend)
            out = call()
            moved = _d2h(backend) - before
            got = out if isinstance(out, tuple) else (out,)
            for g, w in zip(got, want(h), strict=True):
                np.testing.assert_array_equal(_host(backend, g), w, err_msg=f"{name} call {i}")
            if i >= 2:
                assert moved == 0, f"{name} call {i} read {moved} bytes through the copy engine"
            for g in got:
                backend.upload_resident(g.handle, np.full(g.handle.nbytes, 0xFF, np.uint8))
            lib.recycle(*got, backend=backend)


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.float32, np.uint64, np.int64, np.float64])
def test_a_resident_reduce_reads_its_value_from_the_readout(backend, rng, dtype) -> None:
    """reduce of resident data of 4- and 8-byte types (an 8-byte value is two words): the oracle's
    value on new data each call, including edge values, no read-back bytes once compiled."""
    n = 100_003
    r = _put(backend, np.zeros(n, dtype))
    for i in range(5):
        if np.dtype(dtype).kind == "f":
            x = rng.standard_normal(n).astype(dtype)
            x[rng.integers(0, n, 3)] = [0.0, -0.0, np.finfo(dtype).tiny / 2]
            op = "max"
            want = x.max()
        else:
            info = np.iinfo(dtype)
            x = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
            x[:2] = [info.min, info.max]
            op = "xor"
            want = np.bitwise_xor.reduce(x)
        backend.upload_resident(r.handle, x)
        before = _d2h(backend)
        got = lib.reduce(r, op, backend=backend)
        if i >= 2:
            assert _d2h(backend) - before == 0, f"call {i} read through the copy engine"
        assert np.asarray(got).astype(dtype) == want, (i, got, want)


def test_closing_compiled_calls_frees_the_readout_handles(backend, rng) -> None:
    """The readout's handle over pinned memory lives as long as its compiled call: releasing the
    library's scratch gives back every handle it made."""
    before = int(backend.metrics().get("cuda_resident_handles", 0))
    x = _put(backend, rng.integers(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32))
    for _ in range(3):
        lib.reduce(x, backend=backend)
        lib.recycle(lib.select_if(x, 5, 2**31, backend=backend), backend=backend)
    lib.release_scratch(backend)
    backend.free_resident(x.handle)
    assert int(backend.metrics().get("cuda_resident_handles", 0)) == before
