"""Which written buffers may load through the read-only cache (``_codegen.own_index``), without a GPU.

The shape that is safe (the last statement is the only store, every access at the invocation's own
x index) is accepted; each way out of it is refused, and the PTX follows the answer. The GPU side
(results equal to the oracle for such read-modify-write programs, coarsened and not) is
tests/gpu/test_cuda_coarsen.py and the graph tests.
"""

from __future__ import annotations

import re

import pytest

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre_cuda import emit_ptx
from vyre_cuda._codegen.own_index import cached_read_write

F32, U32 = DataType.F32, DataType.U32
i = Expr.var("i")
X = BufferDecl.read("x", 0, F32)
Y = BufferDecl.read_write("y", 1, F32)


def _program(body: list[Node], buffers: tuple[BufferDecl, ...] = (X, Y), size: tuple = (256, 1, 1)) -> Program:
    return Program(list(buffers), size, body, name="rmw")


def _saxpy_body(index: Expr = i) -> list[Node]:
    return [Node.let("i", Expr.invocation_id(0)),
            Node.store("y", index, Expr.add(Expr.mul(Expr.f32(2.0), Expr.load("x", i)), Expr.load("y", index)))]


SAFE = {
    "saxpy": _program(_saxpy_body()),
    "direct_invocation_id": _program(_saxpy_body(Expr.invocation_id(0))),
    "let_of_a_load_then_store": _program([Node.let("i", Expr.invocation_id(0)),
                                          Node.let("v", Expr.load("y", i)),
                                          Node.if_(Expr.lt(Expr.load("x", i), Expr.f32(0.0)),
                                                   Node.assign("v", Expr.neg(Expr.var("v")))),
                                          Node.store("y", i, Expr.var("v"))]),
    "output_buffer": _program(_saxpy_body(), (X, BufferDecl.output("y", 1, F32, 64))),
}

UNSAFE = {
    "store_not_last": _program([*_saxpy_body(), Node.store("y", Expr.u32(0), Expr.f32(1.0))]),
    "load_after_an_earlier_store": _program([Node.let("i", Expr.invocation_id(0)),
                                             Node.store("y", i, Expr.f32(1.0)),
                                             Node.store("y", i, Expr.add(Expr.load("y", i), Expr.f32(1.0)))]),
    "neighbour_load": _program([Node.let("i", Expr.invocation_id(0)),
                                Node.store("y", i, Expr.load("y", Expr.add(i, Expr.u32(1))))]),
    "other_index_store": _program(_saxpy_body(Expr.add(i, Expr.u32(1)))),
    "y_axis_index": _program([Node.let("i", Expr.invocation_id(1)), Node.store("y", i, Expr.load("y", i))]),
    "assigned_index": _program([Node.let("i", Expr.invocation_id(0)), Node.assign("i", Expr.u32(3)),
                                Node.store("y", i, Expr.load("y", i))]),
    "index_bound_twice": _program([Node.block([Node.let("i", Expr.invocation_id(0)),
                                               Node.let("w", Expr.load("y", i))]),
                                   Node.let("i", Expr.u32(5)),
                                   Node.store("y", i, Expr.load("y", i))]),
    "atomic_on_the_buffer": _program([Node.let("i", Expr.invocation_id(0)),
                                      Node.let("o", Expr.atomic(AtomicOp.ADD, "z", i, Expr.u32(1))),
                                      Node.let("w", Expr.atomic(AtomicOp.ADD, "z", Expr.u32(0), Expr.u32(1))),
                                      Node.store("z", i, Expr.load("z", i))],
                                     (BufferDecl.read_write("z", 0, U32),)),
    "store_inside_if": _program([Node.let("i", Expr.invocation_id(0)),
                                 Node.if_(Expr.lt(i, Expr.u32(9)), Node.store("y", i, Expr.load("y", i)))]),
    "workgroup_buffer": _program([Node.let("i", Expr.invocation_id(0)),
                                  Node.store("w", i, Expr.load("w", i))],
                                 (BufferDecl.workgroup("w", 256, U32),)),
}


@pytest.mark.parametrize("name", sorted(SAFE))
def test_safe_shapes_load_through_the_read_only_cache(name: str) -> None:
    program = SAFE[name]
    assert cached_read_write(program) == {"y"}
    ptx = emit_ptx(program, coarsen=4)
    assert not re.search(r"ld\.global\.(u32|b16)", ptx), "every global load should be .nc"


@pytest.mark.parametrize("name", sorted(UNSAFE))
def test_other_shapes_keep_coherent_loads(name: str) -> None:
    program = UNSAFE[name]
    assert cached_read_write(program) == frozenset()
    if name != "workgroup_buffer":
        written = next(d.name for d in program.buffers if d.access.writable)
        ptx = emit_ptx(program)
        assert re.search(r"ld\.global\.u32", ptx), f"a load of {written} must stay coherent"


def test_read_only_buffers_are_unchanged() -> None:
    """A program with no written buffer loads read-only buffers through .nc as before."""
    program = _program([Node.let("i", Expr.invocation_id(0)), Node.store("y", i, Expr.load("x", i))])
    assert cached_read_write(program) == {"y"}  # y is never loaded: harmless
    assert "ld.global.nc" in emit_ptx(program)


def test_the_fuzzer_generates_this_shape() -> None:
    """About one generated program in six ends with the read-modify-write store, so the differential
    fuzzer (``python -m vyre.fuzz``) exercises these loads against the oracle."""
    generate = pytest.importorskip("vyre.ir.generate")
    hits = [seed for seed in range(300) if cached_read_write(generate.generate_program(seed))]
    assert len(hits) >= 20
    for seed in hits[:10]:
        program = generate.generate_program(seed)
        (name,) = cached_read_write(program)
        assert re.search(r"ld\.global\.nc", emit_ptx(program, coarsen=4))
        stores = [n for n in program.body if getattr(n, "buffer", None) == name]
        assert stores == [program.body[-1]]
