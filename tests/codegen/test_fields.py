"""Workgroup-memory indices that are bit fields ``(x >> s) & m`` are scaled inside the field
(``vyre_cuda._codegen.memory.Buffers._shared_address``): ``((x >> (s - k)) & (m << k)) + base``
for elements of 2^k bytes, where ``index * 2^k + base`` took ptxas one instruction more. The
rewrite reads ``x`` again at the access, so it is taken only where ``x`` still holds the value
the field was computed from: a value written once, or an assigned variable (or loop counter)
within the statement that computes the field. The GPU tests
(``tests/gpu/test_field_index_gpu.py``) check the results of every shape against the oracle."""

from __future__ import annotations

import re

import pytest

from tests.codegen.codegen_support import assemble, needs_ptxas
from tests.codegen.field_programs import CASES, ELEMENTS, field, field_program
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre_cuda import emit_ptx

U32 = DataType.U32


def _scaled(body: list[Node], element: DataType = U32) -> set[int]:
    """The amounts of the scaled fields' shifts in the PTX of ``body`` (a workgroup buffer ``t`` of
    ``element``, ``a`` read, ``out`` written): the ``shr.u32`` by a literal (an IR shift's amount
    is a register, masked to 31)."""
    program = Program([BufferDecl.read("a", 0, U32), BufferDecl.read_write("out", 1, U32),
                       BufferDecl.workgroup("t", 256, element)], (64, 1, 1), body, name="fields")
    return {int(m) for m in re.findall(r"shr\.u32 %r\d+, %r\d+, (\d+);", emit_ptx(program, sm="90"))}


def _read(index: Expr, element: DataType = U32) -> Node:
    return Node.store("out", Expr.local_id(0), Expr.cast(U32, Expr.load("t", index)))


V = [Node.let("v", Expr.load("a", Expr.local_id(0)))]
W = [Node.let("w", Expr.load("a", Expr.local_id(0))), Node.assign("w", Expr.add(Expr.var("w"), Expr.u32(1)))]


def test_a_field_of_a_value_written_once_is_scaled_in_any_later_statement():
    assert 5 in _scaled([*V, Node.let("d", field(Expr.var("v"), 7, 255)), _read(Expr.var("d"))])
    assert 6 in _scaled([*V, _read(field(Expr.var("v"), 7, 255))], DataType.U16)
    assert 4 in _scaled([*V, _read(field(Expr.var("v"), 7, 255))], DataType.U64)


def test_a_field_of_an_assigned_variable_is_scaled_only_in_its_own_statement():
    assert 5 in _scaled([*W, _read(field(Expr.var("w"), 7, 255))])
    stale = [*W, Node.let("d", field(Expr.var("w"), 7, 255)), Node.assign("w", Expr.u32(0)), _read(Expr.var("d"))]
    assert _scaled(stale) == set()  # the let's field: w may have changed since


def test_a_loop_counters_field_is_scaled_inside_its_statement():
    loop = Node.loop("j", Expr.u32(0), Expr.u32(9), [_read(field(Expr.var("j"), 2, 3))])
    assert _scaled([loop]) == {0}  # (j >> 0) & 12


@pytest.mark.parametrize("element, s", [(DataType.U8, 7), (U32, 1), (DataType.U64, 2)])
def test_fields_are_not_scaled_for_bytes_or_shifts_below_the_element_size(element, s):
    assert _scaled([*V, _read(field(Expr.var("v"), s, 255), element)], element) == set()


def test_a_shift_alone_or_a_computed_mask_is_not_a_field():
    assert _scaled([*V, _read(Expr.shr(Expr.var("v"), Expr.u32(24)))]) == set()
    masked = Expr.bitand(Expr.shr(Expr.var("v"), Expr.u32(7)), Expr.load("a", Expr.u32(0)))
    assert _scaled([*V, _read(masked)]) == set()


@needs_ptxas
def test_field_programs_assemble_for_sm90():
    ptx = {f"{e.name}_{s}_{m}": emit_ptx(field_program(e, s, m), sm="90") for e in ELEMENTS for s, m in CASES[::3]}
    assert assemble(ptx, "90") == []
