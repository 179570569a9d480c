"""A numpy model of the PTX binary64 operations ``mathlib64`` emits.

``NumpyArith`` implements ``mathlib64.Arith`` on float64 arrays: add/sub/mul/div/sqrt are
numpy's correctly rounded operations (as ``.rn`` PTX), fma is the oracle's exact single-rounding
emulation, rint rounds half to even (``cvt.rni``), min/max return the non-NaN operand
(``min.f64``/``max.f64``), and pow2/frexp are exact. Running a ``mathlib64.ALGORITHMS`` entry
with it evaluates, on the CPU, the instruction sequence the emitter writes. The tables below
(documented bounds, references, domains, edge inputs) are shared by the CPU and GPU tests.
"""

from __future__ import annotations

import numpy as np

from vyre.reference.floats import fma_f64
from vyre_cuda._codegen import mathlib64_consts as C
from vyre_cuda._codegen.mathlib64 import ALGORITHMS

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


#: docs/semantics.md: max error of the F64 ops, in ULP of the exact result and against the oracle
EXACT_BOUND = 2.0
ORACLE_BOUND = 2
REF = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sin": np.sin, "cos": np.cos,
       "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh,
       "cosh": np.cosh, "tanh": np.tanh}
#: op -> the finite inputs sampled (the whole finite domain where the result is finite)
DOMAIN = {"exp": (-745.2, 709.78), "exp2": (-1075.0, 1023.99), "log": (0.0, 1.8e308), "log2": (0.0, 1.8e308),
          "sin": (-C.TRIG_LIMIT, C.TRIG_LIMIT), "cos": (-C.TRIG_LIMIT, C.TRIG_LIMIT),
          "tan": (-C.TRIG_LIMIT, C.TRIG_LIMIT), "asin": (-1.0, 1.0), "acos": (-1.0, 1.0),
          "atan": (-1.8e308, 1.8e308), "sinh": (-710.47, 710.47), "cosh": (-710.47, 710.47), "tanh": (-40.0, 40.0)}
EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e-310, 2.2250738585072014e-308, 1e-300,
                  1e-20, 2.0**-26, 0.5, -0.5, 1.0, -1.0, 2.0, 7 / 16, 11 / 16, 19 / 16, 39 / 16, 0.75,
                  0.7499999999999999, 22.0, 709.782712893384, 709.7827128933841, 710.0, -708.3964185322641,
                  -745.1332191019411, -745.1332191019412, -1022.0, -1074.0, -1075.0, 1023.99, 1024.0, 710.4758600739439,
                  710.475860073944, 2.0**50 - 1, 2.0**50, 1.7976931348623157e308, -1.7976931348623157e308])


def samples(op: str, rng: np.random.Generator, n: int = 12000) -> np.ndarray:
    """Inputs of ``op``: random bit patterns inside its domain (every binade), uniform samples of
    the domain and of [-4, 4], then ``EDGES``."""
    lo, hi = DOMAIN[op]
    bits = rng.integers(0, 1 << 64, 4 * n, dtype=np.uint64).view(np.float64)
    bits = bits[(bits >= lo) & (bits <= hi)][:n]  # NaNs compare false: dropped
    near = rng.uniform(max(lo, -4.0), min(hi, 4.0), n)
    return np.concatenate([bits, rng.uniform(max(lo, -1e300), min(hi, 1e300), n), near, EDGES])


def in_domain(op: str, x: np.ndarray) -> np.ndarray:
    """False where the documented result differs from the function (trig of |x| >= 2^50: NaN)."""
    return ~(np.abs(x) >= C.TRIG_LIMIT) if op in ("sin", "cos", "tan") else np.ones(x.shape, bool)
