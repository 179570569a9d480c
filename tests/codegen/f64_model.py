"""A numpy model of the PTX binary64 operations ``mathlib64`` emits.

``NumpyArith`` implements ``mathlib64.Arith`` on float64 arrays: add/sub/mul/div/sqrt are
numpy's correctly rounded operations (as ``.rn`` PTX), fma is the oracle's exact single-rounding
emulation, rint rounds half to even (``cvt.rni``), min/max return the non-NaN operand
(``min.f64``/``max.f64``), and pow2/frexp are exact. Running a ``mathlib64.ALGORITHMS`` entry
with it evaluates, on the CPU, the instruction sequence the emitter writes.
"""

from __future__ import annotations

import numpy as np

from vyre.reference.floats import fma_f64
from vyre_cuda.codegen.mathlib64 import ALGORITHMS

Arr = np.ndarray


class NumpyArith:
    """``mathlib64.Arith`` on float64 arrays (predicates are bool arrays)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def num(self, x: float) -> Arr:
        return np.full(self.size, x, np.float64)

    def add(self, x: Arr, y: Arr) -> Arr:
        return x + y

    def sub(self, x: Arr, y: Arr) -> Arr:
        return x - y

    def mul(self, x: Arr, y: Arr) -> Arr:
        return x * y

    def div(self, x: Arr, y: Arr) -> Arr:
        return x / y

    def fma(self, x: Arr, y: Arr, z: Arr) -> Arr:
        return np.asarray(fma_f64(x, y, z), np.float64)

    def sqrt(self, x: Arr) -> Arr:
        return np.sqrt(x)

    def neg(self, x: Arr) -> Arr:
        return -x

    def abs(self, x: Arr) -> Arr:
        return np.abs(x)

    def rint(self, x: Arr) -> Arr:
        return np.rint(x)

    def trunc(self, x: Arr) -> Arr:
        return np.trunc(x)

    def min(self, x: Arr, y: Arr) -> Arr:
        return np.fmin(x, y)

    def max(self, x: Arr, y: Arr) -> Arr:
        return np.fmax(x, y)

    def copysign(self, x: Arr, sign: Arr) -> Arr:
        return np.copysign(x, sign)

    def pow2(self, n: Arr) -> Arr:
        return np.ldexp(1.0, np.nan_to_num(n).astype(np.int64))

    def frexp(self, x: Arr) -> tuple[Arr, Arr]:
        mant, e = np.frexp(x)
        return mant * 2.0, (e - 1).astype(np.float64)

    def lt(self, x: Arr, y: Arr) -> Arr:
        return x < y

    def le(self, x: Arr, y: Arr) -> Arr:
        return x <= y

    def eq(self, x: Arr, y: Arr) -> Arr:
        return x == y

    def isnan(self, x: Arr) -> Arr:
        return np.isnan(x)

    def or_(self, p: Arr, q: Arr) -> Arr:
        return p | q

    def select(self, p: Arr, t: Arr, f: Arr) -> Arr:
        return np.where(p, t, f)


def model(op: str, x: np.ndarray) -> np.ndarray:
    """The F64 ``op`` of the cuda backend, evaluated on the CPU."""
    x = np.asarray(x, np.float64).ravel()
    with np.errstate(all="ignore"):
        return np.asarray(ALGORITHMS[op](NumpyArith(x.size), x), np.float64)
