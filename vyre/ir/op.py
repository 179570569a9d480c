"""The expression ops of the vyre IR: the ``Op`` enum and one table of facts per op (``OPS``).

Everything that treats ops one by one derives from this table: the ``Expr`` constructors and their
docstrings, the shapes the validator and the formats check (``vyre.ir.shape``), the type rules
(``vyre.ir.typing``), the text and wire names (``vyre.ir.text``, ``vyre.ir.wire``), operator sugar
(``vyre.ir.sugar``), the random program generator, and the tables of the backends: the oracle's
lane functions (``vyre.reference.scalar_ops``) and the PTX lowerings (``vyre_cuda._codegen.ops``),
which tests check cover every op of their kind.

``Op`` is a ``str`` enum: ``Op.ADD == "add"``, it hashes like its name and prints as it, so code
that compares ``Expr.op`` with a string keeps working. An op's text name (``.vyre``) is its value;
its wire code is its position in ``Op`` (wire version 2: the order never changes; new ops go last).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from vyre.ir.types import DataType


class Op(str, enum.Enum):
    """One expression op; the value is its text name, the declaration order its wire code."""

    __str__ = str.__str__
    __format__ = str.__format__
    __hash__ = str.__hash__

    LIT = "lit"
    VAR = "var"
    LOAD = "load"
    BUF_LEN = "buf_len"
    INVOCATION_ID = "invocation_id"
    WORKGROUP_ID = "workgroup_id"
    LOCAL_ID = "local_id"
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    REM = "rem"
    BITAND = "bitand"
    BITOR = "bitor"
    BITXOR = "bitxor"
    SHL = "shl"
    SHR = "shr"
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    GT = "gt"
    LE = "le"
    GE = "ge"
    AND_ = "and_"
    OR_ = "or_"
    MIN = "min"
    MAX = "max"
    ABS_DIFF = "abs_diff"
    SATURATING_ADD = "saturating_add"
    SATURATING_SUB = "saturating_sub"
    SATURATING_MUL = "saturating_mul"
    ROTATE_LEFT = "rotate_left"
    ROTATE_RIGHT = "rotate_right"
    MUL_HIGH = "mul_high"
    NEG = "neg"
    BITNOT = "bitnot"
    NOT_ = "not_"
    POPCOUNT = "popcount"
    CLZ = "clz"
    CTZ = "ctz"
    REVERSE_BITS = "reverse_bits"
    ABS = "abs"
    SIGN = "sign"
    SQRT = "sqrt"
    INVERSE_SQRT = "inverse_sqrt"
    RECIPROCAL = "reciprocal"
    FLOOR = "floor"
    CEIL = "ceil"
    ROUND = "round"
    TRUNC = "trunc"
    EXP = "exp"
    EXP2 = "exp2"
    LOG = "log"
    LOG2 = "log2"
    SIN = "sin"
    COS = "cos"
    TAN = "tan"
    ASIN = "asin"
    ACOS = "acos"
    ATAN = "atan"
    SINH = "sinh"
    COSH = "cosh"
    TANH = "tanh"
    IS_NAN = "is_nan"
    IS_INF = "is_inf"
    IS_FINITE = "is_finite"
    SELECT = "select"
    CAST = "cast"
    FMA = "fma"
    ATOMIC = "atomic"
    SUBGROUP_BALLOT = "subgroup_ballot"
    SUBGROUP_SHUFFLE = "subgroup_shuffle"
    SUBGROUP_ADD = "subgroup_add"
    SUBGROUP_LOCAL_ID = "subgroup_local_id"
    SUBGROUP_SIZE = "subgroup_size"
    CALL = "call"

    def __repr__(self) -> str:
        return f"Op.{self.name}"

    @property
    def info(self) -> OpInfo:
        """This op's facts (``OPS[self]``)."""
        return OPS[self]

    @property
    def wire_code(self) -> int:
        """The op's code in the wire form: its position in ``Op``."""
        return _WIRE_CODE[self]


class Kind(enum.Enum):
    """What sort of op it is, which says how its operands are typed and which backend table lowers it."""

    LEAF = "leaf"  # no operands: lit, var, buf_len, the subgroup lane id and size
    ID = "id"  # a grid id along an axis (value 0..2)
    MEMORY = "memory"  # load and atomic: read (and write) a buffer
    BINARY = "binary"  # a pure operator on two operands (the ``operands`` types)
    UNARY = "unary"  # a pure operator on one operand
    COMPOSITE = "composite"  # select, cast, fma: their own type rules
    SUBGROUP = "subgroup"  # a subgroup operation with operands
    CALL = "call"  # a call of a registered op (``vyre.ops``)


class Result(enum.Enum):
    """The type rule of a result."""

    OPERAND = "operand"  # the type of the first operand
    BOOL = "bool"
    U32 = "u32"
    OWN = "own"  # the typer's own rule (literals, variables, loads, casts, atomics, calls ...)


@dataclass(frozen=True)
class Shape:
    """Which ``Expr`` fields an op uses: arity range, a dtype, a value kind, a name."""

    min_args: int
    max_args: int | None  # None: any number (``call``)
    dtype: bool = False
    value: str | None = None  # "bits" (literal pattern), "axis" (0..2), "atomic" (AtomicOp)
    name: bool = False

    @property
    def fixed_arity(self) -> bool:
        return self.max_args == self.min_args


@dataclass(frozen=True)
class OpInfo:
    """The facts of one op. ``operands``: the types the (first) operand may have, for binary and
    unary operators (both operands share it unless ``shift``: then the second is a U32 amount)."""

    op: Op
    kind: Kind
    shape: Shape
    result: Result = Result.OWN
    operands: tuple[DataType, ...] = ()
    shift: bool = False
    pure: bool = True  # False: it writes memory (atomic)
    collective: bool = False  # it exchanges values between the lanes of a subgroup: every lane must reach it
    approximate: bool = False  # its result has a documented ULP bound instead of being exact
    doc: str = ""  # what it computes (the docstring of its ``Expr`` constructor)

    @property
    def text_name(self) -> str:
        """The op's name in ``.vyre`` text (and of its ``Expr`` constructor)."""
        return self.op.value

    @property
    def arity(self) -> int | None:
        """The number of operands, or None when it varies (atomic, call)."""
        return self.shape.min_args if self.shape.fixed_arity else None


U32, I32, F32, BOOL = DataType.U32, DataType.I32, DataType.F32, DataType.BOOL
U64, I64, F64 = DataType.U64, DataType.I64, DataType.F64
NUM = (U32, I32, F32, U64, I64, F64)
INT = (U32, I32, U64, I64)
FLOAT = (F32, F64)
ANY = (U32, I32, F32, BOOL, U64, I64, F64)
BITS = (U32, I32, BOOL, U64, I64)
#: operand types of the transcendental ops (a documented ULP bound): F32 and F64
TRANSCENDENTAL_TYPES: tuple[DataType, ...] = FLOAT

_LEAF, _BINARY, _UNARY = Shape(0, 0), Shape(2, 2), Shape(1, 1)


def _bin(op: Op, operands: tuple[DataType, ...], doc: str, result: Result = Result.OPERAND,
         shift: bool = False) -> OpInfo:
    return OpInfo(op, Kind.BINARY, _BINARY, result, operands, shift=shift, doc=doc)


def _un(op: Op, operands: tuple[DataType, ...], doc: str, result: Result = Result.OPERAND,
        approximate: bool = False) -> OpInfo:
    return OpInfo(op, Kind.UNARY, _UNARY, result, operands, approximate=approximate, doc=doc)


def _cmp(op: Op, operands: tuple[DataType, ...], doc: str) -> OpInfo:
    return _bin(op, operands, doc, Result.BOOL)


def _shift(op: Op, doc: str) -> OpInfo:
    return _bin(op, INT, doc, shift=True)


def _math(op: Op, doc: str) -> OpInfo:
    return _un(op, TRANSCENDENTAL_TYPES, doc, approximate=True)


_ID = Shape(0, 0, value="axis")
_TABLE = (
    OpInfo(Op.LIT, Kind.LEAF, Shape(0, 0, dtype=True, value="bits")),
    OpInfo(Op.VAR, Kind.LEAF, Shape(0, 0, name=True)),
    OpInfo(Op.LOAD, Kind.MEMORY, Shape(1, 1, name=True)),
    OpInfo(Op.BUF_LEN, Kind.LEAF, Shape(0, 0, name=True), Result.U32),
    OpInfo(Op.INVOCATION_ID, Kind.ID, _ID, Result.U32),
    OpInfo(Op.WORKGROUP_ID, Kind.ID, _ID, Result.U32),
    OpInfo(Op.LOCAL_ID, Kind.ID, _ID, Result.U32),
    _bin(Op.ADD, NUM, "a + b (integers wrap)"),
    _bin(Op.SUB, NUM, "a - b (integers wrap)"),
    _bin(Op.MUL, NUM, "a * b (integers wrap)"),
    _bin(Op.DIV, NUM, "a / b (integers: toward zero; x / 0 is all ones)"),
    _bin(Op.REM, INT, "a % b (the sign of a; x % 0 is 0)"),
    _bin(Op.BITAND, BITS, "bitwise and (logical on BOOL)"),
    _bin(Op.BITOR, BITS, "bitwise or (logical on BOOL)"),
    _bin(Op.BITXOR, BITS, "bitwise xor (logical on BOOL)"),
    _shift(Op.SHL, "a << (b & 31) (b & 63 at 64 bits)"),
    _shift(Op.SHR, "a >> (b & 31) (b & 63 at 64 bits), arithmetic for I32/I64"),
    _cmp(Op.EQ, ANY, "a == b (BOOL)"),
    _cmp(Op.NE, ANY, "a != b (BOOL; true when either is NaN)"),
    _cmp(Op.LT, NUM, "a < b (BOOL)"),
    _cmp(Op.GT, NUM, "a > b (BOOL)"),
    _cmp(Op.LE, NUM, "a <= b (BOOL)"),
    _cmp(Op.GE, NUM, "a >= b (BOOL)"),
    _bin(Op.AND_, (BOOL,), "a and b (BOOL operands)"),
    _bin(Op.OR_, (BOOL,), "a or b (BOOL operands)"),
    _bin(Op.MIN, NUM, "the smaller operand (F32: the other one when one is NaN)"),
    _bin(Op.MAX, NUM, "the larger operand (F32: the other one when one is NaN)"),
    _bin(Op.ABS_DIFF, NUM, "|a - b|"),
    _bin(Op.SATURATING_ADD, INT, "a + b clamped to the type's range"),
    _bin(Op.SATURATING_SUB, INT, "a - b clamped to the type's range"),
    _bin(Op.SATURATING_MUL, INT, "a * b clamped to the type's range"),
    _shift(Op.ROTATE_LEFT, "a rotated left by b & 31 (b & 63) bits"),
    _shift(Op.ROTATE_RIGHT, "a rotated right by b & 31 (b & 63) bits"),
    _bin(Op.MUL_HIGH, INT, "the high half of the double-width product"),
    _un(Op.NEG, NUM, "-a (integers wrap)"),
    _un(Op.BITNOT, INT, "~a"),
    _un(Op.NOT_, (BOOL,), "not a (BOOL)"),
    _un(Op.POPCOUNT, INT, "the number of set bits"),
    _un(Op.CLZ, INT, "leading zero bits (the width for 0)"),
    _un(Op.CTZ, INT, "trailing zero bits (the width for 0)"),
    _un(Op.REVERSE_BITS, INT, "the bits in reverse order"),
    _un(Op.ABS, NUM, "|a| (signed MIN stays MIN)"),
    _un(Op.SIGN, NUM, "-1, 0 or 1"),
    _un(Op.SQRT, FLOAT, "the square root (correctly rounded)"),
    _un(Op.INVERSE_SQRT, FLOAT, "1 / sqrt(a)"),
    _un(Op.RECIPROCAL, FLOAT, "1 / a (correctly rounded)"),
    _un(Op.FLOOR, FLOAT, "rounded down"),
    _un(Op.CEIL, FLOAT, "rounded up"),
    _un(Op.ROUND, FLOAT, "rounded half away from zero"),
    _un(Op.TRUNC, FLOAT, "rounded toward zero"),
    _math(Op.EXP, "e ** a"),
    _math(Op.EXP2, "2 ** a"),
    _math(Op.LOG, "the natural logarithm"),
    _math(Op.LOG2, "the base-2 logarithm"),
    _math(Op.SIN, "the sine"),
    _math(Op.COS, "the cosine"),
    _math(Op.TAN, "the tangent"),
    _math(Op.ASIN, "the arcsine"),
    _math(Op.ACOS, "the arccosine"),
    _math(Op.ATAN, "the arctangent"),
    _math(Op.SINH, "the hyperbolic sine"),
    _math(Op.COSH, "the hyperbolic cosine"),
    _math(Op.TANH, "the hyperbolic tangent"),
    _un(Op.IS_NAN, FLOAT, "a is a NaN (BOOL)", Result.BOOL),
    _un(Op.IS_INF, FLOAT, "a is an infinity (BOOL)", Result.BOOL),
    _un(Op.IS_FINITE, FLOAT, "a is finite (BOOL)", Result.BOOL),
    OpInfo(Op.SELECT, Kind.COMPOSITE, Shape(3, 3)),
    OpInfo(Op.CAST, Kind.COMPOSITE, Shape(1, 1, dtype=True)),
    OpInfo(Op.FMA, Kind.COMPOSITE, Shape(3, 3), Result.OPERAND, NUM),
    OpInfo(Op.ATOMIC, Kind.MEMORY, Shape(2, 3, value="atomic", name=True), pure=False),
    OpInfo(Op.SUBGROUP_BALLOT, Kind.SUBGROUP, _UNARY, Result.U32, (BOOL,), collective=True),
    OpInfo(Op.SUBGROUP_SHUFFLE, Kind.SUBGROUP, _BINARY, Result.OPERAND, ANY, collective=True),
    OpInfo(Op.SUBGROUP_ADD, Kind.SUBGROUP, _UNARY, Result.OPERAND, NUM, collective=True),
    OpInfo(Op.SUBGROUP_LOCAL_ID, Kind.LEAF, _LEAF, Result.U32),
    OpInfo(Op.SUBGROUP_SIZE, Kind.LEAF, _LEAF, Result.U32),
    OpInfo(Op.CALL, Kind.CALL, Shape(0, None, name=True)),
)
#: every op's facts, in ``Op`` order
OPS: dict[Op, OpInfo] = {info.op: info for info in _TABLE}
assert list(OPS) == list(Op), "the table lists every op once, in Op order"
_WIRE_CODE = {op: i for i, op in enumerate(Op)}
#: an op by its text name (an ``Op`` finds itself too: it hashes and compares as its name)
BY_NAME: dict[str, Op] = {op.value: op for op in Op}


def ops_of(kind: Kind) -> tuple[Op, ...]:
    """The ops of ``kind``, in ``Op`` order."""
    return tuple(op for op, info in OPS.items() if info.kind is kind)


BINARY_OPS = ops_of(Kind.BINARY)
UNARY_OPS = ops_of(Kind.UNARY)
ID_OPS = ops_of(Kind.ID)
SUBGROUP_OPS = (*ops_of(Kind.SUBGROUP), Op.SUBGROUP_LOCAL_ID, Op.SUBGROUP_SIZE)
#: ops whose result is BOOL whatever their operand type (comparisons, the float predicates)
BOOL_RESULT_OPS = tuple(op for op, info in OPS.items() if info.result is Result.BOOL)
#: shift-like ops: the amount (second operand) is always U32, masked to the shifted type's width
SHIFT_OPS = tuple(op for op, info in OPS.items() if info.shift)
#: subgroup ops that exchange values between lanes: every lane of the subgroup must reach them
COLLECTIVE_OPS = tuple(op for op, info in OPS.items() if info.collective)
