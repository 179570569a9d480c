"""Programs whose workgroup-memory indices are bit fields ``(x >> s) & m`` of other values: of a
loaded value (written once), of an assigned variable (the field used in the statement that
computes it, and a ``let`` of it used after the variable changed), and of a loop counter. The
``cuda`` backend scales such an index inside the field (``Buffers._shared_address``); the CPU
tests check the PTX shape, the GPU tests the results against the oracle."""

from __future__ import annotations

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program

U32 = DataType.U32
WG = 64
COUNT = 256  # elements of each workgroup buffer: masks up to 255 stay in bounds, 511 does not
CASES = [(s, m) for s in (0, 1, 2, 3, 7, 13, 24, 31) for m in (3, 127, 255, 511)]
ELEMENTS = (DataType.U16, DataType.U32, DataType.U64)


def field(x: Expr, s: int, m: int) -> Expr:
    return Expr.bitand(Expr.shr(x, Expr.u32(s)), Expr.u32(m))


def field_program(element: DataType, s: int, m: int) -> Program:
    """Per invocation ``i`` of value ``v = a[i]``: a workgroup histogram of ``(v >> s) & m``
    (atomics), a table ``t[j] = 3j + 1`` read at the field of ``v``, of an assigned ``w`` before
    and after it changes, and of a loop counter; stores at the field of ``v`` whose value depends
    only on the index (so racing stores agree). ``out`` holds ``6 * WG`` words per workgroup."""
    i, lid, v, w = Expr.invocation_id(0), Expr.local_id(0), Expr.var("v"), Expr.var("w")
    base = Expr.mul(Expr.workgroup_id(0), Expr.u32(6 * WG))

    def out(k: int, value: Expr) -> Node:
        return Node.store("out", Expr.add(base, Expr.add(Expr.u32(k * WG), lid)), Expr.cast(U32, value))

    def table(index: Expr) -> Expr:
        return Expr.load("t", index)

    def add_acc(value: Expr) -> Expr:
        return Expr.add(Expr.var("acc"), Expr.cast(U32, value))

    body = [
        Node.let("v", Expr.load("a", i)),
        Node.let("w", Expr.bitxor(v, Expr.u32(0x9E3779B9))),
        Node.store("t", lid, Expr.cast(element.arith, Expr.add(Expr.mul(lid, Expr.u32(3)), Expr.u32(1)))),
        Node.store("t", Expr.add(lid, Expr.u32(WG)), Expr.cast(element.arith, Expr.add(Expr.mul(lid, Expr.u32(3)),
                                                                                  Expr.u32(3 * WG + 1)))),
        Node.let("old", Expr.atomic(AtomicOp.ADD, "h", field(v, s, m), Expr.u32(1))),  # the old count: unused
        Node.barrier(),
        out(0, table(field(v, s, m))),
        Node.let("d", field(w, s, m)),  # of w as it is now ...
        Node.assign("w", Expr.add(w, Expr.u32(0x01234567))),  # ... then w changes
        out(1, table(Expr.var("d"))),  # d: the old w's field
        out(2, table(field(w, s, m))),  # the new w's field, in one statement
        Node.let("acc", Expr.u32(0)),
        Node.loop("j", Expr.u32(0), Expr.u32(5), [
            Node.assign("acc", add_acc(table(field(Expr.add(Expr.var("j"), v), s, m)))),
            Node.assign("acc", add_acc(table(field(Expr.var("j"), s, m))))]),
        out(3, Expr.var("acc")),
        Node.barrier(),
        Node.store("s2", field(v, s, m), Expr.cast(element.arith, Expr.add(Expr.mul(field(v, s, m), Expr.u32(7)),
                                                                    Expr.u32(1)))),
        Node.barrier(),
        out(4, Expr.load("h", lid)),
        out(5, Expr.load("s2", lid)),
    ]
    buffers = [BufferDecl.read("a", 0, U32), BufferDecl.read_write("out", 1, U32),
               BufferDecl.workgroup("t", COUNT, element), BufferDecl.workgroup("s2", COUNT, element),
               BufferDecl.workgroup("h", COUNT, U32)]
    return Program(buffers, (WG, 1, 1), body, name=f"field_{element.name.lower()}_s{s}_m{m}")
