"""Expression lowering: ``Expr`` -> instructions, returning the register holding the value.

Operands are evaluated left to right, each into fresh registers; the pure operators come from the
tables in ``ops``, memory from ``memory``, transcendentals from ``mathlib``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from vyre.driver.errors import InvalidProgram, UnsupportedFeature
from vyre.ir.expr import Expr, dtype_of, is_atomic_read, is_counter_add, name_of
from vyre.ir.op import OPS, Op, Result
from vyre.ir.program import Access
from vyre.ir.types import SIGN_TWIN, DataType
from vyre.reference import scalar_ops as oracle
from vyre_cuda._codegen import ops
from vyre_cuda._codegen.builder import Builder, Val
from vyre_cuda._codegen.lowerings import LoweringContext, LoweringFn, get_lowering
from vyre_cuda._codegen.memory import Buffers
from vyre_cuda._codegen.ops import W32, W64, width_of
from vyre_cuda._codegen.ranges import U32_MAX, binary_bound, unary_bound
from vyre_cuda._codegen.types import bits, reg_kind, suffix

U32, I32, F32, BOOL = DataType.U32, DataType.I32, DataType.F32, DataType.BOOL
U64, I64, F64 = DataType.U64, DataType.I64, DataType.F64
#: subgroup_add's add per type (integers wrap: the unsigned add serves both signednesses)
_SUBGROUP_ADD = {U32: "add.u32", I32: "add.u32", F32: "add.rn.f32", U64: "add.u64", I64: "add.u64", F64: "add.rn.f64"}
AXES = "xyz"
Scope = Mapping[str, Val]
#: float ops whose operands are all literals are computed here, with the oracle's own functions,
#: and emitted as one literal: the driver's PTX JIT folds them itself and rounds an exact tie the
#: wrong way (``sub.rn.f32`` of 0xC12027AC and 0xC2C37D49 gives 0x42AF7853 where IEEE gives
#: 0x42AF7854; ptxas gives 0x42AF7854), so it must never see two float literals meet
FOLDED = {Op.ADD: oracle.BINARY[Op.ADD], Op.SUB: oracle.BINARY[Op.SUB], Op.MUL: oracle.BINARY[Op.MUL],
          Op.DIV: oracle.BINARY[Op.DIV], Op.ABS_DIFF: oracle.BINARY[Op.ABS_DIFF], Op.SQRT: oracle.UNARY[Op.SQRT],
          Op.FMA: oracle.fma}
_BITS = {F32: np.uint32, F64: np.uint64}


class ExprLowering:
    """Lowers expressions of one program into a ``Builder``."""

    def __init__(self, b: Builder, buffers: Buffers, logical_x: str | None = None,
                 lowerings: Mapping[str, LoweringFn] | None = None,
                 block: tuple[int, int, int] | None = None) -> None:
        """``logical_x``: in a coarsened kernel, the register holding the logical workgroup id along x;
        ``lowerings``: the lowerings of primitive ``Expr.call`` ops (None: the registry, ``_codegen.lowerings``);
        ``block``: the workgroup size the kernel is emitted for and launched with, which bounds the
        local id (None: no bound)."""
        self.b = b
        self.buffers = buffers
        self.logical_x = logical_x
        self.lowerings = lowerings
        self.block = block
        self._uniform_words: dict[tuple[str, int], Val] = {}  # (buffer, index) -> its value (``_uniform_word``)
        self._literals: dict[str, int] = {}  # register -> the bits of the literal it holds (``_lit``)
        self._bounds: dict[str, int] = {}  # register -> the largest value the U32 it holds can take (``ranges``)
        self.mutable: set[str] = set()  # registers of assigned variables and loop counters (``StmtLowering``)
        self._fields: dict[str, tuple[str, int, int, int | None]] = {}  # register -> ``field``'s (x, s, m, statement)
        self.statement = 0  # the statement being lowered (``StmtLowering.node`` counts them): ``field``'s scope
        self._handlers = {
            Op.LIT: self._lit, Op.VAR: self._var, Op.LOAD: self._load, Op.BUF_LEN: self._buf_len,
            Op.INVOCATION_ID: self._id, Op.WORKGROUP_ID: self._id, Op.LOCAL_ID: self._id,
            Op.SELECT: self._select, Op.CAST: self._cast, Op.FMA: self._fma, Op.ATOMIC: self._atomic,
            Op.SUBGROUP_BALLOT: self._ballot, Op.SUBGROUP_SHUFFLE: self._shuffle,
            Op.SUBGROUP_ADD: self._subgroup_add, Op.SUBGROUP_LOCAL_ID: self._lane,
            Op.SUBGROUP_SIZE: lambda e, s: self.bounded(Val(self.b.op("mov.u32", "r", "32"), U32), 32),
            Op.CALL: self._call,
        }

    def lower(self, e: Expr, scope: Scope) -> Val:
        """Emit ``e``; returns its register and type."""
        handler = self._handlers.get(e.op)
        if handler is not None:
            return handler(e, scope)
        args = [self.lower(a, scope) for a in e.args]
        key = (e.op, args[0].dtype)
        out = BOOL if OPS[e.op].result is Result.BOOL else args[0].dtype
        folded = self._fold(e.op, out, args)
        if folded is not None:
            return folded
        if len(args) == 2 and key in ops.BINARY:
            v = Val(ops.apply(ops.BINARY, key, self.b, reg_kind(out), *(a.reg for a in args)), out)
            if out is U32 and args[1].dtype is U32:
                self.bounded(v, binary_bound(e.op, self.bound(args[0]), self.bound(args[1]),
                                             self._literals.get(args[1].reg)))
                self._note_field(e, v.reg, args)
            return v
        if len(args) == 1 and key in ops.UNARY:
            v = Val(ops.apply(ops.UNARY, key, self.b, reg_kind(out), args[0].reg), out)
            if out is U32:
                self.bounded(v, unary_bound(e.op))
            return v
        raise InvalidProgram(f"{e.op} on {args[0].dtype.name} has no lowering (the program is not valid)",
                             "run vyre.validate(program) and correct the findings.")

    # ---- leaves -----------------------------------------------------------------------------------
    def _lit(self, e: Expr, scope: Scope) -> Val:
        """A literal's register, set once in the prologue and shared by every use of the value
        (no lowering writes into an operand's register; ptxas folds the constants back in)."""
        if e.dtype is BOOL:
            text = "1" if e.value else "0"
            return Val(self.b.cached(("lit", "pred", text), lambda: self.b.op("mov.pred", "p", text)), BOOL)
        return self._literal(dtype_of(e), int(e.value))

    def _literal(self, dtype: DataType, value: int) -> Val:
        """The register of the non-bool literal with bits ``value``."""
        b_, text = bits(dtype), f"0x{value:0{dtype.size * 2}X}"
        reg = self.b.cached(("lit", b_, text), lambda: self.b.op(f"mov.{b_}", reg_kind(dtype), text))
        self._literals[reg] = value
        return self.bounded(Val(reg, dtype), value)

    def constant(self, copy: str, reg: str) -> None:
        """Register ``copy`` holds what ``reg`` holds for good (a ``let`` never assigned): a literal
        stays one for ``_fold``, a bound stays a bound, a bit field stays one (``field``)."""
        if reg in self._literals:
            self._literals[copy] = self._literals[reg]
        if reg in self._bounds:
            self._bounds[copy] = self._bounds[reg]
        if reg in self._fields:
            self._fields[copy] = self._fields[reg]

    def _note_field(self, e: Expr, reg: str, args: list[Val]) -> None:
        """Note U32 ``reg`` = ``x >> s`` (a literal ``s``; ``m`` = all ones) or ``(x >> s) & m`` (a
        literal ``m``) for ``field``. The note holds while ``x`` keeps its value: for good where
        ``x`` is written once (an expression's result, a never-assigned ``let``), else until the
        statement ends (an assigned variable's or a loop counter's register, ``mutable``, may
        change after it)."""
        if e.op is Op.SHR and args[0].dtype is U32 and args[1].reg in self._literals:
            x = args[0].reg
            self._fields[reg] = (x, self._literals[args[1].reg] & 31, U32_MAX,
                                 self.statement if x in self.mutable else None)
        elif e.op is Op.BITAND:
            for a, c in ((args[0], args[1]), (args[1], args[0])):
                note = self._fields.get(a.reg)
                if note is not None and c.reg in self._literals and note[2] == U32_MAX:
                    self._fields[reg] = (note[0], note[1], self._literals[c.reg], note[3])
                    return

    def field(self, v: Val) -> tuple[str, int, int] | None:
        """``(x, s, m)`` where register ``v`` holds ``(x >> s) & m`` of a register ``x`` that still
        holds the value it was computed from (``Buffers`` scales a workgroup index inside the field)."""
        note = self._fields.get(v.reg)
        if note is None or note[2] == U32_MAX or note[3] not in (None, self.statement):
            return None
        return note[0], note[1], note[2]

    def bound(self, v: Val) -> int:
        """The largest value ``v`` can take as a U32 (``U32_MAX``: not known, or not a U32)."""
        return self._bounds.get(v.reg, U32_MAX) if v.dtype is U32 else U32_MAX

    def bounded(self, v: Val, hi: int) -> Val:
        """``v``, noting that its register never holds a U32 above ``hi``; only for registers
        written once (a fresh result, a literal, a special register, a ``let`` never assigned)."""
        if v.dtype is U32 and hi < self._bounds.get(v.reg, U32_MAX):
            self._bounds[v.reg] = hi  # two bounds of one register's value: the smaller holds too
        return v

    def _fold(self, op: Op, out: DataType, args: list[Val]) -> Val | None:
        """``op`` of literal F32/F64 operands as one literal, computed by the oracle (``FOLDED``);
        None when an operand is not a literal, or an operand or the result is NaN (left as it is)."""
        fn, raw = FOLDED.get(op), _BITS.get(out)
        if fn is None or raw is None or any(a.dtype is not out for a in args):
            return None
        found = [self._literals.get(a.reg) for a in args]
        if any(v is None for v in found):
            return None
        values = [np.array([v], raw).view(out.np_dtype) for v in found]
        with np.errstate(all="ignore"):
            result = np.asarray(fn(*values), out.np_dtype)
        if np.isnan(result).any() or any(np.isnan(v).any() for v in values):
            return None
        return self._literal(out, int(result.view(raw)[0]))

    def _var(self, e: Expr, scope: Scope) -> Val:
        try:
            return scope[name_of(e)]
        except KeyError:
            raise InvalidProgram("a variable is used outside its scope (the program is not valid)",
                                 "run vyre.validate(program) and correct the findings.") from None

    def _special(self, reg: str) -> str:
        return self.b.cached(reg, lambda: self.b.op("mov.u32", "r", reg))

    def _workgroup(self, axis: str) -> str:
        """The workgroup id along ``axis``: ``%ctaid``, or the logical id of a coarsened kernel (x)."""
        if axis == "x" and self.logical_x is not None:
            return self.logical_x
        return self._special(f"%ctaid.{axis}")

    def _id(self, e: Expr, scope: Scope) -> Val:
        axis = AXES[e.value]
        tid = f"%tid.{axis}"
        if e.op == Op.LOCAL_ID:
            v = Val(self._special(tid), U32)
            return self.bounded(v, self.block[e.value] - 1) if self.block is not None else v
        if e.op == Op.WORKGROUP_ID:
            return Val(self._workgroup(axis), U32)
        per_group = self.b.iteration if axis == "x" and self.logical_x is not None else None
        return Val(self.b.cached(("gid", axis), lambda: self.b.op(
            "mad.lo.u32", "r", self._workgroup(axis), self._special(f"%ntid.{axis}"), self._special(tid)),
            per_group), U32)

    def linear_local_id(self) -> str:
        """tid.x + tid.y*ntid.x + tid.z*ntid.x*ntid.y, the order warps are formed in."""
        def make() -> str:
            b, s = self.b, self._special
            zy = b.op("mad.lo.u32", "r", s("%tid.z"), s("%ntid.y"), s("%tid.y"))
            return b.op("mad.lo.u32", "r", zy, s("%ntid.x"), s("%tid.x"))

        return self.b.cached("linear_id", make)

    def _lane(self, e: Expr, scope: Scope) -> Val:
        return self.bounded(
            Val(self.b.cached("lane", lambda: self.b.op("and.b32", "r", self.linear_local_id(), "31")), U32), 31)

    # ---- memory -------------------------------------------------------------------------------------
    def _load(self, e: Expr, scope: Scope) -> Val:
        index, name = e.args[0], name_of(e)
        if index.op == Op.LIT and self.buffers.decls[name].access is Access.UNIFORM:
            return self._uniform_word(name, index, scope)
        i = self.lower(index, scope)
        return self.buffers.load(name, i.reg, self.bound(i), self.field(i))

    def _uniform_word(self, name: str, index: Expr, scope: Scope) -> Val:
        """A uniform buffer at a literal index: loaded once, before the body (``Builder.loaded``),
        and shared by every use (nothing writes a uniform buffer during a dispatch; out of bounds
        it is still zero)."""
        key = (name, int(index.value))
        val = self._uniform_words.get(key)
        if val is None:
            with self.b.into(self.b.loaded):
                val = self.buffers.load(name, self.lower(index, scope).reg)
            self._uniform_words[key] = val
        return val

    def _buf_len(self, e: Expr, scope: Scope) -> Val:
        return self.buffers.buf_len(name_of(e))

    def _atomic(self, e: Expr, scope: Scope) -> Val:
        if is_atomic_read(e):  # its value is a literal: nothing else to evaluate
            i = self.lower(e.args[0], scope)
            return self.buffers.atomic_read(name_of(e), i.reg, self.bound(i), self.field(i))
        if is_counter_add(e) and self.buffers.aggregates(name_of(e)):
            return self.buffers.counter_add(name_of(e), self.lower(e.args[0], scope).reg, int(e.args[1].value))
        vals = [self.lower(a, scope) for a in e.args]
        regs = [v.reg for v in vals]
        return self.buffers.atomic(e.value, name_of(e), regs[0], regs[1], regs[2] if len(regs) > 2 else None,
                                   self.bound(vals[0]), self.field(vals[0]))

    # ---- composite ----------------------------------------------------------------------------------
    def _select(self, e: Expr, scope: Scope) -> Val:
        c, t, f = (self.lower(a, scope) for a in e.args)
        if t.dtype is not BOOL:
            v = Val(self.b.op(f"selp.{bits(t.dtype)}", reg_kind(t.dtype), t.reg, f.reg, c.reg), t.dtype)
            return self.bounded(v, max(self.bound(t), self.bound(f)))
        d = self.b.regs.new("p")
        self.b.ins(f"mov.pred {d}, {t.reg}", c.reg)
        self.b.ins(f"mov.pred {d}, {f.reg}", f"!{c.reg}")
        return Val(d, BOOL)

    def _fma(self, e: Expr, scope: Scope) -> Val:
        a, b_, c = (self.lower(x, scope) for x in e.args)
        folded = self._fold(Op.FMA, a.dtype, [a, b_, c])
        if folded is not None:
            return folded
        w = width_of(a.dtype)
        opcode = f"fma.rn.{w.f}" if a.dtype.is_float else f"mad.lo.{w.u}"  # integer fma wraps
        return Val(self.b.op(opcode, w.kind, a.reg, b_.reg, c.reg), a.dtype)

    def _cast(self, e: Expr, scope: Scope) -> Val:
        v = self.lower(e.args[0], scope)
        out = Val(cast(self.b, v, dtype_of(e)), dtype_of(e))
        return self.bounded(out, 1 if v.dtype is BOOL else self.bound(v))

    # ---- subgroups ----------------------------------------------------------------------------------
    def _ballot(self, e: Expr, scope: Scope) -> Val:
        c = self.lower(e.args[0], scope)
        return Val(self.b.op("vote.sync.ballot.b32", "r", c.reg, "0xFFFFFFFF"), U32)

    def _shuffle(self, e: Expr, scope: Scope) -> Val:
        v, lane = (self.lower(a, scope) for a in e.args)
        src = self.b.op("selp.u32", "r", "1", "0", v.reg) if v.dtype is BOOL else v.reg
        out = self._shfl("idx", src, lane.reg, v.dtype.is_wide)
        if v.dtype is BOOL:
            return Val(self.b.op("setp.ne.u32", "p", out, "0"), BOOL)
        return Val(out, v.dtype)

    def _shfl(self, mode: str, value: str, lane: str, wide: bool) -> str:
        """``shfl.sync.<mode>`` of a 32-bit register, or of a 64-bit one as its two 32-bit halves.
        c = 0x1f: no segments, lane index = lane & 31 (idx) or lane ^ offset (bfly)."""
        if not wide:
            return self.b.op(f"shfl.sync.{mode}.b32", "r", value, lane, "0x1F", "0xFFFFFFFF")
        lo, hi = self.b.regs.new("r"), self.b.regs.new("r")
        self.b.ins(f"mov.b64 {{{lo}, {hi}}}, {value}")
        lo, hi = (self.b.op(f"shfl.sync.{mode}.b32", "r", h, lane, "0x1F", "0xFFFFFFFF") for h in (lo, hi))
        out = self.b.regs.new("rd")
        self.b.ins(f"mov.b64 {out}, {{{lo}, {hi}}}")
        return out

    def _subgroup_add(self, e: Expr, scope: Scope) -> Val:
        v = self.lower(e.args[0], scope)
        acc = v.reg
        for offset in (16, 8, 4, 2, 1):
            other = self._shfl("bfly", acc, str(offset), v.dtype.is_wide)
            acc = self.b.op(_SUBGROUP_ADD[v.dtype], reg_kind(v.dtype), acc, other)
        return Val(acc, v.dtype)

    # ---- registered ops -----------------------------------------------------------------------------
    def _call(self, e: Expr, scope: Scope) -> Val:
        from vyre.ops import get_op

        name = name_of(e)
        op = get_op(name)
        if op is None:
            raise UnsupportedFeature(f"op {name}", "cuda", "install the op pack that registers it.")
        if op.expand is not None:  # emit_ptx expanded every composed call (vyre.ir.expand)
            raise InvalidProgram(f"composed op {name!r} reached the emitter unexpanded",
                                 "emit through vyre_cuda.emit_ptx, which expands composed ops first.")
        args = [self.lower(a, scope) for a in e.args]
        fn = get_lowering(name) if self.lowerings is None else self.lowerings.get(name)
        if fn is None:
            raise UnsupportedFeature(f"op {name}", "cuda")
        ctx = LoweringContext(self.b, tuple(a.dtype for a in args), op.result_type)
        return Val(fn(ctx, *(a.reg for a in args)), op.result_type)


def cast(b: Builder, v: Val, to: DataType) -> str:
    """Register holding ``v`` converted to ``to`` (docs/semantics.md, Casts)."""
    frm = v.dtype
    if frm is to or SIGN_TWIN.get(frm) is to:
        return v.reg  # same bits
    if to is BOOL:
        w = width_of(frm)
        if frm.is_float:
            return b.op(f"setp.neu.{w.f}", "p", v.reg, w.zero)  # NaN -> true, ±0 -> false
        return b.op(f"setp.ne.{w.u}", "p", v.reg, "0")
    if frm is BOOL:
        w = width_of(to)
        return b.op(f"selp.{w.b}", w.kind, w.one if to.is_float else "1", "0", v.reg)
    if frm.is_float and to.is_float:  # F32 -> F64 is exact; F64 -> F32 rounds to nearest even
        return b.op("cvt.f64.f32" if to is F64 else "cvt.rn.f32.f64", reg_kind(to), v.reg)
    if to.is_float:
        return b.op(f"cvt.rn.{suffix(to)}.{suffix(frm)}", reg_kind(to), v.reg)
    if frm.is_float:
        # float -> int: .rzi truncates and saturates to the range; it maps NaN to 0 for 32-bit
        # results of f32 only (64-bit results and f64 sources give the most negative bits on sm_90)
        out = b.op(f"cvt.rzi.{suffix(to)}.{suffix(frm)}", reg_kind(to), v.reg)
        if frm is not F64 and not to.is_wide:
            return out
        w = width_of(frm)
        nan = b.op(f"setp.nan.{w.f}", "p", v.reg, v.reg)
        return b.op(f"selp.{width_of(to).b}", reg_kind(to), "0", out, nan)
    if to.is_wide:  # widen after the source's signedness: zero- or sign-extend
        return b.op(f"cvt.{W64.s if frm.is_signed else W64.u}.{suffix(frm)}", "rd", v.reg)
    return b.op(f"cvt.{W32.u}.{W64.u}", "r", v.reg)  # narrow: keep the low 32 bits
