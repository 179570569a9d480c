"""Workgroup-memory accesses whose index is proven below the buffer's count lose their guard
(``vyre_cuda._codegen.ranges``); the proof is checked here against the oracle's semantics.

- Each bound rule holds for random operands within their bounds, computed with the oracle's own
  scalar functions (edges included: the bounds themselves, 0, wrap-around).
- For random index expressions (local id, lane, literals, loaded words, lets, loop counters, the
  rule ops and the others), the bound the lowering records is at least every value the oracle
  computes for the same expression over a workgroup of random data.
- Which accesses keep their guard: unknown indices, indices that may reach the count, variables
  that are assigned, a workgroup size given at dispatch, global memory.
"""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from vyre.driver.config import DispatchConfig
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.ir.op import Op
from vyre.reference import ReferenceBackend
from vyre.reference import scalar_ops as oracle
from vyre_cuda import emit_ptx
from vyre_cuda._codegen.builder import Builder
from vyre_cuda._codegen.exprs import ExprLowering
from vyre_cuda._codegen.memory import Buffers
from vyre_cuda._codegen.ranges import BINARY, U32_MAX, UNARY, binary_bound, unary_bound
from vyre_cuda._codegen.stmts import StmtLowering

U32 = DataType.U32
WG = 64
EDGES = (0, 1, 2, 31, 32, 255, 256, 1023, 4095, 65535, 2**31 - 1, 2**31, U32_MAX - 1, U32_MAX)


def _below(rng: np.random.Generator, hi: int, size: int) -> np.ndarray:
    """``size`` values in ``[0, hi]``: ``hi`` itself, 0 and random ones."""
    v = rng.integers(0, hi, size=size, dtype=np.uint64, endpoint=True)
    v[:2] = (hi, 0)
    return v.astype(np.uint32)


@pytest.mark.parametrize("op", sorted(BINARY, key=str))
def test_each_binary_rule_holds_on_the_oracle(op: Op) -> None:
    rng = np.random.default_rng(7)
    for _ in range(300):
        a_hi = int(rng.choice(EDGES)) if rng.random() < 0.5 else int(rng.integers(0, U32_MAX, endpoint=True))
        b_hi = int(rng.choice(EDGES)) if rng.random() < 0.5 else int(rng.integers(0, U32_MAX, endpoint=True))
        literal = rng.random() < 0.5
        a = _below(rng, a_hi, 64)
        b = np.full(64, b_hi, np.uint32) if literal else _below(rng, b_hi, 64)
        got = np.asarray(oracle.BINARY[op](a, b)).astype(np.uint64)
        bound = binary_bound(op, a_hi, b_hi, b_hi if literal else None)
        assert got.max() <= bound, (op, a_hi, b_hi, literal)


@pytest.mark.parametrize("op", sorted(UNARY, key=str))
def test_each_unary_rule_holds_on_the_oracle(op: Op) -> None:
    x = np.array([0, 1, 255, 2**31, U32_MAX, *np.random.default_rng(3).integers(0, U32_MAX, 200)], np.uint32)
    assert np.asarray(oracle.UNARY[op](x)).max() <= unary_bound(op)


# ---- random index expressions: the lowering's bound against the oracle's values ---------------------
LEAVES = ("lid", "lane", "lit", "load", "loop")
OPS = [*BINARY, Op.SUB, Op.ROTATE_LEFT]


def _expression(rng: random.Random, depth: int) -> Expr:
    if depth == 0 or rng.random() < 0.25:
        leaf = rng.choice(LEAVES)
        if leaf == "lid":
            return Expr.local_id(0)
        if leaf == "lane":
            return Expr.subgroup_local_id()
        if leaf == "load":
            return Expr.load("x", Expr.local_id(0))
        if leaf == "loop":
            return Expr.var("i")
        return Expr.u32(rng.choice((0, 1, 3, 5, 31, 32, 255, 256, 4096, 2**20, 2**31, U32_MAX)))
    if rng.random() < 0.15:
        return Expr.select(Expr.lt(Expr.local_id(0), Expr.u32(rng.randrange(WG))),
                           _expression(rng, depth - 1), _expression(rng, depth - 1))
    op = rng.choice(OPS)
    a, b = _expression(rng, depth - 1), _expression(rng, depth - 1)
    if op in (Op.DIV, Op.REM) and b.op == Op.LIT and b.value == 0:
        b = Expr.u32(7)  # a literal zero divisor is refused by the validator
    return Expr(op, (a, b))


def _program(index: Expr, loop_end: int) -> Program:
    """``o[lid] = index`` inside ``for i in range(0, loop_end)`` (the last trip's value stays)."""
    body = [Node.loop("i", Expr.u32(0), Expr.u32(loop_end), [Node.store("o", Expr.local_id(0), index)])]
    return Program([BufferDecl.read("x", 0, U32), BufferDecl.read_write("o", 1, U32, WG)], (WG, 1, 1), body,
                   name="bound_probe")


def _recorded_bound(program: Program) -> int:
    """The bound the lowering records for the stored index expression (the value stored)."""
    b = Builder()
    buffers = Buffers(program, b)
    exprs = ExprLowering(b, buffers, block=program.workgroup_size)
    seen: list[int] = []
    store = buffers.store

    def spy(name, index, value, hi=U32_MAX, field=None):
        seen.append(exprs.bound(value))
        return store(name, index, value, hi)

    buffers.store = spy  # type: ignore[method-assign]
    StmtLowering(b, exprs, program.body).body(program.body, {})
    return seen[0]


def test_recorded_bounds_hold_on_the_oracle() -> None:
    rng, data = random.Random(11), np.random.default_rng(12)
    backend = ReferenceBackend()
    bounded = 0
    for trial in range(400):
        index = _expression(rng, 4)
        program = _program(index, rng.choice((1, 2, 7, 64)))
        hi = _recorded_bound(program)
        bounded += hi < U32_MAX
        x = data.integers(0, U32_MAX, WG, dtype=np.uint64, endpoint=True).astype(np.uint32)
        x[:4] = (0, U32_MAX, 1, 2**31)
        out = backend.dispatch(program, [x, np.zeros(WG, np.uint32)], DispatchConfig(grid=(1, 1, 1)))
        got = np.asarray(out[-1]).view(np.uint32)
        assert int(got.max()) <= hi, (trial, index, hi)
    assert bounded > 100  # the rules bound most of these expressions, not only their literals


# ---- which accesses keep their guard -----------------------------------------------------------------
_STORE = re.compile(r"^\t(@%p\d+ )?st\.shared\.u32 \[%r\d+\+\d+\], %r\d+;$", re.M)


def _guarded(index: Expr, count: int, before: tuple[Node, ...] = (), wg: int = 256,
             config: DispatchConfig | None = None) -> bool:
    """Whether the store ``t[index] = x[gid]`` into a workgroup buffer of ``count`` words is guarded."""
    body = [*before, Node.store("t", index, Expr.load("x", Expr.invocation_id(0))), Node.barrier(),
            Node.store("o", Expr.invocation_id(0), Expr.load("t", Expr.u32(0)))]
    program = Program([BufferDecl.read("x", 0, U32), BufferDecl.output("o", 1, U32, 1),
                       BufferDecl.workgroup("t", count, U32)], (wg, 1, 1), body, name="guard_probe")
    stores = _STORE.findall(emit_ptx(program, config=config))
    assert len(stores) == 1, stores
    return bool(stores[0])


LID, LANE = Expr.local_id(0), Expr.subgroup_local_id()
DIGIT = Expr.bitand(Expr.load("x", Expr.invocation_id(0)), Expr.u32(255))


@pytest.mark.parametrize(("index", "count", "guarded"), [
    (LID, 256, False), (LID, 255, True),
    (Expr.add(LID, Expr.u32(1)), 256, True), (Expr.add(LID, Expr.u32(1)), 257, False),
    (Expr.sub(LID, Expr.u32(1)), 4096, True),  # wraps below zero
    (Expr.load("x", LID), 8192, True),
    (DIGIT, 256, False), (DIGIT, 255, True),
    (Expr.add(Expr.mul(Expr.shr(LID, Expr.u32(5)), Expr.u32(256)), DIGIT), 2048, False),  # a sort counter
    (Expr.add(Expr.mul(Expr.shr(LID, Expr.u32(5)), Expr.u32(256)), DIGIT), 2047, True),
    (Expr.rem(Expr.load("x", LID), Expr.u32(100)), 100, False),
    (Expr.shl(Expr.bitand(LID, Expr.u32(3)), Expr.u32(6)), 193, False),
    (Expr.shl(Expr.bitand(LID, Expr.u32(3)), Expr.u32(6)), 192, True),
    (Expr.mul(LID, Expr.u32(0x01000000)), 4096, True),  # may wrap past 2**32
    (Expr.select(Expr.lt(LID, Expr.u32(9)), Expr.u32(3), Expr.bitand(LID, Expr.u32(7))), 8, False),
    (LANE, 32, False), (LANE, 31, True),
])
def test_which_stores_keep_their_guard(index: Expr, count: int, guarded: bool) -> None:
    assert _guarded(index, count) is guarded


def test_a_variable_that_is_assigned_keeps_its_guard() -> None:
    let = Node.let("v", Expr.bitand(LID, Expr.u32(15)))
    assert not _guarded(Expr.var("v"), 16, (let,))
    assign = Node.if_(Expr.eq(LID, Expr.u32(300)), [Node.assign("v", Expr.u32(99))])
    assert _guarded(Expr.var("v"), 16, (let, assign))


def test_loop_counters_are_below_their_end() -> None:
    def in_loop(end: int, count: int, assigned: bool = False) -> bool:
        index = Expr.add(Expr.mul(Expr.var("i"), Expr.u32(32)), LANE)
        inner = [Node.store("t", index, Expr.u32(1))]
        if assigned:
            inner.append(Node.assign("i", Expr.u32(0)))
        body = [Node.loop("i", Expr.u32(0), Expr.u32(end), inner), Node.barrier(),
                Node.store("o", Expr.invocation_id(0), Expr.load("t", Expr.u32(0)))]
        program = Program([BufferDecl.output("o", 0, U32, 1), BufferDecl.workgroup("t", count, U32)],
                          (256, 1, 1), body, name="loop_probe")
        stores = _STORE.findall(emit_ptx(program))
        return bool(stores[0])

    assert not in_loop(8, 256)
    assert in_loop(9, 256)


def test_a_workgroup_size_given_at_dispatch_bounds_the_local_id() -> None:
    assert not _guarded(LID, 256)
    assert _guarded(LID, 256, config=DispatchConfig(workgroup_override=(512, 1, 1)))
    assert not _guarded(LID, 128, wg=256, config=DispatchConfig(workgroup_override=(128, 1, 1)))


def test_the_kernel_states_no_launch_bound() -> None:
    """``.reqntid`` / ``.maxntid`` let ptxas raise the register count (the sort's pass kernel 40 ->
    64, the look-back scan 56 -> 64) and so lower occupancy: measured 8% slower on the sort and 30%
    on a 2^28 scan (H200). The bound comes from the runtime launching a kernel only with the size
    it was emitted for (tests/gpu/test_workgroup_size_gpu.py); the header comment names the size
    for a caller that launches the PTX itself."""
    program = Program([BufferDecl.output("o", 0, U32, 1)], (96, 2, 1), [], name="size_probe")
    for config, size in ((None, "96x2x1"), (DispatchConfig(workgroup_override=(32, 1, 1)), "32x1x1")):
        ptx = emit_ptx(program, config=config)
        assert ".reqntid" not in ptx and ".maxntid" not in ptx and ".minnctapersm" not in ptx
        assert f"\n// workgroup {size}, " in ptx and "// launch with exactly this workgroup size" in ptx


def test_global_memory_is_always_guarded() -> None:
    body = [Node.store("o", Expr.bitand(LID, Expr.u32(3)), Expr.load("x", Expr.u32(0)))]
    program = Program([BufferDecl.read("x", 0, U32), BufferDecl.output("o", 1, U32, 1024)], (256, 1, 1), body,
                      name="global_probe")
    ptx = emit_ptx(program)
    assert re.search(r"^\t@%p\d+ st\.global\.u32", ptx, re.M)
    assert not re.search(r"^\tst\.global", ptx, re.M)
