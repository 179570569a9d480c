"""Shared fixtures of the GPU tests: a CUDA backend, fresh random data and oracle comparison.

Every test here is marked ``gpu`` and skipped with a reason when CuPy is missing or no CUDA
device is visible. The oracle (``vyre.reference``) is the judge of every result.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from vyre.driver.config import DispatchConfig
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

HERE = Path(__file__).resolve().parent


def _no_gpu_reason() -> str | None:
    try:
        import cupy
    except Exception as exc:  # noqa: BLE001 - any import failure means no GPU tests
        return f"CuPy is not importable ({type(exc).__name__}: {exc})"
    try:
        if not cupy.cuda.is_available():
            return "no CUDA device: cupy.cuda.is_available() is False"
    except Exception as exc:  # noqa: BLE001
        return f"CUDA is unavailable ({exc})"
    return None


NO_GPU = _no_gpu_reason()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if NO_GPU is None:
        return
    skip = pytest.mark.skip(reason=NO_GPU)
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def backend():
    """One CUDA backend shared by the session (tests that break a backend make their own)."""
    from vyre_cuda.backend import CudaBackend

    be = CudaBackend()
    yield be
    be.shutdown()


@pytest.fixture
def own_backend():
    """A CUDA backend of the test's own, its library scratch released before it shuts down: for
    tests that count one backend's handles, graphs and waits."""
    from vyre import lib
    from vyre_cuda.backend import CudaBackend

    be = CudaBackend()
    yield be
    lib.release_scratch(be)
    be.shutdown()


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """A freshly seeded generator; the seed is reported with a failure (``VYRE_TEST_SEED`` replays)."""
    seed = int(os.environ.get("VYRE_TEST_SEED") or struct.unpack("<Q", os.urandom(8))[0] >> 1)
    request.node.user_properties.append(("seed", seed))
    return np.random.default_rng(seed)


# ---- data ------------------------------------------------------------------------------------------
F32_EDGES = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, np.nan, np.inf, -np.inf,
                      3.4028235e38, -3.4028235e38, 1.17549435e-38, -1.17549435e-38, 1e-45, -1e-45,
                      1e-40, -3e-39, 2.0**24, 2.0**31, -(2.0**31), 4.3e9, -7.25, 0.3], np.float32)
U32_EDGES = np.array([0, 1, 2, 3, 7, 31, 32, 33, 63, 64, 0x7FFFFFFF, 0x80000000, 0x80000001,
                      0xFFFFFFFE, 0xFFFFFFFF, 0x12345678], np.uint32)
I32_EDGES = U32_EDGES.view(np.int32)
BOOL_EDGES = np.array([0, 1, 2, 0xFFFFFFFF], np.uint32)
#: 0, ±1, MAX, MIN, NaN (quiet, signaling, negative), ±inf, -0.0, subnormals, integer-rounding edges
F64_EDGES = np.concatenate([
    np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, np.nan, np.inf, -np.inf, 1.7976931348623157e308,
              -1.7976931348623157e308, 2.2250738585072014e-308, -2.2250738585072014e-308, 5e-324, -5e-324,
              1e-310, 2.0**52, 2.0**53, 2.0**53 + 2, 2.0**63, -(2.0**63), 2.0**64, 1.8e19, 4.3e9, 2.0**31,
              -7.25, 0.1, 3.4028235677973366e38, 1e39, 1.401298464324817e-45], np.float64),
    np.array([0x7FF4000000000001, 0xFFF8000000000000, 0x3FE0000000000001, 0x433FFFFFFFFFFFFF],
             np.uint64).view(np.float64)])
U64_EDGES = np.array([0, 1, 2, 3, 31, 32, 63, 64, 65, 0xFFFFFFFF, 0x100000000, 0x7FFFFFFFFFFFFFFF,
                      0x8000000000000000, 0x8000000000000001, 0xFFFFFFFFFFFFFFFE, 0xFFFFFFFFFFFFFFFF,
                      0x123456789ABCDEF0, (1 << 53) + 1], np.uint64)
I64_EDGES = U64_EDGES.view(np.int64)


def edges(dtype: DataType) -> np.ndarray:
    return {DataType.F32: F32_EDGES, DataType.U32: U32_EDGES, DataType.I32: I32_EDGES,
            DataType.BOOL: BOOL_EDGES, DataType.F64: F64_EDGES, DataType.U64: U64_EDGES,
            DataType.I64: I64_EDGES}[dtype]


def random_array(rng: np.random.Generator, dtype: DataType, n: int) -> np.ndarray:
    """``n`` random elements of a buffer of ``dtype`` (raw bits for floats: NaNs, subnormals...)."""
    np_dtype = dtype.np_dtype
    if dtype is DataType.BOOL:
        return rng.integers(0, 2, n, dtype=np.uint32)
    if dtype in (DataType.F32, DataType.F64):
        bits = np_dtype.itemsize * 8
        mixed = rng.integers(0, 2**bits, n, dtype=np.uint64).astype(f"u{np_dtype.itemsize}").view(np_dtype).copy()
        normal = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(np_dtype)
        return np.where(rng.random(n) < 0.5, normal, mixed).astype(np_dtype)
    bits = np_dtype.itemsize * 8
    return rng.integers(0, 2**bits, n, dtype=np.uint64).astype(f"u{np_dtype.itemsize}").view(np_dtype)


def pairs(rng: np.random.Generator, a: DataType, b: DataType, extra: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of edge values, then ``extra`` random pairs."""
    ea, eb = edges(a), edges(b)
    xa = np.repeat(ea, len(eb))
    xb = np.tile(eb, len(ea))
    return (np.concatenate([xa, random_array(rng, a, extra)]).astype(a.np_dtype),
            np.concatenate([xb, random_array(rng, b, extra)]).astype(b.np_dtype))


def poisoned(n: int, dtype: DataType) -> np.ndarray:
    """A read_write buffer pre-filled with 0xAB bytes, so unwritten elements are caught."""
    return np.full(n * dtype.size, 0xAB, np.uint8).view(dtype.np_dtype)


# ---- comparison ------------------------------------------------------------------------------------
def check(backend, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None,
          reference_inputs: Sequence[object] | None = None) -> list[np.ndarray]:
    """Dispatch on ``backend`` and assert the outputs equal the oracle's bit for bit."""
    from vyre.reference import run
    from vyre.reference.ulp import assert_outputs_equal

    expected = run(program, list(reference_inputs if reference_inputs is not None else inputs), config)
    actual = backend.dispatch(program, list(inputs), config)
    assert_outputs_equal(expected, actual, program)
    return actual


def elementwise(name: str, decls: Sequence[BufferDecl], value: Expr, out: BufferDecl,
                wg: int = 128) -> Program:
    """``out[i] = value`` for every invocation ``i``."""
    i = Expr.var("i")
    body = [Node.let("i", Expr.invocation_id(0)), Node.store(out.name, i, value)]
    return Program([*decls, out], (wg, 1, 1), body, name=name)
