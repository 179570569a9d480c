"""Typed inputs on cuda: the same rule and the same message as the oracle, for host and device arrays.

A typed array (numpy, CuPy, torch, JAX) must hold the buffer's element type (BF16: uint16 bits or
a bfloat16 dtype; BOOL: uint32 words); untyped bytes (uint8 arrays included) are raw bytes.
``upload_resident`` takes any contiguous array as bytes.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_array

from vyre.driver.errors import InvalidProgram
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.reference import run
from vyre.reference.ulp import assert_outputs_equal, host_array

pytestmark = pytest.mark.gpu

D = DataType
GID = Expr.invocation_id(0)
N = 1000


def copy_program(dtype: DataType) -> Program:
    return Program([BufferDecl.read("a", 0, dtype), BufferDecl.output("out", 1, dtype, N)], (128, 1, 1),
                   [Node.store("out", GID, Expr.load("a", GID))], name=f"copy_{dtype.name}")


def _message(fn) -> str:
    with pytest.raises(InvalidProgram) as err:
        fn()
    return str(err.value)


@pytest.mark.parametrize("wrong", [np.int64, np.float64, ">u4", np.int32, np.uint16])
def test_host_arrays_of_another_dtype_give_the_oracles_error(backend, rng, wrong) -> None:
    a = random_array(rng, D.U32, N).astype(wrong)
    program = copy_program(D.U32)
    on_cuda = _message(lambda: backend.dispatch(program, [a]))
    assert on_cuda == _message(lambda: run(program, [a]))
    assert "buffer 'a'" in on_cuda and str(np.dtype(wrong)) in on_cuda and "U32 (uint32)" in on_cuda
    assert on_cuda == _message(lambda: backend.compile(program).dispatch([a]))


@pytest.mark.parametrize("dtype", [D.U32, D.I32, D.F32, D.U16, D.I8, D.F16, D.BF16, D.BOOL], ids=lambda d: d.name)
def test_cupy_arrays_of_the_buffers_dtype_and_raw_bytes_match_the_oracle(backend, rng, dtype) -> None:
    import cupy

    host = random_array(rng, dtype, N)
    program = copy_program(dtype)
    want = run(program, [host])
    for data in (cupy.asarray(host), cupy.asarray(host.view(np.uint8))):
        assert_outputs_equal(want, backend.dispatch(program, [data]), program)
    assert_outputs_equal(want, backend.compile(program).dispatch([cupy.asarray(host)]), program)


@pytest.mark.parametrize("wrong", ["int64", "float64", "int32", "float16"])
def test_cupy_arrays_of_another_dtype_give_the_same_error_as_host_arrays(backend, rng, wrong) -> None:
    import cupy

    host = random_array(rng, D.U32, N).astype(wrong)
    program = copy_program(D.U32)
    on_device = _message(lambda: backend.dispatch(program, [cupy.asarray(host)]))
    assert on_device == _message(lambda: run(program, [host]))
    assert on_device == _message(lambda: backend.compile(program).dispatch([cupy.asarray(host)]))
    good = random_array(rng, D.U32, N)  # the backend is fine afterwards
    assert np.array_equal(cupy.asnumpy(backend.dispatch(program, [cupy.asarray(good)])[0]), good)


def test_torch_tensors_are_checked_and_bfloat16_is_taken_as_bits(backend, rng) -> None:
    torch = pytest.importorskip("torch")
    values = torch.from_numpy(rng.standard_normal(N).astype(np.float32)).to("cuda")
    bf16 = values.to(torch.bfloat16)
    bits = bf16.view(torch.int16).cpu().numpy().view(np.uint16)
    got = backend.dispatch(copy_program(D.BF16), [bf16])[0]  # a torch bfloat16 tensor, as the input
    assert got.dtype == torch.bfloat16 and np.array_equal(host_array(got), run(copy_program(D.BF16), [bits])[0])
    assert np.array_equal(host_array(backend.dispatch(copy_program(D.F32), [values])[0]), values.cpu().numpy())
    message = _message(lambda: backend.dispatch(copy_program(D.U32), [values.to(torch.int64)]))
    assert "is a int64 array, but the buffer holds U32 (uint32)" in message


def test_jax_bfloat16_arrays_are_taken_as_bits(backend, rng) -> None:
    jax = pytest.importorskip("jax")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX has no GPU device here")
    bf16 = jax.numpy.asarray(rng.standard_normal(N).astype(np.float32)).astype(jax.numpy.bfloat16)
    bits = np.asarray(jax.lax.bitcast_convert_type(bf16, jax.numpy.uint16))
    got = backend.dispatch(copy_program(D.BF16), [bf16])[0]  # a CuPy array of the bits
    assert np.array_equal(host_array(got), run(copy_program(D.BF16), [bits])[0])


def test_upload_resident_takes_any_contiguous_array_as_bytes(backend, rng) -> None:
    import cupy

    h = backend.allocate_resident(8 * 64)
    try:
        f64 = rng.standard_normal(64)
        backend.upload_resident(h, cupy.asarray(f64))  # device to device, any dtype
        assert backend.download_resident(h).tobytes() == f64.tobytes()
        backend.upload_resident(h, f64[::-1].copy())  # host, any native dtype
        assert backend.download_resident(h).tobytes() == f64[::-1].tobytes()
        with pytest.raises(InvalidProgram, match=r"non-native byte order \(>f8\)"):
            backend.upload_resident(h, f64.astype(">f8"))
        assert backend.download_resident(h).tobytes() == f64[::-1].tobytes()
    finally:
        backend.free_resident(h)
