"""The validator: every code triggered, all findings at once, uniformity of barriers and subgroup ops."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import vyre.ir.validate as validate_mod
from vyre.driver.errors import ValidationError
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ir.expr import ALL_OPS
from vyre.ir.node import Let
from vyre.ir.validate import findings, validate
from vyre.ops import OpDef, register_op

D = DataType
U = Expr.u32
GID = Expr.invocation_id(0)
LID = Expr.local_id(0)
READ = BufferDecl.read("src", 0, D.U32)
OUT = BufferDecl.output("dst", 1, D.U32, 64)
RW = BufferDecl.read_write("rw", 2, D.I32)
UNI = BufferDecl.uniform("params", 3, D.U32, 4)
TILE = BufferDecl.workgroup("tile", 64, D.U32)
BUFFERS = (READ, OUT, RW, UNI, TILE)
SEMANTICS = Path(__file__).resolve().parents[2] / "docs" / "semantics.md"


def _double(a: Expr) -> Expr:
    return Expr.add(a, a)


register_op(OpDef("tests.validate.double", (D.U32,), D.U32, expand=_double))


def prog(*body, buffers=BUFFERS, wg=(64, 1, 1)) -> Program:
    return Program(buffers, wg, body)


def codes(program) -> list[str]:
    return [f.code for f in findings(program)]


def store(value: Expr, index: Expr = GID) -> Node:
    return Node.store("dst", index, value)


def deep_blocks(n: int) -> Node:
    node: Node = Node.barrier()
    for _ in range(n):
        node = Node.block([node])
    return node


def deep_expr(n: int) -> Expr:
    e = U(1)
    for _ in range(n):
        e = Expr.neg(e)
    return e


# code -> a program that triggers it (and ideally nothing else)
TRIGGERS = {
    "malformed_buffer": lambda: prog(buffers=(BufferDecl("x", "zero", D.U32, 1, READ.access),)),
    "malformed_node": lambda: prog(Let(3, U(1))),
    "malformed_expr": lambda: prog(store(Expr("invocation_id", value=3))),
    "empty_name": lambda: prog(Node.let("", U(1))),
    "invalid_name": lambda: prog(Node.let("bad\ud800", U(1))),
    "duplicate_name": lambda: prog(buffers=(READ, BufferDecl.output("src", 1, D.U32, 4))),
    "duplicate_binding": lambda: prog(buffers=(READ, BufferDecl.output("o", 0, D.U32, 4))),
    "negative_binding": lambda: prog(buffers=(BufferDecl.read("a", -1, D.U32),)),
    "binding_too_large": lambda: prog(buffers=(BufferDecl.read("a", 10**30, D.U32),)),
    "too_many_buffers": lambda: prog(buffers=tuple(BufferDecl.read(f"b{i}", i, D.U32) for i in range(4095))),
    "negative_count": lambda: prog(buffers=(BufferDecl.read("a", 0, D.U32, -5),)),
    "count_too_large": lambda: prog(buffers=(BufferDecl.output("a", 0, D.U32, 2**32),)),
    "count_required": lambda: prog(buffers=(BufferDecl.output("a", 0, D.U32, 0),)),
    "workgroup_memory_too_large": lambda: prog(buffers=(BufferDecl.workgroup("big", 60000, D.F32),)),
    "workgroup_size_invalid": lambda: prog(wg=(0, 1, 1)),
    "workgroup_size_too_large": lambda: prog(wg=(64, 64, 1)),
    "nesting_too_deep": lambda: prog(deep_blocks(200)),
    "unknown_var": lambda: prog(store(Expr.var("nope"))),
    "unknown_buffer": lambda: prog(Node.store("ghost", GID, U(1))),
    "unknown_op": lambda: prog(store(Expr.call("tests.validate.not_registered", U(1)))),
    "type_mismatch": lambda: prog(store(Expr.add(U(1), Expr.i32(1)))),
    "bad_cast": lambda: prog(store(Expr.cast(D.U8, U(1)))),
    "bad_arity": lambda: prog(store(Expr.call("tests.validate.double", U(1), U(2)))),
    "atomic_type": lambda: prog(Node.let("old", Expr.atomic(AtomicOp.ADD, "f", U(0), Expr.f32(1.0))),
                                buffers=(BufferDecl.output("f", 0, D.F32, 4),)),
    "shadowed_name": lambda: prog(Node.let("x", U(1)), Node.block([Node.let("x", U(2))])),
    "assign_undeclared": lambda: prog(Node.assign("y", U(1))),
    "assign_loop_var": lambda: prog(Node.loop("i", U(0), U(4), [Node.assign("i", U(1))])),
    "read_only_write": lambda: prog(Node.store("src", GID, U(1))),
    "zero_divisor": lambda: prog(store(Expr.div(GID, U(0)))),
    "varying_barrier": lambda: prog(Node.if_(Expr.lt(GID, U(10)), [Node.barrier()])),
    "varying_subgroup_op": lambda: prog(Node.if_(Expr.lt(LID, U(3)), [store(Expr.subgroup_add(GID))])),
    "sync_after_varying_return": lambda: prog(Node.if_(Expr.eq(LID, U(0)), [Node.return_()]), Node.barrier()),
    "subgroup_workgroup_size": lambda: prog(store(Expr.subgroup_add(GID)), wg=(48, 1, 1)),
}


@pytest.mark.parametrize("code", sorted(TRIGGERS))
def test_each_code_is_triggered(code: str) -> None:
    found = findings(TRIGGERS[code]())
    assert code in [f.code for f in found]
    for f in found:
        assert f.message and f.fix and not f.fix.endswith(".")


def test_not_a_program() -> None:
    assert codes("program") == ["not_a_program"]


def test_program_too_large(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(validate_mod, "MAX_NODES", 50)
    assert codes(prog(*[store(U(i)) for i in range(20)])) == ["program_too_large"]


def test_exponential_dag_stops_at_the_node_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(validate_mod, "MAX_NODES", 10_000)
    e = U(1)
    for _ in range(60):  # 2**60 nodes as a tree, 60 objects as a DAG
        e = Expr.add(e, e)
    assert "program_too_large" in codes(prog(store(e)))


def test_catalogue_lists_every_code_and_tests_cover_it() -> None:
    text = SEMANTICS.read_text(encoding="utf-8")
    section = text[text.index("## Validator codes"):]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", section, re.MULTILINE))
    tested = set(TRIGGERS) | {"not_a_program", "program_too_large"}
    assert documented == tested


def test_all_findings_reported_at_once() -> None:
    p = prog(
        Node.assign("undeclared", U(1)),
        Node.store("src", GID, U(1)),
        store(Expr.add(U(1), Expr.f32(1.0))),
        Node.if_(Expr.lt(GID, U(3)), [Node.barrier()]),
        store(Expr.rem(GID, U(0))),
        buffers=(READ, OUT, BufferDecl.output("dst2", 1, D.U32, 4)),
        wg=(0, 1, 1),
    )
    with pytest.raises(ValidationError) as info:
        validate(p)
    got = set(info.value.codes)
    assert {"assign_undeclared", "read_only_write", "type_mismatch", "varying_barrier", "zero_divisor",
            "duplicate_binding", "workgroup_size_invalid"} <= got
    assert "Fix:" in str(info.value)
    assert all(f.path for f in info.value.findings)


def test_finding_paths_point_at_the_statement() -> None:
    p = prog(Node.let("a", U(1)), Node.if_(Expr.bool(True), [store(Expr.var("b"))]))
    (f,) = findings(p)
    assert (f.code, f.path) == ("unknown_var", "body[1].then[0].value")


def test_findings_keep_going_after_a_bad_let() -> None:
    # the let's value is ill-typed: later uses of the variable must not cascade
    p = prog(Node.let("x", Expr.add(U(1), Expr.i32(1))), store(Expr.var("x")), store(Expr.var("x")),
             Node.assign("nope", U(1)))
    assert codes(p) == ["type_mismatch", "assign_undeclared"]


@pytest.mark.parametrize("bad", [
    lambda: Node.loop("i", Expr.i32(0), U(4), []),
    lambda: Node.loop("i", U(0), Expr.f32(4.0), []),
    lambda: Node.if_(U(1), []),
    lambda: store(Expr.i32(1)),
    lambda: store(U(1), Expr.i32(0)),
    lambda: Node.block([Node.let("x", U(1)), Node.assign("x", Expr.f32(1.0))]),
    lambda: store(Expr.load("src", Expr.i32(0))),
    lambda: Node.store("rw", GID, U(1)),  # rw is I32: its values are I32
])
def test_statement_type_rules(bad) -> None:
    assert codes(prog(bad())) == ["type_mismatch"]


def test_narrow_buffers_take_their_arithmetic_type() -> None:
    narrow = (BufferDecl.output("b", 0, D.U8, 4), BufferDecl.output("h", 1, D.F16, 4),
              BufferDecl.output("s", 2, D.I16, 4), BufferDecl.output("t", 3, D.BOOL, 4))
    validate(prog(Node.store("b", GID, U(300)), Node.store("h", GID, Expr.f32(1.5)),
                  Node.store("s", GID, Expr.i32(-1)), Node.store("t", GID, Expr.bool(True)), buffers=narrow))


def test_let_shadowing_a_loop_variable_and_nested_loops() -> None:
    assert codes(prog(Node.loop("i", U(0), U(2), [Node.let("i", U(1))]))) == ["shadowed_name"]
    assert codes(prog(Node.loop("i", U(0), U(2), [Node.loop("i", U(0), U(2), [])]))) == ["shadowed_name"]
    # sibling scopes may reuse a name, and the loop variable ends with its loop
    validate(prog(Node.block([Node.let("x", U(1))]), Node.let("x", U(2)),
                  Node.loop("i", U(0), U(2), []), Node.let("i", U(0))))
    assert codes(prog(Node.loop("i", U(0), U(2), []), store(Expr.var("i")))) == ["unknown_var"]


def test_atomics_on_read_only_buffers() -> None:
    p = prog(Node.let("o", Expr.atomic(AtomicOp.ADD, "params", U(0), U(1))))
    assert codes(p) == ["read_only_write"]
    assert codes(prog(Node.let("o", Expr.atomic(AtomicOp.COMPARE_EXCHANGE, "dst", U(0), U(1))))) == ["bad_arity"]
    validate(prog(Node.let("o", Expr.atomic(AtomicOp.MAX, "tile", LID, U(1))),
                  Node.let("p", Expr.atomic(AtomicOp.COMPARE_EXCHANGE, "rw", U(0), Expr.i32(1), Expr.i32(0)))))


def test_registered_call_is_accepted() -> None:
    validate(prog(store(Expr.call("tests.validate.double", GID))))


def test_float_division_by_literal_zero_is_allowed() -> None:
    p = prog(Node.store("f", GID, Expr.div(Expr.f32(1.0), Expr.f32(0.0))),
             buffers=(BufferDecl.output("f", 0, D.F32, 4),))
    validate(p)


def test_deep_expression_is_a_finding_not_a_recursion_error() -> None:
    assert codes(prog(store(deep_expr(5000)))) == ["nesting_too_deep"]
    assert codes(prog(deep_blocks(3000))) == ["nesting_too_deep"]
    validate(prog(store(deep_expr(120))))


# ---- uniformity ------------------------------------------------------------------------------
VARYING_BARRIERS = {
    "if on invocation_id": [Node.if_(Expr.lt(GID, U(10)), [Node.barrier()])],
    "else branch": [Node.if_(Expr.eq(LID, U(0)), [], [Node.barrier()])],
    "loop bound from local_id": [Node.loop("i", U(0), LID, [Node.barrier()])],
    "loop start varying": [Node.loop("i", Expr.bitand(LID, U(1)), U(4), [Node.barrier()])],
    "let from id": [Node.let("v", Expr.mul(GID, U(2))), Node.if_(Expr.eq(Expr.var("v"), U(0)), [Node.barrier()])],
    "load from output buffer": [Node.if_(Expr.ne(Expr.load("dst", U(0)), U(0)), [Node.barrier()])],
    "load from workgroup memory": [Node.if_(Expr.ne(Expr.load("tile", U(0)), U(0)), [Node.barrier()])],
    "load read buffer at varying index": [Node.if_(Expr.ne(Expr.load("src", GID), U(0)), [Node.barrier()])],
    "atomic result": [Node.let("o", Expr.atomic(AtomicOp.ADD, "dst", U(0), U(1))),
                      Node.if_(Expr.eq(Expr.var("o"), U(0)), [Node.barrier()])],
    "ballot result": [Node.if_(Expr.ne(Expr.subgroup_ballot(Expr.bool(True)), U(0)), [Node.barrier()])],
    "subgroup_local_id": [Node.if_(Expr.eq(Expr.subgroup_local_id(), U(0)), [Node.barrier()])],
    "assigned under varying if": [
        Node.let("u", U(0)), Node.if_(Expr.lt(GID, U(3)), [Node.assign("u", U(1))]),
        Node.if_(Expr.eq(Expr.var("u"), U(0)), [Node.barrier()])],
    "loop-carried assignment": [
        Node.let("u", U(0)),
        Node.loop("i", U(0), U(4), [
            Node.if_(Expr.eq(Expr.var("u"), U(0)), [Node.barrier()]),
            Node.assign("u", GID)])],
    "chain through two variables": [
        Node.let("a", U(0)), Node.let("b", U(0)),
        Node.loop("i", U(0), U(4), [
            Node.if_(Expr.eq(Expr.var("a"), U(0)), [Node.barrier()]),
            Node.assign("a", Expr.var("b")), Node.assign("b", LID)])],
    "nested in uniform if": [Node.if_(Expr.bool(True), [Node.if_(Expr.lt(LID, U(1)), [Node.barrier()])])],
    "varying loop var": [Node.loop("i", U(0), LID, []), Node.loop("j", U(0), Expr.bitand(GID, U(3)), [
        Node.if_(Expr.eq(Expr.var("j"), U(1)), [Node.barrier()])])],
}


@pytest.mark.parametrize("name", sorted(VARYING_BARRIERS))
def test_barrier_under_varying_control_flow_is_rejected(name: str) -> None:
    found = codes(prog(*VARYING_BARRIERS[name]))
    assert "varying_barrier" in found, found


UNIFORM_BARRIERS = {
    "if on workgroup_id": [Node.if_(Expr.eq(Expr.workgroup_id(0), U(0)), [Node.barrier()])],
    "if on buf_len": [Node.if_(Expr.gt(Expr.buf_len("src"), U(4)), [Node.barrier()])],
    "read buffer at uniform index": [
        Node.let("n", Expr.load("params", U(0))),
        Node.loop("i", U(0), Expr.load("src", Expr.workgroup_id(0)), [
            Node.if_(Expr.lt(Expr.var("i"), Expr.var("n")), [Node.barrier()])])],
    "uniform loop variable": [Node.loop("i", U(0), U(4), [Node.if_(Expr.eq(Expr.var("i"), U(2)), [Node.barrier()])])],
    "uniform assignment": [Node.let("u", U(0)), Node.assign("u", Expr.workgroup_id(1)),
                           Node.if_(Expr.eq(Expr.var("u"), U(0)), [Node.barrier()])],
    "varying work around uniform barrier": [
        Node.if_(Expr.lt(GID, U(5)), [store(U(1))]),
        Node.store("tile", LID, GID), Node.barrier(), store(Expr.load("tile", Expr.sub(U(63), LID)))],
    "subgroup size": [Node.if_(Expr.eq(Expr.subgroup_size(), U(32)), [Node.barrier()])],
    "uniform return before barrier": [Node.if_(Expr.eq(Expr.workgroup_id(0), U(1)), [Node.return_()]),
                                      Node.barrier()],
    "varying return in the other branch": [
        Node.if_(Expr.eq(Expr.workgroup_id(0), U(1)),
                 [Node.if_(Expr.lt(LID, U(2)), [Node.return_()])], [Node.barrier()])],
    "varying return after the last barrier": [Node.barrier(), Node.if_(Expr.lt(LID, U(2)), [Node.return_()]),
                                              store(U(1))],
}


@pytest.mark.parametrize("name", sorted(UNIFORM_BARRIERS))
def test_barrier_under_uniform_control_flow_is_accepted(name: str) -> None:
    validate(prog(*UNIFORM_BARRIERS[name]))


def test_sync_after_varying_return() -> None:
    ret = Node.if_(Expr.lt(LID, U(2)), [Node.return_()])
    # later in the same loop body, earlier in the body (next iteration), and after the loop
    assert codes(prog(Node.loop("i", U(0), U(4), [Node.barrier(), ret]))) == ["sync_after_varying_return"]
    assert codes(prog(Node.loop("i", U(0), U(4), [ret]), Node.barrier())) == ["sync_after_varying_return"]
    assert codes(prog(ret, store(Expr.subgroup_shuffle(GID, U(1))))) == ["sync_after_varying_return"]
    assert codes(prog(Node.block([ret]), Node.if_(Expr.bool(True), [Node.barrier()]))) == \
        ["sync_after_varying_return"]


def test_subgroup_ops_in_varying_control_flow() -> None:
    assert codes(prog(Node.loop("i", U(0), LID, [store(Expr.subgroup_ballot(Expr.bool(True)))]))) == \
        ["varying_subgroup_op"]
    # in the condition itself the op runs before the branch: that is uniform
    validate(prog(Node.if_(Expr.eq(Expr.subgroup_add(LID), U(0)), [store(U(1))])))
    # subgroup_local_id / subgroup_size are not collectives: fine anywhere, but need x % 32 == 0
    validate(prog(Node.if_(Expr.lt(LID, U(3)), [store(Expr.subgroup_local_id())])))
    assert codes(prog(store(Expr.subgroup_size()), wg=(16, 2, 1))) == ["subgroup_workgroup_size"]


def test_valid_programs_pass() -> None:
    saxpy = Program(
        [BufferDecl.read("x", 0, D.F32), BufferDecl.read_write("y", 1, D.F32), BufferDecl.uniform("a", 2, D.F32, 1)],
        (64, 1, 1),
        [Node.let("i", GID),
         Node.if_(Expr.ge(Expr.var("i"), Expr.buf_len("y")), [Node.return_()]),
         Node.store("y", Expr.var("i"), Expr.fma(Expr.load("a", U(0)), Expr.load("x", Expr.var("i")),
                                                 Expr.load("y", Expr.var("i"))))],
        name="saxpy",
    )
    validate(saxpy)
    reduce = Program(
        [BufferDecl.read("x", 0, D.U32), BufferDecl.output("sum", 1, D.U32, 1), BufferDecl.workgroup("t", 256, D.U32)],
        (256, 1, 1),
        [Node.store("t", LID, Expr.load("x", GID)),
         Node.barrier(),
         Node.loop("s", U(0), U(8), [
             Node.let("step", Expr.shl(U(1), Expr.var("s"))),
             Node.let("v", Expr.load("t", LID)),
             Node.barrier(),
             Node.if_(Expr.eq(Expr.bitand(LID, Expr.sub(Expr.shl(Expr.var("step"), U(1)), U(1))), U(0)), [
                 Node.store("t", LID, Expr.add(Expr.var("v"), Expr.load("t", Expr.add(LID, Expr.var("step")))))]),
             Node.barrier()]),
         Node.if_(Expr.eq(LID, U(0)), [Node.let("old", Expr.atomic(AtomicOp.ADD, "sum", U(0), Expr.load("t", U(0))))]),
         Node.region("vyre.test", [Node.block([])])],
    )
    validate(reduce)
    assert findings(reduce) == []


def test_every_expression_op_is_known_to_the_validator() -> None:
    from vyre.ir.shape import SHAPES

    assert set(SHAPES) == set(ALL_OPS)


@pytest.mark.parametrize("op", [AtomicOp.COMPARE_EXCHANGE, AtomicOp.COMPARE_EXCHANGE_RELAXED, AtomicOp.ADD_RELAXED])
def test_atomic_arity_fix_names_the_op_in_use(op: AtomicOp) -> None:
    expected = () if "COMPARE" in op.name else (U(0),)  # the wrong arity for each op
    (finding,) = findings(prog(Node.let("o", Expr.atomic(op, "dst", U(0), U(1), *expected))))
    assert finding.code == "bad_arity"
    assert f"AtomicOp.{op.name}" in finding.fix
    if op is AtomicOp.COMPARE_EXCHANGE_RELAXED:
        assert "AtomicOp.COMPARE_EXCHANGE," not in finding.fix and "AtomicOp.COMPARE_EXCHANGE " not in finding.fix
