"""Buffer access: pointers, run-time counts, guarded loads/stores/atomics, workgroup memory.

Every access is guarded against the buffer's element count (``setp.lt.u32 p, idx, count``); the
address is computed in 64 bits (``mul.wide.u32``) so no index can wrap into another buffer.
Out of bounds a load yields a typed zero, a store is skipped, an atomic yields 0 and writes nothing.
Loads of read-only buffers, and of written buffers that ``own_index.cached_read_write`` proves
safe, go through the non-coherent cache (``ld.global.nc``).
"""

from __future__ import annotations

from vyre.ir.expr import AtomicOp
from vyre.ir.layout import workgroup_layout
from vyre.ir.program import Access, BufferDecl, Program
from vyre.ir.types import DataType
from vyre_cuda._codegen.abi import count_word, param_name
from vyre_cuda._codegen.builder import Builder, Val
from vyre_cuda._codegen.own_index import cached_read_write
from vyre_cuda._codegen.ranges import U32_MAX
from vyre_cuda._codegen.types import bits

D = DataType
#: ``(x, s, m)``: a U32 register that holds ``(x >> s) & m`` (``ExprLowering.field``)
Field = tuple[str, int, int]
#: most zero-fill stores per thread written out, not looped (``Buffers.zero_workgroup_memory``)
UNROLLED_FILL = 16
#: storage type -> ld/st type suffix (8/16-bit integer loads widen: u* zero-, s* sign-extend)
_MEM_SUFFIX = {
    D.U8: "u8", D.I8: "s8", D.U16: "u16", D.I16: "s16", D.U32: "u32", D.I32: "u32",
    D.F32: "u32", D.BOOL: "u32", D.F16: "b16", D.BF16: "u16", D.U64: "u64", D.I64: "u64", D.F64: "u64",
}
#: storage type -> st suffix (stores truncate to the low bits)
_STORE_SUFFIX = {**_MEM_SUFFIX, D.I8: "u8", D.I16: "u16", D.BF16: "b16"}
#: atomic op -> (atom operation, {buffer type: atom type suffix})
_ATOMIC = {
    AtomicOp.ADD: ("add", {D.U32: "u32", D.I32: "u32", D.U64: "u64", D.I64: "u64", D.F64: "f64"}),
    AtomicOp.OR: ("or", {D.U32: "b32", D.I32: "b32", D.U64: "b64", D.I64: "b64"}),
    AtomicOp.AND: ("and", {D.U32: "b32", D.I32: "b32", D.U64: "b64", D.I64: "b64"}),
    AtomicOp.XOR: ("xor", {D.U32: "b32", D.I32: "b32", D.U64: "b64", D.I64: "b64"}),
    AtomicOp.MIN: ("min", {D.U32: "u32", D.I32: "s32", D.U64: "u64", D.I64: "s64"}),
    AtomicOp.MAX: ("max", {D.U32: "u32", D.I32: "s32", D.U64: "u64", D.I64: "s64"}),
    AtomicOp.EXCHANGE: ("exch", {D.U32: "b32", D.I32: "b32", D.U64: "b64", D.I64: "b64"}),
    AtomicOp.COMPARE_EXCHANGE: ("cas", {D.U32: "b32", D.I32: "b32", D.U64: "b64", D.I64: "b64"}),
}
SHARED_SYMBOL = "vyre_smem"


def counts_by_subgroup(d: BufferDecl) -> bool:
    """Whether counter adds (``is_counter_add``) on ``d`` are made once per subgroup
    (``Buffers.counter_add``): 32-bit global buffers."""
    return not d.is_workgroup and d.dtype in (D.U32, D.I32)


class Buffers:
    """Per-kernel view of the program's buffers for one ``Builder``."""

    def __init__(self, program: Program, b: Builder, packed_narrowing: bool = False) -> None:
        self.program = program
        self.b = b
        #: narrow f32 to f16/bf16 through the packed conversion (sm_80+; see ``narrow``)
        self.packed_narrowing = packed_narrowing
        self.decls = {d.name: d for d in program.buffers}
        self.param_index = {d.name: i for i, d in enumerate(program.bound_buffers)}
        #: workgroup buffers' byte offsets and the padded total (the validator checks the same layout)
        self.shared_offset, self.shared_bytes = workgroup_layout(program)
        #: written buffers whose loads may still use the read-only cache (``own_index``)
        self.cached_read_write = cached_read_write(program)

    # ---- per-buffer prologue values -------------------------------------------------------
    def _global_base(self, name: str) -> str:
        def make() -> str:
            p = self.b.op("ld.param.u64", "rd", f"[{param_name(self.param_index[name])}]")
            return self.b.op("cvta.to.global.u64", "rd", p)

        return self.b.cached(("base", name), make)

    def _param_block(self) -> str:
        def make() -> str:
            p = self.b.op("ld.param.u64", "rd", f"[{param_name(len(self.param_index))}]")
            return self.b.op("cvta.to.global.u64", "rd", p)

        return self.b.cached("param_block", make)

    def count(self, name: str) -> str:
        """The element count of ``name``: a register (run time) or an immediate (workgroup)."""
        d = self.decls[name]
        if d.is_workgroup:
            return str(d.count)
        return self.param_word(("count", name), count_word(self.program, name))

    def param_word(self, key: object, word: int) -> str:
        """Register holding u32 word ``word`` of the parameter block (loaded once, in the prologue)."""
        return self.b.cached(key, lambda: self.b.op("ld.global.nc.u32", "r", f"[{self._param_block()}+{4 * word}]"))

    def shared_base(self) -> str:
        return self.b.cached("smem", lambda: self.b.op("mov.u32", "r", SHARED_SYMBOL))

    # ---- addressing ----------------------------------------------------------------------------
    def _space(self, d: BufferDecl, reading: bool) -> str:
        if d.is_workgroup:
            return "shared"
        cached = d.access in (Access.READ, Access.UNIFORM) or d.name in self.cached_read_write
        return "global.nc" if reading and cached else "global"

    def _guard_and_address(self, d: BufferDecl, index: str, hi: int = U32_MAX,
                           field: Field | None = None) -> tuple[str | None, str]:
        """(in-bounds predicate, address operand text) for element ``index`` of ``d``; no predicate
        (None) for workgroup memory when ``hi``, the largest value ``index`` can take
        (``_codegen.ranges``), is below the buffer's count: that access cannot leave the buffer.
        ``field``: ``index`` is a bit field of another register (``ExprLowering.field``)."""
        b = self.b
        p = None if d.is_workgroup and hi < d.count else b.op("setp.lt.u32", "p", index, self.count(d.name))
        if d.is_workgroup:
            return p, f"[{self._shared_address(index, d.dtype.size, field)}+{self.shared_offset[d.name]}]"
        off = b.op("mul.wide.u32", "rd", index, str(d.dtype.size))
        return p, f"[{b.op('add.s64', 'rd', self._global_base(d.name), off)}]"

    def _shared_address(self, index: str, size: int, field: Field | None) -> str:
        """The workgroup-memory address of element ``index`` of ``size`` bytes (before its buffer's
        offset): ``index * size + base``. An index that is a bit field ``(x >> s) & m`` of a register
        ``x``, with ``size`` = 2^k (k >= 1) and k <= s, is scaled inside the field instead,
        ``((x >> (s - k)) & (m << k)) + base``: ptxas folds that add into the access
        (``[R+UR+offset]``) where ``index * size + base`` took one instruction more (a ``LEA``)."""
        k = size.bit_length() - 1
        if field is not None and k >= 1 and 1 << k == size and k <= field[1] and field[2] << k <= U32_MAX:
            x, s, m = field
            scaled = self.b.op("and.b32", "r", self.b.op("shr.u32", "r", x, str(s - k)), str(m << k))
            return self.b.op("add.u32", "r", scaled, self.shared_base())
        return self.b.op("mad.lo.u32", "r", index, str(size), self.shared_base())

    # ---- operations ----------------------------------------------------------------------------
    def buf_len(self, name: str) -> Val:
        return Val(self.b.op("mov.u32", "r", self.count(name)), D.U32)

    def load(self, name: str, index: str, hi: int = U32_MAX, field: Field | None = None) -> Val:
        """``name[index]`` widened to its arithmetic type, or typed zero out of bounds (``hi``,
        ``field``: as in ``_guard_and_address``)."""
        b, d = self.b, self.decls[name]
        p, addr = self._guard_and_address(d, index, hi, field)
        ld = f"ld.{self._space(d, True)}.{_MEM_SUFFIX[d.dtype]}"
        if d.dtype is D.F16:
            h = b.op("mov.b16", "h", "0")
            b.ins(f"{ld} {h}, {addr}", p)
            return Val(b.op("cvt.f32.f16", "r", h), D.F32)
        wide = d.dtype.is_wide  # everything narrower loads into a 32-bit register
        v = b.op("mov.b64" if wide else "mov.b32", "rd" if wide else "r", "0")
        b.ins(f"{ld} {v}, {addr}", p)
        if d.dtype is D.BF16:
            return Val(b.op("shl.b32", "r", v, "16"), D.F32)
        if d.dtype is D.BOOL:
            # the flag from a select on the guard, not from the guarded load's register alone: ptxas
            # 13.0 (and the driver's JIT) compiled ``if !flag {} else {store}`` on
            # ``mov 0; @p ld; setp.ne`` as if an out-of-bounds flag were set (fuzzer, seed 61101)
            return Val(b.op("setp.ne.u32", "p", b.op("selp.b32", "r", v, "0", p) if p else v, "0"), D.BOOL)
        return Val(v, d.dtype.arith)

    def store(self, name: str, index: str, value: Val, hi: int = U32_MAX, field: Field | None = None) -> None:
        """``name[index] = value`` narrowed to the storage type; skipped out of bounds (``hi``,
        ``field``: as in ``_guard_and_address``)."""
        b, d = self.b, self.decls[name]
        p, addr = self._guard_and_address(d, index, hi, field)
        src = value.reg
        if d.dtype is D.BOOL:
            src = b.op("selp.u32", "r", "1", "0", src)
        elif d.dtype in (D.F16, D.BF16):
            src = self.narrow(src, "f16" if d.dtype is D.F16 else "bf16")
        b.ins(f"st.{self._space(d, False)}.{_STORE_SUFFIX[d.dtype]} {addr}, {src}", p)

    def narrow(self, x: str, kind: str) -> str:
        """The 16-bit ``kind`` (``f16``/``bf16``) bits of f32 ``x``, rounded to nearest even.

        With ``packed_narrowing`` this is the packed conversion of the pair ``(x, x)`` and its low
        half: ptxas 13.0 compiles the plain ``cvt.rn.f16.f32`` of ``p ? 0 : 0x00000001`` (the
        smallest f32 subnormal) as if those bits were the integer 1, storing 1.0 (found by the
        differential fuzzer, seed 777007, and measured for f16 and bf16 on an H100); the packed form
        rounds the same way and is not folded so."""
        if not self.packed_narrowing:
            return self.b.op(f"cvt.rn.{kind}.f32", "h", x)
        return self.b.op("cvt.u16.u32", "h", self.b.op(f"cvt.rn.{kind}x2.f32", "r", x, x))

    def atomic(self, op: AtomicOp, name: str, index: str, value: str, expected: str | None,
               hi: int = U32_MAX, field: Field | None = None) -> Val:
        """Read-modify-write; returns the old value (0 out of bounds).

        PTX ``atom`` alone is relaxed. Following the PTX memory model's mapping of C++
        ``seq_cst`` RMW (Lustig et al., ASPLOS 2019; libcu++), each sequentially consistent
        atomic is ``fence.sc`` then ``atom.acq_rel`` at the scope that can observe it: ``.gpu``
        for global memory (other workgroups), ``.cta`` for workgroup memory. A ``*_RELAXED`` op
        is ``atom.relaxed`` alone: atomic on its word, ordering nothing else. ``hi``, ``field``: as
        in ``_guard_and_address``.
        """
        b, d = self.b, self.decls[name]
        p, addr = self._guard_and_address(d, index, hi, field)
        scope = "cta" if d.is_workgroup else "gpu"
        name_, suffixes = _ATOMIC[op.base]
        old = b.op(f"mov.{bits(d.dtype)}", "rd" if d.dtype.is_wide else "r", "0")
        # atom.cas d, [a], b, c stores c when the old value equals b
        operands = f"{expected}, {value}" if op.base is AtomicOp.COMPARE_EXCHANGE else value
        order = "relaxed" if op.is_relaxed else "acq_rel"
        if not op.is_relaxed:
            b.ins(f"fence.sc.{scope}", p)
        space = "shared" if d.is_workgroup else "global"
        b.ins(f"atom.{order}.{scope}.{space}.{name_}.{suffixes[d.dtype]} {old}, {addr}, {operands}", p)
        return Val(old, d.dtype)

    def aggregates(self, name: str) -> bool:
        """Whether ``counter_add`` serves counter adds on buffer ``name``."""
        return counts_by_subgroup(self.decls[name])

    def counter_add(self, name: str, index: str, value: int) -> Val:
        """A relaxed add of the literal ``value`` at ``index`` (``is_counter_add``) made once per
        subgroup: of the lanes running it together (``activemask``), the lowest adds ``value`` times
        their count, and each lane gets the old word plus ``value`` times the lanes below it, the
        results of the separate adds made in lane order (0 out of bounds). One atomic in place of
        up to 32 on the same word: a hot append counter (a BFS frontier's) stops serialising."""
        b, d = self.b, self.decls[name]
        p, addr = self._guard_and_address(d, index)
        assert p is not None  # global memory: always guarded
        mask = b.regs.new("r")
        b.ins(f"activemask.b32 {mask}")
        rank = b.op("popc.b32", "r", b.op("and.b32", "r", mask, b.op("mov.u32", "r", "%lanemask_lt")))
        total = b.op("mul.lo.u32", "r", b.op("popc.b32", "r", mask), str(value))
        lead = b.op("setp.eq.and.u32", "p", rank, "0", p)
        old = b.op("mov.u32", "r", "0")
        b.ins(f"atom.relaxed.gpu.global.add.u32 {old}, {addr}, {total}", lead)
        first = b.op("bfind.shiftamt.u32", "r", b.op("brev.b32", "r", mask))  # the lowest lane in the mask
        base = b.op("shfl.sync.idx.b32", "r", old, first, "0x1F", mask)
        mine = b.op("mad.lo.u32", "r", rank, str(value), base)
        return Val(b.op("selp.u32", "r", mine, "0", p), d.dtype)

    def atomic_read(self, name: str, index: str, hi: int = U32_MAX, field: Field | None = None) -> Val:
        """A relaxed atomic read (``is_atomic_read``): ``ld.relaxed``, coherent at the scope that can
        write the word, never an L1 line another workgroup cannot update; 0 out of bounds (``hi``,
        ``field``: as in ``_guard_and_address``)."""
        b, d = self.b, self.decls[name]
        p, addr = self._guard_and_address(d, index, hi, field)
        old = b.op(f"mov.{bits(d.dtype)}", "rd" if d.dtype.is_wide else "r", "0")
        scope, space = ("cta", "shared") if d.is_workgroup else ("gpu", "global")
        b.ins(f"ld.relaxed.{scope}.{space}.{bits(d.dtype)} {old}, {addr}", p)
        return Val(old, d.dtype)

    # ---- workgroup memory initialisation -------------------------------------------------------
    def zero_workgroup_memory(self, linear_id: str, threads: int, wait_first: bool = False) -> list[str]:
        """Lines that zero the workgroup's shared memory cooperatively, then ``bar.sync 0``.

        Every thread stores 16 bytes at a time, striding by the workgroup's ``threads`` (the launch's
        exact size), then the last 1-3 words the same way: a workgroup of fewer threads than those
        words still zeroes them all. Up to ``UNROLLED_FILL`` stores per thread are written out, each
        at a constant offset from the thread's first address (a 43 KB fill by 256 threads: 11
        stores, where the loop took five instructions a store); more take a loop.

        ``wait_first`` starts with a ``bar.sync 0`` too: a coarsened kernel zeroes again for each
        logical workgroup, after every thread is done with the previous one's memory.
        """
        lines: list[str] = []
        if not self.shared_bytes:
            return lines
        b = self.b
        with b.into(lines):
            if wait_first:
                b.ins("bar.sync 0")
            base = self.shared_base()
            chunks, tail = divmod(self.shared_bytes // 4, 4)  # 16-byte stores, then the last words
            self._strided(linear_id, threads, chunks, "st.shared.v4.u32 [{}], {{0, 0, 0, 0}}", 16, base, 0)
            if tail:
                self._strided(linear_id, threads, tail, "st.shared.u32 [{}], 0", 4, base, chunks * 16)
            b.ins("bar.sync 0")
        return lines

    def _strided(self, linear_id: str, threads: int, count: int, store: str, size: int, base: str,
                 offset: int) -> None:
        """Thread ``t`` emits ``store`` (its address in place of ``{}``) for items ``t, t + threads,
        ...`` below ``count``, item ``i`` at ``base + offset + i * size``: written out when each
        thread has at most ``UNROLLED_FILL`` items (the last one guarded where ``threads`` does not
        divide ``count``), else a loop."""
        b = self.b
        whole, rest = divmod(count, threads)
        if whole + (rest > 0) <= UNROLLED_FILL:
            first = b.op("mad.lo.u32", "r", linear_id, str(size), base)
            for k in range(whole):
                b.ins(store.format(_plus(first, offset + k * threads * size)))
            if rest:
                b.ins(store.format(_plus(first, offset + whole * threads * size)),
                      b.op("setp.lt.u32", "p", linear_id, str(rest)))
            return
        i = b.op("mov.u32", "r", linear_id)
        top, done = b.new_label(), b.new_label()
        b.place(top)
        p = b.op("setp.ge.u32", "p", i, str(count))
        b.ins(f"bra {done}", p)
        b.ins(store.format(_plus(b.op("mad.lo.u32", "r", i, str(size), base), offset)))
        b.ins(f"add.u32 {i}, {i}, {threads}")
        b.ins(f"bra {top}")
        b.place(done)


def _plus(register: str, offset: int) -> str:
    """A PTX address ``register+offset`` (``register`` alone at offset 0)."""
    return f"{register}+{offset}" if offset else register
