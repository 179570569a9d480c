"""Whole programs through the oracle: barriers, divergence, returns, atomics, subgroups, memory rules.

Expected values are computed here with plain Python (per invocation loops), not with the oracle.
"""

from __future__ import annotations

import math
import struct
from collections import Counter

import numpy as np
import pytest

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ops import OpDef, register_op
from vyre.reference.interpreter import execute

U32, I32, F32, BOOL = DataType.U32, DataType.I32, DataType.F32, DataType.BOOL
gid, lid, wid = Expr.invocation_id(0), Expr.local_id(0), Expr.workgroup_id(0)
u, v = Expr.u32, Expr.var


def rand_u32(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**32, n, dtype=np.uint32)


def let_atomic(name: str, op: AtomicOp, buf: str, index: Expr, value: Expr, expected: Expr | None = None) -> Node:
    return Node.let(name, Expr.atomic(op, buf, index, value, expected))


# ---- barriers and workgroup memory --------------------------------------------------------------
def test_workgroup_tree_reduction() -> None:
    wg, groups = 256, 37
    body = [
        Node.store("s", lid, Expr.load("a", gid)),
        Node.barrier(),
        Node.loop("k", u(0), u(8), [
            Node.let("stride", Expr.shr(u(128), v("k"))),
            Node.if_(Expr.lt(lid, v("stride")),
                     Node.store("s", lid, Expr.add(Expr.load("s", lid), Expr.load("s", Expr.add(lid, v("stride")))))),
            Node.barrier(),
        ]),
        Node.if_(Expr.eq(lid, u(0)), Node.store("out", wid, Expr.load("s", u(0)))),
    ]
    program = Program([BufferDecl.read("a", 0, U32), BufferDecl.output("out", 1, U32, groups),
                       BufferDecl.workgroup("s", wg, U32)], (wg, 1, 1), body)
    a = rand_u32(wg * groups)
    arrays = {"a": a, "out": np.zeros(groups, np.uint32)}
    execute(program, arrays, (groups, 1, 1))
    want = [sum(int(x) for x in a[g * wg:(g + 1) * wg]) & 0xFFFFFFFF for g in range(groups)]
    assert arrays["out"].tolist() == want


def test_workgroup_memory_is_per_group_and_zeroed() -> None:
    body = [Node.store("out", gid, Expr.load("s", lid)), Node.barrier(), Node.store("s", lid, wid), Node.barrier(),
            Node.store("out2", gid, Expr.load("s", Expr.bitxor(lid, u(1))))]
    program = Program([BufferDecl.output("out", 0, U32, 64), BufferDecl.output("out2", 1, U32, 64),
                       BufferDecl.workgroup("s", 16, U32)], (16, 1, 1), body)
    arrays = {"out": np.full(64, 7, np.uint32), "out2": np.zeros(64, np.uint32)}
    execute(program, arrays, (4, 1, 1))
    assert arrays["out"].tolist() == [0] * 64
    assert arrays["out2"].tolist() == [g // 16 for g in range(64)]


# ---- divergence -----------------------------------------------------------------------------------
def test_divergent_if_and_per_lane_loop() -> None:
    n = 300
    body = [
        Node.let("x", Expr.load("a", gid)),
        Node.let("acc", u(0)),
        Node.loop("i", Expr.rem(v("x"), u(7)), Expr.rem(v("x"), u(23)), [
            Node.if_(Expr.eq(Expr.bitand(v("i"), u(1)), u(0)),
                     Node.assign("acc", Expr.add(v("acc"), Expr.mul(v("i"), u(3)))),
                     Node.assign("acc", Expr.bitxor(v("acc"), v("i")))),
        ]),
        Node.if_(Expr.gt(v("x"), u(0x80000000)), Node.assign("acc", Expr.bitnot(v("acc")))),
        Node.store("out", gid, v("acc")),
    ]
    program = Program([BufferDecl.read("a", 0, U32), BufferDecl.output("out", 1, U32, n)], (64, 1, 1), body)
    a = rand_u32(n, 1)
    arrays = {"a": a, "out": np.zeros(n, np.uint32)}
    execute(program, arrays, (5, 1, 1))
    want = []
    for x in a.tolist():
        acc = 0
        for i in range(x % 7, x % 23):
            acc = (acc + 3 * i) & 0xFFFFFFFF if i % 2 == 0 else acc ^ i
        want.append(~acc & 0xFFFFFFFF if x > 0x80000000 else acc)
    assert arrays["out"][:n].tolist() == want


def test_return_inside_nested_loops() -> None:
    n = 256
    body = [
        Node.let("lim", Expr.rem(Expr.load("a", gid), u(40))),
        Node.let("acc", u(0)),
        Node.loop("i", u(0), u(6), Node.loop("j", u(0), Expr.add(v("i"), u(2)), [
            Node.if_(Expr.eq(v("acc"), v("lim")),
                     [Node.store("out", gid, Expr.add(v("acc"), u(1000))), Node.return_()]),
            Node.assign("acc", Expr.add(v("acc"), u(1))),
        ])),
        Node.store("out", gid, v("acc")),
    ]
    program = Program([BufferDecl.read("a", 0, U32), BufferDecl.output("out", 1, U32, n)], (64, 1, 1), body)
    a = rand_u32(n, 2)
    arrays = {"a": a, "out": np.zeros(n, np.uint32)}
    execute(program, arrays, (4, 1, 1))
    total = sum(i + 2 for i in range(6))
    want = [lim + 1000 if lim < total else total for lim in (x % 40 for x in a.tolist())]
    assert arrays["out"].tolist() == want


def test_return_at_top_level_stops_later_statements() -> None:
    body = [Node.if_(Expr.lt(gid, u(10)), Node.return_()), Node.store("out", gid, u(1))]
    program = Program([BufferDecl.output("out", 0, U32, 32)], (32, 1, 1), body)
    arrays = {"out": np.zeros(32, np.uint32)}
    execute(program, arrays, (1, 1, 1))
    assert arrays["out"].tolist() == [0] * 10 + [1] * 22


# ---- atomics --------------------------------------------------------------------------------------
def test_histogram_with_workgroup_and_global_atomics() -> None:
    n, bins = 256 * 24, 64
    body = [
        let_atomic("_l", AtomicOp.ADD, "local", Expr.rem(Expr.load("d", gid), u(bins)), u(1)),
        Node.barrier(),
        Node.if_(Expr.lt(lid, u(bins)), let_atomic("_g", AtomicOp.ADD, "hist", lid, Expr.load("local", lid))),
    ]
    program = Program([BufferDecl.read("d", 0, U32), BufferDecl.output("hist", 1, U32, bins),
                       BufferDecl.workgroup("local", bins, U32)], (256, 1, 1), body)
    d = rand_u32(n, 3)
    arrays = {"d": d, "hist": np.zeros(bins, np.uint32)}
    execute(program, arrays, (24, 1, 1))
    counts = Counter(x % bins for x in d.tolist())
    assert arrays["hist"].tolist() == [counts[b] for b in range(bins)]


def run_atomic(op: AtomicOp, t: DataType, n: int, addresses: int, value: Expr):
    """``n`` lanes (a multiple of 64) apply ``op`` with ``value`` to ``mem[gid % addresses]``."""
    body = [let_atomic("old", op, "mem", Expr.rem(gid, u(addresses)), value),
            Node.store("olds", gid, v("old"))]
    program = Program([BufferDecl.read("vals", 0, t), BufferDecl.read_write("mem", 1, t),
                       BufferDecl.output("olds", 2, t, n)], (64, 1, 1), body)
    vals = rand_u32(n, 4).view(t.np_dtype)
    arrays = {"vals": vals, "mem": rand_u32(addresses, 5).view(t.np_dtype), "olds": np.zeros(n, t.np_dtype)}
    start = arrays["mem"].copy()
    execute(program, arrays, (n // 64, 1, 1))
    return vals, start, arrays["mem"], arrays["olds"]


def test_atomic_add_old_values_form_prefix_multiset() -> None:
    n, addrs = 640, 5
    _, start, mem, olds = run_atomic(AtomicOp.ADD, U32, n, addrs, u(1))
    for a in range(addrs):
        seen = sorted(int(o) for o in olds[a::addrs])
        assert seen == [(int(start[a]) + k) & 0xFFFFFFFF for k in range(len(seen))]
        assert int(mem[a]) == (int(start[a]) + len(seen)) & 0xFFFFFFFF


@pytest.mark.parametrize("op,combine", [
    (AtomicOp.ADD, lambda x, y: (x + y) & 0xFFFFFFFF), (AtomicOp.XOR, lambda x, y: x ^ y),
    (AtomicOp.OR, lambda x, y: x | y), (AtomicOp.AND, lambda x, y: x & y),
    (AtomicOp.MIN, min), (AtomicOp.MAX, max),
], ids=lambda x: getattr(x, "name", ""))
@pytest.mark.parametrize("t", [U32, I32], ids=lambda t: t.name)
def test_atomic_totals(op: AtomicOp, combine, t: DataType) -> None:
    n, addrs = 1024, 7
    vals, start, mem, olds = run_atomic(op, t, n, addrs, Expr.load("vals", gid))
    for a in range(addrs):
        total = int(start[a])
        for x in vals[a::addrs]:
            total = combine(total, int(x))
        assert int(mem[a]) & 0xFFFFFFFF == total & 0xFFFFFFFF
        if op in (AtomicOp.MIN, AtomicOp.MAX):  # every old value lies between the start and the end
            lo, hi = sorted((int(start[a]), total))
            assert all(lo <= int(o) <= hi for o in olds[a::addrs])


def test_atomic_exchange_conserves_values() -> None:
    n, addrs = 512, 3
    vals, start, mem, olds = run_atomic(AtomicOp.EXCHANGE, U32, n, addrs, Expr.load("vals", gid))
    for a in range(addrs):
        assert Counter(olds[a::addrs].tolist() + [int(mem[a])]) == Counter(vals[a::addrs].tolist() + [int(start[a])])


def test_compare_exchange_one_winner_per_address() -> None:
    n, addrs = 256, 4
    body = [let_atomic("old", AtomicOp.COMPARE_EXCHANGE, "mem", Expr.rem(gid, u(addrs)), Expr.add(gid, u(1)), u(0)),
            Node.store("olds", gid, v("old"))]
    program = Program([BufferDecl.output("mem", 0, U32, addrs), BufferDecl.output("olds", 1, U32, n)],
                      (64, 1, 1), body)
    arrays = {"mem": np.zeros(addrs, np.uint32), "olds": np.zeros(n, np.uint32)}
    execute(program, arrays, (4, 1, 1))
    for a in range(addrs):
        olds = arrays["olds"][a::addrs].tolist()
        winner = int(arrays["mem"][a])
        assert olds.count(0) == 1 and (winner - 1) % addrs == a
        assert sorted(olds) == [0] + [winner] * (len(olds) - 1)


SEQUENTIAL = {
    AtomicOp.ADD: lambda m, x, e: m + x, AtomicOp.OR: lambda m, x, e: m | x, AtomicOp.AND: lambda m, x, e: m & x,
    AtomicOp.XOR: lambda m, x, e: m ^ x, AtomicOp.MIN: lambda m, x, e: min(m, x),
    AtomicOp.MAX: lambda m, x, e: max(m, x), AtomicOp.EXCHANGE: lambda m, x, e: x,
    AtomicOp.COMPARE_EXCHANGE: lambda m, x, e: x if m == e else m,
}


@pytest.mark.parametrize("op", list(AtomicOp), ids=lambda o: o.name)
@pytest.mark.parametrize("t", [U32, I32], ids=lambda t: t.name)
def test_atomics_follow_sequential_lane_order(op: AtomicOp, t: DataType) -> None:
    """The oracle's own order: lanes of one statement in linear invocation order, out of bounds skipped."""
    n, words = 2048, 9
    rng = np.random.default_rng(11)
    idx = rng.integers(0, words + 2, n).astype(np.uint32)  # two of eleven addresses are out of bounds
    small = rng.integers(0, 4, n).astype(np.uint32)  # small values make compare-exchange succeed often
    vals = np.where(rng.random(n) < 0.5, small, rng.integers(0, 2**32, n, dtype=np.uint32)).view(t.np_dtype)
    mem0 = rng.integers(0, 4, words).astype(np.uint32).view(t.np_dtype)
    cas = op.base is AtomicOp.COMPARE_EXCHANGE
    body = [Node.if_(Expr.ne(Expr.rem(gid, u(5)), u(3)), [
        let_atomic("old", op, "mem", Expr.load("idx", gid), Expr.load("vals", gid),
                   Expr.load("exp", gid) if cas else None),
        Node.store("olds", gid, v("old"))])]
    program = Program([BufferDecl.read("idx", 0, U32), BufferDecl.read("vals", 1, t), BufferDecl.read("exp", 2, t),
                       BufferDecl.read_write("mem", 3, t), BufferDecl.output("olds", 4, t, n)], (128, 1, 1), body)
    exp = small[::-1].copy().view(t.np_dtype)
    arrays = {"idx": idx, "vals": vals, "exp": exp, "mem": mem0.copy(), "olds": np.zeros(n, t.np_dtype)}
    execute(program, arrays, (n // 128, 1, 1))
    mem, olds = [int(x) for x in mem0], [0] * n
    for lane in range(n):
        if lane % 5 == 3 or idx[lane] >= words:
            continue
        k = int(idx[lane])
        olds[lane] = mem[k]
        mem[k] = encode_like(t, SEQUENTIAL[op.base](mem[k], int(vals[lane]), int(exp[lane])))
    assert arrays["olds"].tolist() == olds
    assert arrays["mem"].tolist() == mem


def encode_like(t: DataType, value: int) -> int:
    """Wrap a Python int to the range of ``t``."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if t is I32 and value >= 1 << 31 else value


# ---- subgroups ------------------------------------------------------------------------------------
def butterfly_f32(values: list[float]) -> float:
    lanes = [np.float32(x) for x in values]
    for off in (16, 8, 4, 2, 1):
        lanes = [np.float32(lanes[i] + lanes[i ^ off]) for i in range(32)]
    assert len({float(x) for x in lanes}) == 1
    return float(lanes[0])


def test_subgroup_ballot_shuffle_add() -> None:
    n = 128
    sl = Expr.subgroup_local_id()
    body = [
        Node.let("x", Expr.load("a", gid)),
        Node.store("ballot", gid, Expr.subgroup_ballot(Expr.eq(Expr.bitand(v("x"), u(3)), u(0)))),
        Node.store("shuf", gid, Expr.subgroup_shuffle(v("x"), Expr.add(sl, u(37)))),
        Node.store("sum", gid, Expr.subgroup_add(v("x"))),
        Node.store("fsum", gid, Expr.subgroup_add(Expr.load("f", gid))),
        Node.store("size", gid, Expr.subgroup_size()),
    ]
    bufs = [BufferDecl.read("a", 0, U32), BufferDecl.read("f", 1, F32)] + [
        BufferDecl.output(name, k + 2, t, n) for k, (name, t) in
        enumerate([("ballot", U32), ("shuf", U32), ("sum", U32), ("fsum", F32), ("size", U32)])]
    program = Program(bufs, (64, 1, 1), body)
    a = rand_u32(n, 6)
    f = np.random.default_rng(7).standard_normal(n).astype(np.float32) * np.float32(1e3)
    arrays = {"a": a, "f": f, **{b.name: np.zeros(n, b.dtype.np_dtype) for b in bufs[2:]}}
    execute(program, arrays, (2, 1, 1))
    for s in range(n // 32):
        xs = a[32 * s:32 * s + 32].tolist()
        ballot = sum(1 << i for i, x in enumerate(xs) if x & 3 == 0)
        assert arrays["ballot"][32 * s:32 * s + 32].tolist() == [ballot] * 32
        assert arrays["shuf"][32 * s:32 * s + 32].tolist() == [xs[(i + 37) & 31] for i in range(32)]
        assert arrays["sum"][32 * s:32 * s + 32].tolist() == [sum(xs) & 0xFFFFFFFF] * 32
        assert arrays["fsum"][32 * s:32 * s + 32].tolist() == [butterfly_f32(f[32 * s:32 * s + 32].tolist())] * 32
    assert arrays["size"].tolist() == [32] * n


# ---- bounds and run-time sizes ---------------------------------------------------------------------
def test_out_of_bounds_loads_stores_and_atomics() -> None:
    n = 96
    body = [
        Node.store("lu", gid, Expr.load("a", gid)),
        Node.store("lf", gid, Expr.load("f", gid)),
        Node.store("lb", gid, Expr.cast(U32, Expr.load("b", gid))),
        Node.store("li", gid, Expr.load("i8", gid)),
        Node.store("small", gid, gid),
        let_atomic("old", AtomicOp.ADD, "cnt", Expr.sub(gid, u(60)), u(1)),
        Node.store("olds", gid, v("old")),
    ]
    program = Program([
        BufferDecl.read("a", 0, U32), BufferDecl.read("f", 1, F32), BufferDecl.read("b", 2, BOOL),
        BufferDecl.read("i8", 3, DataType.I8), BufferDecl.output("lu", 4, U32, n), BufferDecl.output("lf", 5, F32, n),
        BufferDecl.output("lb", 6, U32, n), BufferDecl.output("li", 7, I32, n), BufferDecl.output("small", 8, U32, 10),
        BufferDecl.read_write("cnt", 9, U32), BufferDecl.output("olds", 10, U32, n)], (32, 1, 1), body)
    arrays = {"a": np.arange(1, 51, dtype=np.uint32), "f": np.full(40, -1.5, np.float32),
              "b": np.ones(30, np.uint32), "i8": np.full(20, -3, np.int8), "cnt": np.full(8, 100, np.uint32)}
    for decl in program.outputs:
        arrays.setdefault(decl.name, np.full(decl.count, 0xAB, decl.dtype.np_dtype))
    execute(program, arrays, (3, 1, 1))
    assert arrays["lu"].tolist() == list(range(1, 51)) + [0] * 46
    lf = arrays["lf"].view(np.uint32).tolist()
    assert lf == [struct.unpack("<I", struct.pack("<f", -1.5))[0]] * 40 + [0] * 56  # +0.0, not -0.0
    assert arrays["lb"].tolist() == [1] * 30 + [0] * 66
    assert arrays["li"].tolist() == [-3] * 20 + [0] * 76
    assert arrays["small"].tolist() == list(range(10))
    assert arrays["cnt"].tolist() == [101] * 8
    assert arrays["olds"].tolist() == [0] * 60 + [100] * 8 + [0] * 28


def test_runtime_sized_buffers_and_buf_len() -> None:
    body = [Node.if_(Expr.lt(gid, Expr.buf_len("rw")),
                     Node.store("rw", gid, Expr.add(Expr.load("rw", gid), Expr.buf_len("a")))),
            Node.store("lens", gid, Expr.buf_len("s"))]
    program = Program([BufferDecl.read("a", 0, U32), BufferDecl.read_write("rw", 1, U32),
                       BufferDecl.output("lens", 2, U32, 4), BufferDecl.workgroup("s", 12, U32)], (32, 1, 1), body)
    arrays = {"a": np.zeros(77, np.uint32), "rw": np.arange(45, dtype=np.uint32), "lens": np.zeros(4, np.uint32)}
    execute(program, arrays, (2, 1, 1))
    assert arrays["rw"].tolist() == [k + 77 for k in range(45)]
    assert arrays["lens"].tolist() == [12] * 4


@pytest.mark.parametrize("wg,grid", [((8, 4, 1), (3, 2, 1)), ((4, 2, 3), (2, 3, 2))])
def test_multidimensional_ids(wg: tuple[int, int, int], grid: tuple[int, int, int]) -> None:
    dims = [g * w for g, w in zip(grid, wg)]
    total = dims[0] * dims[1] * dims[2]
    flat = Expr.add(Expr.invocation_id(0), Expr.mul(u(dims[0]), Expr.add(Expr.invocation_id(1),
                                                                         Expr.mul(u(dims[1]), Expr.invocation_id(2)))))
    ids = [Expr.invocation_id, Expr.workgroup_id, Expr.local_id]
    body = [Node.store(f"o{k}{a}", flat, ids[k](a)) for k in range(3) for a in range(3)]
    program = Program([BufferDecl.output(f"o{k}{a}", 3 * k + a, U32, total) for k in range(3) for a in range(3)],
                      wg, body)
    arrays = {b.name: np.zeros(total, np.uint32) for b in program.buffers}
    execute(program, arrays, grid)
    for z in range(dims[2]):
        for y in range(dims[1]):
            for x in range(dims[0]):
                i, g = x + dims[0] * (y + dims[1] * z), (x, y, z)
                for a in range(3):
                    assert arrays[f"o0{a}"][i] == g[a]
                    assert arrays[f"o1{a}"][i] == g[a] // wg[a]
                    assert arrays[f"o2{a}"][i] == g[a] % wg[a]


# ---- storage types ----------------------------------------------------------------------------------
def bf16_round(f32_bits: int) -> int:
    upper, lower = f32_bits >> 16, f32_bits & 0xFFFF
    if (f32_bits & 0x7FFFFFFF) > 0x7F800000:
        return upper | 0x40
    if lower > 0x8000 or (lower == 0x8000 and upper & 1):
        upper += 1
    return upper


def f16_bits(x: float) -> int:
    try:
        return struct.unpack("<H", struct.pack("<e", x))[0]
    except OverflowError:
        return 0xFC00 if x < 0 else 0x7C00


def test_narrow_storage_types_load_and_store() -> None:
    f32_bits = [0x00000000, 0x80000000, 0x3F800000, 0x3F808000, 0x3F818000, 0x3F80C000, 0x477FF000, 0x477FE000,
                0x7F7FFFFF, 0x33800000, 0x33000001, 0x387FC000, 0x7FC00000, 0xFF800000, 0x40490FDB, 0xC2F6E979]
    ints = [0, 1, 127, 128, 255, 256, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0x12345678, 0xFFFFFF80, 0xFFFFFFFF,
            0x80000000, 0x7FFFFFFF, 300]
    n = 16
    narrow = [("u8", DataType.U8, U32), ("i8", DataType.I8, I32), ("u16", DataType.U16, U32),
              ("i16", DataType.I16, I32), ("f16", DataType.F16, F32), ("bf16", DataType.BF16, F32),
              ("bl", BOOL, BOOL)]
    body = []
    for name, _, arith in narrow:
        src = "f" if arith is F32 else ("i" if arith is I32 else "u")
        value = Expr.ne(Expr.load("u", gid), u(0)) if arith is BOOL else Expr.load(src, gid)
        body += [Node.store(name, gid, value), Node.store(f"w_{name}", gid, Expr.load(name, gid))]
    bufs = [BufferDecl.read("u", 0, U32), BufferDecl.read("i", 1, I32), BufferDecl.read("f", 2, F32)]
    for k, (name, storage, arith) in enumerate(narrow):
        bufs += [BufferDecl.output(name, 3 + 2 * k, storage, n), BufferDecl.output(f"w_{name}", 4 + 2 * k, arith, n)]
    program = Program(bufs, (16, 1, 1), body)
    arrays = {"u": np.array(ints, np.uint32), "i": np.array(ints, np.uint32).view(np.int32),
              "f": np.array(f32_bits, np.uint32).view(np.float32)}
    arrays.update({b.name: np.zeros(n, b.dtype.np_dtype) for b in bufs[3:]})
    execute(program, arrays, (1, 1, 1))
    floats = [struct.unpack("<f", struct.pack("<I", b))[0] for b in f32_bits]
    assert arrays["u8"].tolist() == [x & 0xFF for x in ints]
    assert arrays["w_u8"].tolist() == [x & 0xFF for x in ints]
    assert arrays["u16"].tolist() == [x & 0xFFFF for x in ints]
    assert arrays["i8"].tolist() == [((x & 0xFF) ^ 0x80) - 0x80 for x in ints]
    assert arrays["w_i16"].tolist() == [((x & 0xFFFF) ^ 0x8000) - 0x8000 for x in ints]
    assert arrays["bl"].tolist() == arrays["w_bl"].astype(np.uint32).tolist() == [int(x != 0) for x in ints]
    got16 = arrays["f16"].view(np.uint16).tolist()
    for x, g in zip(floats, got16):
        assert (math.isnan(x) and (g & 0x7C00) == 0x7C00 and g & 0x3FF) or g == f16_bits(x), (x, hex(g))
    wide16 = [struct.unpack("<e", struct.pack("<H", g))[0] for g in got16]
    assert [w for w in arrays["w_f16"].tolist() if not math.isnan(w)] == [w for w in wide16 if not math.isnan(w)]
    assert arrays["bf16"].tolist() == [bf16_round(b) for b in f32_bits]
    assert arrays["w_bf16"].view(np.uint32).tolist() == [bf16_round(b) << 16 for b in f32_bits]


# ---- Expr.call -------------------------------------------------------------------------------------
MULADD3 = OpDef("test.oracle.muladd3", (U32, U32), U32, expand=lambda a, b: Expr.add(Expr.mul(a, u(3)), b))
HIGH_HALF = OpDef("test.oracle.high_half", (U32, F32), F32,
                  reference=lambda a, f: (a >> np.uint32(16)).astype(np.float32) * f)


def test_call_composed_and_primitive_ops() -> None:
    register_op(MULADD3)
    register_op(HIGH_HALF)
    n = 64
    body = [Node.store("c", gid, Expr.call(MULADD3.id, Expr.load("a", gid), gid)),
            Node.store("p", gid, Expr.call(HIGH_HALF.id, Expr.load("a", gid), Expr.f32(0.5)))]
    program = Program([BufferDecl.read("a", 0, U32), BufferDecl.output("c", 1, U32, n),
                       BufferDecl.output("p", 2, F32, n)], (32, 1, 1), body)
    a = rand_u32(n, 8)
    arrays = {"a": a, "c": np.zeros(n, np.uint32), "p": np.zeros(n, np.float32)}
    execute(program, arrays, (2, 1, 1))
    assert arrays["c"].tolist() == [(3 * x + k) & 0xFFFFFFFF for k, x in enumerate(a.tolist())]
    assert arrays["p"].tolist() == [(x >> 16) * 0.5 for x in a.tolist()]


def test_empty_grid_runs_nothing() -> None:
    program = Program([BufferDecl.output("o", 0, U32, 4)], (4, 1, 1), [Node.store("o", gid, u(9))])
    arrays = {"o": np.zeros(4, np.uint32)}
    execute(program, arrays, (0, 1, 1))
    assert arrays["o"].tolist() == [0] * 4
