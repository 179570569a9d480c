"""Type names and parameter kinds of ``@vyre.kernel`` functions.

``vyre.u8 ... vyre.f32``, ``vyre.u64/i64/f64`` and ``vyre.boolean`` name element types: in annotations (``x: vyre.f32``,
``vyre.In[vyre.u32]``), in ``vyre.shared(vyre.f32, 256)``, and as casts inside kernels
(``vyre.u32(x)``; ``vyre.u32(7)`` of a number is a typed literal). Called outside a kernel they
build the same ``Expr`` (cast or literal).

``vyre.In[T]`` (read), ``vyre.InOut[T]`` (read_write), ``vyre.Out[T, N]`` (output of N elements,
``vyre.Out[T]`` sized at dispatch) and ``vyre.Uniform[T, N]`` annotate buffer parameters;
``In`` and ``InOut`` also take a count (``vyre.In[T, N]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vyre.ir.expr import Expr
from vyre.ir.program import Access
from vyre.ir.types import DataType


class ScalarType:
    """An element type name usable in annotations, ``vyre.shared`` and as a cast."""

    __slots__ = ("dtype", "name")

    def __init__(self, dtype: DataType, name: str) -> None:
        self.dtype = dtype
        self.name = name

    def __repr__(self) -> str:
        return f"vyre.{self.name}"

    def __call__(self, value: object) -> Expr:
        """``Expr.cast(T, value)`` for an Expr; a typed literal for a Python number."""
        if isinstance(value, Expr):
            return Expr.cast(self.dtype, value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{self!r}() takes an Expr or a number, got {value!r}. Fix: pass an Expr or a number.")
        return number_literal(self.dtype, value)


def number_literal(dtype: DataType, value: int | float) -> Expr:
    """A literal of ``dtype`` holding a Python number; raises ``ValueError``/``TypeError`` if it cannot."""
    if dtype in _FLOAT_LITERALS:
        return _FLOAT_LITERALS[dtype](float(value))
    if dtype in _INT_LITERALS:
        return _INT_LITERALS[dtype](_exact_int(value, dtype))
    raise TypeError(f"{dtype.name} has no literals. Fix: write a U32, I32, F32, U64, I64 or F64 literal (storage "
                    "types only appear in buffers).")


_FLOAT_LITERALS = {DataType.F32: Expr.f32, DataType.F64: Expr.f64}
_INT_LITERALS = {DataType.U32: Expr.u32, DataType.I32: Expr.i32, DataType.U64: Expr.u64, DataType.I64: Expr.i64}
#: the types with literal forms (``vyre.u64(7)``)
LITERAL_TYPES = (*_INT_LITERALS, *_FLOAT_LITERALS)


def _exact_int(value: int | float, dtype: DataType) -> int:
    if isinstance(value, float):
        raise TypeError(f"{value!r} is a float, not a {dtype.name} literal. Fix: write an int literal.")
    return value


u8 = ScalarType(DataType.U8, "u8")
u16 = ScalarType(DataType.U16, "u16")
u32 = ScalarType(DataType.U32, "u32")
i8 = ScalarType(DataType.I8, "i8")
i16 = ScalarType(DataType.I16, "i16")
i32 = ScalarType(DataType.I32, "i32")
f16 = ScalarType(DataType.F16, "f16")
bf16 = ScalarType(DataType.BF16, "bf16")
f32 = ScalarType(DataType.F32, "f32")
boolean = ScalarType(DataType.BOOL, "boolean")
u64 = ScalarType(DataType.U64, "u64")
i64 = ScalarType(DataType.I64, "i64")
f64 = ScalarType(DataType.F64, "f64")

TYPE_NAMES: dict[DataType, ScalarType] = {
    t.dtype: t for t in (u8, u16, u32, i8, i16, i32, f16, bf16, f32, boolean, u64, i64, f64)}
#: scalar parameter types (a one-element uniform passed as a Python number)
SCALAR_PARAM_TYPES = (DataType.U32, DataType.I32, DataType.F32, DataType.BOOL, DataType.U64, DataType.I64,
                      DataType.F64)


@dataclass(frozen=True)
class BufferSpec:
    """A buffer parameter's annotation: access, element type and count (0 = sized at dispatch)."""

    access: Access
    dtype: DataType
    count: int = 0


class BufferKind:
    """``vyre.In`` / ``InOut`` / ``Out`` / ``Uniform``: subscript with ``[T]`` or ``[T, N]``."""

    def __init__(self, name: str, access: Access, needs_count: bool) -> None:
        self.name, self.access, self.needs_count = name, access, needs_count

    def __repr__(self) -> str:
        return f"vyre.{self.name}"

    def __getitem__(self, args: Any) -> BufferSpec:
        args = args if isinstance(args, tuple) else (args,)
        if args and not isinstance(args[0], ScalarType):
            raise TypeError(f"{self!r}[...] takes a vyre element type first, got {_type_text(args[0])}: "
                            f"{_instead_of(args[0])}. Fix: write {self!r}[{_closest(args[0])}] (element types: "
                            f"{', '.join(map(repr, TYPE_NAMES.values()))}).")
        if not args or len(args) > 2:
            raise TypeError(f"{self!r}[...] takes an element type and an optional count, got {args!r}. "
                            f"Fix: write {self!r}[vyre.f32] or {self!r}[vyre.f32, 256].")
        count = args[1] if len(args) == 2 else 0
        if isinstance(count, bool) or not isinstance(count, int) or count < 0 or (self.needs_count and count < 1):
            raise TypeError(f"{self!r}[...] count must be a positive int, got {count!r}. "
                            f"Fix: write {self!r}[{args[0]!r}, 256].")
        return BufferSpec(self.access, args[0].dtype, count)


class ByExpression:
    """``BY_EXPRESSION``: a ``@vyre.func`` parameter annotated ``Annotated[T, BY_EXPRESSION]`` takes
    its argument's expression as it is, written in place of each use (as a builder reuses one
    ``Expr``), not bound to a ``let`` once: its loads are repeated at each use."""

    def __repr__(self) -> str:
        return "BY_EXPRESSION"


BY_EXPRESSION = ByExpression()

In = BufferKind("In", Access.READ, needs_count=False)
InOut = BufferKind("InOut", Access.READ_WRITE, needs_count=False)
Out = BufferKind("Out", Access.OUTPUT, needs_count=False)
Uniform = BufferKind("Uniform", Access.UNIFORM, needs_count=True)


def _type_text(obj: object) -> str:
    """``numpy.float64`` for numpy types, the repr otherwise."""
    if isinstance(obj, type):
        return f"{obj.__module__}.{obj.__name__}".removeprefix("builtins.")
    return repr(obj)


def _numpy_name(obj: object) -> str | None:
    """The numpy dtype name of a numpy scalar type or dtype (``float64``), else None."""
    try:
        import numpy as np

        plain = obj is int or obj is float or obj is bool  # numpy maps these to 64-bit types: keep their names
        return np.dtype(obj).name if isinstance(obj, (type, np.dtype)) and not plain else None
    except TypeError:
        return None


#: Python and numpy type names -> the vyre type to write instead
_CLOSEST = {"float": f32, "int": i32, "bool": boolean, "float32": f32, "float16": f16, "bfloat16": bf16,
            "uint32": u32, "int32": i32, "uint16": u16, "int16": i16, "uint8": u8, "int8": i8,
            "float64": f64, "int64": i64, "uint64": u64}


def _closest(obj: object) -> str:
    """The vyre type name to write for ``obj`` (f32 when nothing is close)."""
    name = _numpy_name(obj) or getattr(obj, "__name__", "")
    fallback = u32 if "uint" in name else i32 if "int" in name else f32
    return repr(_CLOSEST.get(name, fallback))


def _instead_of(obj: object) -> str:
    """Why ``obj`` is not an element type: complex and extended types have no vyre type, others are spelled vyre.*."""
    name = _numpy_name(obj) or getattr(obj, "__name__", "")
    if name in ("complex64", "complex128", "longdouble", "float128"):
        return "complex and extended-precision types are not supported (the IR computes on 32- and 64-bit scalars)"
    return f"element types are vyre type names: write {_closest(obj)}"
