"""The front end's 64-bit types: annotations, scalars, literals, numpy arrays by dtype, printing back."""

from __future__ import annotations

import numpy as np
import pytest

import vyre
from vyre.driver.errors import InvalidProgram, ValidationError
from vyre.frontend import kernel_from_source, to_python
from vyre.reference import ReferenceBackend


@pytest.fixture(scope="module")
def oracle():
    with ReferenceBackend() as backend:
        yield backend


@vyre.kernel(workgroup_size=64)
def wide(a: vyre.In[vyre.u64], b: vyre.InOut[vyre.f64], s: vyre.i64, f: vyre.f64, acc: vyre.InOut[vyre.u64]):
    i = vyre.gid()
    if i < len(a):
        x = a[i] + vyre.u64(9223372036854775808)
        b[i] = vyre.sqrt(b[i] * f) + vyre.f64(vyre.i64(x) >> 3) + vyre.f64(s)
        vyre.atomic_add(acc, 0, x ^ 7)


def test_wide_kernel_matches_numpy(oracle) -> None:
    a = np.arange(10, dtype=np.uint64) * np.uint64(3 << 60)
    b = np.linspace(0.0, 4.0, 10)
    acc = np.zeros(1, np.uint64)
    out_b, out_acc = wide(a, b, -5, 2.0, acc, backend=oracle)
    x = a + np.uint64(1 << 63)
    with np.errstate(over="ignore"):
        want = np.sqrt(b * 2.0) + (x.view(np.int64) >> 3).astype(np.float64) + -5.0
        assert out_acc[0] == np.bitwise_xor(x, np.uint64(7)).sum(dtype=np.uint64)
    np.testing.assert_array_equal(out_b, want)


def test_64_bit_arrays_are_taken_by_dtype_and_others_refused(oracle) -> None:
    a = np.zeros(4, np.uint64)
    b = np.zeros(4, np.float64)
    with pytest.raises(InvalidProgram, match=r"is a int64 array, but the buffer holds U64 \(uint64\)") as caught:
        wide(a.astype(np.int64), b, 0, 1.0, np.zeros(1, np.uint64), backend=oracle)
    assert "numpy.asarray(x, dtype=numpy.uint64)" in str(caught.value)
    with pytest.raises(InvalidProgram, match=r"is a float32 array, but the buffer holds F64"):
        wide(a, b.astype(np.float32), 0, 1.0, np.zeros(1, np.uint64), backend=oracle)


@pytest.mark.parametrize(("s", "f", "said"), [
    (2**63, 1.0, r"not a I64 \(-9223372036854775808 \.\. 9223372036854775807\)"),
    ("1", 1.0, "not a number"),
])
def test_bad_64_bit_scalars_say_the_range(oracle, s, f, said) -> None:
    a, b = np.zeros(4, np.uint64), np.zeros(4)
    with pytest.raises(InvalidProgram, match=said):
        wide(a, b, s, f, np.zeros(1, np.uint64), backend=oracle)


def test_64_bit_scalars_keep_every_bit(oracle) -> None:
    k = kernel_from_source(
        "@vyre.kernel(workgroup_size=1)\n"
        "def k(u: vyre.u64, i: vyre.i64, f: vyre.f64, out: vyre.Out[vyre.u64, 3]):\n"
        "    out[0] = u\n    out[1] = vyre.u64(i)\n    out[2] = vyre.u64(vyre.i64(f))\n")
    (out,) = k(2**64 - 1, -(2**63), -(2.0**62), backend=oracle)
    assert out.tolist() == [2**64 - 1, 2**63, 2**64 - 2**62]


def test_64_bit_literals(oracle) -> None:
    k = kernel_from_source(
        "@vyre.kernel(workgroup_size=1)\n"
        "def k(out: vyre.Out[vyre.f64, 2], big: vyre.Out[vyre.i64, 1]):\n"
        "    out[0] = vyre.f64_from_bits(0x7FF0000000000000)\n    out[1] = vyre.f64(0.1) + 1e300\n"
        "    big[0] = vyre.i64(-9223372036854775808) + 1\n")
    out, big = k(backend=oracle)
    assert out.tolist() == [np.inf, 0.1 + 1e300] and big.tolist() == [-(2**63) + 1]
    for bad, said in (("vyre.u64(18446744073709551616)", "does not fit U64"),
                      ("vyre.f64_from_bits(18446744073709551616)", "is not a u64"), ("vyre.i64(1.5)", "float")):
        with pytest.raises(ValidationError, match=said):
            kernel_from_source(f"@vyre.kernel\ndef k(out: vyre.Out[vyre.i64, 1]):\n    out[0] = vyre.i64({bad})\n")


def test_no_implicit_widening() -> None:
    with pytest.raises(ValidationError, match="there is no implicit"):
        kernel_from_source("@vyre.kernel\ndef k(a: vyre.In[vyre.u64], b: vyre.In[vyre.u32], o: vyre.Out[vyre.u64]):\n"
                           "    o[vyre.gid()] = a[vyre.gid()] + b[vyre.gid()]\n")


def test_wide_program_prints_back_to_the_same_kernel() -> None:
    text = to_python(wide.program)
    assert "vyre.In[vyre.u64]" in text and "vyre.Uniform[vyre.f64, 1]" in text
    assert kernel_from_source(text).program == wide.program
