"""The comparison helpers every backend test uses: bit equality with NaN == NaN, and ULP distance."""

from __future__ import annotations

import numpy as np
import pytest

from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.reference.ulp import assert_outputs_equal, assert_within_ulp, mismatches, nan_mask, ulp_distance


def f32(*bits: int) -> np.ndarray:
    return np.array(bits, np.uint32).view(np.float32)


def test_ulp_distance_orders_across_zero_and_nan() -> None:
    expected = f32(0x3F800000, 0x00000000, 0x80000001, 0x7FC00000, 0x7FC00000, 0x7F7FFFFF)
    actual = f32(0x3F800002, 0x80000000, 0x00000001, 0xFFC00001, 0x3F800000, 0x7F800000)
    assert ulp_distance(expected, actual).tolist()[:5] == [2, 0, 2, 0, np.iinfo(np.int64).max]
    assert ulp_distance(expected, actual)[5] == 1


def test_ulp_distance_in_float64_ulps_for_float64_arrays() -> None:
    bits = np.array([0x3FF0000000000000, 0x0000000000000000, 0x8000000000000001, 0x7FF8000000000000,
                     0x7FF8000000000000, 0x7FEFFFFFFFFFFFFF, 0x7FEFFFFFFFFFFFFF], np.uint64)
    other = np.array([0x3FF0000000000002, 0x8000000000000000, 0x0000000000000001, 0xFFF8000000000001,
                      0x3FF0000000000000, 0x7FF0000000000000, 0xFFEFFFFFFFFFFFFF], np.uint64)
    dist = ulp_distance(bits.view(np.float64), other.view(np.float64))
    assert dist.tolist()[:6] == [2, 0, 2, 0, np.iinfo(np.int64).max, 1]
    assert dist[6] > 2**62  # opposite signs far apart: a huge distance, no overflow
    with pytest.raises(AssertionError, match=r"\[0\].*0x3ff0000000000000.*0x3ff0000000000003.*3 ulp"):
        assert_within_ulp(bits[:1].view(np.float64), np.array([0x3FF0000000000003], np.uint64).view(np.float64), 2)


def test_assert_within_ulp_reports_the_worst_elements() -> None:
    assert_within_ulp(f32(0x3F800000), f32(0x3F800001), 1)
    with pytest.raises(AssertionError, match=r"\[0\].*0x3f800000.*0x3f800003.*3 ulp"):
        assert_within_ulp(f32(0x3F800000), f32(0x3F800003), 2, "exp")


def test_bit_equality_with_any_nan_equal() -> None:
    assert mismatches(f32(0x7FC00000, 0x0), f32(0xFFC12345, 0x80000000)).tolist() == [1]
    half = np.array([0x7E00, 0x7C01, 0x7C00], np.uint16).view(np.float16)
    assert nan_mask(half).tolist() == [True, True, False]
    bf16 = np.array([0x7FC0, 0xFF81, 0x7F80], np.uint16)
    assert nan_mask(bf16, bf16=True).tolist() == [True, True, False]
    assert mismatches(bf16, np.array([0x7FFF, 0x7FC1, 0x7F80], np.uint16), bf16=True).size == 0
    assert mismatches(bf16, np.array([0x7FFF, 0x7FC1, 0x7F80], np.uint16)).tolist() == [0, 1]


def test_assert_outputs_equal_names_buffers_and_shows_hex() -> None:
    program = Program([BufferDecl.output("ints", 0, DataType.U32, 3), BufferDecl.output("h", 1, DataType.BF16, 2)],
                      (1, 1, 1), [Node.store("ints", Expr.u32(0), Expr.u32(1))])
    ints = np.array([1, 2, 3], np.uint32)
    bf = np.array([0x7FC0, 0x3F80], np.uint16)
    assert_outputs_equal([ints, bf], [ints.copy(), np.array([0x7FFF, 0x3F80], np.uint16)], program)
    with pytest.raises(AssertionError, match=r"(?s)output .ints.: 1 of 3 .*\[2\] expected 0x00000003"):
        assert_outputs_equal([ints, bf], [np.array([1, 2, 4], np.uint32), bf], program)
    with pytest.raises(AssertionError, match="expected uint32"):
        assert_outputs_equal([ints], [ints.astype(np.int32)])
    with pytest.raises(AssertionError, match="expected 2 outputs"):
        assert_outputs_equal([ints, bf], [ints])


def test_any_two_f64_nans_are_equal_but_other_bits_are_not() -> None:
    bits = np.array([0x7FF8000000000000, 0xFFF4000000000001, 0x7FF0000000000000, 0x8000000000000000], np.uint64)
    other = np.array([0x7FF0000000000001, 0x7FF8000000000000, 0x7FF0000000000000, 0x0000000000000000], np.uint64)
    assert mismatches(bits.view(np.float64), other.view(np.float64)).tolist() == [3]
