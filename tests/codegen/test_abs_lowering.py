"""I32 ``abs`` is lowered so that ptxas cannot take its result to be non-negative.

abs(MIN) is MIN on every backend (the oracle's semantics). ptxas 13.0 treats ``abs.s32`` - and the
``(x ^ m) - m`` idiom, which it recognises as abs - as never negative: ``rem(abs(MIN), d)`` came
out positive on an H100 (the generated-program tests found it), and ``abs(MIN) < 0`` and
``abs(MIN) >> 31`` fold to constants in its sm_90 code. The emitter writes ``(x ^ m) + (m & 1)``
with an unsigned add instead; ``tests/gpu/test_jit_patterns.py`` runs those shapes on a device.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre_cuda import emit_ptx

I32 = DataType.I32


def _program(value: Expr) -> Program:
    i = Expr.var("i")
    return Program([BufferDecl.read("x", 0, I32), BufferDecl.read("y", 1, I32), BufferDecl.output("o", 2, I32, 64)],
                   (64, 1, 1), [Node.let("i", Expr.invocation_id(0)), Node.store("o", i, value)], name="abs_shape")


X, Y = Expr.load("x", Expr.var("i")), Expr.load("y", Expr.var("i"))
SHAPES = {"rem_abs": Expr.rem(Expr.abs(X), Y), "shr_abs": Expr.shr(Expr.abs(X), Expr.u32(31)),
          "abs_below_zero": Expr.select(Expr.lt(Expr.abs(X), Expr.i32(0)), Expr.i32(1), Expr.i32(0))}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_i32_abs_avoids_the_forms_ptxas_takes_as_non_negative(name: str) -> None:
    ptx = emit_ptx(_program(SHAPES[name]))
    assert "abs.s32" not in ptx
    body = ptx.split("griddepcontrol.wait;")[-1]
    assert "shr.s32" in body and "xor.b32" in body and "and.b32" in body and "add.u32" in body


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_the_abs_shapes_assemble(name: str, tmp_path) -> None:
    path = tmp_path / f"{name}.ptx"
    path.write_text(emit_ptx(_program(SHAPES[name])))
    done = subprocess.run(["ptxas", "--gpu-name", "sm_90", "-o", str(tmp_path / "out.cubin"), str(path)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
