"""Direct DMA to and from large host arrays (``vyre_cuda._runtime.host_pins``): exact results,
registrations that follow their arrays' lives, the pinned-bytes limit, memory pinned by someone
else, and read-only or borrowed memory that must take the staging ring. numpy judges."""

from __future__ import annotations

import ctypes
import gc
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.gpu.test_staging_gpu import mix_expected, mix_program
from vyre import DispatchConfig
from vyre_cuda._runtime.host_pins import (
    DIRECT_MIN,
    MEMORY_TYPE_HOST,
    PAGE,
    PINS,
    RESULT_PIN_MIN,
    HostPins,
    exclusive_pages,
)

pytestmark = pytest.mark.gpu

PROT_READ, PROT_WRITE = 1, 2  # mprotect's flags
ROOT = Path(__file__).resolve().parents[2]

N = (32 << 20) // 4 + 3  # u32 elements, an odd count: past glibc's largest mmap threshold (32 MiB), so
# every such array is a mapping of its own (smaller ones may come from the heap's shared pages)


def words(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 2**32, n, dtype=np.uint32)


def locked(a: np.ndarray) -> int:
    """The bytes a registration of ``a`` page-locks: the pages of its own mapping."""
    pages = exclusive_pages(a)
    assert pages is not None, "a numpy array past 32 MiB is a glibc mapping of its own"
    return pages[1]


def test_large_dispatch_goes_direct_both_ways_and_is_exact(backend, rng) -> None:
    a, x = words(rng, N), words(rng, N)
    program, config = mix_program(N), DispatchConfig(elements=N)
    before, refusals = backend.metrics(), PINS.refusals
    got = backend.dispatch(program, [a, x], config)
    after = backend.metrics()
    assert all(np.array_equal(g, w) for g, w in zip(got, mix_expected(a, x)))
    if PINS.refusals > refusals:  # a machine short of lockable memory: the staging path ran (exactly)
        pytest.skip(f"the OS refused to page-lock {PINS.refusals - refusals} of this call's arrays on this "
                    "loaded machine, so they took the staging path (the results above are exact)")
    assert after["cuda_direct_bytes"] - before["cuda_direct_bytes"] == 4 * 4 * N  # a, x in; x, o out
    assert after["cuda_h2d_bytes"] - before["cuda_h2d_bytes"] == 2 * 4 * N
    assert all(PINS.address(g) is not None for g in got)  # page-locked by their download: fed back in, no registration


def test_results_fed_back_in_need_no_registration(backend, rng) -> None:
    a, x = words(rng, N), words(rng, N)
    program, config = mix_program(N), DispatchConfig(elements=N)
    x2, o = backend.dispatch(program, [a, x], config)
    pinned = PINS.pinned
    assert PINS.address(o) is not None and PINS.address(x2) is not None  # page-locked by their own download
    assert PINS.pinned == pinned
    got = backend.dispatch(program, [o, x2], config)
    assert all(np.array_equal(g, w) for g, w in zip(got, mix_expected(o, x2)))


def test_a_registration_ends_with_its_array(backend, rng) -> None:
    a = words(rng, N)
    handle = backend.allocate_resident(a.nbytes)
    try:
        pinned = PINS.pinned
        backend.upload_resident(handle, a)
        assert PINS.pinned == pinned + locked(a)
        assert np.array_equal(backend.download_resident(handle).view(np.uint32), a)
        backend.download_resident(handle, 0, 4)  # the upload has run
        pinned, nbytes = PINS.pinned, locked(a)
        del a
        gc.collect()  # may also collect arrays of earlier tests: at least this one's bytes are unpinned
        assert PINS.pinned <= pinned - nbytes
    finally:
        backend.free_resident(handle)


def test_a_view_registers_its_owner_once(backend, rng) -> None:
    big = words(rng, 3 * N)
    handle = backend.allocate_resident(4 * N)
    try:
        pinned = PINS.pinned
        for k in range(3):
            part = big[k * N:(k + 1) * N]
            backend.upload_resident(handle, part)
            assert np.array_equal(backend.download_resident(handle).view(np.uint32), part)
        assert PINS.pinned == pinned + locked(big)
        out = np.empty(3 * N, np.uint32)
        backend.residents.download_into(handle, out[N:2 * N])  # into a registered view's middle
        assert np.array_equal(out[N:2 * N], big[2 * N:])
    finally:
        backend.free_resident(handle)


def test_read_only_and_borrowed_memory_take_the_ring(backend, rng) -> None:
    a = words(rng, N)
    frozen = np.frombuffer(a.tobytes(), np.uint32)  # owned by a bytes object: never registered
    assert PINS.address(frozen) is None
    x = words(rng, N)
    got = backend.dispatch(mix_program(N), [frozen, x], DispatchConfig(elements=N))
    assert all(np.array_equal(g, w) for g, w in zip(got, mix_expected(a, x)))


def test_memory_pinned_by_someone_else_falls_back_to_the_ring(backend, rng) -> None:
    from cupy.cuda import runtime

    a = words(rng, N)
    runtime.hostRegister(a.ctypes.data, a.nbytes, 0)
    try:
        pins = HostPins(limit=1 << 40)
        assert pins.address(a) is None and pins.pinned == 0  # someone else's pinning: not ours to use or undo
        x = words(rng, N)
        got = backend.dispatch(mix_program(N), [a, x], DispatchConfig(elements=N))
        assert all(np.array_equal(g, w) for g, w in zip(got, mix_expected(a, x)))
    finally:
        runtime.hostUnregister(a.ctypes.data)


def test_memory_the_os_will_not_lock_is_counted_and_takes_the_ring(backend, rng) -> None:
    a, x = words(rng, N), words(rng, N)
    pages = exclusive_pages(a)
    assert pages is not None, "a numpy array past 32 MiB is a glibc mapping of its own"
    base, size = pages
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.mprotect(ctypes.c_void_p(base), ctypes.c_size_t(size), PROT_READ) == 0
    try:  # read-only pages: the driver will not lock them for writing (cudaHostRegister without ReadOnly)
        pins = HostPins(limit=1 << 40)
        assert pins.address(a) is None and pins.refusals == 1 and pins.pinned == 0
        assert pins.address(a) is None and pins.refusals == 1  # the refusal is remembered, not asked again
        got = backend.dispatch(mix_program(N), [a, x], DispatchConfig(elements=N))
        assert all(np.array_equal(g, w) for g, w in zip(got, mix_expected(a, x)))
    finally:
        libc.mprotect(ctypes.c_void_p(base), ctypes.c_size_t(size), PROT_READ | PROT_WRITE)


def test_the_limit_unpins_the_oldest_and_zero_turns_it_off(backend, rng) -> None:
    arrays = [words(rng, N) for _ in range(3)]
    pins = HostPins(limit=locked(arrays[1]) + locked(arrays[2]) + 100)
    try:
        for arr in arrays:
            assert pins.address(arr) is not None
            assert pins.pinned <= pins.limit
        assert pins.pinned == locked(arrays[1]) + locked(arrays[2])
        assert pins.address(arrays[2]) is not None  # the newest is still registered
    finally:
        pins.release()
    assert pins.pinned == 0
    assert HostPins(limit=0).address(arrays[0]) is None
    assert HostPins(limit=0).pinned_empty(N, np.uint32).base is None  # plain numpy memory


def test_mid_size_results_are_numpy_memory_registered_as_they_download(backend, rng) -> None:
    """A result of DIRECT_MIN to RESULT_PIN_MIN bytes is a plain numpy array (no pinned pool block
    per kept result), page-locked by its own download (one DMA); a larger one is a pool block."""
    a, x = words(rng, N), words(rng, N)
    before = backend.metrics()
    x2, o = backend.dispatch(mix_program(N), [a, x], DispatchConfig(elements=N))
    after = backend.metrics()
    assert N * 4 < RESULT_PIN_MIN and x2.flags.owndata and o.flags.owndata
    assert after["cuda_direct_bytes"] - before["cuda_direct_bytes"] == 4 * 4 * N
    assert all(np.array_equal(g, w) for g, w in zip((x2, o), mix_expected(a, x)))
    assert PINS.pinned_empty(RESULT_PIN_MIN // 4, np.uint32).base is not None  # a pool block


def test_an_arrays_own_mapping_is_registered_whole(backend, rng) -> None:
    """A large numpy array is a mapping of its own: all of it is page-locked (no byte crosses
    through a pinned chunk) and its bytes go both ways exactly, whatever its last page holds."""
    from cupy.cuda import runtime

    for extra in (0, 1, 5, 1023):  # array ends at every kind of offset into its last page
        a = words(rng, N + extra)
        span = PINS.address(a)
        assert span is not None and span.ptr == a.ctypes.data
        ends = (span.ptr, span.ptr + a.nbytes - 1)
        assert all(runtime.pointerGetAttributes(p).type == MEMORY_TYPE_HOST for p in ends)
        handle = backend.allocate_resident(a.nbytes)
        try:
            backend.upload_resident(handle, a)
            got = backend.download_resident(handle).view(np.uint32)  # a new array: registered, then one DMA
            assert np.array_equal(got, a)
        finally:
            backend.free_resident(handle)


def test_small_arrays_are_staged(backend, rng) -> None:
    small = words(rng, DIRECT_MIN // 8)
    assert PINS.address(small) is None
    assert PINS.pinned_empty(small.size, np.uint32).flags.owndata


def test_another_librarys_copy_of_part_of_a_registered_array(backend, rng) -> None:
    """After vyre registers a large numpy array for direct copies, CuPy's own copies of views that
    start anywhere in it (its first page, a whole page, its last page) still work: the driver judges
    a copy by the page its source starts on, and every page of the array is registered."""
    cupy = pytest.importorskip("cupy")
    a = words(rng, N + 5000)
    h = backend.allocate_resident(a.nbytes)
    try:
        backend.upload_resident(h, a)  # registers the array's whole mapping
        first_whole = (-(-a.ctypes.data // PAGE) * PAGE - a.ctypes.data) // 4
        for k in (1, first_whole + 8, a.size // 2 + 3, a.size - 5):
            assert np.array_equal(cupy.asnumpy(cupy.asarray(a[k:])), a[k:])
            assert np.array_equal(cupy.asnumpy(cupy.asarray(a[:k])), a[:k])
    finally:
        backend.free_resident(h)


HEAP_ARRAYS = """
import ctypes

import cupy
import numpy as np

ctypes.CDLL(None).mallopt(-3, 64 << 20)  # M_MMAP_THRESHOLD: arrays up to 64 MiB now come from the heap
from tests.gpu.test_staging_gpu import mix_expected, mix_program
from vyre import DispatchConfig
from vyre_cuda.backend import CudaBackend
from vyre_cuda._runtime.host_pins import PINS, exclusive_pages

rng = np.random.default_rng({seed})
n = (8 << 20) // 4 + 5
a, x = (rng.integers(0, 2**32, n, dtype=np.uint32) for _ in range(2))
assert exclusive_pages(a) is None and PINS.address(a) is None, "a heap array shares its end pages"
backend = CudaBackend()
before = backend.metrics()["cuda_direct_bytes"]
got = backend.dispatch(mix_program(n), [a, x], DispatchConfig(elements=n))
assert all(np.array_equal(g, w) for g, w in zip(got, mix_expected(a, x)))
assert backend.metrics()["cuda_direct_bytes"] == before, "staged, not registered"
for k in (1, 1029, n - 7):
    assert np.array_equal(cupy.asnumpy(cupy.asarray(a[k:])), a[k:])
backend.shutdown()
print("ok")
"""


def test_arrays_on_the_heaps_shared_pages_take_the_ring(rng) -> None:
    """An array from the heap (glibc serves 4-32 MiB arrays there once larger ones were freed) shares
    its first and last page with other memory: it is staged, never registered, exactly, and other
    libraries' copies of it are untouched. Its own process: the heap threshold is process-wide."""
    seed = int(rng.integers(0, 2**31))
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(HEAP_ARRAYS).format(seed=seed)], cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300,
                         check=False)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]
