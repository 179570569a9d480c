"""Thread coarsening along x on the device, judged by the oracle (``vyre_cuda._dispatch.coarsening``).

``VYRE_CUDA_COARSEN=<K>`` (the test hook) coarsens every non-cooperative launch, however small,
so tails (grid x not a multiple of K, grid x < K), barriers with workgroup memory, returns inside
loops, atomics and 2-D grids all run coarsened, through ``dispatch``, ``dispatch_resident``,
pipelines and sequences (graphs on and off). Every result must equal the oracle bit for bit.
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import check, random_array

from vyre.driver.config import DispatchConfig, resolve_grid
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.reference import ReferenceBackend, run
from vyre.reference.ulp import assert_outputs_equal
from vyre_cuda._dispatch.coarsening import AUTO_MAX_SHARED_BYTES, ENV

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from catalogue import GRID_3D, all_programs  # noqa: E402

pytestmark = pytest.mark.gpu

U32, F32 = DataType.U32, DataType.F32
u = Expr.u32
I, L = Expr.var("i"), Expr.var("l")
TAIL_GRIDS = (1, 2, 3, 4, 5, 7, 8, 9, 31, 33, 100, 203)


@pytest.fixture
def coarsen(monkeypatch):
    """Force a factor: ``coarsen(k)``; the default forces 4."""
    def force(k: int) -> None:
        monkeypatch.setenv(ENV, str(k))

    force(4)
    return force


def factor_used(backend, program: Program, config: DispatchConfig | None, counts: dict[str, int]) -> int:
    """The coarsening factor the backend picks for this dispatch now."""
    prep = backend.prepared(program, config)
    return backend.for_grid(prep, resolve_grid(program, config, counts), config).coarsen


def _seed() -> int:
    return struct.unpack("<I", os.urandom(4))[0]


# ---- programs -------------------------------------------------------------------------------------
def ids_program(wg: tuple[int, int, int], grid: tuple[int, int, int], count: int) -> Program:
    """``out[linear gid] = mix(invocation, workgroup and local ids) | 1`` (0 marks "never written")."""
    nx, ny = grid[0] * wg[0], grid[1] * wg[1]
    g = [Expr.invocation_id(a) for a in range(3)]
    index = Expr.add(Expr.mul(Expr.add(Expr.mul(g[2], u(ny)), g[1]), u(nx)), g[0])
    value = u(1)
    for e in (*g, *(Expr.workgroup_id(a) for a in range(3)), *(Expr.local_id(a) for a in range(3))):
        value = Expr.bitxor(Expr.mul(value, u(31)), e)
    return Program([BufferDecl.output("out", 0, U32, count)], wg,
                   [Node.store("out", index, Expr.bitor(value, u(1)))], name="ids")


def reduction_program(wg: int = 64) -> Program:
    """Per workgroup: accumulate into zeroed workgroup memory, count with a workgroup atomic, tree-sum
    with barriers in a uniform loop, lane 0 writes the sum and the count."""
    steps = wg.bit_length() - 1
    stride = Expr.shr(u(wg // 2), Expr.var("s"))
    return Program(
        [BufferDecl.read("src", 0, U32), BufferDecl.output("sums", 1, U32, 512), BufferDecl.output("cnt", 2, U32, 512),
         BufferDecl.workgroup("tile", wg, U32), BufferDecl.workgroup("n", 1, U32)],
        (wg, 1, 1),
        [Node.let("i", Expr.invocation_id(0)), Node.let("l", Expr.local_id(0)),
         Node.store("tile", L, Expr.add(Expr.load("tile", L), Expr.load("src", I))),  # needs the zeroing
         Node.let("old", Expr.atomic(AtomicOp.ADD, "n", u(0), u(1))),
         Node.barrier(),
         Node.loop("s", u(0), u(steps), [
             Node.if_(Expr.lt(L, stride), [Node.store("tile", L, Expr.add(Expr.load("tile", L),
                                                                          Expr.load("tile", Expr.add(L, stride))))]),
             Node.barrier()]),
         Node.if_(Expr.eq(L, u(0)), [Node.store("sums", Expr.workgroup_id(0), Expr.load("tile", u(0))),
                                     Node.store("cnt", Expr.workgroup_id(0), Expr.load("n", u(0)))])],
        name="reduction")


def loop_return_program() -> Program:
    """A varying return inside a loop with varying bounds; the store after the loop is skipped then."""
    acc = Expr.var("acc")
    return Program(
        [BufferDecl.read("src", 0, U32), BufferDecl.output("out", 1, U32, 4096)], (64, 1, 1),
        [Node.let("i", Expr.invocation_id(0)), Node.let("acc", u(1)),
         Node.loop("k", u(0), Expr.rem(Expr.load("src", I), u(9)), [
             Node.assign("acc", Expr.add(acc, Expr.mul(Expr.var("k"), I))),
             Node.if_(Expr.gt(acc, u(5000)), [Node.return_()])]),
         Node.store("out", I, acc)],
        name="loop_return")


def uniform_return_program() -> Program:
    """Every third workgroup returns (uniformly), the others stage through workgroup memory."""
    return Program(
        [BufferDecl.read("src", 0, U32), BufferDecl.output("out", 1, U32, 4096), BufferDecl.workgroup("t", 64, U32)],
        (64, 1, 1),
        [Node.let("i", Expr.invocation_id(0)), Node.let("l", Expr.local_id(0)),
         Node.if_(Expr.eq(Expr.rem(Expr.workgroup_id(0), u(3)), u(1)), [Node.return_()]),
         Node.store("t", L, Expr.add(Expr.load("t", L), Expr.load("src", I))),
         Node.barrier(),
         Node.store("out", I, Expr.add(Expr.load("t", Expr.sub(u(63), L)), u(1)))],
        name="uniform_return")


def atomics_program() -> Program:
    """Order-independent atomics: a global histogram, max, xor, and a workgroup sum copied out."""
    v = Expr.load("src", I)
    return Program(
        [BufferDecl.read("src", 0, U32), BufferDecl.output("hist", 1, U32, 16), BufferDecl.output("mx", 2, U32, 1),
         BufferDecl.output("xr", 3, U32, 4), BufferDecl.output("wsum", 4, U32, 256), BufferDecl.workgroup("w", 1, U32)],
        (32, 1, 1),
        [Node.let("i", Expr.invocation_id(0)),
         Node.let("a", Expr.atomic(AtomicOp.ADD, "hist", Expr.rem(v, u(16)), u(1))),
         Node.let("b", Expr.atomic(AtomicOp.MAX, "mx", u(0), v)),
         Node.let("c", Expr.atomic(AtomicOp.XOR, "xr", Expr.rem(I, u(4)), v)),
         Node.let("d", Expr.atomic(AtomicOp.ADD, "w", u(0), v)),
         Node.barrier(),
         Node.if_(Expr.eq(Expr.local_id(0), u(0)), [Node.store("wsum", Expr.workgroup_id(0), Expr.load("w", u(0)))])],
        name="atomics")


def step_program(k: int) -> Program:
    """``x = x * (2k + 3) + y``, over resident buffers."""
    return Program([BufferDecl.read_write("x", 0, U32), BufferDecl.read("y", 1, U32)], (64, 1, 1),
                   [Node.let("i", Expr.invocation_id(0)),
                    Node.store("x", I, Expr.add(Expr.mul(Expr.load("x", I), u(2 * k + 3)), Expr.load("y", I)))],
                   name=f"step{k}")


def catalogue_inputs(program: Program, rng: np.random.Generator) -> list[np.ndarray]:
    """Inputs for a catalogue program: runtime-sized buffers of 1100 elements, declared ones full.

    1100 is past every output (1024 or 4096 words are written by at most 1024 invocations...), so
    ``mem.read_write.*`` reads ``dst[buf_len(src)]`` out of bounds instead of racing with its writer.
    """
    return [random_array(rng, b.dtype, b.count or 1100) for b in program.inputs]


def catalogue_config(program: Program) -> DispatchConfig | None:
    wx, wy, wz = program.workgroup_size
    return DispatchConfig(grid=GRID_3D) if wy * wz > 1 else None


def _same_bytes(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x.view(np.uint8), y.view(np.uint8)) for x, y in zip(a, b))


# ---- dispatch: the catalogue and generated programs --------------------------------------------------
#: catalogue programs whose result depends on the order invocations run (atomic old values, the
#: overlapping stores of loop_return): they are only assembly tests
RACY = ("atomic.", "loop_return")


@pytest.mark.parametrize("k", [4, 2, 8])
def test_catalogue_coarsened_is_bit_identical_to_plain(backend, rng, coarsen, k) -> None:
    """Coarsened against the plain kernel byte for byte (the plain kernel's own check against the
    oracle, ULP-bounded ops included, is tests/gpu/test_cuda_ops.py), and the oracle where exact."""
    programs = {n: p for n, p in all_programs().items() if not n.startswith(RACY)}
    if k != 4:
        programs = dict(list(programs.items())[::9])
    failures = []
    for name, program in programs.items():
        if "subgroup" in name and not backend.supports_subgroup_ops():
            continue
        inputs, config = catalogue_inputs(program, rng), catalogue_config(program)
        coarsen(0)
        plain = backend.dispatch(program, inputs, config)
        coarsen(k)
        coarse = backend.dispatch(program, inputs, config)
        if not _same_bytes(plain, coarse):
            failures.append(f"{name}: coarsened x{k} differs from the plain kernel")
    assert not failures, f"{len(failures)} of {len(programs)} differ:\n" + "\n".join(failures[:10])
    assert factor_used(backend, all_programs()["if_else"], None, {"src": 1100, "dst": 4096}) == k
    control = {n: p for n, p in programs.items() if n.startswith(("if_else", "ids.", "mem.", "add.", "select."))}
    for program in control.values():
        check(backend, program, catalogue_inputs(program, rng), catalogue_config(program))


@pytest.mark.parametrize("subgroups", [False, True], ids=["plain", "subgroups"])
def test_generated_programs_coarsened(backend, coarsen, subgroups) -> None:
    generate = pytest.importorskip("vyre.ir.generate")
    base = _seed()
    failures = []
    for n in range(150):
        seed = (base + n) & 0xFFFFFFFF
        case = generate.generate_case(seed, subgroups=subgroups)
        inputs = generate.random_inputs(case.program, seed ^ 0x5EED)
        try:
            assert_outputs_equal(run(case.program, inputs, case.config),
                                 backend.dispatch(case.program, inputs, case.config), case.program)
        except Exception as exc:  # noqa: BLE001 - collected and reported with the seed
            failures.append(f"seed {seed}: {type(exc).__name__}: {str(exc)[:300]}")
    assert not failures, f"{len(failures)} of 150 generated programs differ:\n" + "\n".join(failures[:10])


# ---- tails, workgroup memory, returns, atomics, 2-D grids ----------------------------------------------
@pytest.mark.parametrize("k", [4, 8])
def test_tail_grids_run_exactly_the_logical_workgroups(backend, coarsen, k) -> None:
    coarsen(k)
    for gx in TAIL_GRIDS:
        config = DispatchConfig(grid=(gx, 1, 1))
        program = ids_program((32, 1, 1), (gx, 1, 1), 32 * 216)  # room past the grid: stray writes show
        out = check(backend, program, [], config)[0]
        assert np.count_nonzero(out) == 32 * gx
        assert factor_used(backend, program, config, {"out": out.size}) == k


def test_workgroup_memory_is_zeroed_for_each_logical_workgroup(backend, rng, coarsen) -> None:
    program = reduction_program()
    for groups in (1, 3, 4, 5, 9, 64, 301):
        src = random_array(rng, U32, 64 * groups - (groups % 7))
        sums, cnt = check(backend, program, [src], DispatchConfig(grid=(groups, 1, 1)))
        assert np.all(cnt[:groups] == 64) and not cnt[groups:].any()


@pytest.mark.parametrize("program", [loop_return_program, uniform_return_program], ids=lambda f: f.__name__)
def test_returns_end_only_their_logical_invocation(backend, rng, coarsen, program) -> None:
    p = program()
    for n in (1, 63, 64, 200, 1000, 4096):
        check(backend, p, [random_array(rng, U32, n)], DispatchConfig(elements=n))


def test_atomics(backend, rng, coarsen) -> None:
    program = atomics_program()
    for n in (5, 32, 1000, 8000):
        check(backend, program, [random_array(rng, U32, n)], DispatchConfig(elements=n))


@pytest.mark.parametrize("wg, grid", [((8, 4, 1), (9, 3, 2)), ((4, 4, 4), (5, 2, 3)), ((32, 2, 1), (3, 5, 1))])
def test_two_and_three_dimensional_grids(backend, coarsen, wg, grid) -> None:
    total = grid[0] * grid[1] * grid[2] * wg[0] * wg[1] * wg[2]
    out = check(backend, ids_program(wg, grid, total + 64), [], DispatchConfig(grid=grid))[0]
    assert np.count_nonzero(out) == total


def test_cooperative_launches_are_not_coarsened(backend, coarsen) -> None:
    if not backend.supports_cooperative():
        pytest.skip("the device has no cooperative launches")
    config = DispatchConfig(grid=(3, 1, 1), cooperative=True)
    program = ids_program((32, 1, 1), (3, 1, 1), 256)
    assert factor_used(backend, program, config, {"out": 256}) == 1
    check(backend, program, [], config)


# ---- the automatic choice ----------------------------------------------------------------------------
def test_auto_coarsens_large_grids_and_the_switch_turns_it_off(backend, rng, monkeypatch) -> None:
    n = 4 * 8 * backend.info.sm_count * 256 * 2 + 77
    program = Program([BufferDecl.read("a", 0, U32), BufferDecl.read("b", 1, U32), BufferDecl.output("c", 2, U32, n)],
                      (256, 1, 1), [Node.let("i", Expr.invocation_id(0)),
                                    Node.store("c", I, Expr.bitxor(Expr.load("a", I), Expr.load("b", I)))], name="xor")
    a, b = random_array(rng, U32, n), random_array(rng, U32, n)
    counts = {"a": n, "b": n, "c": n}
    for setting, expected in ((None, 4), ("0", 1), ("auto", 4)):
        if setting is None:
            monkeypatch.delenv(ENV, raising=False)
        else:
            monkeypatch.setenv(ENV, setting)
        assert factor_used(backend, program, None, counts) == expected
        assert np.array_equal(backend.dispatch(program, [a, b])[0], a ^ b)
    small = {"a": 1000, "b": 1000, "c": 1000}
    monkeypatch.delenv(ENV, raising=False)
    assert factor_used(backend, program, None, small) == 1


@pytest.mark.parametrize("words", [256, 6144])
def test_auto_leaves_workgroups_with_much_workgroup_memory_uncoarsened(backend, rng, monkeypatch, words) -> None:
    """A grid large enough for auto; the program rotates values through ``words`` u32 of workgroup
    memory behind a barrier. 1 KiB: coarsened x4; 24 KiB (over ``AUTO_MAX_SHARED_BYTES``): not.
    ``VYRE_CUDA_COARSEN=4`` coarsens both. Every result equals the oracle."""
    n = 4 * 8 * backend.info.sm_count * 256 * 2
    nxt = Expr.rem(Expr.add(L, u(1)), u(256))
    program = Program([BufferDecl.read("a", 0, U32), BufferDecl.output("c", 1, U32, n),
                       BufferDecl.workgroup("w", words, U32)], (256, 1, 1),
                      [Node.let("i", Expr.invocation_id(0)), Node.let("l", Expr.local_id(0)),
                       Node.store("w", L, Expr.load("a", I)), Node.barrier(),
                       Node.store("c", I, Expr.load("w", nxt))], name=f"rotate{words}")
    a = random_array(rng, U32, n)
    for setting, expected in ((None, 4 if words * 4 <= AUTO_MAX_SHARED_BYTES else 1), ("4", 4)):
        if setting is None:
            monkeypatch.delenv(ENV, raising=False)
        else:
            monkeypatch.setenv(ENV, setting)
        assert factor_used(backend, program, None, {"a": n, "c": n}) == expected
        (c,) = check(backend, program, [a])
        assert np.array_equal(c, a.reshape(-1, 256)[:, np.r_[1:256, 0]].ravel())


# ---- resident, pipelines, sequences and graphs -----------------------------------------------------------
def _upload(be, arrays: list[np.ndarray]) -> list:
    handles = []
    for a in arrays:
        h = be.allocate_resident(max(a.nbytes, 4))
        be.upload_resident(h, a)
        handles.append(h)
    return handles


def _resident_outputs(be, program: Program, handles: list) -> list[np.ndarray]:
    decls = [b for b in program.buffers if not b.is_workgroup]
    return [be.download_resident(h).view(d.dtype.np_dtype) for d, h in zip(decls, handles) if d.access.writable]


@pytest.mark.parametrize("program", [reduction_program, loop_return_program, atomics_program],
                         ids=lambda f: f.__name__)
def test_dispatch_resident_and_pipelines(backend, rng, coarsen, program) -> None:
    p = program()
    src = random_array(rng, U32, 64 * 37 + 5)
    decls = [b for b in p.buffers if not b.is_workgroup]
    arrays = [src if d.name == "src" else np.zeros(d.count, d.dtype.np_dtype) for d in decls]
    config = DispatchConfig(grid=(37, 1, 1)) if p.name == "reduction" else None
    expected = run(p, [src], config)
    ref = ReferenceBackend()
    ref_handles = _upload(ref, arrays)
    ref.dispatch_resident(p, ref_handles, config)
    handles = _upload(backend, arrays)
    try:
        for _ in range(2):  # the second call takes the memoised fast path
            backend.dispatch_resident(p, handles, config)
            got = _resident_outputs(backend, p, handles)
            want = _resident_outputs(ref, p, ref_handles)
            for g, w in zip(got, want):
                assert np.array_equal(g.view(np.uint8), w.view(np.uint8))
        with backend.compile(p, config) as pipe:
            assert_outputs_equal(expected, pipe.dispatch([src]), p)
            for outs in pipe.dispatch_batch([[src], [src]]):
                assert_outputs_equal(expected, outs, p)
            for _ in range(2):
                pipe.dispatch_resident(handles)
                for g, w in zip(_resident_outputs(backend, p, handles), want):
                    assert np.array_equal(g.view(np.uint8), w.view(np.uint8))
    finally:
        for h in handles:
            backend.free_resident(h)


@pytest.mark.parametrize("graphs", ["1", "0"])
def test_sequences_and_graphs(backend, rng, coarsen, monkeypatch, graphs) -> None:
    monkeypatch.setenv("VYRE_CUDA_GRAPHS", graphs)
    n = 64 * 13 + 9
    data = [random_array(rng, U32, n), random_array(rng, U32, n)]
    ref = ReferenceBackend()
    cuda_h, ref_h = _upload(backend, data), _upload(ref, data)
    try:
        def steps(h):
            return [(step_program(k % 3), h, DispatchConfig(grid=(3, 1, 1)) if k == 4 else None) for k in range(6)]

        for _ in range(3):  # capture, then replays
            out = backend.dispatch_sequence(steps(cuda_h), [(cuda_h[0], 0, 4 * n)])
            want = ref.dispatch_sequence(steps(ref_h), [(ref_h[0], 0, 4 * n)])
            assert np.array_equal(out[0], want[0])
        out = backend.dispatch_repeated(steps(cuda_h)[:1], steps(cuda_h)[1:3], 5, [(cuda_h[0], 0, 4 * n)])
        want = ref.dispatch_repeated(steps(ref_h)[:1], steps(ref_h)[1:3], 5, [(ref_h[0], 0, 4 * n)])
        assert np.array_equal(out[0], want[0])
    finally:
        for h in cuda_h:
            backend.free_resident(h)


def test_a_graph_captured_for_one_factor_is_not_replayed_for_another(backend, rng, monkeypatch) -> None:
    monkeypatch.setenv("VYRE_CUDA_GRAPHS", "1")
    program = loop_return_program()
    src = random_array(rng, U32, 3000)
    expected = run(program, [src])
    with backend.compile(program) as pipe:
        captures = []
        for setting in ("4", "0", "4", "2"):
            monkeypatch.setenv(ENV, setting)
            before = backend.metrics()["cuda_graph_captures"]
            assert_outputs_equal(expected, pipe.dispatch([src]), program)
            captures.append(backend.metrics()["cuda_graph_captures"] - before)
        assert captures == [1, 1, 0, 1]  # one graph per factor, reused when the factor comes back
