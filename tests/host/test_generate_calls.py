"""Generated programs call composed ops with side-effecting arguments, so fuzzing checks call by value."""

from __future__ import annotations

from collections import Counter

import numpy as np

from vyre.ir import Expr, Program
from vyre.ir.generate import GENERATOR_OPS, generate_case, generate_program
from vyre.ir.node import Assign, Block, If, Let, Loop, Node, Region, Store
from vyre.ir.validate import validate
from vyre.ir.walk import iter_all_exprs
from vyre.ops import get_op
from vyre.reference import run


def _effect_args(program: Program) -> list[Expr]:
    """Arguments of calls that run an atomic (``select(atomic(...) == 0, v, v)``)."""
    return [a for e in iter_all_exprs(program.body) if e.op == "call" for a in e.args
            if a.op == "select" and a.args[0].op == "eq" and a.args[0].args[0].op == "atomic"]


def test_every_generator_op_is_called_and_many_calls_have_side_effecting_arguments():
    called: Counter = Counter()
    with_effects = 0
    for seed in range(300):
        program = generate_program(seed, wide=seed % 2 == 1)  # the 64-bit ops are called in wide programs
        validate(program)
        called.update(e.name for e in iter_all_exprs(program.body) if e.op == "call")
        with_effects += bool(_effect_args(program))
    assert {op.id for op in GENERATOR_OPS.values()} <= set(called)
    assert with_effects >= 50


def _by_name(e: Expr) -> Expr:
    """``e`` with composed calls substituted call by name (the old, wrong semantics)."""
    args = tuple(_by_name(a) for a in e.args)
    if e.op == "call":
        return _by_name(get_op(e.name).expand(*args))
    return Expr(e.op, args, e.dtype, e.value, e.name)


def _node_by_name(n: Node) -> Node:
    if isinstance(n, (Let, Assign)):
        return type(n)(n.name, _by_name(n.value))
    if isinstance(n, Store):
        return Store(n.buffer, _by_name(n.index), _by_name(n.value))
    if isinstance(n, If):
        return If(_by_name(n.cond), tuple(map(_node_by_name, n.then)), tuple(map(_node_by_name, n.otherwise)))
    if isinstance(n, Loop):
        return Loop(n.var, _by_name(n.start), _by_name(n.end), tuple(map(_node_by_name, n.body)))
    if isinstance(n, Block):
        return Block(tuple(map(_node_by_name, n.body)))
    if isinstance(n, Region):
        return Region(n.generator, tuple(map(_node_by_name, n.body)))
    return n


def test_a_call_by_name_backend_would_be_caught_by_generated_cases():
    """Substituting argument expressions changes the outputs of many generated cases."""
    caught = checked = 0
    for seed in range(400):
        case = generate_case(seed)
        if not _effect_args(case.program):
            continue
        checked += 1
        p = case.program
        wrong = Program(p.buffers, p.workgroup_size, tuple(map(_node_by_name, p.body)), p.name)
        right, mutant = run(p, case.inputs, case.config), run(wrong, case.inputs, case.config)
        caught += any(a.tobytes() != b.tobytes() for a, b in zip(right, mutant)
                      if not (a.dtype.kind == "f" and np.isnan(a).any()))
        if checked == 60:
            break
    assert checked == 60 and caught >= 10, (checked, caught)
