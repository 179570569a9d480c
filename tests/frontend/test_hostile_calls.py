"""Hostile arguments to ``@vyre.kernel`` calls (issue 30): refused with a Fix, never reinterpreted.

An array where a scalar goes, ``bytes`` or a bool for a numeric scalar, and 2-D arrays used to be
accepted and silently changed meaning (element 0, raw bits, a flattened result).
"""

from __future__ import annotations

import numpy as np
import pytest

import vyre
from tests.refusals import refused


@vyre.kernel(workgroup_size=64)
def saxpy(a: vyre.f32, x: vyre.In[vyre.f32], y: vyre.InOut[vyre.f32]):
    i = vyre.gid()
    if i < len(x):
        y[i] = a * x[i] + y[i]


@vyre.kernel(workgroup_size=64)
def add_u32(k: vyre.u32, y: vyre.InOut[vyre.u32]):
    i = vyre.gid()
    if i < len(y):
        y[i] = y[i] + k


@vyre.kernel(workgroup_size=64)
def flag(on: vyre.boolean, y: vyre.InOut[vyre.u32]):
    i = vyre.gid()
    if i < len(y) and on:
        y[i] = 1


@vyre.kernel(workgroup_size=64)
def copy(x: vyre.In[vyre.u32], y: vyre.InOut[vyre.u32]):
    i = vyre.gid()
    if i < len(y):
        y[i] = x[i]



X = np.arange(8, dtype=np.float32)


@pytest.mark.parametrize("value", [X, np.ones(1, np.float32), [2.0], (2.0,)], ids=["array", "one", "list", "tuple"])
def test_array_for_a_scalar_is_refused(value) -> None:
    refused(lambda: saxpy(value, X, np.ones(8, np.float32)), "'a'", "scalar")


def test_bytes_for_a_scalar_is_refused() -> None:
    refused(lambda: saxpy(b"\x00\x00\x80?", X, np.ones(8, np.float32)), "'a'", "bytes")


@pytest.mark.parametrize("value", [True, np.bool_(False)])
def test_bool_for_a_numeric_scalar_is_refused(value) -> None:
    refused(lambda: add_u32(value, np.zeros(4, np.uint32)), "'k'", "bool")
    refused(lambda: saxpy(value, X, np.ones(8, np.float32)), "'a'", "bool")


def test_bool_for_a_boolean_scalar_works() -> None:
    (on,) = flag(True, np.zeros(4, np.uint32))
    (off,) = flag(np.bool_(False), np.zeros(4, np.uint32))
    assert on.tolist() == [1] * 4 and off.tolist() == [0] * 4


def test_numbers_still_work() -> None:
    (y,) = saxpy(np.float32(2.0), X, np.ones(8, np.float32))
    assert y.tolist() == (2 * X + 1).tolist()
    (z,) = add_u32(np.uint32(3), np.zeros(2, np.uint32))
    (w,) = saxpy(np.array(2.0), X, np.ones(8, np.float32))  # a 0-d array is a number
    assert z.tolist() == [3, 3] and w.tolist() == y.tolist()


@pytest.mark.parametrize("kernel_args", ["copy", "saxpy"])
def test_2d_arrays_are_refused(kernel_args: str) -> None:
    grid = np.zeros((4, 4), np.uint32)
    if kernel_args == "copy":
        refused(lambda: copy(grid, np.zeros(16, np.uint32)), "'x'", "2-D", ".ravel()")
    else:
        refused(lambda: saxpy(2.0, X, np.ones((2, 4), np.float32)), "'y'", "2-D", ".ravel()")


def test_inputs_refuses_like_a_call() -> None:
    refused(lambda: saxpy.inputs(X, X, X), "'a'")
