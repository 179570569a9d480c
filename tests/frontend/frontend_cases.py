"""Front-end kernels, one per construct of the subset, each with the builder's Program and numpy.

Shared by the CPU tests (structural equality with the builder, oracle against numpy) and the GPU
tests (the same kernels on ``cuda`` against the oracle); test modules import the ``rng`` fixture
(``rng_fixture``). Inputs are fresh random values mixed with edge values; ``expected`` computes
the outputs with numpy.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

import vyre
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program

U32, I32, F32, BOOL = DataType.U32, DataType.I32, DataType.F32, DataType.BOOL
N = 300  # odd size: not a multiple of any workgroup size used here
TILE = 64


@pytest.fixture(name="rng")
def rng_fixture(request: pytest.FixtureRequest) -> np.random.Generator:
    """A freshly seeded generator; the seed is reported with a failure (``VYRE_TEST_SEED`` replays)."""
    seed = int(os.environ.get("VYRE_TEST_SEED") or struct.unpack("<Q", os.urandom(8))[0] >> 1)
    request.node.user_properties.append(("seed", seed))
    return np.random.default_rng(seed)


@dataclass
class Case:
    name: str
    kernel: vyre.frontend.Kernel
    builder: Program
    inputs: Callable[[np.random.Generator], list]
    expected: Callable[..., list]
    call: dict = field(default_factory=dict)  # keyword arguments of the kernel call
    multiset: bool = False  # outputs depend on atomic order: compare sorted


def u32s(rng, n=N):
    edges = np.array([0, 1, 2, 31, 32, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF], np.uint32)
    return np.concatenate([edges, rng.integers(0, 2**32, n - len(edges), dtype=np.uint32)])


def i32s(rng, n=N):
    return u32s(rng, n).view(np.int32)


def f32s(rng, n=N):
    edges = np.array([0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 1e-45, 3.4e38], np.float32)
    return np.concatenate([edges, (rng.standard_normal(n - len(edges)) * 100).astype(np.float32)])


def gid():
    return Expr.invocation_id(0)


CASES: list[Case] = []


def case(builder: Program, inputs, expected, **kw):
    def register(k):
        CASES.append(Case(k.name, k, builder, inputs, expected, **kw))
        return k

    return register


# ---- scalars, In/InOut, gid, if, len, store -----------------------------------------------------
@case(Program([BufferDecl.uniform("a", 0, F32, 1), BufferDecl.read("x", 1, F32), BufferDecl.read_write("y", 2, F32)],
              (256, 1, 1),
              [Node.let("i", gid()),
               Node.if_(Expr.lt(Expr.var("i"), Expr.buf_len("x")),
                        [Node.store("y", Expr.var("i"), Expr.add(Expr.mul(Expr.load("a", Expr.u32(0)),
                                                                          Expr.load("x", Expr.var("i"))),
                                                                 Expr.load("y", Expr.var("i"))))])],
              name="saxpy"),
      lambda rng: [np.float32(rng.standard_normal()), f32s(rng), f32s(rng)],
      lambda a, x, y: [np.float32(a) * x + y])
@vyre.kernel(workgroup_size=256)
def saxpy(a: vyre.f32, x: vyre.In[vyre.f32], y: vyre.InOut[vyre.f32]):
    i = vyre.gid()
    if i < len(x):
        y[i] = a * x[i] + y[i]


# ---- Out[T, N], let then assign, augmented assignment on names and elements -------------------------
@case(Program([BufferDecl.read("x", 0, U32), BufferDecl.output("out", 1, U32, N), BufferDecl.read_write("acc", 2, U32)],
              (64, 1, 1),
              [Node.let("i", gid()),
               Node.let("v", Expr.load("x", Expr.var("i"))),
               Node.assign("v", Expr.mul(Expr.var("v"), Expr.u32(3))),
               Node.assign("v", Expr.add(Expr.var("v"), Expr.u32(1))),
               Node.assign("v", Expr.bitxor(Expr.var("v"), Expr.u32(0x55))),
               Node.store("out", Expr.var("i"), Expr.var("v")),
               Node.store("acc", Expr.var("i"), Expr.sub(Expr.load("acc", Expr.var("i")), Expr.var("v")))],
              name="assignments"),
      lambda rng: [u32s(rng), u32s(rng)],
      lambda x, acc: [((x * np.uint32(3) + np.uint32(1)) ^ np.uint32(0x55)),
                      acc - ((x * np.uint32(3) + np.uint32(1)) ^ np.uint32(0x55))])
@vyre.kernel(workgroup_size=64)
def assignments(x: vyre.In[vyre.u32], out: vyre.Out[vyre.u32, N], acc: vyre.InOut[vyre.u32]):
    i = vyre.gid()
    v = x[i]
    v = v * 3
    v += 1
    v ^= 0x55
    out[i] = v
    acc[i] -= v


# ---- if / elif / else and comparisons ------------------------------------------------------------------
def _sign_builder() -> Program:
    i, x = Expr.var("i"), Expr.load("x", Expr.var("i"))
    return Program(
        [BufferDecl.read("x", 0, I32), BufferDecl.output("out", 1, I32, N)], (128, 1, 1),
        [Node.let("i", gid()),
         Node.if_(Expr.lt(x, Expr.i32(0)), [Node.store("out", i, Expr.i32(-1))],
                  [Node.if_(Expr.eq(x, Expr.i32(0)), [Node.store("out", i, Expr.i32(0))],
                            [Node.if_(Expr.ge(x, Expr.i32(1000)), [Node.store("out", i, Expr.i32(2))],
                                      [Node.store("out", i, Expr.i32(1))])])])],
        name="sign3")


def _sign_numpy(x):
    return [np.where(x < 0, -1, np.where(x == 0, 0, np.where(x >= 1000, 2, 1))).astype(np.int32)]


@case(_sign_builder(), lambda rng: [i32s(rng)], _sign_numpy)
@vyre.kernel(workgroup_size=128)
def sign3(x: vyre.In[vyre.i32], out: vyre.Out[vyre.i32, N]):
    i = vyre.gid()
    if x[i] < 0:
        out[i] = -1
    elif x[i] == 0:
        out[i] = 0
    elif x[i] >= 1000:
        out[i] = 2
    else:
        out[i] = 1


# ---- for range(a, b) / range(b), return ------------------------------------------------------------------
@case(Program([BufferDecl.read("x", 0, F32), BufferDecl.uniform("n", 1, U32, 1), BufferDecl.output("out", 2, F32, N)],
              (32, 1, 1),
              [Node.let("i", gid()),
               Node.if_(Expr.ge(Expr.var("i"), Expr.buf_len("out")), [Node.return_()]),
               Node.let("acc", Expr.f32(0.0)),
               Node.loop("k", Expr.u32(0), Expr.load("n", Expr.u32(0)),
                         [Node.assign("acc", Expr.add(Expr.var("acc"),
                                                      Expr.load("x", Expr.add(Expr.var("i"), Expr.var("k")))))]),
               Node.loop("_k", Expr.u32(1), Expr.u32(3),
                         [Node.assign("acc", Expr.mul(Expr.var("acc"), Expr.f32(0.5)))]),
               Node.store("out", Expr.var("i"), Expr.var("acc"))],
              name="window_sum"),
      lambda rng: [(rng.standard_normal(N) * 10).astype(np.float32), np.uint32(4)],
      lambda x, n: [_window(x, int(n))])
@vyre.kernel(workgroup_size=32)
def window_sum(x: vyre.In[vyre.f32], n: vyre.u32, out: vyre.Out[vyre.f32, N]):
    i = vyre.gid()
    if i >= len(out):
        return
    acc = 0.0
    for k in range(n):
        acc += x[i + k]
    for _k in range(1, 3):
        acc *= 0.5
    out[i] = acc


def _window(x, n):
    padded = np.concatenate([x, np.zeros(n, np.float32)])
    acc = np.zeros(len(x), np.float32)
    for k in range(n):
        acc = acc + padded[k: k + len(x)]
    return acc * np.float32(0.5) * np.float32(0.5)


# ---- shared memory and barriers --------------------------------------------------------------------------
@case(Program([BufferDecl.read("x", 0, U32), BufferDecl.output("out", 1, U32, N),
               BufferDecl.workgroup("tile", TILE, U32)],
              (TILE, 1, 1),
              [Node.let("l", Expr.local_id(0)),
               Node.store("tile", Expr.var("l"), Expr.load("x", gid())),
               Node.barrier(),
               Node.store("out", gid(),
                          Expr.load("tile", Expr.sub(Expr.sub(Expr.u32(TILE), Expr.u32(1)), Expr.var("l"))))],
              name="reverse_tiles"),
      lambda rng: [u32s(rng)],
      lambda x: [_reverse_tiles(x)])
@vyre.kernel(workgroup_size=TILE)
def reverse_tiles(x: vyre.In[vyre.u32], out: vyre.Out[vyre.u32, N]):
    tile = vyre.shared(vyre.u32, TILE)
    l = vyre.lid()
    tile[l] = x[vyre.gid()]
    vyre.barrier()
    out[vyre.gid()] = tile[TILE - 1 - l]


def _reverse_tiles(x):
    padded = np.concatenate([x, np.zeros(-len(x) % TILE, np.uint32)])
    return padded.reshape(-1, TILE)[:, ::-1].reshape(-1)[: len(x)]


# ---- every infix operator, unary -, ~, not, and/or, ternary, min/max/abs, casts --------------------------
def _ops_builder() -> Program:
    i = Expr.var("i")
    a, b = Expr.load("a", i), Expr.load("b", i)
    fa, fb = Expr.load("fa", i), Expr.load("fb", i)
    u = Expr.cast(U32, a)
    values = [
        Expr.add(a, b), Expr.sub(a, b), Expr.mul(a, b), Expr.div(a, b), Expr.div(a, b), Expr.rem(a, b),
        Expr.bitand(a, b), Expr.bitor(a, b), Expr.bitxor(a, b), Expr.shl(a, Expr.cast(U32, b)),
        Expr.shr(a, Expr.u32(3)), Expr.neg(a), Expr.bitnot(a), Expr.min(a, b), Expr.max(a, Expr.i32(-7)),
        Expr.abs(a), Expr.select(Expr.and_(Expr.lt(a, b), Expr.not_(Expr.eq(b, Expr.i32(0)))), a, Expr.i32(5)),
        Expr.select(Expr.or_(Expr.gt(a, b), Expr.le(a, Expr.i32(-1))), Expr.i32(1), Expr.i32(0)),
        Expr.cast(I32, Expr.ne(a, b)), Expr.cast(I32, Expr.mul(fa, fb)), Expr.cast(I32, Expr.div(fa, fb)),
        Expr.cast(I32, Expr.sub(Expr.neg(fa), Expr.f32(1.5))), Expr.cast(I32, Expr.rem(u, Expr.u32(10))),
    ]
    body = [Node.let("i", gid())]
    body += [Node.store("out", Expr.add(Expr.mul(i, Expr.u32(len(values))), Expr.u32(k)), v)
             for k, v in enumerate(values)]
    return Program([BufferDecl.read("a", 0, I32), BufferDecl.read("b", 1, I32), BufferDecl.read("fa", 2, F32),
                    BufferDecl.read("fb", 3, F32), BufferDecl.output("out", 4, I32, N * len(values))],
                   (64, 1, 1), body, name="operators")


def _c_div(a, b):
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    safe = np.where(b64 == 0, 1, b64)
    q = np.where(b64 == 0, -1, np.trunc(a64 / safe)).astype(np.int64)
    q = np.where((a64 == -(2**31)) & (b64 == -1), -(2**31), q)
    r = np.where(b64 == 0, 0, a64 - np.trunc(a64 / safe).astype(np.int64) * safe)
    r = np.where((a64 == -(2**31)) & (b64 == -1), 0, r)
    return q.astype(np.int64).astype(np.uint32).view(np.int32), r.astype(np.int32)


def _f2i(x):
    with np.errstate(invalid="ignore", over="ignore"):
        x = np.where(np.isnan(x), 0, x).astype(np.float64)
        return np.clip(np.trunc(x), -(2**31), 2**31 - 1).astype(np.int32)


def _ops_numpy(a, b, fa, fb):
    with np.errstate(all="ignore"):
        q, r = _c_div(a, b)
        sh = (b.view(np.uint32) & 31).astype(np.uint32)
        cols = [
            a + b, a - b, a * b, q, q, r, a & b, a | b, a ^ b, (a.view(np.uint32) << sh).view(np.int32), a >> 3,
            -a, ~a, np.minimum(a, b), np.maximum(a, -7), np.abs(a),
            np.where((a < b) & ~(b == 0), a, 5), np.where((a > b) | (a <= -1), 1, 0), (a != b).astype(np.int32),
            _f2i(fa * fb), _f2i(fa / fb), _f2i(-fa - np.float32(1.5)), (a.view(np.uint32) % 10).astype(np.int32),
        ]
    return [np.stack([np.asarray(c).astype(np.int32) for c in cols], axis=1).reshape(-1)]


@case(_ops_builder(), lambda rng: [i32s(rng), i32s(rng), f32s(rng), f32s(rng)], _ops_numpy)
@vyre.kernel(workgroup_size=64)
def operators(a: vyre.In[vyre.i32], b: vyre.In[vyre.i32], fa: vyre.In[vyre.f32], fb: vyre.In[vyre.f32],
              out: vyre.Out[vyre.i32, N * 23]):
    i = vyre.gid()
    out[i * 23 + 0] = a[i] + b[i]
    out[i * 23 + 1] = a[i] - b[i]
    out[i * 23 + 2] = a[i] * b[i]
    out[i * 23 + 3] = a[i] / b[i]
    out[i * 23 + 4] = a[i] // b[i]
    out[i * 23 + 5] = a[i] % b[i]
    out[i * 23 + 6] = a[i] & b[i]
    out[i * 23 + 7] = a[i] | b[i]
    out[i * 23 + 8] = a[i] ^ b[i]
    out[i * 23 + 9] = a[i] << vyre.u32(b[i])
    out[i * 23 + 10] = a[i] >> 3
    out[i * 23 + 11] = -a[i]
    out[i * 23 + 12] = ~a[i]
    out[i * 23 + 13] = min(a[i], b[i])
    out[i * 23 + 14] = max(a[i], -7)
    out[i * 23 + 15] = abs(a[i])
    out[i * 23 + 16] = a[i] if a[i] < b[i] and not b[i] == 0 else 5
    out[i * 23 + 17] = 1 if a[i] > b[i] or a[i] <= -1 else 0
    out[i * 23 + 18] = vyre.i32(a[i] != b[i])
    out[i * 23 + 19] = vyre.i32(fa[i] * fb[i])
    out[i * 23 + 20] = vyre.i32(fa[i] / fb[i])
    out[i * 23 + 21] = vyre.i32(-fa[i] - 1.5)
    out[i * 23 + 22] = vyre.i32(vyre.u32(a[i]) % 10)


# ---- ops under their own names, f32 literals and bit patterns, module constants -------------------------
SCALE = 0.25


def _math_builder() -> Program:
    i = Expr.var("i")
    x = Expr.load("x", i)
    values = [Expr.sqrt(Expr.abs(x)), Expr.floor(x), Expr.ceil(x), Expr.round(x), Expr.trunc(x),
              Expr.fma(x, Expr.f32(SCALE), Expr.f32(1.0)), Expr.max(x, Expr.f32_from_bits(0x7FC00000)),
              Expr.cast(F32, Expr.is_nan(x)), Expr.abs_diff(x, Expr.f32(2.0)), Expr.sign(x)]
    body = [Node.let("i", gid())]
    body += [Node.store("out", Expr.add(Expr.mul(i, Expr.u32(len(values))), Expr.u32(k)), v)
             for k, v in enumerate(values)]
    return Program([BufferDecl.read("x", 0, F32), BufferDecl.output("out", 1, F32, N * len(values))], (64, 1, 1),
                   body, name="math_ops")


def _math_numpy(x):
    with np.errstate(all="ignore"):
        x64 = x.astype(np.float64)
        half_away = np.copysign(np.where(x64 >= 0, np.floor(x64 + 0.5), np.ceil(x64 - 0.5)), x64).astype(np.float32)
        fma = (x.astype(np.float64) * SCALE + 1.0).astype(np.float32)
        cols = [np.sqrt(np.abs(x)), np.floor(x), np.ceil(x), half_away, np.trunc(x), fma,
                np.where(np.isnan(x), np.nan, x), np.isnan(x).astype(np.float32),
                np.abs(x - np.float32(2.0)), np.where(x == 0, x, np.sign(x))]
    return [np.stack([np.asarray(c, np.float32) for c in cols], axis=1).reshape(-1)]


@case(_math_builder(), lambda rng: [f32s(rng)], _math_numpy)
@vyre.kernel(workgroup_size=64)
def math_ops(x: vyre.In[vyre.f32], out: vyre.Out[vyre.f32, N * 10]):
    i = vyre.gid()
    out[i * 10 + 0] = vyre.sqrt(abs(x[i]))
    out[i * 10 + 1] = vyre.floor(x[i])
    out[i * 10 + 2] = vyre.ceil(x[i])
    out[i * 10 + 3] = vyre.round(x[i])
    out[i * 10 + 4] = vyre.trunc(x[i])
    out[i * 10 + 5] = vyre.fma(x[i], SCALE, 1)
    out[i * 10 + 6] = max(x[i], vyre.f32_from_bits(0x7FC00000))
    out[i * 10 + 7] = vyre.f32(vyre.is_nan(x[i]))
    out[i * 10 + 8] = vyre.abs_diff(x[i], 2.0)
    out[i * 10 + 9] = vyre.sign(x[i])


# ---- atomics: statement form, value form, compare-exchange; helpers with arguments bound once ------------
@vyre.func
def bucket(v, bins):
    return v % bins


@case(Program([BufferDecl.read("data", 0, U32), BufferDecl.output("counts", 1, U32, 16),
               BufferDecl.output("first", 2, U32, 1)],
              (64, 1, 1),
              [Node.let("i", gid()),
               Node.if_(Expr.lt(Expr.var("i"), Expr.buf_len("data")), [
                   Node.let("v_0", Expr.load("data", Expr.var("i"))),
                   Node.let("_atomic_0", Expr.atomic(AtomicOp.ADD, "counts", Expr.rem(Expr.var("v_0"), Expr.u32(16)),
                                                     Expr.u32(1))),
                   Node.let("_old", Expr.atomic(AtomicOp.COMPARE_EXCHANGE, "first", Expr.u32(0),
                                               Expr.add(Expr.var("i"), Expr.u32(1)), Expr.u32(0))),
               ])],
              name="histogram16"),
      lambda rng: [u32s(rng)],
      lambda data: [np.bincount(data % 16, minlength=16).astype(np.uint32), None], call={"elements": N})
@vyre.kernel(workgroup_size=64)
def histogram16(data: vyre.In[vyre.u32], counts: vyre.Out[vyre.u32, 16], first: vyre.Out[vyre.u32, 1]):
    i = vyre.gid()
    if i < len(data):
        vyre.atomic_add(counts, bucket(data[i], 16), 1)
        _old = vyre.atomic_compare_exchange(first, 0, 0, i + 1)


# ---- Out[T] sized at dispatch, 3-D workgroups and explicit grids, a name= --------------------------------
@case(Program([BufferDecl.read("x", 0, F32), BufferDecl.output("out", 1, F32, 0)], (8, 4, 1),
              [Node.let("col", Expr.invocation_id(0)), Node.let("row", Expr.invocation_id(1)),
               Node.let("w", Expr.mul(Expr.workgroup_id(0), Expr.u32(0))),
               Node.store("out", Expr.add(Expr.add(Expr.mul(Expr.var("row"), Expr.u32(16)), Expr.var("col")),
                                          Expr.var("w")),
                          Expr.mul(Expr.load("x", Expr.add(Expr.mul(Expr.var("col"), Expr.u32(8)), Expr.var("row"))),
                                   Expr.f32(2.0)))],
              name="transpose2x"),
      lambda rng: [f32s(rng, 128)],
      lambda x: [x.reshape(16, 8).T.reshape(-1) * np.float32(2.0)],
      call={"grid": (2, 2, 1), "output_counts": {"out": 128}})
@vyre.kernel(workgroup_size=(8, 4, 1), name="transpose2x")
def transpose(x: vyre.In[vyre.f32], out: vyre.Out[vyre.f32]):
    col = vyre.gid(0)
    row = vyre.gid(axis=1)
    w = vyre.wid() * 0
    out[row * 16 + col + w] = x[col * 8 + row] * 2


# ---- subgroup ops ----------------------------------------------------------------------------------------
@case(Program([BufferDecl.read("x", 0, U32), BufferDecl.output("out", 1, U32, 64 * 4)], (64, 1, 1),
              [Node.let("i", gid()),
               Node.let("v", Expr.load("x", Expr.var("i"))),
               Node.store("out", Expr.mul(Expr.var("i"), Expr.u32(4)), Expr.subgroup_add(Expr.var("v"))),
               Node.store("out", Expr.add(Expr.mul(Expr.var("i"), Expr.u32(4)), Expr.u32(1)),
                          Expr.subgroup_ballot(Expr.eq(Expr.bitand(Expr.var("v"), Expr.u32(1)), Expr.u32(1)))),
               Node.store("out", Expr.add(Expr.mul(Expr.var("i"), Expr.u32(4)), Expr.u32(2)),
                          Expr.subgroup_shuffle(Expr.var("v"), Expr.bitxor(Expr.subgroup_local_id(), Expr.u32(1)))),
               Node.store("out", Expr.add(Expr.mul(Expr.var("i"), Expr.u32(4)), Expr.u32(3)), Expr.subgroup_size())],
              name="subgroups"),
      lambda rng: [u32s(rng, 64)],
      lambda x: [_subgroups(x)])
@vyre.kernel(workgroup_size=64)
def subgroups(x: vyre.In[vyre.u32], out: vyre.Out[vyre.u32, 64 * 4]):
    i = vyre.gid()
    v = x[i]
    out[i * 4] = vyre.subgroup_add(v)
    out[i * 4 + 1] = vyre.subgroup_ballot(v & 1 == 1)
    out[i * 4 + 2] = vyre.subgroup_shuffle(v, vyre.subgroup_local_id() ^ 1)
    out[i * 4 + 3] = vyre.subgroup_size()


def _subgroups(x):
    lanes = x.reshape(-1, 32)
    sums = np.repeat(lanes.sum(axis=1, dtype=np.uint32), 32)
    bits = (lanes & 1).astype(np.uint64) << np.arange(32, dtype=np.uint64)
    ballots = np.repeat(bits.sum(axis=1).astype(np.uint32), 32)
    shuffled = lanes[:, np.arange(32) ^ 1].reshape(-1)
    return np.stack([sums, ballots, shuffled, np.full(len(x), 32, np.uint32)], axis=1).reshape(-1)


def by_name(name: str) -> Case:
    return next(c for c in CASES if c.name == name)
