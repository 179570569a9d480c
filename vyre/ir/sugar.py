"""Python operator sugar for ``Expr``, for people who build programs with the builder API.

``a + b``, ``a ^ b``, ``-a``, ``~a``, ``a << 3`` ... build the same ``Expr`` as ``Expr.add(a, b)``
and friends. ``==`` stays structural equality of expressions, so comparisons are methods:
``a.lt(b)``, ``a.eq(b)``; every binary and unary constructor also works as a method
(``a.min(b)``, ``x.sqrt()``) while ``Expr.lt(a, b)`` keeps working.

A Python ``int`` or ``float`` on the other side becomes a literal of the Expr's type when the
Expr shows its type by itself (a literal, a cast, an id, ``buf_len``, a comparison, or an
operation on those); otherwise (a ``var`` or a ``load``, whose type lives in the program) an int
is U32 and a float F32: write ``x + Expr.i32(1)`` for I32.
"""

from __future__ import annotations

from typing import Any

from vyre.ir.op import OPS, SHIFT_OPS, Kind, Op, Result
from vyre.ir.types import DataType

U32, I32, F32, BOOL = DataType.U32, DataType.I32, DataType.F32, DataType.BOOL
#: ops whose result is BOOL: comparisons, predicates, and the logical ops (BOOL operands)
_COMPARE = tuple(op for op, info in OPS.items() if info.result is Result.BOOL
                 or info.kind in (Kind.BINARY, Kind.UNARY) and info.operands == (BOOL,))
_U32_RESULT = tuple(op for op, info in OPS.items() if info.result is Result.U32)
_SHIFTS = SHIFT_OPS


def apparent_type(e: Any) -> DataType | None:
    """The type ``e`` shows without a program (None for vars, loads, atomics and calls)."""
    while True:
        op = e.op
        if op in (Op.LIT, Op.CAST):
            return e.dtype
        if op in _COMPARE:
            return BOOL
        if op in _U32_RESULT:
            return U32
        if op == Op.SELECT:
            return apparent_type(e.args[1]) or apparent_type(e.args[2])
        if op in _SHIFTS or len(e.args) == 1 and op not in (Op.LOAD, Op.ATOMIC, Op.CALL):
            e = e.args[0]
            continue
        if op in (Op.VAR, Op.LOAD, Op.ATOMIC, Op.CALL) or not e.args:
            return None
        return apparent_type(e.args[0]) or apparent_type(e.args[1])


def literal(value: int | float | bool, dtype: DataType | None) -> Any:
    """A literal ``Expr`` for a Python number: of ``dtype`` when given, else U32 (int) / F32 (float) / BOOL."""
    from vyre.ir.expr import Expr

    if isinstance(value, bool):
        return Expr.bool(value)
    if isinstance(value, float):
        return Expr.f64(value) if dtype is DataType.F64 else Expr.f32(value)
    build = {I32: Expr.i32, DataType.U64: Expr.u64, DataType.I64: Expr.i64}.get(dtype) if dtype is not None else None
    if build is not None:
        return build(value)
    if dtype in (F32, DataType.F64):
        return (Expr.f64 if dtype is DataType.F64 else Expr.f32)(float(value))
    return Expr.u32(value)


def lift(value: object, like: Any = None, dtype: DataType | None = None) -> Any:
    """``value`` as an ``Expr``: Exprs pass through, numbers become literals typed after ``like``."""
    from vyre.ir.expr import Expr

    if isinstance(value, Expr):
        return value
    if isinstance(value, (int, float)):
        return literal(value, dtype or (apparent_type(like) if like is not None else None))
    raise TypeError(f"expected an Expr or a Python number, got {value!r}. Fix: build it with the Expr constructors.")


def _method(build: Any, cls: type) -> Any:
    """``build`` callable as ``Expr.op(a, b)`` and as ``a.op(b)``; a Python number operand is lifted."""
    if build.__code__.co_argcount == 1:
        return build  # unary: a plain function already works both ways
    shift = build.__name__ in _SHIFTS

    def op(a: Any, b: Any) -> Any:
        if not isinstance(b, cls):
            b = lift(b, None if shift else a)
        if not isinstance(a, cls):
            a = lift(a, b)
        return build(a, b)

    op.__name__, op.__qualname__, op.__doc__ = build.__name__, f"Expr.{build.__name__}", build.__doc__
    return op


class ExprMeta(type):
    """Turns the op constructors that ``vyre.ir.expr`` attaches (static methods) into plain functions.

    A plain function on a class is called unbound as ``Expr.add(a, b)`` and bound as ``a.add(b)``.
    """

    def __setattr__(cls, name: str, value: object) -> None:
        if isinstance(value, staticmethod) and getattr(value.__func__, "__name__", None) == name:
            value = _method(value.__func__, cls)
        super().__setattr__(name, value)


def _op(name: str, swap: bool = False) -> Any:
    shift = name in _SHIFTS

    def operator(self: Any, other: object) -> Any:
        from vyre.ir.expr import Expr

        if not isinstance(other, (Expr, int, float)):
            return NotImplemented
        other = lift(other, None if shift else self, U32 if shift and not swap else None)
        a, b = (other, self) if swap else (self, other)
        return getattr(Expr, name)(a, b)

    operator.__name__ = f"__{'r' if swap else ''}{name}__"
    return operator


class ExprOperators(metaclass=ExprMeta):
    """Operators of ``Expr``: arithmetic, bitwise and shifts build IR; ``==`` stays structural."""

    __slots__ = ()

    __add__, __radd__ = _op("add"), _op("add", True)
    __sub__, __rsub__ = _op("sub"), _op("sub", True)
    __mul__, __rmul__ = _op("mul"), _op("mul", True)
    __truediv__, __rtruediv__ = _op("div"), _op("div", True)
    __floordiv__, __rfloordiv__ = _op("div"), _op("div", True)
    __mod__, __rmod__ = _op("rem"), _op("rem", True)
    __and__, __rand__ = _op("bitand"), _op("bitand", True)
    __or__, __ror__ = _op("bitor"), _op("bitor", True)
    __xor__, __rxor__ = _op("bitxor"), _op("bitxor", True)
    __lshift__, __rlshift__ = _op("shl"), _op("shl", True)
    __rshift__, __rrshift__ = _op("shr"), _op("shr", True)

    def __neg__(self) -> Any:
        from vyre.ir.expr import Expr

        return Expr.neg(self)  # pyright: ignore[reportArgumentType] - self is an Expr

    def __invert__(self) -> Any:
        from vyre.ir.expr import Expr

        return Expr.bitnot(self)  # pyright: ignore[reportArgumentType] - self is an Expr
