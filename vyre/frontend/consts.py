"""Compile-time parameters: ``vyre.Const[T]``, their values at call time, and static conditions.

A parameter annotated ``vyre.Const[int]`` (``[float]``, ``[bool]``, or a vyre scalar type such as
``[vyre.u32]``) takes a Python value when the kernel is called; the kernel is lowered once per
distinct value with that value as a literal. ``if`` conditions and ``range`` bounds made only of
compile-time values, at least one of them a ``Const``, are evaluated here, in Python, when the
kernel is specialised: only the taken branch is lowered, and such loops are unrolled.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre.driver.errors import InvalidProgram
from vyre.frontend.annotations import SCALAR_PARAM_TYPES, ScalarType
from vyre.frontend.names import STATIC_INT_BITS
from vyre.frontend.values import BOOL, Number, Typed, Value, number_expr
from vyre.ir.expr import Expr, literal_value
from vyre.ir.op import Op
from vyre.ir.types import DataType
from vyre.reference.scalar_ops import BINARY

#: a compile-time value: what a ``Const`` parameter holds once checked
Scalar = int | float | bool
_PYTHON_KINDS = (int, float, bool)
_FIX_SPELLING = "write vyre.Const[int], vyre.Const[float], vyre.Const[bool] or vyre.Const[vyre.u32] (any scalar type)"


@dataclass(frozen=True)
class ConstSpec:
    """A ``vyre.Const[...]`` annotation: a Python kind (int, float, bool) or a vyre scalar type."""

    kind: type | ScalarType

    def __repr__(self) -> str:
        kind = self.kind
        return f"vyre.Const[{kind.__name__ if isinstance(kind, type) else repr(kind)}]"

    def check(self, name: str, v: object) -> Scalar:
        """``v`` as this parameter's value (a Python int, float or bool); ``InvalidProgram`` when it is not one."""
        if isinstance(v, np.ndarray) and v.ndim == 0:
            v = v[()]
        if _unhashable(v):
            raise InvalidProgram(f"compile-time parameter {name!r} ({self!r}) got an unhashable {type(v).__name__}; "
                                 "a kernel is specialised per value, so the value must be hashable",
                                 f"pass one {_wanted(self)} for {name!r}; an array is passed to a buffer "
                                 "parameter (vyre.In[...]) instead.")
        dtype = self.kind.dtype if isinstance(self.kind, ScalarType) else None
        kind = self.kind if dtype is None else bool if dtype is BOOL else float if dtype.is_float else int
        is_bool = isinstance(v, (bool, np.bool_))
        if kind is bool and is_bool:
            return bool(v)
        if kind is int and isinstance(v, (int, np.integer)) and not is_bool:
            value: Scalar = int(v)
        elif kind is float and isinstance(v, (int, float, np.integer, np.floating)) and not is_bool:
            value = float(v)
        else:
            raise InvalidProgram(f"compile-time parameter {name!r} is {self!r} and got {_describe(v)}",
                                 f"pass {_wanted(self)} for {name!r}, or change its annotation.")
        if dtype is not None:
            try:
                number_expr(Number(value), dtype)
            except (TypeError, ValueError) as exc:
                reason, _, fix = str(exc).partition(". Fix: ")
                raise InvalidProgram(f"compile-time parameter {name!r} ({self!r}): {reason}",
                                     fix or "pass a value in range.") from None
        return value

    def literal(self, value: Scalar) -> Value:
        """The value as the kernel sees it: a typed literal, or an untyped number typed where it is used."""
        if isinstance(value, bool):
            return Typed(Expr.bool(value), BOOL)
        if isinstance(self.kind, ScalarType):
            dtype = self.kind.dtype
            return Typed(number_expr(Number(value), dtype), dtype)
        return Number(value)


def _unhashable(v: object) -> bool:
    try:
        hash(v)
    except TypeError:
        return True
    return False


def _wanted(spec: ConstSpec) -> str:
    kind = spec.kind
    if isinstance(kind, ScalarType):
        dtype = kind.dtype
        return "True or False" if dtype is BOOL else f"a Python number that fits {dtype.name}"
    return "True or False" if kind is bool else f"a Python {kind.__name__}"


def _describe(v: object) -> str:
    shape = getattr(v, "shape", None)
    return f"an array of shape {tuple(shape)}" if shape is not None else f"{type(v).__name__} {v!r:.40}"


class ConstKind:
    """``vyre.Const``: subscript with ``[int]``, ``[float]``, ``[bool]`` or a vyre scalar type."""

    def __repr__(self) -> str:
        return "vyre.Const"

    def __getitem__(self, kind: Any) -> ConstSpec:
        if kind in _PYTHON_KINDS or isinstance(kind, ScalarType) and kind.dtype in SCALAR_PARAM_TYPES:
            return ConstSpec(kind)
        raise TypeError(f"vyre.Const[...] takes int, float, bool or a scalar vyre type, got {kind!r}. "
                        f"Fix: {_FIX_SPELLING}.")


Const = ConstKind()

#: the most iterations one loop over compile-time bounds unrolls to
MAX_UNROLL = 64


class StaticError(Exception):
    """A compile-time expression that cannot be evaluated (message and Fix for the caller's error)."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.message, self.fix = message, fix


#: name -> (value, is a Const), or None when the name is not a compile-time value
StaticLookup = Callable[[str], "tuple[Scalar, bool] | None"]

_UNARY: dict[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.Not: operator.not_, ast.Invert: operator.invert}
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
    ast.BitXor: operator.xor, ast.LShift: operator.lshift, ast.RShift: operator.rshift}
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge}


def static_eval(node: ast.expr, lookup: StaticLookup) -> tuple[Scalar, bool] | None:
    """``(value, uses a Const)`` of an expression made only of compile-time values, evaluated in Python.

    Literals, names that ``lookup`` resolves, unary ``- ~ not``, arithmetic, one comparison,
    ``and``/``or`` and ``a if c else b``; None for anything else (a variable, a load, a call).
    Raises ``StaticError`` when the arithmetic fails or leaves 64-bit integers.
    """
    if isinstance(node, ast.Constant):
        v = node.value
        return (v, False) if isinstance(v, _PYTHON_KINDS) else None
    if isinstance(node, ast.Name):
        return lookup(node.id)
    parts: list[ast.expr]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        parts = [node.operand]
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        parts = [node.left, node.right]
    elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        parts = [node.left, node.comparators[0]]
    elif isinstance(node, (ast.BoolOp, ast.IfExp)):
        parts = list(node.values) if isinstance(node, ast.BoolOp) else [node.test, node.body, node.orelse]
    else:
        return None
    found = [static_eval(p, lookup) for p in parts]
    if any(f is None for f in found):
        return None
    values = [f[0] for f in found if f is not None]
    uses_const = any(f[1] for f in found if f is not None)
    return _apply(node, values), uses_const


def _apply(node: ast.expr, values: list[Any]) -> Scalar:
    text = ast.unparse(node)
    logical = isinstance(node, ast.BoolOp) or isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
    if logical and not all(isinstance(v, bool) for v in values):
        raise StaticError(f"the operands of `{text}` are not all bools", "compare numbers first: `n != 0 and m > 2`")
    try:
        if isinstance(node, ast.UnaryOp):
            result = _UNARY[type(node.op)](values[0])
        elif isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.LShift) and not 0 <= values[1] <= STATIC_INT_BITS:
                raise StaticError(f"`{text}` shifts by {values[1]}, outside 0 .. {STATIC_INT_BITS}",
                                  "shift compile-time values by at most 64")
            result = _BINARY[type(node.op)](values[0], values[1])
        elif isinstance(node, ast.Compare):
            result = _COMPARE[type(node.ops[0])](values[0], values[1])
        elif isinstance(node, ast.BoolOp):
            result = all(values) if isinstance(node.op, ast.And) else any(values)
        else:
            result = values[1] if values[0] else values[2]
    except (ArithmeticError, TypeError) as exc:
        raise StaticError(f"the compile-time expression `{text}` cannot be evaluated ({exc})",
                          "compute it from numbers and Const parameters that Python can evaluate") from None
    if isinstance(result, int) and not isinstance(result, bool) and result.bit_length() > STATIC_INT_BITS:
        raise StaticError(f"the compile-time expression `{text}` is beyond {STATIC_INT_BITS} bits",
                          "keep compile-time integers within 64 bits")
    return result


#: the integer operators ``fold`` computes (those Python's operators lower to)
_FOLDED_OPS = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.REM, Op.BITAND, Op.BITOR, Op.BITXOR, Op.SHL, Op.SHR})
_INT_TYPES = (DataType.U32, DataType.I32, DataType.U64, DataType.I64)


def fold(v: Typed) -> Typed:
    """``v`` as one literal when it is an integer operator on two literals (``4 * 256`` is ``1024``),
    computed by the oracle's function of that op, so wrapping, shifts and division by zero are the
    IR's; else ``v`` as it is."""
    e = v.expr
    if e.op not in _FOLDED_OPS or v.dtype not in _INT_TYPES or any(a.op != Op.LIT for a in e.args):
        return v
    a, b = (np.array([literal_value(x)], x.dtype.np_dtype) for x in e.args)  # a shift's amount stays U32
    with np.errstate(all="ignore"):
        result = np.asarray(BINARY[e.op](a, b), v.dtype.np_dtype)
    return Typed(number_expr(Number(int(result[0])), v.dtype), v.dtype)


__all__ = ["MAX_UNROLL", "Const", "ConstKind", "ConstSpec", "Scalar", "StaticError", "StaticLookup", "fold",
           "static_eval"]

