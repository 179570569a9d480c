"""Relaxed atomics: the API, both formats, the oracle, and the PTX (no fence, ``atom.relaxed``)."""

from __future__ import annotations

import numpy as np
import pytest
from codegen_support import assemble, needs_ptxas

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ir.expr import is_atomic_read
from vyre.ir.text import parse, to_text
from vyre.ir.wire import from_wire, to_wire
from vyre.reference import ReferenceBackend
from vyre_cuda import emit_ptx

U32 = DataType.U32


def _counts(relaxed: bool, shared: bool) -> Program:
    """Bins of ``x & 15`` counted with atomic adds into ``bins`` (global) or a workgroup copy."""
    i = Expr.invocation_id(0)
    bin_ = Expr.bitand(Expr.load("x", i), Expr.u32(15))
    lid = Expr.local_id(0)
    if not shared:
        body = [Node.let("old", Expr.atomic(AtomicOp.ADD, "bins", bin_, Expr.u32(1), relaxed=relaxed))]
        return Program([BufferDecl.read("x", 0, U32), BufferDecl.read_write("bins", 1, U32)], (64, 1, 1), body)
    body = [Node.let("old", Expr.atomic(AtomicOp.ADD, "local", bin_, Expr.u32(1), relaxed=relaxed)), Node.barrier(),
            Node.if_(Expr.lt(lid, Expr.u32(16)), Node.let("merged", Expr.atomic(
                AtomicOp.ADD, "bins", lid, Expr.load("local", lid), relaxed=relaxed)))]
    return Program([BufferDecl.read("x", 0, U32), BufferDecl.read_write("bins", 1, U32),
                    BufferDecl.workgroup("local", 16, U32)], (64, 1, 1), body)


def test_relaxed_picks_the_twin_of_every_op() -> None:
    for op in AtomicOp:
        twin = Expr.atomic(op, "b", Expr.u32(0), Expr.u32(1), relaxed=True).value
        assert twin.is_relaxed and twin.base is op.base and twin.ordered(False) is op.base
        assert op.base.ordered(True) is twin and not op.base.is_relaxed


@pytest.mark.parametrize("shared", [False, True])
def test_formats_round_trip_and_name_the_order(shared: bool) -> None:
    program = _counts(True, shared)
    assert "atomic_add_relaxed(" in to_text(program)
    assert parse(to_text(program)) == program
    assert from_wire(to_wire(program)) == program
    assert from_wire(to_wire(_counts(False, shared))) != program


@pytest.mark.parametrize("shared", [False, True])
def test_the_oracle_counts_the_same_either_way(shared: bool) -> None:
    x = np.random.default_rng().integers(0, 2**32, 1024, dtype=np.uint64).astype(np.uint32)
    want = np.bincount(x & 15, minlength=16).astype(np.uint32)
    with ReferenceBackend() as be:
        for relaxed in (False, True):
            (bins,) = be.dispatch(_counts(relaxed, shared), [x, np.zeros(16, np.uint32)])
            np.testing.assert_array_equal(bins.view(np.uint32), want)


@pytest.mark.parametrize("shared", [False, True])
def test_relaxed_atomics_have_no_fence(shared: bool) -> None:
    strict, relaxed = emit_ptx(_counts(False, shared)), emit_ptx(_counts(True, shared))
    assert strict.count("fence.sc.") == (2 if shared else 1) and "atom.acq_rel." in strict
    assert "fence.sc" not in relaxed and "atom.acq_rel" not in relaxed
    assert relaxed.count("atom.relaxed.gpu.global.add.u32") == 1
    assert relaxed.count("atom.relaxed.cta.shared.add.u32") == (1 if shared else 0)


@needs_ptxas
@pytest.mark.parametrize("op", [op for op in AtomicOp if op.is_relaxed], ids=lambda op: op.name)
def test_every_relaxed_op_assembles(op: AtomicOp) -> None:
    for t in (U32, DataType.I32):
        lit = Expr.u32 if t is U32 else Expr.i32
        expected = lit(3) if op.base is AtomicOp.COMPARE_EXCHANGE else None
        body = [Node.let("a", Expr.atomic(op, "g", Expr.invocation_id(0), lit(5), expected)),
                Node.let("b", Expr.atomic(op, "s", Expr.local_id(0), Expr.var("a"), expected))]
        program = Program([BufferDecl.read_write("g", 0, t), BufferDecl.workgroup("s", 64, t)], (64, 1, 1), body)
        assert assemble({op.name: emit_ptx(program)}, "90") == []


@pytest.mark.parametrize("shared", [False, True])
def test_a_relaxed_atomic_of_zero_is_a_read(shared: bool) -> None:
    """ADD/OR/XOR of the literal 0, relaxed: ``ld.relaxed`` (no read-modify-write); the same of a
    non-literal or a sequentially consistent one stays an atomic; all equal the oracle."""
    buf = "s" if shared else "g"
    i = Expr.local_id(0)
    reads = [Expr.atomic(op, buf, i, Expr.u32(0), relaxed=True) for op in (AtomicOp.ADD, AtomicOp.OR, AtomicOp.XOR)]
    kept = [Expr.atomic(AtomicOp.OR, buf, i, Expr.u32(0)),
            Expr.atomic(AtomicOp.OR, buf, i, Expr.sub(Expr.u32(1), Expr.u32(1)), relaxed=True),
            Expr.atomic(AtomicOp.MAX, buf, i, Expr.u32(0), relaxed=True)]
    assert all(is_atomic_read(e) for e in reads) and not any(is_atomic_read(e) for e in kept)
    body = [Node.store("out", Expr.add(Expr.mul(Expr.u32(6), i), Expr.u32(k)), e) for k, e in enumerate(reads + kept)]
    if shared:
        body.insert(0, Node.store("s", i, Expr.load("g", i)))
        body.insert(1, Node.barrier())
    decls = [BufferDecl.read_write("g", 0, U32), BufferDecl.output("out", 1, U32, 6 * 64)]
    program = Program(decls + ([BufferDecl.workgroup("s", 64, U32)] if shared else []), (64, 1, 1), body)
    ptx = emit_ptx(program)
    space = "cta.shared" if shared else "gpu.global"
    assert ptx.count(f"ld.relaxed.{space}.b32") == 3
    assert ptx.count(f"atom.relaxed.{space}.") == 2 and ptx.count(f"atom.acq_rel.{space}.") == 1
    g = np.random.default_rng().integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    with ReferenceBackend() as be:
        _, out = be.dispatch(program, [g])
    np.testing.assert_array_equal(out.view(np.uint32).reshape(64, 6), np.repeat(g[:, None], 6, axis=1))
