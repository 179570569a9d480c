"""The programs the scale layer makes (per-block Dask kernels, per-device shards) assemble with ptxas."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ir.shard import plan_split, shard_program

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from codegen_support import assemble_all_targets, emit_for_targets, needs_ptxas  # noqa: E402

vdask = pytest.importorskip("vyre.dask")
U32, I32 = DataType.U32, DataType.I32


def shards() -> dict[str, Program]:
    gid, i = Expr.invocation_id(0), Expr.var("i")
    program = Program(
        [BufferDecl.read("a", 0, U32), BufferDecl.read_write("o", 1, U32), BufferDecl.output("bins", 2, U32, 16)],
        (128, 1, 1),
        [Node.let("i", gid),
         Node.if_(Expr.lt(i, Expr.buf_len("a")), [
             Node.store("o", i, Expr.add(Expr.load("a", i), Expr.add(i, Expr.workgroup_id(0)))),
             Node.let("old", Expr.atomic(AtomicOp.ADD, "bins", Expr.rem(i, Expr.u32(16)), Expr.u32(1)))])],
        name="shard")
    plan = plan_split(program, {"bins": "add"})
    return {f"shard_{offset}": shard_program(program, plan, offset, {"a": 10_000, "o": 10_000}, {})
            for offset in (0, 1280)}


@needs_ptxas
def test_scale_programs_assemble() -> None:
    programs = {"histogram": vdask.histogram_program(256), **shards()}
    for op in vdask.OPS:
        for dtype in (U32, I32):
            programs[f"reduce_{op}_{dtype.name}"] = vdask.reduce_program(op, dtype)
            programs[f"scan_{op}_{dtype.name}"] = vdask.scan_step_program(op, dtype)
    assert assemble_all_targets(emit_for_targets(programs)) == []
