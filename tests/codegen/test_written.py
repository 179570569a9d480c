"""Which ``output`` buffers keep their zero fill (``vyre_cuda._codegen.written``), without a GPU.

The shape the analysis accepts (one store per invocation at its own index, reached by every
invocation, nothing read before it) skips the fill; each way out of it keeps the fill. The oracle
checks the claim: a proven buffer filled with poison instead of zeros gives the same result.
"""

from __future__ import annotations

import numpy as np
import pytest

from vyre.driver.config import DispatchConfig, effective_workgroup
from vyre.driver.inputs import prepare_host_dispatch
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ir.program import Access
from vyre.reference.interpreter import execute
from vyre_cuda._codegen.written import outputs_to_zero, whole_writes
from vyre_cuda.testing import launch_grid

U32 = DataType.U32
i = Expr.var("i")
gid = Expr.invocation_id(0)
A = BufferDecl.read("a", 0, U32)
B = BufferDecl.read("b", 1, U32)
OUT = BufferDecl.output("out", 2, U32, 1024)
XOR = Expr.bitxor(Expr.load("a", i), Expr.load("b", i))
COUNTS = {"a": 1024, "b": 1024, "out": 1024}
BLOCK = (256, 1, 1)
GRID = (4, 1, 1)


def _program(body: list[Node], buffers: tuple[BufferDecl, ...] = (A, B, OUT)) -> Program:
    return Program(list(buffers), BLOCK, body, name="xor")


def _zero(program: Program, grid: tuple = GRID, counts: dict | None = None) -> tuple[str, ...]:
    return outputs_to_zero(program, BLOCK, grid, counts or COUNTS)


LET = Node.let("i", gid)

WRITTEN = {
    "top_level_store": [LET, Node.store("out", i, XOR)],
    "invocation_id_directly": [Node.store("out", gid, Expr.bitxor(Expr.load("a", gid), Expr.load("b", gid)))],
    "inside_a_block": [LET, Node.block([Node.let("v", XOR), Node.store("out", i, Expr.var("v"))])],
    "guarded_by_its_own_length": [LET, Node.if_(Expr.lt(i, Expr.buf_len("out")), Node.store("out", i, XOR))],
    "guarded_by_an_input_length": [LET, Node.if_(Expr.gt(Expr.buf_len("a"), i), Node.store("out", i, XOR))],
    "read_back_at_own_index_after": [LET, Node.store("out", i, XOR),
                                     Node.store("out", i, Expr.add(Expr.load("out", i), Expr.u32(1)))],
    "return_after_the_store": [LET, Node.store("out", i, XOR), Node.if_(Expr.eq(i, Expr.u32(3)), Node.return_())],
    "another_store_elsewhere_too": [LET, Node.store("out", i, XOR), Node.store("out", Expr.u32(0), Expr.u32(7))],
}

ZEROED = {
    "store_under_if": [LET, Node.if_(Expr.lt(Expr.load("a", i), Expr.u32(5)), Node.store("out", i, XOR))],
    "store_under_if_with_else": [LET, Node.if_(Expr.lt(i, Expr.buf_len("out")), Node.store("out", i, XOR),
                                               Node.store("out", i, Expr.u32(1)))],
    "after_a_possible_return": [LET, Node.if_(Expr.eq(Expr.load("a", i), Expr.u32(0)), Node.return_()),
                                Node.store("out", i, XOR)],
    "after_a_return_inside_the_guard": [LET, Node.if_(Expr.lt(i, Expr.buf_len("out")),
                                                      [Node.if_(Expr.eq(i, Expr.u32(9)), Node.return_()),
                                                       Node.store("out", i, XOR)])],
    "in_a_loop": [LET, Node.loop("k", Expr.u32(0), Expr.u32(1), Node.store("out", i, XOR))],
    "at_another_index": [LET, Node.store("out", Expr.add(i, Expr.u32(1)), XOR)],
    "at_a_workgroup_index": [Node.store("out", Expr.workgroup_id(0), Expr.u32(1))],
    "loaded_before_the_store": [LET, Node.let("old", Expr.load("out", i)), Node.store("out", i, Expr.var("old"))],
    "loaded_in_its_own_value": [LET, Node.store("out", i, Expr.add(Expr.load("out", i), Expr.u32(1)))],
    "loaded_at_another_index_after": [LET, Node.store("out", i, XOR),
                                      Node.store("out", i, Expr.load("out", Expr.add(i, Expr.u32(1))))],
    "atomic_anywhere": [LET, Node.store("out", i, XOR),
                        Node.let("o", Expr.atomic(AtomicOp.ADD, "out", i, Expr.u32(1)))],
    "no_store": [LET, Node.let("v", XOR)],
    "own_index_variable_reassigned": [Node.let("i", gid), Node.assign("i", Expr.add(i, Expr.u32(1))),
                                      Node.store("out", i, XOR)],
}


@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_whole_writes_skip_the_fill(name: str) -> None:
    program = _program(WRITTEN[name])
    assert "out" in whole_writes(program)
    assert _zero(program) == ()


@pytest.mark.parametrize("name", sorted(ZEROED))
def test_every_other_shape_keeps_the_fill(name: str) -> None:
    assert _zero(_program(ZEROED[name])) == ("out",)


def test_a_grid_that_does_not_cover_the_buffer_keeps_the_fill() -> None:
    program = _program(WRITTEN["top_level_store"])
    assert _zero(program, (3, 1, 1)) == ("out",)  # 768 invocations for 1024 elements
    assert _zero(program, (4, 0, 1)) == ("out",)  # nothing runs
    assert _zero(program, (5, 1, 1)) == ()


def test_a_guard_shorter_than_the_buffer_keeps_the_fill() -> None:
    program = _program(WRITTEN["guarded_by_an_input_length"])
    assert _zero(program, counts={"a": 1000, "b": 1024, "out": 1024}) == ("out",)
    assert _zero(program, counts={"a": 2000, "b": 1024, "out": 1024}) == ()


def test_coarsened_grids_are_judged_by_their_logical_grid() -> None:
    """A coarsened kernel runs every logical workgroup; its smaller hardware grid alone would not cover."""
    program = _program(WRITTEN["top_level_store"])
    logical = (4, 1, 1)
    assert _zero(program, logical) == ()
    assert _zero(program, launch_grid(logical, 4)) == ("out",)


def test_an_empty_output_needs_no_fill_and_calls_keep_it() -> None:
    program = _program(WRITTEN["top_level_store"])
    assert _zero(program, (0, 1, 1), {"a": 0, "b": 0, "out": 0}) == ()
    called = _program([LET, Node.store("out", i, Expr.call("no.such.op", Expr.load("a", i)))])
    assert whole_writes(called) == {}


def test_read_write_buffers_are_never_listed() -> None:
    rw = BufferDecl.read_write("out", 2, U32)
    assert _zero(_program([LET, Node.if_(Expr.eq(i, Expr.u32(0)), Node.store("out", i, XOR))], (A, B, rw))) == ()


def _run(program: Program, arrays: dict, grid: tuple, config: DispatchConfig | None) -> dict:
    arrays = {k: v.copy() for k, v in arrays.items()}
    execute(program, arrays, grid, effective_workgroup(program, config))
    return arrays


def test_the_oracle_agrees_on_generated_programs() -> None:
    """For random programs, every output the analysis lets go unfilled ends the same when it starts as
    poison (0xA5 bytes) instead of zeros; and the analysis does accept a fair share of them."""
    generate = pytest.importorskip("vyre.ir.generate")
    proven = 0
    for seed in range(400):
        case = generate.generate_case(seed)
        program = case.program
        outputs = [b.name for b in program.buffers if b.access is Access.OUTPUT and not b.is_workgroup]
        if not outputs:
            continue
        host = prepare_host_dispatch(program, case.inputs, case.config)
        block = effective_workgroup(program, case.config)
        skip = set(outputs) - set(outputs_to_zero(program, block, host.grid, host.counts))
        if not skip:
            continue
        proven += 1
        try:
            zeroed = _run(program, host.arrays, host.grid, case.config)
        except Exception:  # noqa: BLE001 - programs the oracle refuses are not this test's business
            continue
        poisoned_in = dict(host.arrays)
        for name in skip:
            arr = host.arrays[name]
            poisoned_in[name] = np.full(arr.nbytes, 0xA5, np.uint8).view(arr.dtype)
        poisoned = _run(program, poisoned_in, host.grid, case.config)
        for name in skip:
            assert np.array_equal(zeroed[name].view(np.uint8), poisoned[name].view(np.uint8)), (seed, name)
    assert proven >= 5, proven
