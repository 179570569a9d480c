"""The default grid: ``elements``, else the largest read / read_write / output buffer (not uniform)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vyre import DispatchConfig
from vyre.driver.config import default_elements, resolve_grid
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program, parse
from vyre.reference import run

U32 = DataType.U32
I = Expr.invocation_id(0)
ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(20261126)


def test_a_histogram_without_elements_counts_every_value():
    program = parse((ROOT / "examples" / "histogram.vyre").read_text())
    data = RNG.integers(0, 2**32, 10_000, dtype=np.uint32)
    (bins,) = run(program, [data])
    assert int(bins.sum()) == data.size
    assert np.array_equal(bins, np.bincount(data & 255, minlength=256).astype(np.uint32))


def test_the_largest_of_inputs_and_outputs_sets_the_grid_and_uniforms_do_not():
    p = Program([BufferDecl.read("a", 0, U32), BufferDecl.uniform("k", 1, U32, 4096),
                 BufferDecl.read_write("b", 2, U32), BufferDecl.output("c", 3, U32, 300)], (64, 1, 1),
                [Node.let("old", Expr.atomic(AtomicOp.ADD, "c", Expr.u32(0), Expr.u32(1)))])
    counts = {"a": 1000, "k": 4096, "b": 10, "c": 300}
    assert default_elements(p, counts) == 1000
    assert resolve_grid(p, None, counts) == (16, 1, 1)  # ceil(1000 / 64); the 4096 uniform words do not count
    assert resolve_grid(p, None, {**counts, "a": 5, "b": 2000}) == (32, 1, 1)
    assert resolve_grid(p, None, {**counts, "a": 0, "b": 0}) == (5, 1, 1)  # the output alone
    assert resolve_grid(p, DispatchConfig(elements=7), counts) == (1, 1, 1)
    (c,) = run(p, [RNG.integers(0, 9, 1000, dtype=np.uint32), RNG.integers(0, 9, 4096, dtype=np.uint32),
                   np.zeros(10, np.uint32)])[1:]
    assert c[0] == 16 * 64  # every invocation of the 16 workgroups ran


@pytest.mark.parametrize("n", [0, 1, 255, 256, 257])
def test_input_larger_than_output_sizes_the_grid_at_the_edges(n):
    p = Program([BufferDecl.read("a", 0, U32), BufferDecl.output("count", 1, U32, 1)], (256, 1, 1),
                [Node.if_(Expr.lt(I, Expr.buf_len("a")),
                          Node.let("old", Expr.atomic(AtomicOp.ADD, "count", Expr.u32(0), Expr.load("a", I))))])
    data = RNG.integers(0, 1000, n, dtype=np.uint32)
    (count,) = run(p, [data])
    assert int(count[0]) == int(data.sum())


def test_cli_histogram_without_elements_counts_everything():
    done = subprocess.run([sys.executable, "-m", "vyre", "run", str(ROOT / "examples" / "histogram.vyre"),
                           "-i", "data=@random:10000", "--backend", "reference"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "sum=10000 " in done.stdout, done.stdout
