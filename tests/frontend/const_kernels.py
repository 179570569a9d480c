"""Kernels with ``vyre.Const`` parameters, shared by the CPU tests (oracle, IR) and the GPU tests."""

from __future__ import annotations

import numpy as np

import vyre
from vyre.lib.blocks import PARAM_WORDS, WG


@vyre.kernel(workgroup_size=64)
def power(x: vyre.In[vyre.f32], y: vyre.Out[vyre.f32], n: vyre.Const[int]):
    """y = x multiplied n times: the loop over a Const bound is unrolled."""
    i = vyre.gid()
    if i < len(x):
        acc = 1.0
        for _ in range(n):
            acc = acc * x[i]
        y[i] = acc


@vyre.kernel(workgroup_size=64)
def power_rolled(x: vyre.In[vyre.f32], y: vyre.Out[vyre.f32], n: vyre.u32):
    """``power`` with n a scalar parameter: the loop stays a loop."""
    i = vyre.gid()
    if i < len(x):
        acc = 1.0
        for _ in range(n):
            acc = acc * x[i]
        y[i] = acc


@vyre.kernel(workgroup_size=64)
def scale_or_shift(x: vyre.In[vyre.i32], y: vyre.Out[vyre.i32], scale: vyre.Const[bool], k: vyre.Const[vyre.i32]):
    """y = x * k or x + k: only the branch the Const selects is emitted."""
    i = vyre.gid()
    if i < len(x):
        if scale:
            y[i] = x[i] * k
        else:
            y[i] = x[i] + k


@vyre.kernel(workgroup_size=64)
def alternating(x: vyre.In[vyre.f32], y: vyre.Out[vyre.f32], n: vyre.Const[int]):
    """x - x + x ...: an unrolled loop's variable is a compile-time value, so its `if` is resolved too."""
    i = vyre.gid()
    if i < len(x):
        acc = 0.0
        for j in range(n):
            t = x[i]
            if j % 2 == 0:
                acc += t
            else:
                acc -= t
        y[i] = acc


@vyre.func
def window(x: vyre.In[vyre.u32], i: vyre.u32, width: vyre.Const[int]):
    s = vyre.u32(0)
    for k in range(width):
        s += x[i + k]  # past the end reads 0
    return s


@vyre.kernel(workgroup_size=64)
def moving_sum(x: vyre.In[vyre.u32], y: vyre.Out[vyre.u32], width: vyre.Const[int]):
    """y[i] = x[i] + ... + x[i + width - 1], through a helper with a Const parameter."""
    i = vyre.gid()
    if i < len(x):
        y[i] = window(x, i, width)


def power_expected(x: np.ndarray, n: int) -> np.ndarray:
    acc = np.ones_like(x)
    for _ in range(n):
        acc = acc * x
    return acc


def moving_sum_expected(x: np.ndarray, width: int) -> np.ndarray:
    padded = np.concatenate([x, np.zeros(width, x.dtype)])
    return sum((padded[k:k + len(x)] for k in range(width)), np.zeros_like(x))


@vyre.kernel(workgroup_size=WG, name="lib_zero_fill")
def zero_fill(out: vyre.InOut[vyre.u32], params: vyre.Uniform[vyre.u32, PARAM_WORDS], n_word: vyre.Const[int]):
    """``vyre.lib.blocks.zero_fill`` (nested builder calls there) as a kernel: the params word is a Const."""
    if vyre.gid() < params[n_word]:  # gid() twice, not a `let`: the builder's program exactly
        out[vyre.gid()] = 0
