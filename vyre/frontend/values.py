"""What a kernel expression lowers to before it is an ``Expr``: typed values and untyped numbers.

A Python number literal stays untyped (``Number``) until its context gives it a type: the other
operand of a binary op, the variable it is assigned to, the buffer it is stored into, an index
(U32). Alone, an int is U32; a float literal is always F32.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vyre.frontend.annotations import number_literal
from vyre.ir.expr import Expr
from vyre.ir.program import BufferDecl
from vyre.ir.types import DataType

U32, I32, F32, BOOL = DataType.U32, DataType.I32, DataType.F32, DataType.BOOL


@dataclass(frozen=True)
class Typed:
    """An expression and its type."""

    expr: Expr
    dtype: DataType


@dataclass(frozen=True)
class Owned(Typed):
    """A ``@vyre.func`` call's value that is one of the helper's own variables, dead once it returns:
    a new name assigned it takes that variable instead of a copy."""


@dataclass(frozen=True)
class Number:
    """A Python int or float literal whose type comes from its context."""

    value: int | float

    def default_type(self) -> DataType:
        return F32 if isinstance(self.value, float) else U32


@dataclass(frozen=True)
class Untyped:
    """An expression of untyped numbers only (``1 + 2``, ``1 if c else 0``): built once its type is known."""

    build: Callable[[DataType], Typed]
    default: DataType

    def default_type(self) -> DataType:
        return self.default


@dataclass(frozen=True)
class Buffer:
    """A name that refers to a buffer (a parameter or ``vyre.shared``); only indexable."""

    decl: BufferDecl


@dataclass(frozen=True)
class PyObject:
    """A Python object found by name (an intrinsic, a ``@vyre.func``, a module, a type name)."""

    obj: object


Value = Typed | Number | Untyped | Buffer | PyObject


def peer_type(values: list[Value]) -> DataType:
    """The type untyped operands take among ``values``: the first typed one's, else F32 if any float, else U32."""
    for v in values:
        if isinstance(v, Typed):
            return v.dtype
    return F32 if any(isinstance(v, (Number, Untyped)) and v.default_type() is F32 for v in values) else U32


def number_expr(n: Number, dtype: DataType) -> Expr:
    """The literal ``n`` as ``dtype``; raises ``ValueError``/``TypeError`` with a Fix when it does not fit."""
    if dtype is BOOL:
        raise TypeError(f"the number {int_text(n.value)} is not a BOOL. Fix: write True or False, or compare: x != 0")
    if isinstance(n.value, float) and dtype not in (F32, DataType.F64):
        raise TypeError(f"the float literal {n.value!r} is used as {dtype.name}. Fix: write an int literal, "
                        f"or cast: vyre.{dtype.name.lower()}(...)")
    if dtype is F32 and isinstance(n.value, int) and abs(n.value) >= _F32_INT_LIMIT:
        raise ValueError(f"the number {int_text(n.value)} does not fit F32 (at most about 3.4e38). Fix: write a "
                         "float literal in range (1e38), or vyre.f32_from_bits(0x7F800000) for infinity")
    if dtype is DataType.F64 and isinstance(n.value, int) and abs(n.value) >= _F64_INT_LIMIT:
        raise ValueError(f"the number {int_text(n.value)} does not fit F64 (at most about 1.8e308). Fix: write a "
                         "float literal in range, or vyre.f64_from_bits(0x7FF0000000000000) for infinity")
    lo, hi = _INT_RANGES.get(dtype, (None, None))
    if lo is not None and hi is not None and not lo <= n.value <= hi:
        other = "vyre.i32" if n.value < 0 else "vyre.u32"
        raise ValueError(f"the number {int_text(n.value)} does not fit {dtype.name} ({lo} .. {hi}). Fix: write a "
                         f"value in range, or make the other operand {other} (e.g. {other}(x))")
    return number_literal(dtype, n.value)


def int_text(value: int | float, max_bits: int = 128) -> str:
    """``value`` for a message: its digits, or its size in bits when it is too long to print usefully."""
    if isinstance(value, int) and value.bit_length() > max_bits:
        return f"({'-' if value < 0 else ''}a {value.bit_length()}-bit integer)"
    return str(value)


_INT_RANGES = {U32: (0, 0xFFFFFFFF), I32: (-(2**31), 2**31 - 1), DataType.U64: (0, 2**64 - 1),
               DataType.I64: (-(2**63), 2**63 - 1)}
_F32_INT_LIMIT = 2**128  # every int at least this large rounds to infinity as an F32
_F64_INT_LIMIT = 2**1024  # and as an F64 (Python cannot convert it to a float at all)
