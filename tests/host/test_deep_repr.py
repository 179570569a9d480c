"""``repr`` and ``to_python`` of programs nested past the validator's limit: bounded, never a
RecursionError (issue 30, point 7)."""

from __future__ import annotations

import pytest

from vyre.driver.errors import ValidationError
from vyre.frontend.printer import to_python
from vyre.ir import BufferDecl, DataType, Expr, Node, Program


def _deep_expr(levels: int) -> Expr:
    e = Expr.u32(1)
    for i in range(levels):
        e = Expr.add(e, Expr.u32(i))
    return e


def _program(body: list[Node]) -> Program:
    return Program([BufferDecl.output("o", 0, DataType.U32, 1)], (1, 1, 1), body, name="deep")


def test_repr_of_a_3000_level_expression_is_bounded():
    text = repr(_deep_expr(3000))
    assert text.startswith("Expr.add(") and "..." in text and len(text) < 20_000


def test_repr_of_programs_with_deep_statements_and_expressions():
    nested: list[Node] = [Node.store("o", Expr.u32(0), Expr.u32(1))]
    for _ in range(3000):
        nested = [Node.if_(Expr.bool(True), nested)]
    for program in (_program(nested), _program([Node.store("o", Expr.u32(0), _deep_expr(3000))])):
        text = repr(program)
        assert text.startswith("Program(") and "not shown" in text


def test_to_python_of_a_deep_program_is_a_validation_error():
    with pytest.raises(ValidationError, match="nesting_too_deep.*Fix: "):
        to_python(_program([Node.store("o", Expr.u32(0), _deep_expr(3000))]))


def test_shallow_programs_print_in_full():
    program = _program([Node.store("o", Expr.u32(0), _deep_expr(50))])
    assert "..." not in repr(program) and "not shown" not in repr(program)
    assert "def deep" in to_python(program)
