"""The split rule of ``vyre.ir.shard``: which buffers are sharded, replicated or reduced, and the rewrite."""

from __future__ import annotations

import pytest

from vyre.driver.errors import InvalidProgram
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ir.shard import own_index_names, plan_split, shard_program
from vyre.ir.walk import iter_all_exprs

U32 = DataType.U32
gid = Expr.invocation_id(0)


def program(body, *extra: BufferDecl) -> Program:
    return Program([BufferDecl.read_write("a", 0, U32), BufferDecl.read("b", 1, U32),
                    BufferDecl.uniform("u", 2, U32, 1), *extra], (64, 1, 1), body, name="p")


def test_plan_sorts_buffers() -> None:
    p = program([Node.let("i", gid),
                 Node.store("a", Expr.var("i"), Expr.load("b", Expr.load("u", Expr.u32(0)))),
                 Node.let("old", Expr.atomic(AtomicOp.ADD, "r", Expr.u32(0), Expr.u32(1)))],
                BufferDecl.output("r", 3, U32, 4))
    plan = plan_split(p, {"r": "add"})
    assert plan.sharded == {"a"} and plan.replicated == {"b", "u"} and plan.reduce_ops == {"r": "add"}
    assert plan.own == {"i"}


def test_own_index_names_need_one_binding() -> None:
    i = Expr.var("i")
    assert own_index_names(program([Node.let("i", gid), Node.store("a", i, i)])) == {"i"}
    assert own_index_names(program([Node.let("i", gid), Node.assign("i", Expr.u32(0)), Node.store("a", i, i)])) == set()
    assert own_index_names(program([Node.let("i", Expr.local_id(0)), Node.store("a", i, i)])) == set()


def test_programs_without_global_values_are_unchanged() -> None:
    p = program([Node.store("a", gid, Expr.bitxor(Expr.load("a", gid), Expr.load("b", gid)))])
    plan = plan_split(p)
    shard = shard_program(p, plan, 128, {"a": 1000, "b": 1000}, {})
    assert shard.body == p.body  # one compiled kernel serves every device
    assert [b.count for b in shard.buffers] == [0, 0, 1]


def test_rewrite_offsets_ids_and_whole_lengths() -> None:
    p = program([Node.let("i", gid),
                 Node.store("a", Expr.var("i"), Expr.add(Expr.var("i"), Expr.add(Expr.workgroup_id(0),
                                                                             Expr.buf_len("a"))))])
    shard = shard_program(p, plan_split(p), 640, {"a": 5000, "b": 5000}, {})
    lits = {e.value for e in iter_all_exprs(shard.body) if e.op == "lit"}
    assert {640, 10, 5000} <= lits
    assert shard.body[0] == p.body[0]  # the own index stays the device-local id used for sharded accesses
    with pytest.raises(ValueError):
        shard_program(p, plan_split(p), 100, {"a": 5000, "b": 5000}, {})


@pytest.mark.parametrize("body,reduce,words", [
    ([Node.store("a", Expr.u32(0), Expr.u32(1))], None, "own"),
    ([Node.let("x", Expr.atomic(AtomicOp.ADD, "a", Expr.add(gid, Expr.u32(1)), Expr.u32(1)))], None, "own"),
    ([Node.let("x", Expr.load("r", gid))], {"r": "add"}, "loads reduced"),
    ([Node.store("a", gid, Expr.atomic(AtomicOp.ADD, "r", Expr.u32(0), Expr.u32(1)))], {"r": "add"}, "old value"),
    ([Node.let("x", Expr.atomic(AtomicOp.MAX, "r", Expr.u32(0), Expr.u32(1)))], {"r": "add"}, "combines"),
])
def test_refusals(body, reduce, words) -> None:
    with pytest.raises(InvalidProgram, match=words) as info:
        plan_split(program(body, BufferDecl.output("r", 3, U32, 4)), reduce)
    assert "Fix:" in str(info.value)
