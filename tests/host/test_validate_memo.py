"""The validator remembers valid program objects (programs are immutable), so a ``@vyre.kernel``
program validated by the front end is not walked again at dispatch; programs that call registered
ops are always walked (their validity follows the op registry); invalid ones are never remembered."""

from __future__ import annotations

import pytest

from vyre.ir import Expr, Node, Program
from vyre.ir import validate as validate_module
from vyre.ir.program import BufferDecl
from vyre.ir.types import DataType
from vyre.ops import OpDef, register_op

U32 = DataType.U32


def _program(value: Expr) -> Program:
    return Program([BufferDecl.output("out", 0, U32, 4)], (1, 1, 1), [Node.store("out", Expr.u32(0), value)])


def _walks(monkeypatch: pytest.MonkeyPatch) -> list[Program]:
    """Record every program the validator walks."""
    walked: list[Program] = []
    run = validate_module._Validator.run

    def counting(self: validate_module._Validator) -> list:
        walked.append(self.program)
        return run(self)

    monkeypatch.setattr(validate_module._Validator, "run", counting)
    return walked


def test_a_valid_program_is_walked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    walked = _walks(monkeypatch)
    program = _program(Expr.u32(7))
    assert validate_module.findings(program) == []
    validate_module.validate(program)
    assert walked == [program]
    equal_copy = _program(Expr.u32(7))  # remembered by identity, not equality
    validate_module.validate(equal_copy)
    assert len(walked) == 2


def test_an_invalid_program_is_walked_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    walked = _walks(monkeypatch)
    program = _program(Expr.var("nowhere"))
    for _ in range(2):
        assert [f.code for f in validate_module.findings(program)] == ["unknown_var"]
    assert len(walked) == 2


def test_a_program_calling_a_registered_op_is_walked_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    register_op(OpDef("tests.memo.twice", (U32,), U32, expand=lambda x: Expr.add(x, x)))
    walked = _walks(monkeypatch)
    program = _program(Expr.call("tests.memo.twice", Expr.u32(3)))
    for _ in range(2):
        assert validate_module.findings(program) == []
    assert len(walked) == 2


def test_the_memory_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(validate_module, "MAX_KNOWN_VALID", 4)
    for i in range(10):
        validate_module.validate(_program(Expr.u32(i)))
    assert len(validate_module._known_valid) <= 4
