"""Expressions of the vyre IR: immutable, hashable values with structural equality.

Every expression is one ``Expr`` value: ``op`` names what it is, ``args`` holds its operand
expressions, and ``dtype``/``value``/``name`` carry the op's attributes:

| op | attributes | args |
|---|---|---|
| ``lit`` | dtype, value = the bit pattern (32 or 64 bits; floats as IEEE bits, signed as two's complement) | () |
| ``var`` | name | () |
| ``load`` | name = buffer | (index,) |
| ``buf_len`` | name = buffer | () |
| ``invocation_id`` ``workgroup_id`` ``local_id`` | value = axis 0..2 | () |
| each of ``BINARY_OPS`` / ``UNARY_OPS`` | - | (a, b) / (a,) |
| ``select`` | - | (cond, if_true, if_false) |
| ``cast`` | dtype = target | (value,) |
| ``fma`` | - | (a, b, c) |
| ``atomic`` | name = buffer, value = AtomicOp | (index, value) or (index, value, expected) |
| ``subgroup_ballot`` ``subgroup_shuffle`` ``subgroup_add`` | - | (cond,) / (value, lane) / (value,) |
| ``subgroup_local_id`` ``subgroup_size`` | - | () |
| ``call`` | name = op id | the call's arguments |
"""

from __future__ import annotations

import enum
import math
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union, cast

import numpy as np

from vyre.ir.op import BINARY_OPS as BINARY_OPS
from vyre.ir.op import BY_NAME, OPS, Op
from vyre.ir.op import ID_OPS as ID_OPS
from vyre.ir.op import SUBGROUP_OPS as SUBGROUP_OPS
from vyre.ir.op import UNARY_OPS as UNARY_OPS
from vyre.ir.sugar import ExprOperators
from vyre.ir.types import DataType, f32_bits, f64_bits

#: every expression op (``Op`` order), and those without operands
ALL_OPS: tuple[Op, ...] = tuple(Op)
LEAF_OPS = tuple(op for op, info in OPS.items() if info.shape.max_args == 0)


REPR_DEPTH = 200  # expression levels ``repr`` spells out (the validator allows 128; two frames a level)
_repr_state = threading.local()

class AtomicOp(enum.Enum):
    """Read-modify-write operations of ``Expr.atomic``; each returns the old value.

    The plain ops are sequentially consistent. Each ``*_RELAXED`` twin does the same to its one
    word, atomically, but orders no other memory access (a count, a bin, a flag word that
    carries its own payload); ``Expr.atomic(..., relaxed=True)`` picks it.
    """

    ADD = "add"
    OR = "or"
    AND = "and"
    XOR = "xor"
    MIN = "min"
    MAX = "max"
    EXCHANGE = "exchange"
    COMPARE_EXCHANGE = "compare_exchange"
    ADD_RELAXED = "add_relaxed"
    OR_RELAXED = "or_relaxed"
    AND_RELAXED = "and_relaxed"
    XOR_RELAXED = "xor_relaxed"
    MIN_RELAXED = "min_relaxed"
    MAX_RELAXED = "max_relaxed"
    EXCHANGE_RELAXED = "exchange_relaxed"
    COMPARE_EXCHANGE_RELAXED = "compare_exchange_relaxed"

    def __repr__(self) -> str:
        return f"AtomicOp.{self.name}"

    @property
    def is_relaxed(self) -> bool:
        """Whether this op orders nothing but its own word."""
        return self.name.endswith("_RELAXED")

    @property
    def base(self) -> AtomicOp:
        """The operation itself, whatever its ordering (``ADD_RELAXED.base is ADD``)."""
        return AtomicOp[self.name.removesuffix("_RELAXED")]

    def ordered(self, relaxed: bool) -> AtomicOp:
        """This operation, relaxed or sequentially consistent."""
        return AtomicOp[self.base.name + "_RELAXED"] if relaxed else self.base


def is_atomic_read(e: Expr) -> bool:
    """A relaxed ADD, OR or XOR of the literal 0: it cannot change the word, so it is an atomic read
    (backends may carry it out as a relaxed load, which may return a value that another invocation
    has since replaced, though never one older than this invocation saw before)."""
    return (e.op == Op.ATOMIC and e.value.is_relaxed and e.value.base in (AtomicOp.ADD, AtomicOp.OR, AtomicOp.XOR)
            and e.args[1].op == Op.LIT and e.args[1].value == 0)


Operand = Union["Expr", int, float]  # an Expr, or a Python number the op makes a literal
BufferRef = Union[str, "object"]  # a buffer name or a BufferDecl (its name is used)


def _buffer_name(buffer: BufferRef) -> str:
    name = getattr(buffer, "name", buffer)
    if not isinstance(name, str):
        raise TypeError(f"expected a buffer name or BufferDecl, got {buffer!r}. Fix: pass the buffer's name.")
    return name


def _expr(value: object, what: str) -> Expr:
    if not isinstance(value, Expr):
        raise TypeError(f"{what} must be an Expr, got {value!r}. Fix: wrap literals with Expr.u32/i32/f32/bool.")
    return value


def _int_in(v: object, lo: int, hi: int, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{what} literal must be an int, got {v!r}. Fix: pass a Python int.")
    if not lo <= v <= hi:
        raise ValueError(f"{what} literal {v} is outside [{lo}, {hi}]. Fix: pass a value in range.")
    return v


@dataclass(frozen=True, eq=True, repr=False)
class Expr(ExprOperators):
    """One IR expression node (see the module docstring for the field layout)."""

    op: Op  # a text name given to the constructor becomes its ``Op``
    args: tuple[Expr, ...] = ()
    dtype: DataType | None = None
    value: Any = None  # an int (bits, axis) or an AtomicOp, which one follows from ``op``
    name: str | None = None
    _hash: int = field(default=0, compare=False, repr=False)

    def __post_init__(self) -> None:
        if type(self.op) is not Op:  # a text name: its member (the constructors pass members)
            try:
                op = BY_NAME[self.op]
            except (KeyError, TypeError):
                raise ValueError(f"unknown expression op {self.op!r}. Fix: use one of the Expr constructors.") from None
            object.__setattr__(self, "op", op)
        object.__setattr__(self, "_hash", hash((self.op, self.args, self.dtype, self.value, self.name)))

    def __hash__(self) -> int:
        return self._hash

    def __bool__(self) -> bool:
        raise TypeError("an Expr has no truth value. Fix: build conditions with Expr.eq/lt/... and Node.if_.")

    def __repr__(self) -> str:
        """The constructor call that builds this expression (``Expr.u32(1)``, ``Expr.add(...)``);
        below ``REPR_DEPTH`` levels a nested expression shows as ``...`` (never a RecursionError)."""
        if self.op == Op.LIT:
            return _literal_repr(self)
        if self.op == Op.VAR:
            return f"Expr.var({self.name!r})"
        depth = getattr(_repr_state, "depth", 0)
        if depth >= REPR_DEPTH:
            return "..."
        _repr_state.depth = depth + 1
        try:
            parts = [repr(a) for a in self.args]
        finally:
            _repr_state.depth = depth
        if self.name is not None:
            parts.insert(0, repr(self.name))
        if self.value is not None:
            parts.insert(0, repr(self.value))
        if self.dtype is not None:
            parts.insert(0, repr(self.dtype))
        return f"Expr.{self.op}({', '.join(parts)})"

    # ---- literals and variables -------------------------------------------------------
    @staticmethod
    def u32(v: int) -> Expr:
        """A U32 literal, 0 <= v <= 0xFFFFFFFF."""
        return Expr(Op.LIT, dtype=DataType.U32, value=_int_in(v, 0, 0xFFFFFFFF, "u32"))

    @staticmethod
    def i32(v: int) -> Expr:
        """An I32 literal, -2**31 <= v < 2**31 (stored as its two's complement bits)."""
        return Expr(Op.LIT, dtype=DataType.I32, value=_int_in(v, -(2**31), 2**31 - 1, "i32") & 0xFFFFFFFF)

    @staticmethod
    def f32(v: float) -> Expr:
        """An F32 literal: ``v`` rounded to binary32 (nearest even; overflow gives infinity)."""
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"f32 literal must be a float, got {v!r}. Fix: pass a Python float.")
        return Expr(Op.LIT, dtype=DataType.F32, value=f32_bits(float(v)))

    @staticmethod
    def f32_from_bits(bits: int) -> Expr:
        """An F32 literal given by its exact IEEE bit pattern (NaN payloads, -0.0, subnormals)."""
        return Expr(Op.LIT, dtype=DataType.F32, value=_int_in(bits, 0, 0xFFFFFFFF, "f32 bits"))

    @staticmethod
    def u64(v: int) -> Expr:
        """A U64 literal, 0 <= v < 2**64."""
        return Expr(Op.LIT, dtype=DataType.U64, value=_int_in(v, 0, 2**64 - 1, "u64"))

    @staticmethod
    def i64(v: int) -> Expr:
        """An I64 literal, -2**63 <= v < 2**63 (stored as its two's complement bits)."""
        return Expr(Op.LIT, dtype=DataType.I64, value=_int_in(v, -(2**63), 2**63 - 1, "i64") & (2**64 - 1))

    @staticmethod
    def f64(v: float) -> Expr:
        """An F64 literal: ``v`` as binary64 (a Python float is one already)."""
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"f64 literal must be a float, got {v!r}. Fix: pass a Python float.")
        try:
            return Expr(Op.LIT, dtype=DataType.F64, value=f64_bits(float(v)))
        except OverflowError:
            raise ValueError(f"f64 literal {v} is too large for binary64. Fix: pass a value below 2**1024.") from None

    @staticmethod
    def f64_from_bits(bits: int) -> Expr:
        """An F64 literal given by its exact IEEE bit pattern (NaN payloads, -0.0, subnormals)."""
        return Expr(Op.LIT, dtype=DataType.F64, value=_int_in(bits, 0, 2**64 - 1, "f64 bits"))

    @staticmethod
    def bool(v: bool) -> Expr:
        """A BOOL literal (a 0/1 word in buffers)."""
        if not isinstance(v, (bool, int)):
            raise TypeError(f"bool literal must be a bool, got {v!r}. Fix: pass True or False.")
        return Expr(Op.LIT, dtype=DataType.BOOL, value=1 if v else 0)

    @staticmethod
    def var(name: str) -> Expr:
        """The value of the variable ``name`` (declared by ``Node.let`` or a loop)."""
        if not isinstance(name, str):
            raise TypeError(f"variable name must be a str, got {name!r}. Fix: pass a str.")
        return Expr(Op.VAR, name=name)

    # ---- memory and ids -----------------------------------------------------------------
    @staticmethod
    def load(buffer: BufferRef, index: Expr) -> Expr:
        """Element ``index`` (U32) of ``buffer``, widened to its arithmetic type; out of bounds: a typed zero."""
        return Expr(Op.LOAD, (_expr(index, "index"),), name=_buffer_name(buffer))

    @staticmethod
    def buf_len(buffer: BufferRef) -> Expr:
        """The element count of ``buffer`` at run time (U32)."""
        return Expr(Op.BUF_LEN, name=_buffer_name(buffer))

    @staticmethod
    def invocation_id(axis: int = 0) -> Expr:
        """The global invocation id along ``axis`` (0..2): workgroup_id * workgroup_size + local_id."""
        return Expr(Op.INVOCATION_ID, value=_int_in(axis, 0, 2, "axis"))

    @staticmethod
    def workgroup_id(axis: int = 0) -> Expr:
        """The id of this invocation's workgroup along ``axis`` (0..2)."""
        return Expr(Op.WORKGROUP_ID, value=_int_in(axis, 0, 2, "axis"))

    @staticmethod
    def local_id(axis: int = 0) -> Expr:
        """The id of this invocation within its workgroup along ``axis`` (0..2)."""
        return Expr(Op.LOCAL_ID, value=_int_in(axis, 0, 2, "axis"))

    # ---- composite ------------------------------------------------------------------------
    @staticmethod
    def select(cond: Expr, if_true: Expr, if_false: Expr) -> Expr:
        """``if_true`` where ``cond`` (BOOL) holds, else ``if_false``; all three are evaluated."""
        return Expr(Op.SELECT, (_expr(cond, "cond"), _expr(if_true, "if_true"), _expr(if_false, "if_false")))

    @staticmethod
    def cast(dtype: DataType, value: Expr) -> Expr:
        """``value`` converted to ``dtype`` (an arithmetic type; rules in docs/semantics.md, Casts)."""
        if not isinstance(dtype, DataType):
            raise TypeError(f"cast target must be a DataType, got {dtype!r}. "
                            "Fix: pass DataType.U32/I32/F32/BOOL/U64/I64/F64.")
        return Expr(Op.CAST, (_expr(value, "value"),), dtype=dtype)

    @staticmethod
    def fma(a: Expr, b: Expr, c: Expr) -> Expr:
        """``a * b + c``; F32 and F64 round once (the only contraction), integers wrap."""
        return Expr(Op.FMA, (_expr(a, "a"), _expr(b, "b"), _expr(c, "c")))

    @staticmethod
    def atomic(op: AtomicOp, buffer: BufferRef, index: Expr, value: Expr, expected: Expr | None = None,
               *, relaxed: bool = False) -> Expr:
        """Atomically apply ``op`` to ``buffer[index]`` with ``value``; returns the old value.

        ``expected`` is given exactly for ``AtomicOp.COMPARE_EXCHANGE``. Only on U32/I32/U64/I64
        buffers (and ADD on F64 buffers) that the program may write; out of bounds it returns 0
        and writes nothing. Sequentially
        consistent unless ``relaxed`` (or ``op`` is a ``*_RELAXED`` twin): then atomic on its
        word only, ordering no other access, and cheaper (no fence on ``cuda``).
        """
        if not isinstance(op, AtomicOp):
            raise TypeError(f"atomic op must be an AtomicOp, got {op!r}. Fix: pass AtomicOp.ADD etc.")
        if relaxed:
            op = op.ordered(True)
        args = (_expr(index, "index"), _expr(value, "value"))
        if expected is not None:
            args += (_expr(expected, "expected"),)
        return Expr(Op.ATOMIC, args, value=op, name=_buffer_name(buffer))

    # ---- subgroups ------------------------------------------------------------------------
    @staticmethod
    def subgroup_ballot(cond: Expr) -> Expr:
        """A U32 whose bit ``i`` is ``cond`` of subgroup lane ``i`` (32 lanes)."""
        return Expr(Op.SUBGROUP_BALLOT, (_expr(cond, "cond"),))

    @staticmethod
    def subgroup_shuffle(value: Expr, lane: Expr) -> Expr:
        """``value`` of subgroup lane ``lane & 31``."""
        return Expr(Op.SUBGROUP_SHUFFLE, (_expr(value, "value"), _expr(lane, "lane")))

    @staticmethod
    def subgroup_add(value: Expr) -> Expr:
        """The sum of ``value`` over the 32 lanes of the subgroup, given to every lane."""
        return Expr(Op.SUBGROUP_ADD, (_expr(value, "value"),))

    @staticmethod
    def subgroup_local_id() -> Expr:
        """This invocation's lane in its subgroup (0..31)."""
        return Expr(Op.SUBGROUP_LOCAL_ID)

    @staticmethod
    def subgroup_size() -> Expr:
        """The subgroup size: 32."""
        return Expr(Op.SUBGROUP_SIZE)

    @staticmethod
    def call(op_id: str, *args: Expr) -> Expr:
        """A call of the registered op ``op_id`` (``vyre.ops``), call by value.

        Each argument is evaluated exactly once, left to right, before the op, however often (or
        never) a composed op's expansion uses it (``vyre.ir.expand``).
        """
        if not isinstance(op_id, str):
            raise TypeError(f"op id must be a str, got {op_id!r}. Fix: pass the registered op's id.")
        return Expr(Op.CALL, tuple(_expr(a, "argument") for a in args), name=op_id)

    # ---- the op constructors, as type checkers see them -----------------------------------
    # At run time they are attached after the class from BINARY_OPS / UNARY_OPS (each also a method:
    # ``Expr.add(a, b)`` is ``a.add(b)``); tests/host/test_typing.py checks this list against them.
    if TYPE_CHECKING:
        def add(self: Operand, b: Operand, /) -> Expr: ...
        def sub(self: Operand, b: Operand, /) -> Expr: ...
        def mul(self: Operand, b: Operand, /) -> Expr: ...
        def div(self: Operand, b: Operand, /) -> Expr: ...
        def rem(self: Operand, b: Operand, /) -> Expr: ...
        def bitand(self: Operand, b: Operand, /) -> Expr: ...
        def bitor(self: Operand, b: Operand, /) -> Expr: ...
        def bitxor(self: Operand, b: Operand, /) -> Expr: ...
        def shl(self: Operand, b: Operand, /) -> Expr: ...
        def shr(self: Operand, b: Operand, /) -> Expr: ...
        def eq(self: Operand, b: Operand, /) -> Expr: ...
        def ne(self: Operand, b: Operand, /) -> Expr: ...
        def lt(self: Operand, b: Operand, /) -> Expr: ...
        def gt(self: Operand, b: Operand, /) -> Expr: ...
        def le(self: Operand, b: Operand, /) -> Expr: ...
        def ge(self: Operand, b: Operand, /) -> Expr: ...
        def and_(self: Operand, b: Operand, /) -> Expr: ...
        def or_(self: Operand, b: Operand, /) -> Expr: ...
        def min(self: Operand, b: Operand, /) -> Expr: ...
        def max(self: Operand, b: Operand, /) -> Expr: ...
        def abs_diff(self: Operand, b: Operand, /) -> Expr: ...
        def saturating_add(self: Operand, b: Operand, /) -> Expr: ...
        def saturating_sub(self: Operand, b: Operand, /) -> Expr: ...
        def saturating_mul(self: Operand, b: Operand, /) -> Expr: ...
        def rotate_left(self: Operand, b: Operand, /) -> Expr: ...
        def rotate_right(self: Operand, b: Operand, /) -> Expr: ...
        def mul_high(self: Operand, b: Operand, /) -> Expr: ...
        def neg(self, /) -> Expr: ...
        def bitnot(self, /) -> Expr: ...
        def not_(self, /) -> Expr: ...
        def popcount(self, /) -> Expr: ...
        def clz(self, /) -> Expr: ...
        def ctz(self, /) -> Expr: ...
        def reverse_bits(self, /) -> Expr: ...
        def abs(self, /) -> Expr: ...
        def sign(self, /) -> Expr: ...
        def sqrt(self, /) -> Expr: ...
        def inverse_sqrt(self, /) -> Expr: ...
        def reciprocal(self, /) -> Expr: ...
        def floor(self, /) -> Expr: ...
        def ceil(self, /) -> Expr: ...
        def round(self, /) -> Expr: ...
        def trunc(self, /) -> Expr: ...
        def exp(self, /) -> Expr: ...
        def exp2(self, /) -> Expr: ...
        def log(self, /) -> Expr: ...
        def log2(self, /) -> Expr: ...
        def sin(self, /) -> Expr: ...
        def cos(self, /) -> Expr: ...
        def tan(self, /) -> Expr: ...
        def asin(self, /) -> Expr: ...
        def acos(self, /) -> Expr: ...
        def atan(self, /) -> Expr: ...
        def sinh(self, /) -> Expr: ...
        def cosh(self, /) -> Expr: ...
        def tanh(self, /) -> Expr: ...
        def is_nan(self, /) -> Expr: ...
        def is_inf(self, /) -> Expr: ...
        def is_finite(self, /) -> Expr: ...
        # the Python operators of ExprOperators (``a + 1``, ``1 << a``, ...)
        def __add__(self, other: Operand, /) -> Expr: ...
        def __radd__(self, other: int | float, /) -> Expr: ...
        def __sub__(self, other: Operand, /) -> Expr: ...
        def __rsub__(self, other: int | float, /) -> Expr: ...
        def __mul__(self, other: Operand, /) -> Expr: ...
        def __rmul__(self, other: int | float, /) -> Expr: ...
        def __truediv__(self, other: Operand, /) -> Expr: ...
        def __rtruediv__(self, other: int | float, /) -> Expr: ...
        def __floordiv__(self, other: Operand, /) -> Expr: ...
        def __rfloordiv__(self, other: int | float, /) -> Expr: ...
        def __mod__(self, other: Operand, /) -> Expr: ...
        def __rmod__(self, other: int | float, /) -> Expr: ...
        def __and__(self, other: Operand, /) -> Expr: ...
        def __rand__(self, other: int, /) -> Expr: ...
        def __or__(self, other: Operand, /) -> Expr: ...
        def __ror__(self, other: int, /) -> Expr: ...
        def __xor__(self, other: Operand, /) -> Expr: ...
        def __rxor__(self, other: int, /) -> Expr: ...
        def __lshift__(self, other: Operand, /) -> Expr: ...
        def __rlshift__(self, other: int, /) -> Expr: ...
        def __rshift__(self, other: Operand, /) -> Expr: ...
        def __rrshift__(self, other: int, /) -> Expr: ...
        def __neg__(self) -> Expr: ...
        def __invert__(self) -> Expr: ...


def _binary(op: Op):
    def build(a: Expr, b: Expr) -> Expr:
        return Expr(op, (_expr(a, "a"), _expr(b, "b")))

    build.__name__ = op.value
    build.__doc__ = f"``Expr.{op}(a, b)``: {OPS[op].doc}. Exact rules per type in docs/semantics.md."
    return staticmethod(build)


def _unary(op: Op):
    def build(a: Expr) -> Expr:
        return Expr(op, (_expr(a, "a"),))

    build.__name__ = op.value
    build.__doc__ = f"``Expr.{op}(a)``: {OPS[op].doc}. Exact rules per type in docs/semantics.md."
    return staticmethod(build)


for _op in BINARY_OPS:
    setattr(Expr, _op.value, _binary(_op))
for _op in UNARY_OPS:
    setattr(Expr, _op.value, _unary(_op))


def is_counter_add(e: Expr) -> bool:
    """A relaxed ADD of a literal at a literal index (a shared counter every invocation bumps by the
    same amount: an append slot, a tally). Backends may combine the adds of invocations that run
    together into one (the old value each gets is still that of some order of the separate adds)."""
    return (e.op == Op.ATOMIC and e.value is AtomicOp.ADD_RELAXED and e.args[0].op == Op.LIT
            and e.args[1].op == Op.LIT and e.args[1].value != 0)


def name_of(e: Expr) -> str:
    """``e.name`` as type checkers should see it where ``e.op`` has a name (``var``, ``load``, ``buf_len``,
    ``atomic``, ``call``: the constructors set it, the validator checks it); the value itself, unchecked."""
    return cast(str, e.name)


def dtype_of(e: Expr) -> DataType:
    """``e.dtype`` as type checkers should see it where ``e.op`` has one (``lit``, ``cast``); unchecked."""
    return cast(DataType, e.dtype)


def _literal_repr(e: Expr) -> str:
    """``Expr.u32(7)``, ``Expr.i64(-1)``, ``Expr.f32(0.5)``, ``Expr.bool(True)``; float NaN and infinities
    as ``Expr.f32_from_bits(0x7FC00000)`` (their exact bits)."""
    constructor = {DataType.U32: "u32", DataType.I32: "i32", DataType.F32: "f32", DataType.BOOL: "bool",
                   DataType.U64: "u64", DataType.I64: "i64", DataType.F64: "f64"}
    name = constructor.get(e.dtype) if isinstance(e.dtype, DataType) else None
    if name is None or not isinstance(e.value, int):
        return f"Expr('lit', dtype={e.dtype!r}, value={e.value!r})"
    value = literal_value(e)
    if name in ("f32", "f64"):
        if not math.isfinite(value):
            return f"Expr.{name}_from_bits(0x{int(e.value):0{e.dtype.size * 2}X})"
        text = str(np.float32(value)) if name == "f32" else repr(value)  # shortest text that reads back
        return f"Expr.{name}({text})"
    return f"Expr.{name}({value!r})"


def literal_value(e: Expr) -> int | float | bool:
    """The Python value of a literal (floats as float, signed integers signed, BOOL as bool)."""
    from vyre.ir.types import bits_f32, bits_f64

    bits = int(e.value)
    if e.dtype is DataType.F32:
        return bits_f32(bits)
    if e.dtype is DataType.F64:
        return bits_f64(bits)
    if e.dtype in (DataType.I32, DataType.I64):
        width = e.dtype.bits
        return bits - (1 << width) if bits >> (width - 1) else bits
    if e.dtype is DataType.BOOL:
        return bool(bits)
    return bits


def is_nan_literal(e: Expr) -> bool:
    return e.op == Op.LIT and e.dtype in (DataType.F32, DataType.F64) and math.isnan(literal_value(e))
