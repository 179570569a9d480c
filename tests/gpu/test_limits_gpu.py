"""Programs at the validator's limits run on the device: 48 KiB of workgroup memory, 600 buffers; a refused cache."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
from conftest import check, random_array

from vyre.driver.config import DispatchConfig
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.ir.layout import PORTABLE_WORKGROUP_BYTES, workgroup_bytes

pytestmark = pytest.mark.gpu

U8, U32 = DataType.U8, DataType.U32
WG = 256
GRID = 5


def _full_shared_program() -> Program:
    """Two u8 tiles whose padded layout is exactly 48 KiB; every byte is written from the input, then read."""
    sizes = (3, PORTABLE_WORKGROUP_BYTES - 4)
    lid, wid, gid = Expr.local_id(0), Expr.workgroup_id(0), Expr.invocation_id(0)
    body: list[Node] = []
    for t, n in enumerate(sizes):
        idx = Expr.add(Expr.mul(Expr.var(f"j{t}"), Expr.u32(WG)), lid)
        src = Expr.rem(Expr.add(idx, Expr.mul(wid, Expr.u32(13))), Expr.buf_len("inp"))
        body.append(Node.loop(f"j{t}", Expr.u32(0), Expr.u32(-(-n // WG)),
                              [Node.store(f"t{t}", idx, Expr.load("inp", src))]))
    body.append(Node.barrier())
    far = Expr.load("t1", Expr.rem(Expr.mul(gid, Expr.u32(7919)), Expr.u32(sizes[1])))
    last = Expr.load("t1", Expr.u32(sizes[1] - 1))
    body.append(Node.store("out", gid, Expr.add(Expr.add(far, last), Expr.load("t0", Expr.rem(lid, Expr.u32(3))))))
    return Program([BufferDecl.read("inp", 0, U32), BufferDecl.output("out", 1, U32, GRID * WG),
                    BufferDecl.workgroup("t0", sizes[0], U8), BufferDecl.workgroup("t1", sizes[1], U8)],
                   (WG, 1, 1), body, name="full_shared")


def test_exactly_48_kib_of_workgroup_memory_runs_and_matches_the_oracle(backend, rng) -> None:
    program = _full_shared_program()
    assert workgroup_bytes(program) == PORTABLE_WORKGROUP_BYTES
    inp = random_array(rng, U32, GRID * WG + 17)
    check(backend, program, [inp], DispatchConfig(grid=(GRID, 1, 1)))


def test_600_buffers_need_ptx_8_1_parameter_space_and_run(backend, rng) -> None:
    """600 pointers + the parameter block overflow the 4,352 bytes before PTX ISA 8.1 (driver 12.1+)."""
    n, count = 599, 100
    gid = Expr.invocation_id(0)
    value = Expr.load("b0", gid)
    for k in (1, 298, n - 1):
        value = Expr.bitxor(value, Expr.load(f"b{k}", gid))
    program = Program([*(BufferDecl.read(f"b{k}", k, U32) for k in range(n)), BufferDecl.output("out", n, U32, count)],
                      (64, 1, 1), [Node.store("out", gid, value)], name="six_hundred")
    check(backend, program, [random_array(rng, U32, count) for _ in range(n)])


def test_a_refused_cache_directory_is_not_used_and_kernels_still_run(monkeypatch, tmp_path: Path, rng) -> None:
    from vyre_cuda.backend import CudaBackend

    shared = tmp_path / "shared-cache"
    shared.mkdir()
    shared.chmod(0o777)  # another local user could plant kernels here
    monkeypatch.setenv("VYRE_CUDA_CACHE_DIR", str(shared))
    x = random_array(rng, U32, 1000)
    program = Program([BufferDecl.read("x", 0, U32), BufferDecl.output("o", 1, U32, 1000)], (128, 1, 1),
                      [Node.store("o", Expr.invocation_id(0),
                                  Expr.mul(Expr.load("x", Expr.invocation_id(0)), Expr.u32(2654435761)))],
                      name="refused_cache")
    be = CudaBackend()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check(be, program, [x])
        assert any("writable by group or others" in str(w.message) for w in caught)
    finally:
        be.shutdown()
    assert os.listdir(shared) == []  # nothing read from or written into it
