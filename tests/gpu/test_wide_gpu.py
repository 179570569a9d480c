"""64-bit types on the GPU: memory, atomics under contention, subgroups, fma rounding, casts.

The per-op differential tables (every binary and unary op, every cast, on U64/I64/F64 edge values
and random data) live in ``test_cuda_ops.py`` with the 32-bit ones; this file covers what those
element-wise programs cannot: many invocations racing on one 64-bit word, workgroup memory of
8-byte elements, 64-bit values crossing subgroup lanes, and F64 fma's single rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import check, edges, elementwise, poisoned, random_array

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program

pytestmark = pytest.mark.gpu

U32, U64, I64, F64 = DataType.U32, DataType.U64, DataType.I64, DataType.F64
ORDER_FREE = (AtomicOp.ADD, AtomicOp.OR, AtomicOp.AND, AtomicOp.XOR, AtomicOp.MIN, AtomicOp.MAX)
SLOTS = 5
N = 64 * 1024


def _contended(op: AtomicOp, dtype: DataType, shared: bool) -> Program:
    """Every invocation applies ``op`` with its value to slot ``gid % SLOTS``: thousands per word.
    With ``shared`` the words are workgroup memory, copied out (one row per workgroup) after a barrier."""
    i, u = Expr.var("i"), Expr.u32
    slot = Expr.rem(Expr.local_id(0) if shared else i, u(SLOTS))
    target = "tile" if shared else "acc"
    bufs = [BufferDecl.read("val", 0, dtype), BufferDecl.read_write("acc", 1, dtype)]
    if shared:
        bufs.append(BufferDecl.workgroup("tile", SLOTS, dtype))
    body = [Node.let("i", Expr.invocation_id(0)),
            Node.let("old", Expr.atomic(op, target, slot, Expr.load("val", i)))]
    if shared:
        lid = Expr.local_id(0)
        body += [Node.barrier(), Node.if_(Expr.lt(lid, u(SLOTS)), [Node.store(
            "acc", Expr.add(Expr.mul(Expr.workgroup_id(0), u(SLOTS)), lid), Expr.load("tile", lid))])]
    return Program(bufs, (256, 1, 1), body, name=f"contended_{op.value}_{dtype.name}_{shared}")


@pytest.mark.parametrize("shared", [False, True], ids=["global", "shared"])
@pytest.mark.parametrize("dtype", [U64, I64], ids=lambda t: t.name)
@pytest.mark.parametrize("op", ORDER_FREE + tuple(o.ordered(True) for o in ORDER_FREE), ids=lambda o: o.name)
def test_64_bit_atomics_under_contention(backend, rng, op: AtomicOp, dtype: DataType, shared: bool) -> None:
    """The order-free ops leave the same words whatever order the invocations win in."""
    vals = np.concatenate([edges(dtype), random_array(rng, dtype, N - len(edges(dtype)))])
    acc = np.zeros((N // 256) * SLOTS if shared else SLOTS, dtype.np_dtype)
    if not shared:
        acc[:] = random_array(rng, dtype, SLOTS)
    check(backend, _contended(op, dtype, shared), [vals, acc])


@pytest.mark.parametrize("shared", [False, True], ids=["global", "shared"])
@pytest.mark.parametrize("relaxed", [False, True], ids=["seq_cst", "relaxed"])
def test_f64_atomic_add_under_contention(backend, rng, shared: bool, relaxed: bool) -> None:
    """Integers below 2^53 and halves sum exactly in any order, so the words equal the oracle's."""
    op = AtomicOp.ADD.ordered(relaxed)
    vals = (rng.integers(-2**20, 2**20, N) / rng.choice([1.0, 2.0, 4.0], N)).astype(np.float64)
    vals[:4] = [-0.0, 0.0, 2.0**30, -(2.0**30)]
    acc = np.zeros((N // 256) * SLOTS if shared else SLOTS, np.float64)
    check(backend, _contended(op, F64, shared), [vals, acc])


@pytest.mark.parametrize("dtype", [U64, I64], ids=lambda t: t.name)
def test_64_bit_exchange_and_compare_exchange_under_contention(backend, rng, dtype: DataType) -> None:
    """Order-dependent ops, checked by what every order guarantees: EXCHANGE hands each value on
    exactly once (olds + final = initial + values, as multisets); one COMPARE_EXCHANGE per word
    wins (sees the initial value; the rest see the winner's value, which the word ends with)."""
    n = 8192
    vals = (np.arange(1, n + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)).view(dtype.np_dtype)
    i = Expr.var("i")
    slot = Expr.rem(i, Expr.u32(SLOTS))
    for op in (AtomicOp.EXCHANGE, AtomicOp.COMPARE_EXCHANGE):
        expected = Expr.load("init", slot) if op is AtomicOp.COMPARE_EXCHANGE else None
        program = Program(
            [BufferDecl.read("val", 0, dtype), BufferDecl.read("init", 1, dtype),
             BufferDecl.read_write("acc", 2, dtype), BufferDecl.output("old", 3, dtype, n)], (128, 1, 1),
            [Node.let("i", Expr.invocation_id(0)),
             Node.store("old", i, Expr.atomic(op, "acc", slot, Expr.load("val", i), expected))],
            name=f"contended_{op.value}_{dtype.name}")
        init = random_array(rng, dtype, SLOTS)
        acc, old = backend.dispatch(program, [vals, init, init.copy()])
        bits = lambda a: a.view(np.uint64)  # noqa: E731
        for s in range(SLOTS):
            mine = np.arange(s, n, SLOTS)
            if op is AtomicOp.EXCHANGE:
                got = np.sort(np.concatenate([bits(old[mine]), bits(acc[s:s + 1])]))
                want = np.sort(np.concatenate([bits(vals[mine]), bits(init[s:s + 1])]))
                np.testing.assert_array_equal(got, want)
            else:
                winners = np.flatnonzero(bits(old[mine]) == bits(init[s:s + 1])[0])
                assert len(winners) == 1, f"slot {s}: {len(winners)} compare-exchanges saw the initial value"
                winner_value = vals[mine[winners[0]]]
                assert bits(acc[s:s + 1])[0] == bits(np.array([winner_value]))[0]
                losers = np.delete(bits(old[mine]), winners)
                assert (losers == bits(np.array([winner_value]))[0]).all()


@pytest.mark.parametrize("dtype", [U64, I64, F64], ids=lambda t: t.name)
def test_64_bit_memory(backend, rng, dtype: DataType) -> None:
    """Loads and stores of 8-byte elements: global (read, uniform, read_write at odd sizes, out of
    bounds) and workgroup memory laid out after a 1-byte and a 4-byte buffer (8-byte aligned)."""
    n = 1000
    src = np.concatenate([edges(dtype), random_array(rng, dtype, n - len(edges(dtype)))])
    uni = random_array(rng, dtype, 7)
    i, lid = Expr.var("i"), Expr.local_id(0)
    program = Program(
        [BufferDecl.read("src", 0, dtype), BufferDecl.uniform("uni", 1, dtype, 7),
         BufferDecl.read_write("rw", 2, dtype), BufferDecl.output("out", 3, dtype, n + 24),
         BufferDecl.workgroup("pad8", 3, DataType.U8), BufferDecl.workgroup("pad32", 1, U32),
         BufferDecl.workgroup("tile", 64, dtype)], (64, 1, 1),
        [Node.let("i", Expr.invocation_id(0)),
         Node.store("pad8", lid, Expr.u32(255)),
         Node.store("tile", lid, Expr.load("src", i)),
         Node.barrier(),
         Node.store("out", i, Expr.select(Expr.lt(i, Expr.u32(n)), Expr.load("tile", Expr.sub(Expr.u32(63), lid)),
                                          Expr.load("uni", Expr.rem(i, Expr.u32(9))))),
         Node.store("rw", i, Expr.load("src", Expr.add(i, Expr.u32(3))))],
        name=f"memory_{dtype.name}")
    check(backend, program, [src, uni, poisoned(n - 5, dtype)], None)


@pytest.mark.parametrize("dtype", [U64, I64, F64], ids=lambda t: t.name)
def test_64_bit_subgroup_shuffle_and_add(backend, rng, dtype: DataType) -> None:
    """Both 32-bit halves of a 64-bit value cross lanes; the butterfly sum matches the oracle's
    order bit for bit (F64 included)."""
    n = 4096
    a = np.concatenate([edges(dtype), random_array(rng, dtype, n - len(edges(dtype)))])
    lanes = rng.integers(0, 2**32, n, dtype=np.uint32)
    i = Expr.var("i")
    v = Expr.load("a", i)
    value = Expr.add(Expr.subgroup_shuffle(v, Expr.load("lane", i)), Expr.subgroup_add(v))
    decls = [BufferDecl.read("a", 0, dtype), BufferDecl.read("lane", 1, U32)]
    check(backend, elementwise(f"subgroup_{dtype.name}", decls, value, BufferDecl.output("out", 2, dtype, n)),
          [a, lanes])
    if dtype is F64:  # sums of F64 values with no NaN/inf, so every bit of the butterfly order shows
        finite = (rng.standard_normal(n) * 10.0 ** rng.integers(-20, 20, n)).astype(np.float64)
        check(backend, elementwise("subgroup_add_f64", decls[:1], Expr.subgroup_add(Expr.load("a", i)),
                                   BufferDecl.output("out", 1, F64, n)), [finite])


def test_f64_fma_rounds_once(backend, rng) -> None:
    """Exact products on a binary64 midpoint nudged by a tiny c, near-cancellations, and products that
    over- or underflow: the oracle's emulated fma and the GPU's fma.rn.f64 agree bit for bit."""
    n = 8192
    short = (rng.integers(0, 1 << 26, n, dtype=np.uint64) << np.uint64(26)) | np.uint64(0x3FF0000000000000)
    a = short.view(np.float64)
    b = short[::-1].copy().view(np.float64)
    c = np.where(rng.random(n) < 0.5, 2.0**-120, -(2.0**-120)) * rng.choice([1.0, 3.0, 0.75], n)
    near = (rng.random(n) + 1.0)
    cancel = -(near * near) * (1.0 + rng.choice([0.0, 2.0**-52, -(2.0**-53)], n))
    # products beyond the range (their exact value still matters: c = -1.7e308 brings the first back)
    ea, eb = [1.7e308, 1e-300, 3e-170, 1.5e154, -2.2e-308, 5e-324], [2.0, 1e-10, 3e-170, 1.5e154, 0.5, 0.75]
    ec = [-1.7e308, 1e-320, -5e-324, 0.0, 1e-308, -0.0]
    a = np.concatenate([a, near, ea, edges(F64)])
    b = np.concatenate([b, near, eb, edges(F64)[::-1]])
    c = np.concatenate([c, cancel, ec, edges(F64)])
    decls = [BufferDecl.read(x, k, F64) for k, x in enumerate("abc")]
    i = Expr.var("i")
    value = Expr.fma(Expr.load("a", i), Expr.load("b", i), Expr.load("c", i))
    check(backend, elementwise("fma_f64_hard", decls, value, BufferDecl.output("out", 3, F64, len(a))), [a, b, c])


@pytest.mark.parametrize("dtype", [U64, I64, F64], ids=lambda t: t.name)
def test_64_bit_scalars_and_kernels(backend, rng, dtype: DataType) -> None:
    """A ``@vyre.kernel`` with a 64-bit scalar parameter and numpy 64-bit arrays, on the GPU."""
    from vyre.frontend import kernel_from_source
    from vyre.reference import ReferenceBackend

    name = dtype.value
    k = kernel_from_source(
        "@vyre.kernel(workgroup_size=128)\n"
        f"def k(x: vyre.In[vyre.{name}], s: vyre.{name}, out: vyre.Out[vyre.{name}]):\n"
        "    i = vyre.gid()\n    if i < len(x):\n        out[i] = x[i] * s + x[i]\n")
    x = random_array(rng, dtype, 3000)
    s = {U64: 2**64 - 3, I64: -(2**62) + 7, F64: 1.0 / 3.0}[dtype]
    (actual,) = k(x, s, backend=backend, output_counts={"out": 3000})
    with ReferenceBackend() as oracle:
        (expected,) = k(x, s, backend=oracle, output_counts={"out": 3000})
    np.testing.assert_array_equal(actual.view(np.uint64), expected.view(np.uint64))
