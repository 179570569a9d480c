"""Bounds on the ``cuda`` backend: a kernel over the compile-time bound is refused before any
compilation and the backend stays usable; the oracle runs the same program, and a timeout is the
same error on both backends."""

from __future__ import annotations

import time

import numpy as np
import pytest

import vyre
from vyre.driver.config import DispatchConfig
from vyre.driver.errors import DispatchFailed, UnsupportedFeature
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre_cuda.testing import MAX_INSTRUCTIONS

pytestmark = pytest.mark.gpu

U32 = DataType.U32
GID = Expr.invocation_id(0)


def many_stores(n: int) -> Program:
    body = [Node.store("out", Expr.add(GID, Expr.u32(k)), Expr.add(Expr.load("x", Expr.u32(k)), Expr.u32(k)))
            for k in range(n)]
    return Program([BufferDecl.read("x", 0, U32), BufferDecl.read_write("out", 1, U32)], (64, 1, 1), body)


def test_kernel_over_the_bound_is_refused_and_the_backend_stays_usable(backend, rng) -> None:
    x = rng.integers(0, 2**32, 1024, dtype=np.uint32)
    out = rng.integers(0, 2**32, 1024 + 64, dtype=np.uint32)
    big = many_stores(MAX_INSTRUCTIONS)  # several instructions per store: far over the bound
    start = time.perf_counter()
    with pytest.raises(UnsupportedFeature) as info:
        backend.dispatch(big, [x, out], DispatchConfig(grid=(1, 1, 1)))
    assert time.perf_counter() - start < 30 and "Fix:" in str(info.value)
    small = many_stores(64)
    got = backend.dispatch(small, [x, out], DispatchConfig(grid=(1, 1, 1)))
    want = vyre.reference.run(small, [x, out], DispatchConfig(grid=(1, 1, 1)))
    np.testing.assert_array_equal(got[0], want[0])


def test_timeout_is_the_same_error_on_both_backends(backend) -> None:
    spin = Program([BufferDecl.output("o", 0, U32, 1)], (1, 1, 1),
                   [Node.loop("i", Expr.u32(0), Expr.u32(1 << 26), [Node.store("o", Expr.u32(0), Expr.var("i"))])])
    config = DispatchConfig(grid=(1, 1, 1), timeout_s=0.0)
    errors = []
    for b in (backend, vyre.acquire("reference")):
        with pytest.raises(DispatchFailed) as info:
            b.dispatch(spin, [], config)
        errors.append(info.value.code)
    assert errors == ["timeout", "timeout"]
    backend.dispatch(spin, [], DispatchConfig(grid=(1, 1, 1)))  # waits for the kernel still running
