"""Control flow, barriers and workgroup memory, atomics, subgroups and multi-dimensional grids."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from conftest import check, poisoned, random_array

from vyre.driver.config import DispatchConfig
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program

pytestmark = pytest.mark.gpu

U32, I32, F32 = DataType.U32, DataType.I32, DataType.F32
i, lid = Expr.var("i"), Expr.var("lid")


def test_control_flow(backend, rng) -> None:
    """Loops with data-dependent bounds, if/else, assignment and early return."""
    n = 5000
    a, b = random_array(rng, U32, n), random_array(rng, U32, n)
    acc, k = Expr.var("acc"), Expr.var("k")
    program = Program(
        [BufferDecl.read("a", 0, U32), BufferDecl.read("b", 1, U32), BufferDecl.read_write("out", 2, U32)],
        (128, 1, 1),
        [Node.let("i", Expr.invocation_id(0)),
         Node.let("acc", Expr.load("b", i)),
         Node.loop("k", Expr.u32(0), Expr.bitand(Expr.load("a", i), Expr.u32(31)), [
             Node.if_(Expr.eq(Expr.bitand(k, Expr.u32(1)), Expr.u32(1)),
                      [Node.assign("acc", Expr.add(acc, Expr.mul(k, Expr.u32(3))))],
                      [Node.assign("acc", Expr.rotate_left(Expr.bitxor(acc, Expr.load("a", i)), k))]),
         ]),
         Node.if_(Expr.eq(Expr.rem(Expr.load("a", i), Expr.u32(7)), Expr.u32(0)),
                  [Node.store("out", i, Expr.u32(0xDEAD)), Node.return_()]),
         Node.if_(Expr.gt(acc, Expr.u32(0x40000000)), [Node.store("out", i, acc)]),
         ],
        name="control")
    check(backend, program, [a, b, poisoned(n + 100, U32)], DispatchConfig(elements=n))


def guarded_loops(negated: bool, levels: int = 3, trips: int = 16) -> Program:
    """Nested loops each of whose one statement is ``if (not flag)`` (``if (go)`` unless
    ``negated``), the shape of the sort's look-back wait (``onesweep.wait_for_prefix``): the innermost body counts its
    trips, folds relaxed atomic reads into ``acc`` (so it is not unrolled away) and turns the
    guard after ``a[i] & 63`` trips."""
    flag, acc, count = Expr.var("flag"), Expr.var("acc"), Expr.var("count")
    stop = Expr.ge(count, Expr.bitand(Expr.load("a", i), Expr.u32(63)))
    guard = Expr.not_(flag) if negated else flag
    read = Expr.atomic(AtomicOp.OR, "a", Expr.rem(Expr.add(i, count), Expr.buf_len("a")), Expr.u32(0), relaxed=True)
    step = [Node.assign("count", Expr.add(count, Expr.u32(1))),
            Node.assign("acc", Expr.add(Expr.rotate_left(acc, Expr.u32(5)), Expr.bitxor(read, Expr.var("k0")))),
            Node.assign("flag", stop if negated else Expr.not_(stop))]
    node = Node.if_(guard, step)
    for level in range(levels):
        loop = Node.loop(f"k{level}", Expr.u32(0), Expr.u32(trips), [node])
        node = loop if level == levels - 1 else Node.if_(guard, loop)
    return Program(
        [BufferDecl.read_write("a", 0, U32), BufferDecl.read_write("out", 1, U32)], (128, 1, 1),
        [Node.let("i", Expr.invocation_id(0)), Node.let("count", Expr.u32(0)), Node.let("acc", Expr.u32(7)),
         Node.let("flag", Expr.bool(not negated)), node,
         Node.store("out", Expr.mul(i, Expr.u32(2)), count),
         Node.store("out", Expr.add(Expr.mul(i, Expr.u32(2)), Expr.u32(1)), acc)],
        name="guarded_loops")


@pytest.mark.parametrize("negated", [True, False])
def test_loops_that_stop_when_their_guard_turns(backend, rng, negated: bool) -> None:
    """Loops guarded by ``if (not flag)`` or ``if (go)`` stop at the first trip that finds the
    guard off (``cuda`` leaves the loop there); each invocation turns its guard at its own trip,
    inside three nested loops: trips and the value folded at exit must equal the oracle's."""
    n = 3000
    a = random_array(rng, U32, n)
    out = check(backend, guarded_loops(negated), [a, poisoned(2 * n, U32)], DispatchConfig(elements=n))[1]
    assert 1 < out[0::2].max() <= 63  # the guards turned at many trips


@pytest.mark.parametrize("wg", [32, 256, 1024])
def test_tree_reduction_with_barriers(backend, rng, wg: int) -> None:
    """A workgroup tree reduction in shared memory; workgroup buffers start zeroed."""
    groups = 37
    a = random_array(rng, U32, wg * groups)
    steps = wg.bit_length() - 1
    stride = Expr.shr(Expr.u32(wg // 2), Expr.var("s"))
    program = Program(
        [BufferDecl.read("a", 0, U32), BufferDecl.output("sums", 1, U32, groups),
         BufferDecl.output("fresh", 2, U32, wg * groups),
         BufferDecl.workgroup("sh", wg, U32), BufferDecl.workgroup("untouched", wg, U32)],
        (wg, 1, 1),
        [Node.let("i", Expr.invocation_id(0)), Node.let("lid", Expr.local_id(0)),
         Node.store("fresh", i, Expr.load("untouched", lid)),
         Node.store("sh", lid, Expr.load("a", i)),
         Node.barrier(),
         Node.loop("s", Expr.u32(0), Expr.u32(steps), [
             Node.if_(Expr.lt(lid, stride),
                      [Node.store("sh", lid, Expr.add(Expr.load("sh", lid), Expr.load("sh", Expr.add(lid, stride))))]),
             Node.barrier(),
         ]),
         Node.if_(Expr.eq(lid, Expr.u32(0)), [Node.store("sums", Expr.workgroup_id(0), Expr.load("sh", Expr.u32(0)))]),
         ],
        name=f"reduce{wg}")
    sums, fresh = check(backend, program, [a], DispatchConfig(grid=(groups, 1, 1)))
    assert np.array_equal(sums, a.reshape(groups, wg).sum(axis=1, dtype=np.uint32))
    assert not fresh.any()


ATOMIC_OPS = list(AtomicOp)  # sequentially consistent and relaxed


@pytest.mark.parametrize("dtype", [U32, I32])
@pytest.mark.parametrize("op", ATOMIC_OPS, ids=[o.name for o in ATOMIC_OPS])
def test_atomics_uncontended(backend, rng, op: AtomicOp, dtype: DataType) -> None:
    """One invocation per slot: old values and final state equal the oracle exactly."""
    n = 3000
    init, vals = random_array(rng, dtype, n), random_array(rng, dtype, n)
    exp = np.where(rng.random(n) < 0.5, init, random_array(rng, dtype, n)).astype(dtype.np_dtype)
    expected = Expr.load("e", i) if op.base is AtomicOp.COMPARE_EXCHANGE else None
    program = Program(
        [BufferDecl.read("v", 0, dtype), BufferDecl.read("e", 1, dtype), BufferDecl.read_write("slots", 2, dtype),
         BufferDecl.output("olds", 3, dtype, n)],
        (64, 1, 1),
        [Node.let("i", Expr.invocation_id(0)),
         Node.let("old", Expr.atomic(op, "slots", i, Expr.load("v", i), expected)),
         Node.store("olds", i, Expr.var("old"))],
        name=f"atomic_{op.name}_{dtype.name}")
    check(backend, program, [vals, exp, init])


@pytest.mark.parametrize("op", [op.ordered(relaxed) for relaxed in (False, True) for op in (
    AtomicOp.ADD, AtomicOp.OR, AtomicOp.AND, AtomicOp.XOR, AtomicOp.MIN, AtomicOp.MAX, AtomicOp.EXCHANGE)],
    ids=lambda o: o.name)
def test_atomics_contended(backend, rng, op: AtomicOp) -> None:
    """Many invocations per slot: final state exact; old values checked as multisets."""
    n, slots = 8192, 16
    vals = (rng.integers(1, 1 << 20, n, dtype=np.uint32) if op.base is AtomicOp.ADD
            else random_array(rng, U32, n))
    init = rng.integers(1, 1 << 20, slots, dtype=np.uint32)
    program = Program(
        [BufferDecl.read("v", 0, U32), BufferDecl.read_write("slots", 1, U32), BufferDecl.output("olds", 2, U32, n)],
        (256, 1, 1),
        [Node.let("i", Expr.invocation_id(0)),
         Node.let("old", Expr.atomic(op, "slots", Expr.rem(i, Expr.u32(slots)), Expr.load("v", i))),
         Node.store("olds", i, Expr.var("old"))],
        name=f"atomic_contended_{op.name}")
    from vyre.reference import run

    exp_final, exp_olds = run(program, [vals, init.copy()])
    final, olds = backend.dispatch(program, [vals, init.copy()])
    if op.base is not AtomicOp.EXCHANGE:
        assert np.array_equal(final, exp_final)
    for s in range(slots):
        mine, values = olds[s::slots], vals[s::slots]
        if op.base is AtomicOp.EXCHANGE:  # every value is returned once or left in the slot
            assert Counter(mine.tolist()) + Counter([int(final[s])]) == Counter([int(init[s])] + values.tolist())
        elif op.base is AtomicOp.ADD:  # sorted olds are the running sums of some order of the values
            chain = np.sort(mine).astype(np.int64)
            steps = np.diff(np.append(chain, int(final[s])))
            assert chain[0] == init[s] and Counter(steps.tolist()) == Counter(values.tolist())
        else:
            assert int(init[s]) in mine.tolist()
    if op.base is AtomicOp.ADD:
        assert Counter(exp_final.tolist()) == Counter(final.tolist())
        assert len(exp_olds) == len(olds)


@pytest.mark.parametrize("dtype", [U32, I32])
def test_relaxed_atomic_reads_see_earlier_writes(backend, rng, dtype: DataType) -> None:
    """Relaxed ADD/OR/XOR of 0 (atomic reads, ``ld.relaxed``) of global and workgroup words after
    a barrier read what the workgroup wrote; a relaxed add then counts every lane once."""
    n = 64 * 40
    lid, gid = Expr.local_id(0), Expr.invocation_id(0)
    zero = Expr.u32(0) if dtype is U32 else Expr.i32(0)
    reads = [Expr.atomic(op, buf, index, zero, relaxed=True)
             for op in (AtomicOp.ADD, AtomicOp.OR, AtomicOp.XOR) for buf, index in (("g", gid), ("s", lid))]
    body = [Node.store("s", lid, Expr.load("g", gid)), Node.barrier(),
            *[Node.store("out", Expr.add(Expr.mul(Expr.u32(6), gid), Expr.u32(k)), e) for k, e in enumerate(reads)],
            Node.let("old", Expr.atomic(AtomicOp.ADD, "count", Expr.u32(0), Expr.cast(dtype, Expr.u32(1)),
                                        relaxed=True))]
    program = Program([BufferDecl.read_write("g", 0, dtype), BufferDecl.read_write("count", 1, dtype),
                       BufferDecl.output("out", 2, dtype, 6 * n), BufferDecl.workgroup("s", 64, dtype)],
                      (64, 1, 1), body, name=f"atomic_reads_{dtype.name}")
    check(backend, program, [random_array(rng, dtype, n), np.zeros(1, dtype.np_dtype)],
          DispatchConfig(grid=(n // 64, 1, 1)))


@pytest.mark.parametrize("dtype", [U32, I32])
def test_subgroup_ops(backend, rng, dtype: DataType) -> None:
    assert backend.supports_subgroup_ops()
    n = 64 * 50
    a = random_array(rng, dtype, n)
    lanes = rng.integers(0, 64, n, dtype=np.uint32)
    v = Expr.load("a", i)
    odd = Expr.ne(Expr.bitand(Expr.cast(U32, v), Expr.u32(1)), Expr.u32(0))
    program = Program(
        [BufferDecl.read("a", 0, dtype), BufferDecl.read("lane", 1, U32),
         BufferDecl.output("ballot", 2, U32, n), BufferDecl.output("shuf", 3, dtype, n),
         BufferDecl.output("sum", 4, dtype, n), BufferDecl.output("ids", 5, U32, n)],
        (64, 1, 1),
        [Node.let("i", Expr.invocation_id(0)),
         Node.store("ballot", i, Expr.subgroup_ballot(odd)),
         Node.store("shuf", i, Expr.subgroup_shuffle(v, Expr.bitand(Expr.load("lane", i), Expr.u32(31)))),
         Node.store("sum", i, Expr.subgroup_add(v)),
         Node.store("ids", i, Expr.add(Expr.mul(Expr.subgroup_size(), Expr.u32(1000)), Expr.subgroup_local_id()))],
        name=f"subgroup_{dtype.name}")
    check(backend, program, [a, lanes])


@pytest.mark.parametrize(("wg", "grid"), [((64, 1, 1), (7, 1, 1)), ((8, 4, 1), (3, 5, 1)),
                                          ((4, 2, 8), (3, 2, 4)), ((1, 1, 1), (2, 3, 4))])
def test_grids(backend, wg: tuple, grid: tuple) -> None:
    """Ids on 1-D, 2-D and 3-D grids: every invocation writes its own slot."""
    w = [wg[k] * grid[k] for k in range(3)]
    n = w[0] * w[1] * w[2]
    gid = [Expr.invocation_id(k) for k in range(3)]
    linear = Expr.add(gid[0], Expr.mul(Expr.u32(w[0]), Expr.add(gid[1], Expr.mul(Expr.u32(w[1]), gid[2]))))

    def pack(ids: list) -> Expr:
        return Expr.bitor(ids[0], Expr.bitor(Expr.shl(ids[1], Expr.u32(10)), Expr.shl(ids[2], Expr.u32(20))))

    program = Program(
        [BufferDecl.read_write("gid", 0, U32), BufferDecl.output("wid", 1, U32, n),
         BufferDecl.output("lid", 2, U32, n)],
        wg,
        [Node.let("at", linear),
         Node.store("gid", Expr.var("at"), pack(gid)),
         Node.store("wid", Expr.var("at"), pack([Expr.workgroup_id(k) for k in range(3)])),
         Node.store("lid", Expr.var("at"), pack([Expr.local_id(k) for k in range(3)]))],
        name="grids")
    check(backend, program, [poisoned(n, U32)], DispatchConfig(grid=grid))


def test_float_reduction_loop(backend, rng) -> None:
    """F32 accumulation in a loop (no contraction: mul then add round twice)."""
    n = 2048
    a = random_array(rng, F32, n)
    acc = Expr.var("acc")
    program = Program(
        [BufferDecl.read("a", 0, F32), BufferDecl.output("out", 1, F32, n)],
        (128, 1, 1),
        [Node.let("i", Expr.invocation_id(0)), Node.let("acc", Expr.f32(0.0)),
         Node.loop("k", Expr.u32(0), Expr.u32(16), [
             Node.assign("acc", Expr.add(Expr.mul(acc, Expr.f32(0.75)),
                                         Expr.load("a", Expr.rem(Expr.add(i, Expr.var("k")), Expr.u32(n)))))]),
         Node.store("out", i, acc)],
        name="float_loop")
    check(backend, program, [a])


@pytest.mark.parametrize("dtype, step", [(U32, 1), (U32, 3), (I32, -2)])
def test_counter_adds_made_once_per_subgroup(backend, rng, dtype: DataType, step: int) -> None:
    """A relaxed add of a literal at a literal index (an append counter) is made once per subgroup
    on ``cuda``: under divergent ifs and loops, the slots handed out are still each of
    ``0, step, 2 step, ...`` exactly once, the counter ends where the oracle's does, and an index past
    the buffer returns 0 and changes nothing."""
    n = 128 * 37
    a = random_array(rng, U32, n)
    lit = Expr.u32(step) if dtype is U32 else Expr.i32(step)
    trips = Expr.bitand(Expr.load("a", i), Expr.u32(7))
    body = [
        Node.let("i", Expr.invocation_id(0)),
        Node.loop("k", Expr.u32(0), trips, [
            Node.if_(Expr.ne(Expr.bitand(Expr.shr(Expr.load("a", i), Expr.var("k")), Expr.u32(1)), Expr.u32(0)), [
                Node.let("slot", Expr.atomic(AtomicOp.ADD, "count", Expr.u32(0), lit, relaxed=True)),
                Node.store("out", Expr.add(Expr.mul(i, Expr.u32(8)), Expr.var("k")), Expr.var("slot")),
            ]),
        ]),
        Node.let("past", Expr.atomic(AtomicOp.ADD, "count", Expr.u32(2), lit, relaxed=True)),
        Node.store("past_out", i, Expr.var("past")),
    ]
    program = Program([BufferDecl.read("a", 0, U32), BufferDecl.read_write("count", 1, dtype, 2),
                       BufferDecl.read_write("out", 2, dtype), BufferDecl.output("past_out", 3, dtype, n)],
                      (128, 1, 1), body, name=f"counter_adds_{dtype.name}_{step & 0xFF}")
    poison = np.full(8 * n, 0x5A5A5A5A, dtype=np.uint32).view(dtype.np_dtype)
    start = np.array([0, 77], dtype=dtype.np_dtype)
    from vyre.reference import run

    want = run(program, [a, start, poison], DispatchConfig(elements=n))
    got = backend.dispatch(program, [a, start, poison.copy()], DispatchConfig(elements=n))
    assert np.array_equal(got[0], want[0])  # the counter ends at step * appends; word 1 untouched
    written = want[1].view(np.uint32) != 0x5A5A5A5A
    assert np.array_equal(got[1].view(np.uint32) != 0x5A5A5A5A, written)
    appends = int(written.sum())
    assert appends > n  # many appends, in divergent lanes
    slots = np.sort(got[1][written].astype(np.int64))
    assert np.array_equal(slots, np.sort(np.arange(appends, dtype=np.int64) * step))
    assert not got[2].any()  # out of bounds: 0 for every lane
