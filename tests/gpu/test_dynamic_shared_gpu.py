"""Workgroup memory over 48 KiB (dynamic shared memory, opted in at load) on the device.

Programs of 64 KiB, 100 KiB and the device's opt-in maximum, whose every output depends on every
workgroup word, against the oracle through each launch path: eager dispatch, cooperative, in
place on CuPy arrays, resident sequences captured as CUDA graphs (programmatic launches on and
off) and uncaptured. Then the 64-bit keys-only onesweep sort with 20 and 24 keys per invocation
(57,380 and 67,620 bytes) against numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import check, random_array

from tests.lib import expected as E
from vyre import lib
from vyre.driver.config import DispatchConfig
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.ir.layout import MAX_WORKGROUP_BYTES, PORTABLE_WORKGROUP_BYTES, workgroup_bytes
from vyre.lib._sort import onesweep
from vyre.reference import ReferenceBackend, run
from vyre.reference.ulp import assert_outputs_equal

pytestmark = pytest.mark.gpu
U32 = DataType.U32
WG, GRID = 256, 6
KIB = 1024


def wide(nbytes: int, groups: int = GRID) -> Program:
    """A ``nbytes`` u32 tile filled from ``inp`` (shifted per workgroup); invocation ``l`` folds the
    words ``l, l + 256, ...`` (together: every word) and one far word into ``out``."""
    n = nbytes // 4
    lid, wid, gid = Expr.local_id(0), Expr.workgroup_id(0), Expr.invocation_id(0)
    rounds = Expr.u32(-(-n // WG))
    idx = lambda var: Expr.add(Expr.mul(Expr.var(var), Expr.u32(WG)), lid)  # noqa: E731
    src = Expr.rem(Expr.add(idx("j"), Expr.mul(wid, Expr.u32(13))), Expr.buf_len("inp"))
    fold = Expr.add(Expr.mul(Expr.var("acc"), Expr.u32(31)), Expr.load("t", idx("k")))
    body = [
        Node.loop("j", Expr.u32(0), rounds, [Node.store("t", idx("j"), Expr.load("inp", src))]),
        Node.barrier(),
        Node.let("acc", Expr.u32(0)),
        Node.loop("k", Expr.u32(0), rounds, [Node.assign("acc", fold)]),
        Node.store("out", gid, Expr.bitxor(Expr.var("acc"),
                                           Expr.load("t", Expr.rem(Expr.mul(gid, Expr.u32(7919)), Expr.u32(n))))),
    ]
    return Program([BufferDecl.read("inp", 0, U32), BufferDecl.output("out", 1, U32, groups * WG),
                    BufferDecl.workgroup("t", n, U32)], (WG, 1, 1), body, name=f"wide_{nbytes}_{groups}")


def _optin(backend) -> int:
    return min(backend.runtime.limits.max_shared_per_block_optin, MAX_WORKGROUP_BYTES) // 4 * 4


SIZES = [64 * KIB, 100 * KIB, "optin"]


def _size(backend, size: int | str) -> int:
    nbytes = _optin(backend) if size == "optin" else int(size)
    if nbytes > _optin(backend):
        pytest.skip(f"the device opts in to {_optin(backend)} bytes per workgroup")
    return nbytes


@pytest.mark.parametrize("size", SIZES)
def test_eager_dispatch_matches_the_oracle(backend, rng, size) -> None:
    program = wide(_size(backend, size))
    assert workgroup_bytes(program) > PORTABLE_WORKGROUP_BYTES
    prep = backend.prepared(program)
    assert prep.kernel.dynamic_bytes == prep.plan.shared_bytes == workgroup_bytes(program)
    for n in (GRID * WG + 17, 5):
        check(backend, program, [random_array(rng, U32, n)], DispatchConfig(grid=(GRID, 1, 1)))


def test_coarsened_launches_pass_the_dynamic_bytes(backend, rng, monkeypatch) -> None:
    """``VYRE_CUDA_COARSEN=4``: each hardware workgroup runs 4 logical ones, re-zeroing the tile."""
    monkeypatch.setenv("VYRE_CUDA_COARSEN", "4")
    groups = 37  # the last hardware workgroup runs one logical workgroup
    program = wide(_size(backend, 100 * KIB), groups)
    config = DispatchConfig(grid=(groups, 1, 1))
    coarse = backend.for_grid(backend.prepared(program), config.grid)
    assert coarse.coarsen == 4 and coarse.plan.shared_bytes == 100 * KIB
    check(backend, program, [random_array(rng, U32, 5000)], config)


def test_cooperative_launch_counts_the_dynamic_bytes(backend, rng) -> None:
    if not backend.runtime.info.cooperative_launch:
        pytest.skip("no cooperative launches on this device")
    check(backend, wide(100 * KIB), [random_array(rng, U32, 999)], DispatchConfig(grid=(GRID, 1, 1), cooperative=True))


def test_in_place_on_cupy_arrays_matches_the_oracle(backend, rng) -> None:
    cupy = pytest.importorskip("cupy")
    program = wide(_size(backend, 100 * KIB))
    inp = random_array(rng, U32, 4097)
    config = DispatchConfig(grid=(GRID, 1, 1))
    (out,) = backend.dispatch(program, [cupy.asarray(inp)], config)
    assert isinstance(out, cupy.ndarray)
    assert_outputs_equal(run(program, [inp], config), [cupy.asnumpy(out)], program)


@pytest.mark.parametrize("graphs, pdl", [("1", "1"), ("1", "0"), ("0", "0")])
def test_resident_sequences_match_the_oracle(backend, rng, monkeypatch, graphs, pdl) -> None:
    """Two wide programs in a row over resident buffers, captured (and replayed) or not."""
    monkeypatch.setenv("VYRE_CUDA_GRAPHS", graphs)
    monkeypatch.setenv("VYRE_CUDA_PDL", pdl)
    ref = ReferenceBackend()
    data = [random_array(rng, U32, 3001), np.zeros(GRID * WG, np.uint32), np.zeros(GRID * WG, np.uint32)]
    handles = {}
    for be in (backend, ref):
        handles[be] = []
        for d in data:
            h = be.allocate_resident(d.nbytes)
            be.upload_resident(h, d)
            handles[be].append(h)
    config = DispatchConfig(grid=(GRID, 1, 1))

    def steps(be) -> list[tuple]:
        inp, a, b = handles[be]
        return [(wide(64 * KIB), [inp, a], config), (wide(100 * KIB), [a, b], config)]

    try:
        for _ in range(2):  # capture, then replay
            got = backend.dispatch_sequence(steps(backend), [(h, 0, h.nbytes) for h in handles[backend][1:]])
            want = ref.dispatch_sequence(steps(ref), [(h, 0, h.nbytes) for h in handles[ref][1:]])
            assert all(np.array_equal(x, y) for x, y in zip(got, want))
    finally:
        for h in handles[backend]:
            backend.free_resident(h)


@pytest.mark.parametrize("items", [20, 24])
@pytest.mark.parametrize("dtype", [np.uint64, np.float64])
def test_onesweep_sort_with_wider_tiles_matches_numpy(rng, monkeypatch, items, dtype) -> None:
    """``ONESWEEP_WIDE_ITEMS`` patched to 20 and 24 (a fresh backend: no plan of another width)."""
    from vyre_cuda.backend import CudaBackend

    monkeypatch.setattr(onesweep, "ONESWEEP_WIDE_ITEMS", items)
    monkeypatch.setattr(onesweep, "ONESWEEP_WIDE_LARGE_ITEMS", items)
    be = CudaBackend()
    try:
        for n in (1, 4097, (1 << 20) + 3, 1 << 23):
            keys = E.data(rng, dtype, n)
            keys[: n // 4] = keys[n // 4: 2 * (n // 4)]
            E.assert_same_bits(np.asarray(lib.sort(keys, backend=be)), keys[E.sort_order(keys)])
    finally:
        be.shutdown()
