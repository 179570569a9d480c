"""The combining operations of ``reduce``, the scans and ``segmented_reduce``, as IR and as numpy.

A ``Monoid`` pairs an op name (add, min, max, and, or, xor) with an element type and knows its
IR combine, the identity used to pad partial tiles, and the value an empty input gives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from vyre.driver.errors import InvalidProgram
from vyre.frontend.annotations import TYPE_NAMES
from vyre.frontend.intrinsics import INTRINSICS, Intrinsic
from vyre.ir import DataType, Expr

OPS = ("add", "min", "max", "and", "or", "xor")
WIDE_TYPES = (DataType.U64, DataType.I64, DataType.F64)
SCAN_TYPES = (DataType.U32, DataType.I32, DataType.F32, *WIDE_TYPES)
FLOAT_TYPES = (DataType.F32, DataType.F64)
ELEMENT_TYPES = (DataType.U8, DataType.I8, DataType.U16, DataType.I16, DataType.U32, DataType.I32, DataType.F32,
                 *WIDE_TYPES)  # every integer type and the floats: select's flags, what a transform may read
_BITWISE = {"and": Expr.bitand, "or": Expr.bitor, "xor": Expr.bitxor}
_U32_MAX, _I32_MAX, _I32_MIN = 0xFFFFFFFF, 0x7FFFFFFF, -0x80000000
_F32_NAN_BITS, _F32_NEG_ZERO_BITS = 0x7FC00000, 0x80000000
_F64_NAN_BITS, _F64_NEG_ZERO_BITS = 0x7FF8000000000000, 0x8000000000000000
_LITERAL = {DataType.U32: Expr.u32, DataType.I32: Expr.i32, DataType.U64: Expr.u64, DataType.I64: Expr.i64}
_FUNCTIONS = {"add": "add", "min": "min", "max": "max", "and": "bitand", "or": "bitor", "xor": "bitxor"}


@dataclass(frozen=True)
class Monoid:
    """An associative op over one arithmetic type (F32 add and min/max are associative up to rounding)."""

    op: str
    dtype: DataType

    def combine(self, a: Expr, b: Expr) -> Expr:
        """``a op b`` with ``a`` the earlier operand (the order matters for F32 rounding)."""
        if self.op == "add":
            return Expr.add(a, b)
        if self.op == "min":
            return Expr.min(a, b)
        if self.op == "max":
            return Expr.max(a, b)
        return _BITWISE[self.op](a, b)

    def pad(self) -> Expr:
        """A true identity: F32 add pads with -0.0 and F32 min/max with NaN (min/max skip NaN)."""
        if self.dtype is DataType.F32:
            if self.op == "add":
                return Expr.f32_from_bits(_F32_NEG_ZERO_BITS)
            return Expr.f32_from_bits(_F32_NAN_BITS)
        if self.dtype is DataType.F64:
            return Expr.f64_from_bits(_F64_NEG_ZERO_BITS if self.op == "add" else _F64_NAN_BITS)
        return self.literal(self.empty_value())

    @property
    def apply(self) -> Intrinsic:
        """The op in a ``@vk.kernel``: ``m.apply(a, b)`` lowers to what ``m.combine(a, b)`` builds."""
        return INTRINSICS[_FUNCTIONS[self.op]]

    @property
    def element(self) -> Any:
        """The element type in a ``@vk.kernel`` (a ``ScalarType``, typed ``Any`` so that type checkers
        take it where the kernel language's stubs want a type): ``m.element(m.pad_number)`` is ``m.pad()``."""
        return TYPE_NAMES[self.dtype]

    @property
    def pad_number(self) -> int | float:
        """``pad()`` as a Python number (-0.0 and NaN for the floats), typed where a kernel uses it."""
        if self.dtype in FLOAT_TYPES:
            return -0.0 if self.op == "add" else float("nan")
        return self.empty_value()

    def empty_value(self) -> int | float:
        """What an empty input reduces to: 0 for add/or/xor, all ones for and, the type's max/min."""
        if self.op in ("add", "or", "xor"):
            return 0
        if self.dtype in FLOAT_TYPES:
            return float("inf") if self.op == "min" else float("-inf")
        info = np.iinfo(self.dtype.np_dtype)
        if self.op == "and":
            return -1 if info.min else int(info.max)
        return int(info.max) if self.op == "min" else int(info.min)

    def literal(self, value: int | float) -> Expr:
        if self.dtype is DataType.F32:
            return Expr.f32(float(value))
        if self.dtype is DataType.F64:
            return Expr.f64(float(value))
        return _LITERAL[self.dtype](int(value))

    def numpy_empty(self) -> np.generic:
        return cast(np.generic, np.array(self.empty_value()).astype(self.dtype.np_dtype)[()])


def monoid(op: str, dtype: DataType) -> Monoid:
    """The monoid of ``op`` over ``dtype``, or ``InvalidProgram`` saying which ops and types work."""
    if op not in OPS:
        raise InvalidProgram(f"unknown op {op!r} for a vyre.lib reduction or scan",
                             f"use one of {', '.join(OPS)}.")
    if dtype not in SCAN_TYPES:
        raise InvalidProgram(f"vyre.lib reductions and scans take (u)int32, (u)int64, float32 or float64 data, "
                             f"not {dtype.name}",
                             "convert the array with .astype(numpy.uint32), int32, float32, uint64, int64 or "
                             "float64 first.")
    if dtype in FLOAT_TYPES and op in _BITWISE:
        bits = "uint32" if dtype is DataType.F32 else "uint64"
        raise InvalidProgram(f"op {op!r} is bitwise and {dtype.np_dtype.name} data has no bitwise {op}",
                             f"use add, min or max on {dtype.np_dtype.name}, or view the bits as {bits}.")
    return Monoid(op, dtype)


COUNT = Monoid("add", DataType.U32)  # counts: of kept elements, of digits, of matches
