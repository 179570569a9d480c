"""``init=`` of the scans as a 1-element array where the data lives (a ``ResidentArray`` on the
oracle; CuPy and torch arrays on ``cuda`` in tests/gpu): the scan reads it from a bound buffer in
the same pass, so the result equals the scan with the same value given on the host, for every
size class (one workgroup, the look-back, reduce-then-scan), op and type."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.codegen.codegen_support import assemble, needs_ptxas
from tests.lib import expected as E
from vyre import lib
from vyre.driver.errors import InvalidProgram
from vyre.ir import DataType
from vyre.ir.program import Access
from vyre.lib import ResidentArray
from vyre.lib._scan import kernels as K
from vyre.lib._scan import lookback
from vyre.lib.monoid import monoid

INT_OPS = ["add", "min", "max", "and", "or", "xor"]
CASES = [(np.uint32, op) for op in INT_OPS] + [(np.int32, op) for op in INT_OPS] + \
    [(np.float32, op) for op in ("add", "min", "max")] + [(np.uint64, "add"), (np.int64, "xor"), (np.float64, "max")]
SIZES = [1, 33, 4097, 2 * lookback.SCAN_LOOKBACK_ITEMS * 256 + 1]  # one workgroup, two tiles, many tiles


def resident(backend: Any, value: np.ndarray) -> ResidentArray:
    """``value`` (a 1-element array) in a new resident buffer of ``backend``."""
    handle = backend.allocate_resident(value.nbytes)
    backend.upload_resident(handle, value)
    return ResidentArray(handle, value.dtype, value.size, backend)


def read(backend: Any, r: ResidentArray) -> np.ndarray:
    return backend.download_resident(r.handle, 0, r.n * r.dtype.itemsize).view(r.dtype)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize(("dtype", "op"), CASES)
def test_init_array_equals_the_host_init(backend, rng, dtype: type, op: str, n: int) -> None:
    x = E.data(rng, dtype, n, finite=True)
    init = E.data(rng, dtype, 1, finite=True)
    r = resident(backend, init)
    try:
        for scan in (lib.inclusive_scan, lib.exclusive_scan):
            got = scan(x, op, init=r, backend=backend)
            assert isinstance(got, ResidentArray) and got.n == n and got.dtype == np.dtype(dtype)
            want = scan(x, op, init=init[0], backend=backend)
            E.assert_same_bits(read(backend, got), want)
            if np.dtype(dtype).kind in "iu":  # integers: numpy's scan of the carry and the data
                joined = E.inclusive_scan(np.concatenate([init, x]), op)
                E.assert_same(read(backend, got), joined[1:] if scan is lib.inclusive_scan else joined[:-1])
            backend.free_resident(got.handle)
    finally:
        backend.free_resident(r.handle)


def test_init_array_of_a_transform_scan(backend, rng) -> None:
    from tests.lib.test_transform import widen_times_three

    x = E.data(rng, np.uint32, 9000)
    r = resident(backend, np.array([2**63 + 5], np.uint64))
    try:
        got = lib.transform_inclusive_scan(x, widen_times_three, "max", init=r, backend=backend)
        want = lib.transform_inclusive_scan(x, widen_times_three, "max", init=2**63 + 5, backend=backend)
        E.assert_same(read(backend, got), want)
        backend.free_resident(got.handle)
    finally:
        backend.free_resident(r.handle)


def test_an_empty_scan_with_an_init_array_is_empty(backend) -> None:
    r = resident(backend, np.array([9], np.int32))
    try:
        got = lib.exclusive_scan(np.zeros(0, np.int32), init=r, backend=backend)
        assert isinstance(got, ResidentArray) and got.n == 0
        backend.free_resident(got.handle)
    finally:
        backend.free_resident(r.handle)


def test_init_arrays_of_another_type_or_length_are_refused(backend) -> None:
    x = np.arange(10, dtype=np.uint32)
    two = resident(backend, np.array([1, 2], np.uint32))
    signed = resident(backend, np.array([1], np.int32))
    try:
        with pytest.raises(InvalidProgram, match=r"2 elements, not one value[\s\S]*Fix:"):
            lib.inclusive_scan(x, init=two, backend=backend)
        with pytest.raises(InvalidProgram, match=r"'init' has dtype int32[\s\S]*Fix:"):
            lib.exclusive_scan(x, init=signed, backend=backend)
    finally:
        backend.free_resident(two.handle)
        backend.free_resident(signed.handle)


def _variants(bound: bool) -> dict[str, Any]:
    """The scan programs that take ``init`` (bound: from a buffer), for U32 max and F32 add."""
    u, f = monoid("max", DataType.U32), monoid("add", DataType.F32)
    return {"lookback": lookback.scan_lookback(u, lookback.SCAN_LOOKBACK_ITEMS, False, 1, 0 if bound else 4,
                                               tiles_word=2, init_bound=bound),
            "single": K.scan_segments(u, K.SCAN_ITEMS, True, False, 1, 2, 0 if bound else 4, bound),
            "down": K.scan_segments(f, K.SCAN_ITEMS, False, True, 1, 2, 0 if bound else 4, bound)}


def test_the_bound_variants_read_init_from_a_buffer_the_others_from_the_parameter_words() -> None:
    for bound in (False, True):
        for name, program in _variants(bound).items():
            (init,) = [b for b in program.buffers if b.name == "init"]
            assert init.access is (Access.READ if bound else Access.UNIFORM), name
            assert program.name.endswith("_init_buffer") is bound, name


@needs_ptxas
def test_the_bound_variants_assemble_for_sm90() -> None:
    from vyre_cuda import emit_ptx

    failures = assemble({name: emit_ptx(p, sm="90") for name, p in _variants(True).items()}, "90")
    assert not failures, "\n".join(failures)
