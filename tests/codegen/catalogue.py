"""Every IR construct in isolation, as small programs keyed by a readable name."""

from __future__ import annotations

from codegen_support import ARITH, D, elementwise

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ir.typing import ATOMIC_TYPES, BINARY_TYPES, SHIFT_OPS, UNARY_TYPES

STORAGE = (D.U8, D.U16, D.U32, D.I8, D.I16, D.I32, D.F16, D.BF16, D.F32, D.BOOL, D.U64, D.I64, D.F64)
I = Expr.var("i")


def _result(op: str, t: DataType) -> DataType:
    return D.BOOL if op in ("eq", "ne", "lt", "gt", "le", "ge", "is_nan", "is_inf", "is_finite") else t


def operator_programs() -> dict[str, Program]:
    out: dict[str, Program] = {}
    for op, types in BINARY_TYPES.items():
        for t in types:
            second = D.U32 if op in SHIFT_OPS else t
            out[f"{op}.{t.name}"] = elementwise(getattr(Expr, op), (t, second), _result(op, t))
    for op, types in UNARY_TYPES.items():
        for t in types:
            out[f"{op}.{t.name}"] = elementwise(getattr(Expr, op), (t,), _result(op, t))
    for src in ARITH:
        for dst in ARITH:
            out[f"cast.{src.name}.{dst.name}"] = elementwise(lambda a, d=dst: Expr.cast(d, a), (src,), dst)
    for t in ARITH:
        out[f"select.{t.name}"] = elementwise(lambda c, a, b: Expr.select(c, a, b), (D.BOOL, t, t), t)
    for t in (D.U32, D.I32, D.F32, D.U64, D.I64, D.F64):
        out[f"fma.{t.name}"] = elementwise(Expr.fma, (t, t, t), t)
    out["literals"] = elementwise(
        lambda a: Expr.select(Expr.bool(True), Expr.add(a, Expr.f32(-0.0)), Expr.f32_from_bits(0x7FC00001)),
        (D.F32,), D.F32)
    out["literals.wide"] = elementwise(
        lambda a, b: Expr.select(Expr.lt(a, Expr.i64(-(2**63))), Expr.f64_from_bits(0x7FF8000000000001),
                                 Expr.add(b, Expr.f64(-0.1))),
        (D.I64, D.F64), D.F64)
    return out


def memory_programs() -> dict[str, Program]:
    out: dict[str, Program] = {}
    for t in STORAGE:
        for ctor in (BufferDecl.read, BufferDecl.uniform, BufferDecl.read_write):
            src = ctor("src", 0, t, 256) if ctor is BufferDecl.uniform else ctor("src", 0, t)
            dst = BufferDecl.output("dst", 1, t, 1024)
            body = [Node.let("i", Expr.invocation_id(0)),
                    Node.store("dst", I, Expr.load("src", I)),
                    Node.let("n", Expr.buf_len("src"))]
            if ctor is BufferDecl.read_write:
                body.append(Node.store("src", I, Expr.load("dst", Expr.var("n"))))
            out[f"mem.{ctor.__name__}.{t.name}"] = Program([src, dst], (64, 1, 1), body)
        wg = BufferDecl.workgroup("tile", 130, t)
        body = [Node.let("l", Expr.local_id(0)),
                Node.store("tile", Expr.var("l"), Expr.load("src", Expr.var("l"))),
                Node.barrier(),
                Node.store("dst", Expr.invocation_id(0), Expr.load("tile", Expr.sub(Expr.u32(63), Expr.var("l")))),
                Node.let("n", Expr.buf_len("tile"))]
        out[f"mem.workgroup.{t.name}"] = Program(
            [BufferDecl.read("src", 0, t), BufferDecl.output("dst", 1, t, 1024), wg], (64, 1, 1), body)
    for op in AtomicOp:
        for t in ATOMIC_TYPES[op.base]:
            out.update(_atomic_programs(op, t))
    mixed = [BufferDecl.workgroup("w8", 3, D.U8), BufferDecl.workgroup("w64", 5, D.F64),
             BufferDecl.workgroup("w32", 1, D.U32), BufferDecl.workgroup("i64", 2, D.I64)]
    lid = Expr.local_id(0)
    out["mem.workgroup.aligned64"] = Program(
        [BufferDecl.read("src", 0, D.F64), BufferDecl.output("dst", 1, D.F64, 1024), *mixed], (64, 1, 1),
        [Node.store("w8", lid, Expr.cast(D.U32, Expr.load("src", lid))),
         Node.store("w64", lid, Expr.load("src", lid)),
         Node.store("i64", lid, Expr.cast(D.I64, Expr.load("src", lid))),
         Node.barrier(),
         Node.store("dst", Expr.invocation_id(0), Expr.add(Expr.load("w64", Expr.rem(lid, Expr.u32(5))),
                                                           Expr.cast(D.F64, Expr.load("i64", lid))))])
    return out


def _atomic_programs(op: AtomicOp, t: DataType) -> dict[str, Program]:
    """Atomics into ``acc`` (global) or ``tile`` (shared, copied to ``acc`` after a barrier)."""
    u = Expr.u32
    exp = Expr.load("src", I) if op.base is AtomicOp.COMPARE_EXCHANGE else None
    out = {}
    for shared in (False, True):
        bufs = [BufferDecl.read("src", 0, t), BufferDecl.output("dst", 1, t, 1024),
                BufferDecl.output("acc", 2, t, 128)]
        slot = Expr.rem(I, u(7))
        if shared:
            bufs.append(BufferDecl.workgroup("tile", 8, t))
            slot = Expr.rem(Expr.local_id(0), u(7))
        body = [Node.let("i", Expr.invocation_id(0)),
                Node.let("old", Expr.atomic(op, "tile" if shared else "acc", slot, Expr.load("src", I), exp)),
                Node.store("dst", I, Expr.var("old"))]
        if shared:
            lid = Expr.local_id(0)
            body += [Node.barrier(), Node.if_(Expr.lt(lid, u(8)), [Node.store(
                "acc", Expr.add(Expr.mul(Expr.workgroup_id(0), u(8)), lid), Expr.load("tile", lid))])]
        out[f"atomic.{op.name}.{t.name}.{'shared' if shared else 'global'}"] = Program(bufs, (64, 1, 1), body)
    return out


def _linear_gid(grid: tuple[int, int, int], wg: tuple[int, int, int]) -> Expr:
    """Row-major global index of the invocation for a known grid (x fastest)."""
    u = Expr.u32
    nx, ny = grid[0] * wg[0], grid[1] * wg[1]
    g = [Expr.invocation_id(a) for a in range(3)]
    return Expr.add(Expr.mul(Expr.add(Expr.mul(g[2], u(ny)), g[1]), u(nx)), g[0])


#: grid the GPU check launches multi-dimensional workgroups with
GRID_3D = (2, 2, 2)


def control_programs() -> dict[str, Program]:
    u = Expr.u32
    out: dict[str, Program] = {}
    bufs = [BufferDecl.read("src", 0, D.U32), BufferDecl.output("dst", 1, D.U32, 4096)]
    out["if_else"] = Program(bufs, (64, 1, 1), [
        Node.let("i", Expr.invocation_id(0)),
        Node.let("acc", u(0)),
        Node.if_(Expr.lt(I, Expr.buf_len("src")),
                 [Node.assign("acc", Expr.load("src", I))],
                 [Node.assign("acc", u(7)), Node.if_(Expr.eq(I, u(5)), [Node.return_()])]),
        Node.store("dst", I, Expr.var("acc"))])
    out["loop_return"] = Program(bufs, (64, 1, 1), [
        Node.let("i", Expr.invocation_id(0)),
        Node.let("n", Expr.load("src", I)),
        Node.let("acc", u(0)),
        Node.loop("k", u(0), Expr.var("n"), [
            Node.assign("n", u(3)),
            Node.assign("acc", Expr.add(Expr.var("acc"), Expr.var("k"))),
            Node.if_(Expr.gt(Expr.var("acc"), u(1000)), [Node.return_()])]),
        Node.block([Node.let("t", Expr.var("acc")), Node.store("dst", I, Expr.var("t"))]),
        Node.region("gen", [Node.let("t", u(1)), Node.store("dst", Expr.add(I, u(1)), Expr.var("t"))])])
    for dims in ((8, 8, 1), (4, 4, 4)):
        ids = [Expr.invocation_id(a) for a in range(3)] + [Expr.workgroup_id(a) for a in range(3)] + \
              [Expr.local_id(a) for a in range(3)]
        value = ids[0]
        for e in ids[1:]:
            value = Expr.bitxor(Expr.mul(value, u(31)), e)
        key = f"ids.{'x'.join(map(str, dims))}"
        out[key] = Program(bufs, dims, [Node.store("dst", _linear_gid(GRID_3D, dims), value)])
    sg = [BufferDecl.read("src", 0, D.U32), BufferDecl.read("fsrc", 1, D.F32),
          BufferDecl.output("dst", 2, D.U32, 4096), BufferDecl.output("fdst", 3, D.F32, 4096),
          BufferDecl.output("dst2", 4, D.U32, 4096)]
    v, f = Expr.load("src", I), Expr.load("fsrc", I)
    out["subgroups"] = Program(sg, (64, 2, 1), [
        Node.let("i", _linear_gid(GRID_3D, (64, 2, 1))),
        Node.let("b", Expr.subgroup_ballot(Expr.lt(v, u(9)))),
        Node.let("s", Expr.subgroup_shuffle(v, Expr.add(Expr.subgroup_local_id(), u(1)))),
        Node.let("sb", Expr.subgroup_shuffle(Expr.lt(v, u(3)), u(0))),
        Node.let("sf", Expr.subgroup_shuffle(f, u(0))),
        Node.let("a", Expr.subgroup_add(v)),
        Node.let("ai", Expr.subgroup_add(Expr.cast(D.I32, v))),
        Node.let("af", Expr.subgroup_add(f)),
        Node.store("dst", I, Expr.add(Expr.add(Expr.var("b"), Expr.var("s")),
                                      Expr.add(Expr.var("a"), Expr.subgroup_size()))),
        Node.store("dst2", I, Expr.select(Expr.var("sb"), Expr.cast(D.U32, Expr.var("ai")), u(0))),
        Node.store("fdst", I, Expr.add(Expr.var("af"), Expr.var("sf")))])
    wide = [BufferDecl.read("src", 0, D.U64), BufferDecl.read("fsrc", 1, D.F64),
            BufferDecl.output("dst", 2, D.U64, 4096), BufferDecl.output("fdst", 3, D.F64, 4096),
            BufferDecl.output("idst", 4, D.I64, 4096)]
    v, f = Expr.load("src", I), Expr.load("fsrc", I)
    out["subgroups.wide"] = Program(wide, (64, 2, 1), [
        Node.let("i", _linear_gid(GRID_3D, (64, 2, 1))),
        Node.let("s", Expr.subgroup_shuffle(v, Expr.add(Expr.subgroup_local_id(), u(5)))),
        Node.let("sf", Expr.subgroup_shuffle(f, u(31))),
        Node.let("a", Expr.subgroup_add(v)),
        Node.let("ai", Expr.subgroup_add(Expr.cast(D.I64, v))),
        Node.let("af", Expr.subgroup_add(f)),
        Node.store("dst", I, Expr.add(Expr.var("s"), Expr.var("a"))),
        Node.store("idst", I, Expr.var("ai")),
        Node.store("fdst", I, Expr.add(Expr.var("af"), Expr.var("sf")))])
    return out


def all_programs() -> dict[str, Program]:
    return {**operator_programs(), **memory_programs(), **control_programs()}
