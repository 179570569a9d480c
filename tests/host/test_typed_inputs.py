"""Typed inputs: a typed array must hold the buffer's element type; untyped bytes stay raw bytes.

The check lives in ``vyre.driver.inputs`` and serves every backend; here on the oracle (the cuda
backend's device arrays are in tests/gpu/test_typed_inputs_gpu.py).
"""

from __future__ import annotations

import array

import numpy as np
import pytest

from vyre.driver.errors import InvalidProgram
from vyre.driver.inputs import element_dtype
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.reference import run
from vyre.reference.backend import ReferenceBackend

D = DataType
GID = Expr.invocation_id(0)
RNG = np.random.default_rng(7)
XOR = Program([BufferDecl.read_write("a", 0, D.U32), BufferDecl.read("b", 1, D.U32)], (256, 1, 1),
              [Node.store("a", GID, Expr.bitxor(Expr.load("a", GID), Expr.load("b", GID)))], name="xor")


def copy_program(dtype: DataType) -> Program:
    """``out[i] = a[i]`` through the arithmetic type (loads widen, stores narrow: an exact copy)."""
    return Program([BufferDecl.read("a", 0, dtype), BufferDecl.output("out", 1, dtype, 16)], (16, 1, 1),
                   [Node.store("out", GID, Expr.load("a", GID))])


def test_the_readme_tour_without_a_dtype_is_refused_naming_the_buffer_and_both_dtypes():
    b = np.full(8, 3, dtype=np.uint32)
    with pytest.raises(InvalidProgram) as err:
        run(XOR, [np.arange(8, dtype=np.int64), b])
    message = str(err.value)
    assert "buffer 'a'" in message and "int64" in message and "U32 (uint32)" in message
    assert "Fix: convert it with numpy.asarray(x, dtype=numpy.uint32)" in message


def finite_values(dtype: DataType, n: int) -> np.ndarray:
    """``n`` random finite elements of a buffer of ``dtype`` (BF16 as bits, BOOL as 0/1 words)."""
    if dtype is D.BOOL:
        return RNG.integers(0, 2, n, dtype=np.uint32)
    if dtype is D.BF16:
        return RNG.integers(0, 2**16, n, dtype=np.uint16) & np.uint16(0xFF7F)  # exponent never all ones
    if dtype.is_float:
        return (RNG.standard_normal(n) * 100).astype(dtype.np_dtype)
    return RNG.integers(0, 256, n * dtype.size, dtype=np.uint8).view(dtype.np_dtype)


@pytest.mark.parametrize("dtype", list(DataType), ids=lambda d: d.name)
def test_every_storage_type_takes_its_own_dtype_and_refuses_another(dtype):
    values = finite_values(dtype, 16)
    (out,) = run(copy_program(dtype), [values])
    assert out.dtype == dtype.np_dtype and out.tobytes() == values.tobytes()
    wrong = np.zeros(16, dtype=np.float64 if dtype not in (D.F32, D.F64) else np.int32)
    with pytest.raises(InvalidProgram, match=f"buffer 'a' is a {wrong.dtype} array, but the buffer holds {dtype.name}"):
        run(copy_program(dtype), [wrong])


@pytest.mark.parametrize("make", [
    lambda a: a.astype(">u4"),
    lambda a: memoryview(a.astype(">u4")),
    lambda a: np.ascontiguousarray(a.byteswap().view(">u4")),
], ids=["ndarray", "memoryview", "swapped-view"])
def test_byte_swapped_arrays_are_another_dtype(make):
    a = RNG.integers(0, 2**32, 16, dtype=np.uint32)
    with pytest.raises(InvalidProgram, match=r"buffer 'a' is a >u4 array, but the buffer holds U32 \(uint32\)"):
        run(copy_program(D.U32), [make(a)])


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview, lambda a: a.view(np.uint8),
                                  lambda a: memoryview(a.view(np.uint8))],
                         ids=["bytes", "bytearray", "memoryview-B", "uint8", "memoryview-uint8"])
def test_untyped_bytes_are_raw_little_endian_bytes_for_any_buffer(wrap):
    f = RNG.standard_normal(16).astype(np.float32)
    raw = np.frombuffer(f.tobytes(), np.uint8)
    (out,) = run(copy_program(D.F32), [wrap(raw)])
    assert out.tobytes() == f.tobytes()
    (out,) = run(copy_program(D.I32), [wrap(raw)])  # the same bytes read as I32
    assert np.array_equal(out, f.view(np.int32))


def test_typed_buffer_protocol_objects_are_checked_too():
    a = array.array("I", range(16))  # 4-byte unsigned: uint32
    assert element_dtype(a) == "uint32" and element_dtype(memoryview(a)) == "uint32"
    assert run(copy_program(D.U32), [a])[0].tolist() == list(range(16))
    with pytest.raises(InvalidProgram, match="is a int32 array"):
        run(copy_program(D.U32), [memoryview(array.array("i", range(16)))])


def test_bf16_takes_uint16_bits_and_bool_takes_uint32_words():
    bits = RNG.integers(0, 2**16, 16, dtype=np.uint16) & 0x7F7F  # finite values
    assert np.array_equal(run(copy_program(D.BF16), [bits])[0], bits)
    for wrong in (np.zeros(16, np.float16), np.zeros(16, np.int16)):
        with pytest.raises(InvalidProgram, match="uint16 bits"):
            run(copy_program(D.BF16), [wrong])
    words = RNG.integers(0, 2, 16, dtype=np.uint32)
    assert np.array_equal(run(copy_program(D.BOOL), [words])[0], words)
    for wrong in (np.ones(16, np.bool_), np.ones(16, np.int32)):
        with pytest.raises(InvalidProgram, match=r"uint32 0/1 words"):
            run(copy_program(D.BOOL), [wrong])


def test_a_bfloat16_dtype_is_taken_as_its_bits():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    values = RNG.standard_normal(16).astype(ml_dtypes.bfloat16)
    (out,) = run(copy_program(D.BF16), [values])
    assert np.array_equal(out, values.view(np.uint16))


class HostTensor:
    """A host array that offers ``__array__`` and ``dtype`` but no buffer, as torch CPU tensors do."""

    def __init__(self, values: np.ndarray) -> None:
        self._values = values
        self.dtype = values.dtype

    def __array__(self, dtype=None, copy=None):
        return self._values if dtype is None else self._values.astype(dtype)


def test_host_arrays_without_a_buffer_are_read_through_numpy_and_checked():
    a = RNG.integers(0, 2**32, 16, dtype=np.uint32)
    assert np.array_equal(run(copy_program(D.U32), [HostTensor(a)])[0], a)
    with pytest.raises(InvalidProgram, match="is a int64 array"):
        run(copy_program(D.U32), [HostTensor(a.astype(np.int64))])


def test_upload_resident_takes_any_native_array_as_bytes_and_refuses_byte_swapped_ones():
    with ReferenceBackend() as backend:
        h = backend.allocate_resident(32)
        f64 = RNG.standard_normal(4)
        backend.upload_resident(h, f64)  # no declared type: its bytes
        assert backend.download_resident(h).tobytes() == f64.tobytes()
        before = backend.download_resident(h).tobytes()
        for swapped in (f64.astype(">f8"), memoryview(f64.astype(">f8"))):
            with pytest.raises(InvalidProgram, match=r"non-native byte order \(>f8\).*Fix:"):
                backend.upload_resident(h, swapped)
        assert backend.download_resident(h).tobytes() == before  # nothing was written
        backend.upload_resident(h, HostTensor(np.arange(8, dtype=np.int32)))
        assert backend.download_resident(h).view(np.int32).tolist() == list(range(8))


def test_a_refused_input_leaves_the_backend_usable():
    with ReferenceBackend() as backend:
        a, b = RNG.integers(0, 2**32, 8, dtype=np.uint32), RNG.integers(0, 2**32, 8, dtype=np.uint32)
        with pytest.raises(InvalidProgram):
            backend.dispatch(XOR, [a, b.astype(np.float64)])
        assert np.array_equal(backend.dispatch(XOR, [a, b])[0], a ^ b)
