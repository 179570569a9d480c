"""Seeded random programs, inputs and dispatch configs for oracle, emitter and GPU fuzz tests.

Every generated program is valid (``vyre.validate`` passes) and race-free, so any correct backend
gives results bit-identical to the oracle (NaNs compared as NaN):

- invocation ``gid`` (a unique linear global id) stores only to index ``gid`` of output and
  read_write buffers, or to indices that are always out of bounds (``gid + buf_len``,
  0xFFFFFFFF); it reads read_write/output buffers only at ``gid``; read-only inputs anywhere;
- atomics go to dedicated U32/I32 buffers with one commutative op each (ADD/OR/AND/XOR/MIN/MAX),
  their results are bound by a ``let`` that is never read, and nothing else touches those buffers;
- workgroup memory is used in segments ``store tile[lid]; barrier; read tile[any]; barrier``
  placed only in workgroup-uniform control flow (the same holds for subgroup ops);
- a program has a *prefix* (barriers and subgroup ops allowed, returns only under uniform
  control) and a *suffix* (returns under varying control allowed, no barrier/subgroup op);
- on a 1-D grid one output or read_write buffer may be *last*: its only store is the program's
  final statement, at ``gid = invocation_id(0)`` (the read-modify-write shape that backends may
  optimise, e.g. ``vyre_cuda._codegen.own_index``); it is read, like the others, only at ``gid``.

- expressions call the composed ops of ``GENERATOR_OPS`` (``Expr.call``), some with an argument
  that runs an atomic on the dedicated atomic buffer but whose value does not depend on the
  atomic's result (``select(atomic(...) == 0, v, v)``); ops that use an argument twice, never, or
  in another order, and ops whose expansion calls other ops, make the final value of that buffer
  count how often each argument was evaluated (call by value: exactly once).

With ``approximate=False`` no transcendental op or ``inverse_sqrt`` appears (their results are
only ULP-bounded). With ``wide=True`` the 64-bit types U64, I64 and F64 join every choice of a
type (buffers, variables, casts, comparisons, atomic buffers; F64 takes the same float ops as F32);
without it programs use only the 32-bit types, so a seed gives the same program as before they
existed. Programs are small so that the oracle runs them in milliseconds.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from vyre.driver.config import DispatchConfig
from vyre.ir.expr import AtomicOp, Expr
from vyre.ir.node import Node
from vyre.ir.op import Op
from vyre.ir.program import Access, BufferDecl, Program
from vyre.ir.types import DataType
from vyre.ir.values import random_values
from vyre.ops import GENERATOR_OP_PREFIX, OpDef, register_op

U32, I32, F32, BOOL = DataType.U32, DataType.I32, DataType.F32, DataType.BOOL
U64, I64, F64 = DataType.U64, DataType.I64, DataType.F64
ARITH = (U32, I32, F32, BOOL)
WIDE = (U64, I64, F64)
STORAGE = tuple(t for t in DataType if not t.is_wide)

#: the operators the generator draws, per operand type (keyed on ``Op``; the order fixes the programs of a seed)
INT_BINARY = (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.REM, Op.MIN, Op.MAX, Op.ABS_DIFF, Op.BITAND, Op.BITOR, Op.BITXOR,
              Op.SATURATING_ADD, Op.SATURATING_SUB, Op.SATURATING_MUL, Op.MUL_HIGH)
SHIFTS = (Op.SHL, Op.SHR, Op.ROTATE_LEFT, Op.ROTATE_RIGHT)
INT_UNARY = (Op.NEG, Op.BITNOT, Op.POPCOUNT, Op.CLZ, Op.CTZ, Op.REVERSE_BITS, Op.ABS, Op.SIGN)
F32_BINARY = (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MIN, Op.MAX, Op.ABS_DIFF)
F32_UNARY_EXACT = (Op.NEG, Op.ABS, Op.SIGN, Op.SQRT, Op.RECIPROCAL, Op.FLOOR, Op.CEIL, Op.ROUND, Op.TRUNC)
F32_UNARY_APPROX = (Op.INVERSE_SQRT, Op.EXP, Op.EXP2, Op.LOG, Op.LOG2, Op.SIN, Op.COS, Op.TAN, Op.ASIN, Op.ACOS,
                    Op.ATAN, Op.SINH, Op.COSH, Op.TANH)
COMPARES = (Op.EQ, Op.NE, Op.LT, Op.GT, Op.LE, Op.GE)
BOOL_BINARY = (Op.AND_, Op.OR_, Op.BITAND, Op.BITOR, Op.BITXOR)
PREDICATES = (Op.IS_NAN, Op.IS_INF, Op.IS_FINITE)
_ORDER_FREE = (AtomicOp.ADD, AtomicOp.OR, AtomicOp.AND, AtomicOp.XOR, AtomicOp.MIN, AtomicOp.MAX)
ORDER_FREE_ATOMICS = (*_ORDER_FREE, *(op.ordered(True) for op in _ORDER_FREE))

_U32_EDGES = (0, 1, 2, 3, 7, 8, 31, 32, 33, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF)
_I32_EDGES = (0, 1, -1, 2, -2, 7, 31, 32, -32, 2**31 - 1, -(2**31), -(2**31) + 1)
_U64_EDGES = (0, 1, 2, 63, 64, 65, 0xFFFFFFFF, 2**32, 2**63 - 1, 2**63, 2**64 - 2, 2**64 - 1)
_I64_EDGES = (0, 1, -1, 63, 64, -64, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63), -(2**63) + 1)
_F64_EDGE_BITS = (0x0000000000000000, 0x8000000000000000, 0x3FF0000000000000, 0xBFF0000000000000,
                  0x3FE0000000000000, 0x0000000000000001, 0x800FFFFFFFFFFFFF, 0x0010000000000000,
                  0x7FEFFFFFFFFFFFFF, 0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000,
                  0xFFF8000000000001, 0x4330000000000001, 0x43E0000000000000, 0xC3E0000000000000)
_F32_EDGE_BITS = (0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x3F000000, 0x40200000, 0xC0200000,
                  0x00000001, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000,
                  0x7FC00000, 0xFFC00001, 0x4B000001, 0x4F000000, 0xCF000000)
_ODD_NAMES = ("x y", "ünï", "名前", 'q"t', "nl\nx", "tab\t", "in", "add", "true", "u32", "ω", "back\\s", "#c")


def _generator_ops() -> dict[tuple[str, DataType], OpDef]:
    """The composed ops generated programs call, by (kind, type): each uses its arguments differently."""
    ops: dict[tuple[str, DataType], OpDef] = {}

    def add(kind: str, t: DataType, args: tuple[DataType, ...], expand) -> None:
        ops[kind, t] = OpDef(f"{GENERATOR_OP_PREFIX}{kind}_{t.value}", args, t, expand=expand,
                             doc=f"used by vyre.ir.generate: {kind}")

    for t in ARITH + WIDE:
        both = Expr.and_ if t is BOOL else Expr.add
        add("twice", t, (t,), lambda x, both=both: both(x, x))  # an argument used twice
        add("first", t, (t, t), lambda a, b: a)  # an argument never used
        add("pick", t, (BOOL, t, t), lambda c, a, b: Expr.select(c, b, a))  # used in another order
        add("nest", t, (t, t), lambda a, b, t=t: Expr.call(ops["first", t].id,  # calls inside the expansion
                                                             Expr.call(ops["twice", t].id, b), a))
    return ops


#: composed ops that generated programs call, by (kind, result type); registered on import
GENERATOR_OPS = _generator_ops()
for _op in GENERATOR_OPS.values():
    register_op(_op)


@dataclass(frozen=True)
class Case:
    """One differential-test case: a program, its inputs (``program.inputs`` order) and a config."""

    program: Program
    inputs: list[np.ndarray]
    config: DispatchConfig


def generate_program(seed: int, *, subgroups: bool = False, approximate: bool = False, max_depth: int = 3,
                     max_stmts: int = 12, wide: bool = False) -> Program:
    """A valid, race-free random program determined by ``seed`` and the options."""
    return _Generator(seed, subgroups, approximate, max_depth, max_stmts, wide).build()[0]


def generate_case(seed: int, **opts: Any) -> Case:
    """``generate_program(seed, **opts)`` with ``random_inputs(program, seed)`` and its dispatch config."""
    program, config = _Generator(seed, **opts).build()
    return Case(program, random_inputs(program, seed), config)


def random_inputs(program: Program, seed: int) -> list[np.ndarray]:
    """One array per input buffer (``program.inputs`` order), rich in edge values; sized 0..320 when runtime-sized."""
    rng = np.random.default_rng([seed & 0xFFFFFFFF, 0x5EED])
    arrays = []
    for b in program.inputs:
        n = b.count if b.count > 0 else int(rng.choice([0, 1, 7, 32, 64, 100, 128, 200, 256, 320]))
        arrays.append(random_values(b.dtype, n, rng))
    return arrays


# ==== generator state ===========================================================================
@dataclass
class _Var:
    name: str
    dtype: DataType
    uniform: bool  # workgroup-uniform value (never assigned)
    mutable: bool


@dataclass(frozen=True)
class _Ctx:
    """Where statements are being generated."""

    uniform: bool = True  # control flow is workgroup-uniform here
    sync: bool = True  # barriers and subgroup ops allowed (uniform and before any varying return)
    returns: bool = False  # a return under varying control flow is allowed (suffix)
    depth: int = 0


@dataclass
class _Atomic:
    buffer: BufferDecl
    op: AtomicOp


@dataclass
class _Layout:
    workgroup: tuple[int, int, int]
    config: DispatchConfig
    invocations: int
    x_extent: int  # invocations along x of the whole grid (explicit grids only)
    xy_extent: int


@dataclass
class _Buffers:
    decls: list[BufferDecl] = field(default_factory=list)
    readable: list[BufferDecl] = field(default_factory=list)  # read/uniform: any index
    own: list[BufferDecl] = field(default_factory=list)  # output/read_write: only index gid
    last: BufferDecl | None = None  # output/read_write stored only by the final statement (at gid)
    atomic: _Atomic | None = None
    tile: BufferDecl | None = None
    shared_atomic: _Atomic | None = None


class _Generator:
    def __init__(self, seed: int, subgroups: bool = False, approximate: bool = False, max_depth: int = 3,
                 max_stmts: int = 12, wide: bool = False) -> None:
        self.rng = random.Random(seed)
        self.subgroups = subgroups
        self.f32_unary = F32_UNARY_EXACT + (F32_UNARY_APPROX if approximate else ())
        self.f64_unary = self.f32_unary
        self.arith = ARITH + WIDE if wide else ARITH
        self.storage = tuple(DataType) if wide else STORAGE
        self.atomic_types = (U32, I32, U64, I64) if wide else (U32, I32)
        self.floats = (F32, F64) if wide else (F32,)
        self.max_depth = max_depth
        self.budget = max_stmts
        self.odd_names = self.rng.random() < 0.15
        self.counter = 0
        self.used: set[str] = set()
        self.scopes: list[list[_Var]] = [[]]
        self.layout = self._layout()
        self.bufs = self._buffers()

    # ---- names, layout and buffers --------------------------------------------------------------
    def fresh(self, base: str) -> str:
        """A new unique name: ``base`` + a counter, or in some programs an odd (unicode, quoted, reserved) one."""
        self.counter += 1
        if self.odd_names and self.rng.random() < 0.5:
            odd = self.rng.choice(_ODD_NAMES)
            if odd not in self.used:  # odd names never end in a digit, counter names always do
                self.used.add(odd)
                return odd
            return f"{odd}{self.counter}"
        return f"{base}{self.counter}"

    def _layout(self) -> _Layout:
        r = self.rng
        if self.subgroups:
            wg = (r.choice((32, 64, 128)), 1, 1)
        elif r.random() < 0.25:
            wg = r.choice(((4, 4, 1), (8, 2, 2), (2, 3, 4), (16, 4, 1), (3, 1, 5), (1, 8, 2)))
        else:
            wg = (r.choice((1, 2, 7, 16, 32, 64, 128)), 1, 1)
        size = wg[0] * wg[1] * wg[2]
        if wg[1] == wg[2] == 1 and r.random() < 0.6:  # grid derived from the element count
            elements = r.randint(1, 384) if r.random() < 0.5 else r.choice((1, size, 3 * size, 256))
            config = DispatchConfig(elements=elements) if r.random() < 0.5 else DispatchConfig()
            invocations = -(-elements // wg[0]) * wg[0]
            return _Layout(wg, config, invocations, 0, 0)
        limit = max(1, 512 // size)
        grid = [r.randint(1, max(1, min(4, limit)))]
        grid.append(r.randint(1, max(1, min(2, limit // grid[0]))))
        grid.append(r.randint(1, max(1, min(2, limit // (grid[0] * grid[1])))))
        sx, sy = grid[0] * wg[0], grid[1] * wg[1]
        invocations = sx * sy * grid[2] * wg[2]
        return _Layout(wg, DispatchConfig(grid=(grid[0], grid[1], grid[2])), invocations, sx, sx * sy)

    def _buffers(self) -> _Buffers:
        r, bufs = self.rng, _Buffers()
        n = self.layout.invocations
        specs: list[tuple[str, Access, DataType, int]] = []
        for _ in range(r.randint(1, 3)):
            specs.append(("in", Access.READ, r.choice(self.storage), 0 if r.random() < 0.6 else r.randint(1, 2 * n)))
        if r.random() < 0.3:
            specs.append(("uni", Access.UNIFORM, r.choice(self.storage), r.randint(1, 8)))
        if r.random() < 0.4:
            dtype = r.choice(self.storage)  # drawn before the count, as always: seeds keep their programs
            specs.append(("rw", Access.READ_WRITE, dtype, 0 if r.random() < 0.7 else r.randint(1, 2 * n)))
        for _ in range(r.randint(1, 2)):
            specs.append(("out", Access.OUTPUT, r.choice(self.storage), max(1, n + r.choice((0, 0, -1, 3, -n // 2)))))
        if r.random() < 0.35:
            access = Access.OUTPUT if r.random() < 0.6 else Access.READ_WRITE
            specs.append(("acc", access, r.choice(self.atomic_types), r.choice((1, 4, 16))))
        bindings = list(range(len(specs)))
        if r.random() < 0.2:
            r.shuffle(bindings)
        for (base, access, dtype, count), binding in zip(specs, bindings):
            decl = BufferDecl(self.fresh(base), binding, dtype, count, access)
            bufs.decls.append(decl)
            if base == "acc":
                bufs.atomic = _Atomic(decl, r.choice(ORDER_FREE_ATOMICS))
            elif access.is_output:
                bufs.own.append(decl)
            else:
                bufs.readable.append(decl)
        if not self.layout.x_extent and len(bufs.own) > 1 and r.random() < 0.5:
            bufs.last = bufs.own.pop(r.randrange(len(bufs.own)))
        wg_size = self.layout.workgroup[0] * self.layout.workgroup[1] * self.layout.workgroup[2]
        if wg_size > 1 and r.random() < 0.4:
            count = wg_size + r.choice((0, 0, 1, -1))  # sometimes a slot short: its accesses are out of bounds
            bufs.tile = BufferDecl.workgroup(self.fresh("tile"), count, r.choice(self.storage))
            bufs.decls.append(bufs.tile)
        if wg_size > 1 and r.random() < 0.2:
            decl = BufferDecl.workgroup(self.fresh("wacc"), r.choice((1, 2, 8)), r.choice(self.atomic_types))
            bufs.shared_atomic = _Atomic(decl, r.choice(ORDER_FREE_ATOMICS))
            bufs.decls.append(decl)
        return bufs

    # ---- program ------------------------------------------------------------------------------
    def build(self) -> tuple[Program, DispatchConfig]:
        gid = self._declare("gid", U32, False, False)
        body: list[Node] = [Node.let(gid, self._gid())]
        wx, wy, wz = self.layout.workgroup
        self.gid = Expr.var(gid)
        lid = Expr.local_id(0)
        if wy > 1 or wz > 1:
            lid = Expr.add(lid, Expr.mul(Expr.local_id(1), Expr.u32(wx)))
            lid = Expr.add(lid, Expr.mul(Expr.local_id(2), Expr.u32(wx * wy)))
        lid_name = self._declare("lid", U32, False, False)
        body.append(Node.let(lid_name, lid))
        self.lid = Expr.var(lid_name)
        for buf in self.bufs.own:  # every output is written at least once
            body.append(Node.store(buf, self.gid, self.expr(buf.dtype.arith, 3, _Ctx())))
        suffix_budget = self.budget - self.budget // 2
        self.budget //= 2  # the prefix: barriers, subgroup ops and workgroup exchanges, no varying return
        body += self.statements(_Ctx(), self.rng.randint(1, 5))
        self.budget += suffix_budget  # the suffix: varying returns, no barrier or subgroup op
        body += self.statements(_Ctx(sync=False, returns=True), self.rng.randint(1, 6))
        if self.bufs.last is not None:
            last = self.bufs.last
            body.append(Node.store(last, self.gid, self.expr(last.dtype.arith, 3, _Ctx(sync=False, returns=True))))
        name = None if self.rng.random() < 0.3 else self.fresh("prog")
        return Program(self.bufs.decls, self.layout.workgroup, body, name), self.layout.config

    def _gid(self) -> Expr:
        gid = Expr.invocation_id(0)
        if self.layout.x_extent:  # explicit grid: linearise the 3-D global id
            gid = Expr.add(gid, Expr.mul(Expr.invocation_id(1), Expr.u32(self.layout.x_extent)))
            gid = Expr.add(gid, Expr.mul(Expr.invocation_id(2), Expr.u32(self.layout.xy_extent)))
        return gid

    def _declare(self, base: str, dtype: DataType, uniform: bool, mutable: bool) -> str:
        var = _Var(self.fresh(base), dtype, uniform, mutable)
        self.scopes[-1].append(var)
        return var.name

    def _vars(self, dtype: DataType | None = None, uniform: bool = False, mutable: bool = False) -> list[_Var]:
        return [v for scope in self.scopes for v in scope
                if (dtype is None or v.dtype is dtype) and (v.uniform or not uniform) and (v.mutable or not mutable)]

    # ---- statements ---------------------------------------------------------------------------
    def statements(self, ctx: _Ctx, count: int) -> list[Node]:
        """Up to ``count`` statements (fewer when the budget runs out) in a new scope."""
        self.scopes.append([])
        out: list[Node] = []
        for _ in range(count):
            if self.budget <= 0:
                break
            self.budget -= 1
            out += self.statement(ctx)
        self.scopes.pop()
        return out

    def statement(self, ctx: _Ctx) -> list[Node]:
        r = self.rng
        kinds = ["let", "let", "store", "store", "store_oob"]
        if self._vars(mutable=True):
            kinds += ["assign", "assign"]
        if self.bufs.atomic or self.bufs.shared_atomic:
            kinds.append("atomic")
        if ctx.depth < self.max_depth:
            kinds += ["if", "if", "loop", "loop", "block"]
        if ctx.depth > 0 and (ctx.returns or ctx.uniform) and r.random() < 0.5:
            kinds.append("return")
        if ctx.sync:
            kinds.append("barrier")
            if self.bufs.tile or self.bufs.shared_atomic:
                kinds += ["exchange", "exchange"]
        return getattr(self, "_" + r.choice(kinds))(ctx)

    def _let(self, ctx: _Ctx) -> list[Node]:
        dtype = self.rng.choice(self.arith)
        uniform = ctx.uniform and self.rng.random() < 0.4
        value = self.uniform_expr(dtype, 3) if uniform else self.expr(dtype, 3, ctx)
        return [Node.let(self._declare("v", dtype, uniform, not uniform), value)]

    def _assign(self, ctx: _Ctx) -> list[Node]:
        var = self.rng.choice(self._vars(mutable=True))
        return [Node.assign(var.name, self.expr(var.dtype, 3, ctx))]

    def _store(self, ctx: _Ctx) -> list[Node]:
        buf = self.rng.choice(self.bufs.own)
        return [Node.store(buf, self.gid, self.expr(buf.dtype.arith, 3, ctx))]

    def _store_oob(self, ctx: _Ctx) -> list[Node]:
        buf = self.rng.choice(self.bufs.own)
        index = Expr.add(self.gid, Expr.buf_len(buf)) if self.rng.random() < 0.6 else Expr.u32(0xFFFFFFFF)
        return [Node.store(buf, index, self.expr(buf.dtype.arith, 2, ctx))]

    def _atomic(self, ctx: _Ctx) -> list[Node]:
        # anywhere is fine: workgroup atomics are read only between the two barriers of _exchange
        target = self.rng.choice([a for a in (self.bufs.atomic, self.bufs.shared_atomic) if a])
        count = target.buffer.count
        index = self.rng.choice((
            Expr.rem(self.expr(U32, 2, ctx), Expr.u32(count)),
            Expr.u32(self.rng.randrange(count)),
            Expr.u32(count + self.rng.randrange(3)),  # out of bounds: does nothing
        ))
        value = self.expr(target.buffer.dtype, 2, ctx)
        return [Node.let(self.fresh("_old"), Expr.atomic(target.op, target.buffer, index, value))]

    def _if(self, ctx: _Ctx) -> list[Node]:
        inner = _Ctx(ctx.uniform, ctx.sync, ctx.returns, ctx.depth + 1)
        if ctx.uniform and self.rng.random() < 0.35:
            cond = self.uniform_expr(BOOL, 3)
        else:
            cond = self.expr(BOOL, 3, ctx)
            inner = _Ctx(False, False, ctx.returns, ctx.depth + 1)
        then = self.statements(inner, self.rng.randint(0, 3))
        otherwise = self.statements(inner, self.rng.randint(0, 2)) if self.rng.random() < 0.5 else []
        return [Node.if_(cond, then, otherwise)]

    def _loop(self, ctx: _Ctx) -> list[Node]:
        uniform = ctx.uniform and self.rng.random() < 0.4
        bound = self.uniform_expr if uniform else (lambda t, d: self.expr(t, d, ctx))
        start = Expr.bitand(bound(U32, 2), Expr.u32(3)) if self.rng.random() < 0.6 else Expr.u32(self.rng.randint(0, 2))
        end = Expr.bitand(bound(U32, 2), Expr.u32(7)) if self.rng.random() < 0.7 else Expr.u32(self.rng.randint(0, 8))
        inner = _Ctx(ctx.uniform, ctx.sync, ctx.returns, ctx.depth + 1) if uniform else \
            _Ctx(False, False, ctx.returns, ctx.depth + 1)
        self.scopes.append([])
        var = self._declare("i", U32, uniform, False)
        body = self.statements(inner, self.rng.randint(0, 3))
        self.scopes.pop()
        return [Node.loop(var, start, end, body)]

    def _block(self, ctx: _Ctx) -> list[Node]:
        inner = _Ctx(ctx.uniform, ctx.sync, ctx.returns, ctx.depth + 1)
        body = self.statements(inner, self.rng.randint(0, 3))
        if self.rng.random() < 0.5:
            return [Node.block(body)]
        return [Node.region(self.rng.choice(("vyre.generated", "", "op.pack/ünï")), body)]

    def _return(self, ctx: _Ctx) -> list[Node]:
        return [Node.return_()]

    def _barrier(self, ctx: _Ctx) -> list[Node]:
        return [Node.barrier()]

    def _exchange(self, ctx: _Ctx) -> list[Node]:
        """``write own slot; barrier; read any slot; barrier`` on workgroup memory."""
        nodes: list[Node] = []
        tile, shared = self.bufs.tile, self.bufs.shared_atomic
        if tile:
            guarded = ctx.depth < self.max_depth and self.rng.random() < 0.3  # only some write their slot
            value = self.expr(tile.dtype.arith, 2, replace(ctx, uniform=False, sync=False) if guarded else ctx)
            store = Node.store(tile, self.lid, value)
            nodes.append(Node.if_(self.expr(BOOL, 2, ctx), [store]) if guarded else store)
        if shared:
            count = shared.buffer.count
            index = Expr.rem(self.lid, Expr.u32(count)) if self.rng.random() < 0.7 else Expr.u32(count)
            value = self.expr(shared.buffer.dtype, 2, ctx)
            nodes.append(Node.let(self.fresh("_old"), Expr.atomic(shared.op, shared.buffer, index, value)))
        nodes.append(Node.barrier())
        size = self.layout.workgroup[0] * self.layout.workgroup[1] * self.layout.workgroup[2]
        for buf in (b for b in (tile, shared.buffer if shared else None) if b):
            index = self.rng.choice((
                Expr.rem(Expr.add(self.lid, Expr.u32(self.rng.randint(1, 40))), Expr.u32(size)),
                Expr.sub(Expr.u32(size - 1), self.lid),
                Expr.u32(self.rng.randrange(buf.count + 2)),
                Expr.bitand(self.expr(U32, 2, ctx), Expr.u32(7)),
            ))
            name = self._declare("w", buf.dtype.arith, False, True)
            nodes.append(Node.let(name, Expr.load(buf, index)))
            out = self.rng.choice(self.bufs.own)
            if out.dtype.arith is buf.dtype.arith:
                nodes.append(Node.store(out, self.gid, Expr.var(name)))
        nodes.append(Node.barrier())
        return nodes

    # ---- expressions --------------------------------------------------------------------------
    def expr(self, t: DataType, depth: int, ctx: _Ctx) -> Expr:
        """A random expression of type ``t`` (subgroup ops only where ``ctx.sync``)."""
        r = self.rng
        if depth <= 0 or r.random() < 0.25:
            return self.leaf(t, ctx)
        forms = ["op", "op", "op", "select", "cast", "call"]
        if t is not BOOL:
            forms.append("fma")
        if ctx.sync and self.subgroups:
            forms.append("subgroup")
        form = r.choice(forms)
        sub = depth - 1
        if form == "select":
            return Expr.select(self.expr(BOOL, sub, ctx), self.expr(t, sub, ctx), self.expr(t, sub, ctx))
        if form == "cast":
            return Expr.cast(t, self.expr(r.choice(self.arith), sub, ctx))
        if form == "fma":
            return Expr.fma(self.expr(t, sub, ctx), self.expr(t, sub, ctx), self.expr(t, sub, ctx))
        if form == "subgroup":
            return self._subgroup(t, sub, ctx)
        if form == "call":
            return self._call(t, sub, ctx)
        return self._operator(t, sub, lambda t2: self.expr(t2, sub, ctx))

    def _call(self, t: DataType, depth: int, ctx: _Ctx) -> Expr:
        """A call of a generator op; with an atomic buffer, often with a side-effecting argument."""
        op = GENERATOR_OPS[self.rng.choice(("twice", "first", "pick", "nest")), t]
        args = [self.expr(a, depth, ctx) for a in op.arg_types]
        if self.bufs.atomic is not None and self.rng.random() < 0.6:
            k = self.rng.randrange(len(args))
            args[k] = self._effect(op.arg_types[k], depth, ctx)
        return Expr.call(op.id, *args)

    def _effect(self, t: DataType, depth: int, ctx: _Ctx) -> Expr:
        """A value of type ``t`` that runs an atomic on the dedicated buffer, independent of its result."""
        target = self.bufs.atomic
        count = target.buffer.count
        index = Expr.u32(self.rng.randrange(count + 1))  # sometimes out of bounds: does nothing
        value = self.literal(target.buffer.dtype)
        old = Expr.atomic(target.op, target.buffer, index, value)
        v = self.expr(t, depth, ctx)
        return Expr.select(Expr.eq(old, _typed_int(target.buffer.dtype, 0)), v, v)

    def uniform_expr(self, t: DataType, depth: int) -> Expr:
        """A workgroup-uniform expression of type ``t``."""
        r = self.rng
        if depth <= 0 or r.random() < 0.3:
            return self.uniform_leaf(t)
        sub = depth - 1
        if r.random() < 0.15:
            return Expr.select(self.uniform_expr(BOOL, sub), self.uniform_expr(t, sub), self.uniform_expr(t, sub))
        if r.random() < 0.15:
            return Expr.cast(t, self.uniform_expr(r.choice(self.arith), sub))
        return self._operator(t, sub, lambda t2: self.uniform_expr(t2, sub))

    def _operator(self, t: DataType, depth: int, operand) -> Expr:
        r = self.rng
        if t is BOOL:
            kind = r.choice(("compare", "compare", "logic", "not", "predicate"))
            if kind == "compare":
                ot = r.choice(self.arith)
                op = r.choice(COMPARES if ot is not BOOL else (Op.EQ, Op.NE))
                return getattr(Expr, op)(operand(ot), operand(ot))
            if kind == "logic":
                return getattr(Expr, r.choice(BOOL_BINARY))(operand(BOOL), operand(BOOL))
            if kind == "not":
                return Expr.not_(operand(BOOL))
            ft = r.choice(self.floats) if len(self.floats) > 1 else F32  # draw nothing extra without ``wide``
            return getattr(Expr, r.choice(PREDICATES))(operand(ft))
        unary = INT_UNARY if not t.is_float else self.f32_unary if t is F32 else self.f64_unary
        if r.random() < 0.3:
            return getattr(Expr, r.choice(unary))(operand(t))
        if not t.is_float and r.random() < 0.2:
            return getattr(Expr, r.choice(SHIFTS))(operand(t), operand(U32))
        op = r.choice(INT_BINARY if not t.is_float else F32_BINARY)
        b = operand(t)
        if op in (Op.DIV, Op.REM) and not t.is_float:  # a literal zero divisor is rejected, also after expansion
            if b.op == Op.LIT and b.value == 0:
                b = _typed_int(t, 3 if t in (U32, U64) else -3)
            elif b.op == Op.CALL:  # a composed op may expand to a literal 0 (first(0, x))
                b = Expr.bitor(b, _typed_int(t, 1))
        return getattr(Expr, op)(operand(t), b)

    def _subgroup(self, t: DataType, depth: int, ctx: _Ctx) -> Expr:
        r = self.rng
        if t is U32 and r.random() < 0.3:
            return Expr.subgroup_ballot(self.expr(BOOL, depth, ctx))
        if t is not BOOL and r.random() < 0.5:
            return Expr.subgroup_add(self.expr(t, depth, ctx))
        return Expr.subgroup_shuffle(self.expr(t, depth, ctx), self.expr(U32, depth, ctx))

    def literal(self, t: DataType) -> Expr:
        r = self.rng
        if t is BOOL:
            return Expr.bool(r.random() < 0.5)
        if t is F32:
            if r.random() < 0.5:
                return Expr.f32_from_bits(r.choice(_F32_EDGE_BITS))
            return Expr.f32(r.choice((r.uniform(-100, 100), r.uniform(-2, 2), float(r.randint(-9, 9)))))
        if t is F64:
            if r.random() < 0.5:
                return Expr.f64_from_bits(r.choice(_F64_EDGE_BITS))
            return Expr.f64(r.choice((r.uniform(-1e6, 1e6), r.uniform(-2, 2), float(r.randint(-9, 9)))))
        if t is I32:
            return Expr.i32(r.choice(_I32_EDGES) if r.random() < 0.6 else r.randint(-(2**31), 2**31 - 1))
        if t is I64:
            return Expr.i64(r.choice(_I64_EDGES) if r.random() < 0.6 else r.randint(-(2**63), 2**63 - 1))
        if t is U64:
            return Expr.u64(r.choice(_U64_EDGES) if r.random() < 0.6 else r.randint(0, 2**64 - 1))
        return Expr.u32(r.choice(_U32_EDGES) if r.random() < 0.6 else r.randint(0, 0xFFFFFFFF))

    def leaf(self, t: DataType, ctx: _Ctx) -> Expr:
        r = self.rng
        options = [lambda: self.literal(t)]
        names = self._vars(t)
        if names:
            options += [lambda: Expr.var(r.choice(names).name)] * 2
        loads = [b for b in self.bufs.readable if b.dtype.arith is t]
        own = [b for b in (*self.bufs.own, self.bufs.last) if b is not None and b.dtype.arith is t]
        if loads:
            options += [lambda: Expr.load(r.choice(loads), self.index(ctx))] * 2
        if own:
            options.append(lambda: Expr.load(r.choice(own), self.gid))
        if t is U32:
            options += [lambda: self.gid, lambda: self.lid, lambda: self._id(),
                        lambda: Expr.buf_len(r.choice(self.bufs.decls))]
            if self.subgroups:
                options.append(lambda: r.choice((Expr.subgroup_local_id(), Expr.subgroup_size())))
        return r.choice(options)()

    def _id(self) -> Expr:
        return getattr(Expr, self.rng.choice(("invocation_id", "workgroup_id", "local_id")))(self.rng.randint(0, 2))

    def index(self, ctx: _Ctx) -> Expr:
        """An index into a read-only input: own slot, nearby, masked, computed or out of bounds."""
        r = self.rng
        kind = r.randrange(6)
        if kind == 0:
            return self.gid
        if kind == 1:
            return Expr.add(self.gid, Expr.u32(r.randint(1, 5)))
        if kind == 2:
            return Expr.bitand(self.expr(U32, 1, ctx), Expr.u32(r.choice((7, 15, 63))))
        if kind == 3:
            return Expr.u32(r.choice((0, 1, 2, 5, 0xFFFFFFFF)))
        return self.expr(U32, 1, ctx)

    def uniform_leaf(self, t: DataType) -> Expr:
        r = self.rng
        options = [lambda: self.literal(t)]
        names = self._vars(t, uniform=True)
        if names:
            options += [lambda: Expr.var(r.choice(names).name)] * 2
        loads = [b for b in self.bufs.readable if b.dtype.arith is t]
        if loads:
            options.append(lambda: Expr.load(r.choice(loads), self.uniform_index()))
        if t is U32:
            options += [lambda: Expr.workgroup_id(r.randint(0, 2)), lambda: Expr.buf_len(r.choice(self.bufs.decls))]
            if self.subgroups:
                options.append(Expr.subgroup_size)
        return r.choice(options)()

    def uniform_index(self) -> Expr:
        r = self.rng
        kind = r.randrange(3)
        if kind == 0:
            return Expr.u32(r.choice((0, 1, 3, 0xFFFFFFFF)))
        if kind == 1:
            return Expr.workgroup_id(0)
        names = self._vars(U32, uniform=True)
        return Expr.var(r.choice(names).name) if names else Expr.u32(2)


def _typed_int(t: DataType, v: int) -> Expr:
    """The integer literal ``v`` of integer type ``t``."""
    return {U32: Expr.u32, I32: Expr.i32, U64: Expr.u64, I64: Expr.i64}[t](v)
