"""The compile-time bound: every kernel emit_ptx returns assembles in seconds; bigger ones are refused."""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path

import pytest
from codegen_support import PTXAS, needs_ptxas

from tests.stopwatch import stopwatch
from vyre.driver.errors import UnsupportedFeature, ValidationError
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre_cuda import emit_ptx
from vyre_cuda._codegen.limits import MAX_INSTRUCTIONS, instruction_count

U32 = DataType.U32
GID = Expr.invocation_id(0)


def let_chain(n: int) -> Program:
    """The issue's shape: ``n`` lets, all live until the end (ptxas took 84 s for 20,000)."""
    body = [Node.let(f"v{k}", Expr.load("x", Expr.add(GID, Expr.u32(k)))) for k in range(n)]
    body += [Node.store("out", Expr.add(GID, Expr.u32(k)), Expr.var(f"v{k}")) for k in range(n)]
    return Program([BufferDecl.read("x", 0, U32), BufferDecl.read_write("out", 1, U32)], (64, 1, 1), body)


def loops(n: int) -> Program:
    """The costliest shape per instruction measured: many loops with a guarded store each."""
    body = [Node.loop(f"j{k}", Expr.u32(0), Expr.load("x", Expr.u32(k)), [Node.store("out", Expr.var(f"j{k}"),
                                                                                      Expr.u32(k))])
            for k in range(n)]
    return Program([BufferDecl.read("x", 0, U32), BufferDecl.read_write("out", 1, U32)], (64, 1, 1), body)


def atomics(n: int) -> Program:
    body = [Node.let(f"t{k}", Expr.atomic(AtomicOp.COMPARE_EXCHANGE, "out", Expr.add(GID, Expr.u32(k)),
                                          Expr.u32(k), Expr.u32(k + 1))) for k in range(n)]
    body += [Node.store("out", Expr.add(GID, Expr.u32(k)), Expr.var(f"t{k}")) for k in range(n)]
    return Program([BufferDecl.read("x", 0, U32), BufferDecl.read_write("out", 1, U32)], (64, 1, 1), body)


def largest_accepted(build) -> tuple[int, str]:
    """The largest ``n`` whose ``build(n)`` still emits, with its PTX (bisection)."""
    lo, hi = 1, 2048
    while lo < hi:
        mid = (lo + hi + 1) // 2
        try:
            emit_ptx(build(mid), sm="90")
            lo = mid
        except UnsupportedFeature:
            hi = mid - 1
    return lo, emit_ptx(build(lo), sm="90")


def test_long_let_chains_are_refused_quickly() -> None:
    with stopwatch() as watch:
        with pytest.raises(ValidationError) as too_many_nodes:  # 200,000 nodes: over the validator's MAX_NODES
            emit_ptx(let_chain(20_000), sm="90")
        assert too_many_nodes.value.codes == ("program_too_large",)
        with pytest.raises(UnsupportedFeature) as too_big:  # 50,000 nodes: valid, but too big to compile quickly
            emit_ptx(let_chain(5_000), sm="90")
    assert watch.seconds < 10
    message = str(too_big.value)
    assert f"more than {MAX_INSTRUCTIONS} PTX instructions" in message and "Fix:" in message


def test_the_bound_is_on_instructions() -> None:
    n, ptx = largest_accepted(let_chain)
    body = [line for line in ptx.splitlines() if line.startswith("\t")]
    assert MAX_INSTRUCTIONS - 16 <= instruction_count(body) <= MAX_INSTRUCTIONS + 32  # + prologue
    with pytest.raises(UnsupportedFeature):
        emit_ptx(let_chain(n + 1), sm="90")


@needs_ptxas
@pytest.mark.parametrize("build", [loops, atomics], ids=["loops", "atomics"])
def test_largest_accepted_kernel_assembles_in_seconds(build, tmp_path: Path) -> None:
    _, ptx = largest_accepted(build)
    path = tmp_path / "big.ptx"
    path.write_text(ptx)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([PTXAS, "--gpu-name", "sm_90", str(path), "-o", str(tmp_path / "big.cubin")], check=True,
                   capture_output=True, timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    assert cpu < 20, f"ptxas took {cpu:.1f} s of CPU for the largest accepted kernel"  # measured: 1.1 s, 0.5 s
