"""Type rules of the vyre IR: each op's operand types and result come from its facts in ``vyre.ir.op``.

The validator reports ``IRTypeError`` findings; the oracle and the PTX emitter call
``ExprTyper.type_of`` on validated programs to learn each expression's type.
"""

from __future__ import annotations

from collections.abc import Mapping

from vyre.ir.expr import AtomicOp, Expr, dtype_of, name_of
from vyre.ir.op import ANY as ANY
from vyre.ir.op import BINARY_OPS, BOOL, F64, OPS, U32, UNARY_OPS, Op, Result
from vyre.ir.op import BITS as BITS
from vyre.ir.op import FLOAT as FLOAT
from vyre.ir.op import INT as INT
from vyre.ir.op import NUM as NUM
from vyre.ir.op import SHIFT_OPS as SHIFT_OPS
from vyre.ir.op import TRANSCENDENTAL_TYPES as TRANSCENDENTAL_TYPES
from vyre.ir.program import Program
from vyre.ir.types import DataType

#: binary op -> operand types it accepts (both operands the same type unless in SHIFT_OPS)
BINARY_TYPES: dict[Op, tuple[DataType, ...]] = {op: OPS[op].operands for op in BINARY_OPS}
#: ops whose result is BOOL whatever the operand type
COMPARE_OPS = tuple(op for op in BINARY_OPS if OPS[op].result is Result.BOOL)
_COMPARE = frozenset(COMPARE_OPS)
#: float ops with exact (correctly rounded or rounding-free) results: on F32 and F64
EXACT_FLOAT_UNARY = tuple(op for op in UNARY_OPS if OPS[op].operands == FLOAT and OPS[op].result is Result.OPERAND
                          and not OPS[op].approximate)
#: transcendental ops (a documented ULP bound, ``TRANSCENDENTAL_TYPES``)
TRANSCENDENTAL_UNARY = tuple(op for op in UNARY_OPS if OPS[op].approximate)
FLOAT_UNARY = EXACT_FLOAT_UNARY + TRANSCENDENTAL_UNARY
UNARY_TYPES: dict[Op, tuple[DataType, ...]] = {op: OPS[op].operands for op in UNARY_OPS}
PREDICATE_UNARY = tuple(op for op in UNARY_OPS if OPS[op].result is Result.BOOL)
#: buffer types atomics work on, per operation (F64 buffers take ADD only)
ATOMIC_TYPES: dict[AtomicOp, tuple[DataType, ...]] = {op: INT for op in AtomicOp if not op.is_relaxed}
ATOMIC_TYPES[AtomicOp.ADD] = INT + (F64,)
SHUFFLE_TYPES = OPS[Op.SUBGROUP_SHUFFLE].operands
SUBGROUP_ADD_TYPES = OPS[Op.SUBGROUP_ADD].operands
FMA_TYPES = OPS[Op.FMA].operands


class IRTypeError(Exception):
    """A typing finding: stable ``code``, what is wrong, and a ``fix`` sentence."""

    def __init__(self, code: str, message: str, fix: str) -> None:
        super().__init__(f"{message}. Fix: {fix}")
        self.code = code
        self.message = message
        self.fix = fix


def _names(types: tuple[DataType, ...]) -> str:
    return "/".join(t.name for t in types)


class ExprTyper:
    """Computes expression types against a program's buffers and a variable scope."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self._buffers = {b.name: b for b in program.buffers}

    def type_of(self, e: Expr, scope: Mapping[str, DataType]) -> DataType:
        """The type of ``e``; raises ``IRTypeError`` at the first problem found."""
        op = e.op
        if op == Op.LIT:
            return dtype_of(e)
        if op == Op.VAR:
            if e.name not in scope:
                raise IRTypeError("unknown_var", f"variable {e.name!r} is not declared here",
                                  f"declare it with Node.let({e.name!r}, ...) before this use")
            return scope[name_of(e)]
        if op in (Op.INVOCATION_ID, Op.WORKGROUP_ID, Op.LOCAL_ID, Op.SUBGROUP_LOCAL_ID, Op.SUBGROUP_SIZE):
            return U32
        if op == Op.BUF_LEN:
            self._buffer(name_of(e))
            return U32
        if op == Op.LOAD:
            buf = self._buffer(name_of(e))
            self._expect(e.args[0], scope, (U32,), f"index of load from {e.name!r}")
            return buf.dtype.arith
        if op in BINARY_TYPES:
            return self._binary(e, scope)
        if op in UNARY_TYPES:
            t = self._expect(e.args[0], scope, UNARY_TYPES[op], f"operand of {op}")
            return BOOL if op in PREDICATE_UNARY else t
        if op == Op.SELECT:
            self._expect(e.args[0], scope, (BOOL,), "condition of select")
            a = self.type_of(e.args[1], scope)
            self._same(op, a, self.type_of(e.args[2], scope))
            return a
        if op == Op.CAST:
            if not e.dtype.is_arith:
                raise IRTypeError("bad_cast", f"cast target {e.dtype.name} is a storage-only type",
                                  "cast to U32, I32, F32, BOOL, U64, I64 or F64; stores narrow automatically")
            self.type_of(e.args[0], scope)
            return dtype_of(e)
        if op == Op.FMA:
            a = self._expect(e.args[0], scope, FMA_TYPES, "first operand of fma")
            for arg in e.args[1:]:
                self._same(op, a, self.type_of(arg, scope))
            return a
        if op == Op.ATOMIC:
            return self._atomic(e, scope)
        if op == Op.SUBGROUP_BALLOT:
            self._expect(e.args[0], scope, (BOOL,), "condition of subgroup_ballot")
            return U32
        if op == Op.SUBGROUP_SHUFFLE:
            t = self._expect(e.args[0], scope, SHUFFLE_TYPES, "value of subgroup_shuffle")
            self._expect(e.args[1], scope, (U32,), "lane of subgroup_shuffle")
            return t
        if op == Op.SUBGROUP_ADD:
            return self._expect(e.args[0], scope, SUBGROUP_ADD_TYPES, "value of subgroup_add")
        if op == Op.CALL:
            return self._call(e, scope)
        raise IRTypeError("unknown_op", f"unknown expression op {op!r}", "use the Expr constructors")

    def quick_type(self, e: Expr, operand_types: list[DataType]) -> DataType | None:
        """The type of ``e`` from its operands' types when ``e`` is a common op (binary, load,
        select, literal) whose every rule holds; None otherwise, and ``type_of`` decides (and
        names any problem). Lets the validator type a tree bottom-up without re-walking it."""
        op = e.op
        allowed = BINARY_TYPES.get(op)
        if allowed is not None:
            a, b = operand_types
            if a in allowed and (b is U32 if op in SHIFT_OPS else b is a):
                return BOOL if op in _COMPARE else a
            return None
        if op == Op.LOAD:
            buf = self._buffers.get(e.name) if type(e.name) is str else None
            return buf.dtype.arith if buf is not None and operand_types[0] is U32 else None
        if op == Op.SELECT:
            c, a, b = operand_types
            return a if c is BOOL and a is b else None
        if op == Op.LIT and not operand_types:
            return dtype_of(e)
        return None

    # ---- helpers ------------------------------------------------------------------------------
    def _buffer(self, name: str):
        buf = self._buffers.get(name)
        if buf is None:
            raise IRTypeError("unknown_buffer", f"buffer {name!r} is not declared",
                              f"add a BufferDecl named {name!r} to the program's buffers")
        return buf

    def _expect(self, e: Expr, scope, allowed: tuple[DataType, ...], what: str) -> DataType:
        t = self.type_of(e, scope)
        if t not in allowed:
            fix = "cast it first with Expr.cast(DataType.U32, ...)" if allowed == (U32,) else \
                f"cast it to one of {_names(allowed)} with Expr.cast"
            raise IRTypeError("type_mismatch", f"{what} is {t.name}, expected {_names(allowed)}", fix)
        return t

    @staticmethod
    def _same(op: str, a: DataType, b: DataType) -> None:
        if a is not b:
            raise IRTypeError("type_mismatch", f"operands of {op} are {a.name} and {b.name}",
                              "there is no implicit promotion: cast one operand with Expr.cast")

    def _binary(self, e: Expr, scope) -> DataType:
        op = e.op
        a = self._expect(e.args[0], scope, BINARY_TYPES[op], f"first operand of {op}")
        if op in SHIFT_OPS:
            self._expect(e.args[1], scope, (U32,), f"shift amount of {op}")
        else:
            self._same(op, a, self.type_of(e.args[1], scope))
        return BOOL if op in COMPARE_OPS else a

    def _atomic(self, e: Expr, scope) -> DataType:
        buf = self._buffer(name_of(e))
        allowed = ATOMIC_TYPES[e.value.base] if isinstance(e.value, AtomicOp) else INT
        if buf.dtype not in allowed:
            raise IRTypeError("atomic_type", f"atomic {e.value.name} on buffer {e.name!r} of type {buf.dtype.name}",
                              f"declare the buffer as {_names(allowed)} to use this atomic on it")
        self._expect(e.args[0], scope, (U32,), f"index of atomic on {e.name!r}")
        self._expect(e.args[1], scope, (buf.dtype,), f"value of atomic on {e.name!r}")
        wants_expected = e.value.base is AtomicOp.COMPARE_EXCHANGE
        if wants_expected != (len(e.args) == 3):
            fix = (f"pass expected= (the value to compare with) to AtomicOp.{e.value.name}" if wants_expected else
                   f"drop expected=: AtomicOp.{e.value.name} takes none (only the COMPARE_EXCHANGE ops do)")
            raise IRTypeError("bad_arity", f"atomic {e.value.name} on {e.name!r} has the wrong operands", fix)
        if wants_expected:
            self._expect(e.args[2], scope, (buf.dtype,), f"expected value of atomic on {e.name!r}")
        return buf.dtype

    def _call(self, e: Expr, scope) -> DataType:
        from vyre.ops import get_op

        op = get_op(name_of(e))
        if op is None:
            raise IRTypeError("unknown_op", f"op {e.name!r} is not registered",
                              "install the op pack that provides it, or check the op id")
        if len(e.args) != len(op.arg_types):
            raise IRTypeError("bad_arity", f"op {e.name!r} takes {len(op.arg_types)} arguments, got {len(e.args)}",
                              "pass exactly the op's arguments")
        for i, (arg, t) in enumerate(zip(e.args, op.arg_types)):
            self._expect(arg, scope, (t,), f"argument {i} of {e.name!r}")
        return op.result_type
