"""The op table (``vyre.ir.op``): its names round-trip, and every backend table covers every op it allows.

A new op (or a new operand type of one) is one row of the table; these tests then name each
backend table that still lacks it, and each backend entry the table does not allow.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pytest

from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.ir.op import BY_NAME, OPS, Kind, Op, Result
from vyre.ir.shape import SHAPES
from vyre.ir.text import parse
from vyre.ir.typing import BINARY_TYPES, UNARY_TYPES
from vyre.ir.wire import OPS as WIRE_OPS
from vyre.reference import compiler, scalar_ops
from vyre.reference.backend import ReferenceBackend
from vyre_cuda.testing import Builder, ExprLowering, ptx_ops

#: wire version 2's op codes, spelled out: the table may grow at the end, never reorder
WIRE_V2 = (
    "lit", "var", "load", "buf_len", "invocation_id", "workgroup_id", "local_id",
    "add", "sub", "mul", "div", "rem", "bitand", "bitor", "bitxor", "shl", "shr",
    "eq", "ne", "lt", "gt", "le", "ge", "and_", "or_", "min", "max", "abs_diff",
    "saturating_add", "saturating_sub", "saturating_mul", "rotate_left", "rotate_right", "mul_high",
    "neg", "bitnot", "not_", "popcount", "clz", "ctz", "reverse_bits", "abs", "sign",
    "sqrt", "inverse_sqrt", "reciprocal", "floor", "ceil", "round", "trunc", "exp", "exp2",
    "log", "log2", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
    "is_nan", "is_inf", "is_finite", "select", "cast", "fma", "atomic",
    "subgroup_ballot", "subgroup_shuffle", "subgroup_add", "subgroup_local_id", "subgroup_size", "call",
)
OPERATORS = [(op, t) for op, types in {**BINARY_TYPES, **UNARY_TYPES}.items() for t in types]


def test_op_is_its_text_name():
    assert Op.ADD == "add" and hash(Op.ADD) == hash("add") and f"{Op.ADD}" == str(Op.ADD) == "add"
    assert {"add": 1}[Op.ADD] == 1 and repr(Op.ADD) == "Op.ADD"
    assert Expr("add", (Expr.u32(1), Expr.u32(2))).op is Op.ADD  # a text name becomes its member
    with pytest.raises(ValueError, match="unknown expression op"):
        Expr("plus", (Expr.u32(1), Expr.u32(2)))


def test_every_op_has_one_row_and_its_names_round_trip():
    assert list(OPS) == list(Op) and all(info.op is op for op, info in OPS.items())
    for op, info in OPS.items():
        assert BY_NAME[info.text_name] is op and Op(info.text_name) is op
        assert WIRE_OPS[op.wire_code] is op
        assert SHAPES[op] is info.shape
    assert tuple(op.value for op in Op)[: len(WIRE_V2)] == WIRE_V2


def test_operator_rows_are_consistent():
    for op, info in OPS.items():
        assert (info.kind in (Kind.BINARY, Kind.UNARY)) == bool(info.doc), op
        if info.kind is Kind.BINARY:
            assert info.arity == 2 and info.operands
        if info.kind is Kind.UNARY:
            assert info.arity == 1 and info.operands and not info.shift
        assert info.pure or op is Op.ATOMIC
    assert {op for op, info in OPS.items() if info.approximate} <= set(UNARY_TYPES)


@pytest.mark.parametrize("table", [scalar_ops.BINARY, scalar_ops.UNARY], ids=["binary", "unary"])
def test_the_oracle_has_a_lane_function_for_every_operator(table):
    kind = Kind.BINARY if table is scalar_ops.BINARY else Kind.UNARY
    assert set(table) == {op for op, info in OPS.items() if info.kind is kind}


def test_the_oracle_compiles_every_other_op():
    operators = set(scalar_ops.BINARY) | set(scalar_ops.UNARY)
    assert set(compiler._MAKERS) == set(Op) - operators


def test_the_ptx_lowering_covers_exactly_what_the_table_allows():
    allowed = set(OPERATORS)
    lowered = set(ptx_ops.BINARY) | set(ptx_ops.UNARY)
    assert allowed - lowered == set(), "operators the validator accepts but the emitter cannot lower"
    assert lowered - allowed == set(), "lowerings of types the validator refuses (widen the op's operands)"


def test_the_ptx_emitter_handles_every_other_op():
    operators = {op for op, info in OPS.items() if info.kind in (Kind.BINARY, Kind.UNARY)}
    handlers = ExprLowering(Builder(), cast(Any, None))._handlers
    assert set(handlers) == set(Op) - operators


def _operand(t: DataType, i: int) -> Expr:
    return Expr.cast(t, Expr.load("src", Expr.add(Expr.invocation_id(0), Expr.u32(i))))


@pytest.mark.parametrize(("op", "t"), OPERATORS, ids=[f"{op}-{t.name}" for op, t in OPERATORS])
def test_the_oracle_runs_every_operator_the_table_allows(op: Op, t: DataType):
    info = OPS[op]
    args = [_operand(t, 0)] + ([_operand(DataType.U32 if info.shift else t, 1)] if info.kind is Kind.BINARY else [])
    out = DataType.BOOL if info.result is Result.BOOL else t
    program = Program([BufferDecl.read("src", 0, DataType.U32), BufferDecl.output("dst", 1, out, 4)], (4, 1, 1),
                      [Node.store("dst", Expr.invocation_id(0), Expr(op, tuple(args)))])
    program = parse(program.to_text())  # the text name reads back as the same op
    result = ReferenceBackend().dispatch(program, [np.arange(8, dtype=np.uint32)])
    assert len(result[0]) == 4 and result[0].dtype == out.np_dtype
