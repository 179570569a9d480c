"""``Expr.call`` of composed ops is call by value: each argument once, left to right (vyre.ir.expand).

The oracle and the PTX emitter both run ``expand_calls``' output; atomics in arguments show how
often an argument was evaluated (the counter buffer), loads beside them show the order.
"""

from __future__ import annotations

import numpy as np
import pytest

from vyre.driver.config import DispatchConfig
from vyre.driver.errors import ValidationError
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ir.expand import MAX_EXPANSION_DEPTH, expand_calls
from vyre.ir.node import Let
from vyre.ir.walk import iter_all_exprs, iter_nodes
from vyre.ops import OpDef, register_op
from vyre.reference import run

U32, I32, F32, BOOL = DataType.U32, DataType.I32, DataType.F32, DataType.BOOL
GID = Expr.invocation_id(0)
RNG = np.random.default_rng(91)


def _op(name: str, args: tuple[DataType, ...], result: DataType, expand) -> str:
    op = OpDef(f"tests.expand.{name}", args, result, expand=expand)
    register_op(op)
    return op.id


TWICE = _op("twice", (U32,), U32, lambda x: Expr.add(x, x))
FIRST = _op("first", (U32, U32), U32, lambda a, b: a)
SWAP = _op("swap_sub", (U32, U32), U32, lambda a, b: Expr.sub(b, a))
QUAD = _op("quad", (U32,), U32, lambda x: Expr.call(TWICE, Expr.call(TWICE, x)))
NONZERO = _op("nonzero", (U32,), BOOL, lambda x: Expr.ne(x, Expr.u32(0)))
WRONG_TYPE = _op("wrong_type", (U32,), U32, lambda x: Expr.cast(F32, x))
NOT_EXPR = _op("not_expr", (U32,), U32, lambda x: 3)
RAISES = _op("raises", (U32,), U32, lambda x: 1 / 0)
CAPTURES = _op("captures", (U32,), U32, lambda x: Expr.add(x, Expr.var("user")))
RECURSIVE = _op("recursive", (U32,), U32, lambda x: Expr.call(RECURSIVE, x))
SUBGROUP = _op("subgroup_sum", (U32,), U32, lambda x: Expr.subgroup_add(x))


def bump(buffer: str = "acc", by: int = 1) -> Expr:
    """An atomic add of ``by`` to ``buffer[0]``: how often it ran shows in the buffer."""
    return Expr.atomic(AtomicOp.ADD, buffer, Expr.u32(0), Expr.u32(by))


def counted(body: list[Node], n: int = 64, wg: int = 32) -> Program:
    return Program([BufferDecl.output("acc", 0, U32, 1), BufferDecl.output("out", 1, U32, n)], (wg, 1, 1), body)


def run_counted(program: Program) -> tuple[int, np.ndarray]:
    acc, out = run(program, [])
    return int(acc[0]), out


def test_an_atomic_argument_used_twice_runs_once():
    acc, out = run_counted(counted([Node.store("out", GID, Expr.call(TWICE, bump()))]))
    assert acc == 64  # call by name would give 128
    assert sorted(out.tolist()) == [2 * k for k in range(64)]  # each invocation got its own old value


def test_a_never_used_argument_is_still_evaluated():
    acc, out = run_counted(counted([Node.store("out", GID, Expr.call(FIRST, GID, bump(by=5)))]))
    assert acc == 5 * 64
    assert out.tolist() == list(range(64))


def test_nested_calls_and_calls_inside_expansions_evaluate_the_argument_once():
    acc, out = run_counted(counted([Node.store("out", GID, Expr.call(TWICE, Expr.call(QUAD, bump())))]))
    assert acc == 64
    assert sorted(out.tolist()) == [8 * k for k in range(64)]


def test_arguments_are_evaluated_left_to_right_whatever_order_the_expansion_uses_them_in():
    p = Program([BufferDecl.read_write("c", 0, U32), BufferDecl.output("out", 1, U32, 1)], (1, 1, 1),
                [Node.store("out", Expr.u32(0), Expr.call(SWAP, Expr.atomic(AtomicOp.ADD, "c", Expr.u32(0),
                                                                              Expr.u32(10)),
                                                          Expr.load("c", Expr.u32(0))))])
    c, out = run(p, [np.array([7], np.uint32)])
    assert c[0] == 17 and out[0] == 17 - 7  # a = old 7, then b = load after the add: 17


def test_an_operand_before_a_call_keeps_its_place_in_the_evaluation_order():
    # load(c) is evaluated before the call's atomic argument, so it sees the value before the add
    p = Program([BufferDecl.read_write("c", 0, U32), BufferDecl.output("out", 1, U32, 1)], (1, 1, 1),
                [Node.store("out", Expr.u32(0), Expr.add(Expr.mul(Expr.load("c", Expr.u32(0)), Expr.u32(1000)),
                                                         Expr.call(TWICE, Expr.atomic(AtomicOp.ADD, "c", Expr.u32(0),
                                                                                      Expr.u32(1)))))])
    c, out = run(p, [np.array([5], np.uint32)])
    assert c[0] == 6 and out[0] == 5 * 1000 + 2 * 5


def test_calls_in_conditions_loop_bounds_store_indices_and_atomic_operands():
    n = 48
    p = Program([BufferDecl.output("acc", 0, U32, 4), BufferDecl.output("out", 1, U32, 2 * n)], (16, 1, 1), [
        Node.if_(Expr.call(NONZERO, bump()), [Node.store("out", Expr.call(TWICE, GID), Expr.u32(1))]),
        Node.loop("i", Expr.u32(0), Expr.call(FIRST, Expr.u32(2), bump("acc", 1)), [
            Node.let("old", Expr.atomic(AtomicOp.ADD, "acc", Expr.call(FIRST, Expr.u32(1), bump()),
                                        Expr.call(TWICE, Expr.u32(3))))]),
        Node.store("out", Expr.add(Expr.call(TWICE, GID), Expr.u32(1)), Expr.call(TWICE, bump())),
    ])
    acc, out = run(p, [], DispatchConfig(elements=n))
    # bumps: the if condition, the loop end (once: bounds are evaluated once), 2 iterations x 1
    # atomic-index argument, the stored value: 5 per invocation
    assert acc[0] == 5 * n
    assert acc[1] == 2 * 6 * n  # two iterations adding twice(3) at index first(1, ...)
    assert out[0::2].sum() == n - 1  # only the invocation that saw acc[0] == 0 skipped its store
    assert len(set(out[1::2].tolist())) == n and not np.any(out[1::2] % 2)  # twice a distinct old value


def test_fresh_names_never_collide_with_the_programs_names():
    body = [Node.let("__arg1", Expr.u32(100)), Node.let("__t2", Expr.u32(20)),
            Node.store("out", GID, Expr.add(Expr.add(Expr.var("__arg1"), Expr.var("__t2")), Expr.call(TWICE, bump())))]
    program = counted(body)
    expanded = expand_calls(program)
    lets = [n.name for n in iter_nodes(expanded.body) if isinstance(n, Let)]
    assert len(lets) == len(set(lets)) and lets[:2] == ["__arg1", "__t2"]
    acc, out = run_counted(program)
    assert acc == 64 and sorted(out.tolist()) == [120 + 2 * k for k in range(64)]


def test_the_expansion_binds_each_argument_once_and_leaves_no_composed_call():
    program = counted([Node.store("out", GID, Expr.call(TWICE, bump()))])
    expanded = expand_calls(program)
    atomics = [e for e in iter_all_exprs(expanded.body) if e.op == "atomic"]
    assert len(atomics) == 1 and not any(e.op == "call" for e in iter_all_exprs(expanded.body))
    assert expand_calls(expanded) is expanded  # nothing left to do: the same object
    plain = counted([Node.store("out", GID, bump())])
    assert expand_calls(plain) is plain


@pytest.mark.parametrize("op, code", [(WRONG_TYPE, "bad_expansion"), (NOT_EXPR, "bad_expansion"),
                                      (RAISES, "bad_expansion"), (CAPTURES, "bad_expansion"),
                                      (RECURSIVE, "expansion_too_deep")])
def test_a_broken_op_is_a_validation_error_naming_the_op(op, code):
    program = counted([Node.store("out", GID, Expr.call(op, GID))])
    with pytest.raises(ValidationError) as err:
        run(program, [])
    assert err.value.codes == (code,) and op in str(err.value) and "Fix:" in str(err.value)
    if code == "expansion_too_deep":
        assert str(MAX_EXPANSION_DEPTH) in str(err.value)


def test_the_expanded_program_is_validated_again():
    # the call hides a subgroup op under varying control flow until it is expanded
    program = counted([Node.if_(Expr.lt(GID, Expr.u32(3)), [Node.let("s", Expr.call(SUBGROUP, GID))])])
    with pytest.raises(ValidationError, match="after expanding composed ops") as err:
        run(program, [])
    assert "varying_subgroup_op" in err.value.codes


def test_random_arguments_match_a_hand_expanded_program():
    a = RNG.integers(0, 2**32, 100, dtype=np.uint32)
    call = Program([BufferDecl.read("a", 0, U32), BufferDecl.output("o", 1, U32, 100)], (32, 1, 1),
                   [Node.store("o", GID, Expr.call(SWAP, Expr.call(QUAD, Expr.load("a", GID)),
                                                   Expr.load("a", Expr.add(GID, Expr.u32(1)))))])
    hand = Program(call.buffers, (32, 1, 1),
                   [Node.let("x", Expr.load("a", GID)), Node.let("y", Expr.load("a", Expr.add(GID, Expr.u32(1)))),
                    Node.store("o", GID, Expr.sub(Expr.var("y"), Expr.mul(Expr.var("x"), Expr.u32(4))))])
    assert np.array_equal(run(call, [a])[0], run(hand, [a])[0])
