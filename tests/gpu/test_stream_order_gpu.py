"""The backend's own stream against the caller's: a call on a caller's stream waits for parameter
words, zero fills and uploads still queued on the backend's (non-blocking) stream, and the
backend's stream waits for a caller's work before the heap hands that work's memory out again.

Each test holds one stream back with a kernel that spins for a while, so work on the other stream
would overtake it if nothing ordered the two; the results are checked against numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.stress_streams import hold
from vyre import lib
from vyre.lib.scratch import raw_backend

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")


@pytest.fixture(scope="module")
def backend():
    import vyre

    return vyre.default_backend()


def test_a_call_waits_for_parameter_words_queued_on_the_backends_stream(backend, rng):
    """A call whose steps are bound anew (scratch released) writes its parameter blocks and zero
    fills on the backend's stream; with that stream held back, the call on the default stream
    still computes with them (a new size each round, so old words in reused blocks are wrong)."""
    stream = raw_backend(backend).stream
    for n in ((1 << 16) + 3, 70_001, (1 << 18) + 5, 5_003):
        x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
        flags = (rng.integers(0, 3, n) == 0).astype(np.uint32)
        d, f = cupy.asarray(x), cupy.asarray(flags)
        lib.release_scratch()
        hold(stream, 100)
        np.testing.assert_array_equal(cupy.asnumpy(lib.select(d, f)), x[flags != 0], err_msg=f"select {n}")
        lib.release_scratch()
        hold(stream, 100)
        want = np.cumsum(x, dtype=np.uint64).astype(np.uint32)
        np.testing.assert_array_equal(cupy.asnumpy(lib.inclusive_scan(d, "add")), want, err_msg=f"scan {n}")


def test_the_backends_stream_waits_for_a_callers_work_before_its_memory_is_reused(backend, rng):
    """A sort enqueued behind a spinning kernel on the default stream (no wait); then its compiled
    steps are dropped (``release_scratch``: parameter blocks and scratch go back to the heap) and
    new resident handles take those blocks and are zeroed on the backend's stream at once. The
    sort still reads its own words."""
    raw = raw_backend(backend)
    n = (1 << 18) + 7
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    d = cupy.asarray(x)
    for _ in range(3):  # compiled: the later calls run the bound steps
        lib.sort(d)
    cupy.cuda.Stream.null.synchronize()
    hold(cupy.cuda.Stream.null, 200)
    got = lib.sort(d)  # queued behind the spin
    lib.release_scratch()
    taken = []
    for nbytes in [256] * 64 + [1 << k for k in range(9, (8 * n).bit_length() + 1)]:
        handle = raw.allocate_resident(nbytes)
        raw.upload_resident(handle, np.zeros(nbytes, np.uint8))
        taken.append(handle)
    try:
        np.testing.assert_array_equal(cupy.asnumpy(got), np.sort(x))
    finally:
        for handle in taken:
            raw.free_resident(handle)
