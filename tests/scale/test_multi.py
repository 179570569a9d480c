"""``vyre.lib.multi.map`` on several oracle backends, judged by one-device runs of the oracle."""

from __future__ import annotations

import numpy as np
import pytest

from vyre import DispatchConfig
from vyre.driver.errors import InvalidProgram
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.lib import multi
from vyre.reference import run

U32, I32, F32 = DataType.U32, DataType.I32, DataType.F32
gid, lid, wid = Expr.invocation_id(0), Expr.local_id(0), Expr.workgroup_id(0)
i = Expr.var("i")
U32_EDGES = np.array([0, 1, 2, 31, 32, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF], np.uint32)
SIZES = [0, 1, 63, 64, 65, 1000, 4099]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng()


def oracles(k: int) -> list[str]:
    return ["reference"] * k


def u32(rng: np.random.Generator, n: int) -> np.ndarray:
    data = rng.integers(0, 2**32, n, dtype=np.uint32)
    data[: min(n, U32_EDGES.size)] = U32_EDGES[: min(n, U32_EDGES.size)]
    return data


def xor_program(wg: int = 64) -> Program:
    return Program([BufferDecl.read_write("a", 0, U32), BufferDecl.read("b", 1, U32)], (wg, 1, 1),
                   [Node.store("a", gid, Expr.bitxor(Expr.load("a", gid), Expr.load("b", gid)))], name="xor")


def global_ids_program() -> Program:
    """Uses the x id, the workgroup id and buf_len as values: only right if shards are rewritten."""
    n = Expr.buf_len("a")
    return Program(
        [BufferDecl.read("a", 0, U32), BufferDecl.read("table", 1, U32), BufferDecl.uniform("k", 2, U32, 1),
         BufferDecl.read_write("tag", 3, U32)],
        (32, 1, 1),
        [Node.let("i", gid),
         Node.if_(Expr.lt(i, n), [
             Node.let("t", Expr.load("table", Expr.rem(Expr.add(Expr.load("a", i), i), Expr.buf_len("table")))),
             Node.store("tag", i, Expr.add(Expr.mul(wid, Expr.u32(1000)),
                                           Expr.add(lid, Expr.bitxor(Expr.var("t"), Expr.sub(n, i))))),
         ]),
         Node.store("tag", gid, Expr.add(Expr.load("tag", gid), Expr.load("k", Expr.u32(0))))],
        name="global_ids")


def histogram_program(bins: int = 256, dtype: DataType = U32, op: AtomicOp = AtomicOp.ADD) -> Program:
    return Program(
        [BufferDecl.read("data", 0, U32), BufferDecl.output("bins", 1, dtype, bins),
         BufferDecl.workgroup("local", bins, dtype)],
        (bins, 1, 1),
        [Node.if_(Expr.lt(gid, Expr.buf_len("data")), [
            Node.let("v", Expr.load("data", gid)),
            Node.let("old", Expr.atomic(op, "local", Expr.rem(Expr.var("v"), Expr.u32(bins)),
                                        Expr.cast(dtype, Expr.var("v")) if dtype is I32 else Expr.u32(1))),
         ]),
         Node.barrier(),
         Node.let("old2", Expr.atomic(op, "bins", lid, Expr.load("local", lid)))],
        name="histogram")


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_xor_split_equals_one_device(rng, n: int, k: int) -> None:
    a, b = u32(rng, n), u32(rng, n)
    stats: dict = {}
    (out,) = multi.map(xor_program(), [a, b], devices=oracles(k), stats=stats)
    assert out.dtype == np.uint32 and np.array_equal(out, a ^ b)
    assert len(stats["devices"]) == max(1, min(k, -(-n // 64)))


@pytest.mark.parametrize("n", [1, 31, 32, 100, 1025])
def test_global_ids_buf_len_and_replicated_table(rng, n: int) -> None:
    program = global_ids_program()
    inputs = [u32(rng, n), u32(rng, 37), np.array([rng.integers(1, 2**32)], np.uint32), u32(rng, n)]
    expected = run(program, inputs)
    for k in (2, 3, 4):
        actual = multi.map(program, inputs, devices=oracles(k))
        for e, a in zip(expected, actual):
            assert np.array_equal(e, a), (n, k)


def test_read_write_with_declared_count_shorter_than_input(rng) -> None:
    program = Program([BufferDecl.read_write("a", 0, U32, 150), BufferDecl.read("b", 1, U32)], (32, 1, 1),
                      xor_program().body, name="xor150")
    a, b = u32(rng, 300), u32(rng, 300)
    expected = run(program, [a, b])
    (out,) = multi.map(program, [a, b], devices=oracles(3))
    assert out.size == 150 and np.array_equal(out, expected[0])


def test_sharded_output_with_static_count(rng) -> None:
    program = Program([BufferDecl.read("a", 0, U32), BufferDecl.output("o", 1, U32, 500)], (64, 1, 1),
                      [Node.store("o", gid, Expr.add(Expr.load("a", gid), gid))], name="iota_plus")
    a = u32(rng, 500)
    (out,) = multi.map(program, [a], devices=oracles(4))
    assert np.array_equal(out, run(program, [a])[0])


@pytest.mark.parametrize("n", [0, 1, 255, 256, 257, 9000])
def test_histogram_reduced_with_add(rng, n: int) -> None:
    data = u32(rng, n)
    stats: dict = {}
    (bins,) = multi.map(histogram_program(), [data], devices=oracles(3), reduce={"bins": "add"},
                        config=DispatchConfig(elements=n), stats=stats)
    assert np.array_equal(bins, np.bincount(data % 256, minlength=256).astype(np.uint32))
    assert stats["reduction"] == ("single" if len(stats["devices"]) == 1 else "host")


@pytest.mark.parametrize("op,name", [(AtomicOp.MIN, "min"), (AtomicOp.MAX, "max"), (AtomicOp.XOR, "xor"),
                                     (AtomicOp.OR, "or"), (AtomicOp.ADD, "add")])
def test_reduce_ops_on_i32(rng, op: AtomicOp, name: str) -> None:
    program = histogram_program(64, I32, op)
    data = u32(rng, 3000)
    expected = run(program, [data], DispatchConfig(elements=3000))[0]
    (actual,) = multi.map(program, [data], devices=oracles(4), reduce={"bins": name},
                          config=DispatchConfig(elements=3000))
    assert np.array_equal(actual, expected)


def test_accepts_anything_with_a_program_attribute(rng) -> None:
    class Kernel:  # the front end's kernels carry their IR as .program
        program = xor_program()

    a, b = u32(rng, 130), u32(rng, 130)
    assert np.array_equal(multi.map(Kernel(), [a, b], devices=oracles(2))[0], a ^ b)


def test_workgroup_override_is_applied(rng) -> None:
    a, b = u32(rng, 700), u32(rng, 700)
    out = multi.map(xor_program(), [a, b], devices=oracles(3), config=DispatchConfig(workgroup_override=(96, 1, 1)))
    assert np.array_equal(out[0], a ^ b)


def test_default_devices_run_on_this_machine(rng) -> None:
    a, b = u32(rng, 77), u32(rng, 77)
    assert np.array_equal(multi.map(xor_program(), [a, b])[0], a ^ b)


def test_split_workgroups_covers_every_group_once() -> None:
    for groups in (0, 1, 7, 100):
        for parts in (1, 2, 3, 8):
            ranges = multi.split_workgroups(groups, parts)
            assert ranges[0][0] == 0 and ranges[-1][1] == groups
            assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
            assert all(hi > lo for lo, hi in ranges) or groups == 0


# ---- refusals ------------------------------------------------------------------------------------------------
def stencil() -> Program:
    return Program([BufferDecl.read_write("a", 0, U32)], (32, 1, 1),
                   [Node.store("a", gid, Expr.load("a", Expr.add(gid, Expr.u32(1))))], name="stencil")


REFUSED = {
    "stencil on a split buffer": (stencil(), [np.arange(64, dtype=np.uint32)], None, None, "own index"),
    "2-D workgroup": (Program([BufferDecl.read_write("a", 0, U32)], (8, 2, 1),
                              [Node.store("a", gid, Expr.u32(1))]), [np.zeros(8, np.uint32) + 1], None,
                      DispatchConfig(grid=(1, 1, 1)), "1-D"),
    "2-D grid": (xor_program(), [np.ones(64, np.uint32)] * 2, None, DispatchConfig(grid=(1, 2, 1)), "not 1-D"),
    "atomic accumulator not reduced": (histogram_program(), [np.ones(300, np.uint32)], None,
                                       DispatchConfig(elements=300), "reduce="),
    "reduce a read_write buffer": (xor_program(), [np.ones(64, np.uint32)] * 2, {"a": "add"}, None,
                                   "not an output"),
    "reduce op differs from the atomic": (histogram_program(), [np.ones(300, np.uint32)], {"bins": "max"},
                                          DispatchConfig(elements=300), "combines it with"),
    "unknown reduce op": (histogram_program(), [np.ones(300, np.uint32)], {"bins": "mul"}, None, "not one of"),
    "cooperative": (xor_program(), [np.ones(64, np.uint32)] * 2, None, DispatchConfig(cooperative=True),
                    "cooperative"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_with_a_fix(case: str) -> None:
    program, inputs, reduce, config, words = REFUSED[case]
    with pytest.raises(InvalidProgram) as info:
        multi.map(program, inputs, devices=oracles(2), reduce=reduce, config=config)
    assert words in str(info.value) and "Fix:" in str(info.value)


def test_old_value_of_a_reduced_atomic_must_not_be_read() -> None:
    program = Program([BufferDecl.read("d", 0, U32), BufferDecl.output("count", 1, U32, 1),
                       BufferDecl.output("slot", 2, U32, 64)], (32, 1, 1),
                      [Node.let("t", Expr.atomic(AtomicOp.ADD, "count", Expr.u32(0), Expr.u32(1))),
                       Node.store("slot", gid, Expr.var("t"))], name="ticket")
    with pytest.raises(InvalidProgram, match="old value"):
        multi.map(program, [np.ones(64, np.uint32)], devices=oracles(2), reduce={"count": "add"})


def test_store_to_reduced_buffer_is_refused() -> None:
    program = Program([BufferDecl.read("d", 0, U32), BufferDecl.output("o", 1, U32, 4)], (32, 1, 1),
                      [Node.store("o", Expr.u32(0), Expr.load("d", gid))], name="last_writer")
    with pytest.raises(InvalidProgram, match="store"):
        multi.map(program, [np.ones(64, np.uint32)], devices=oracles(2), reduce={"o": "add"})


def test_output_shorter_than_the_split_range_is_refused() -> None:
    program = Program([BufferDecl.read("a", 0, U32), BufferDecl.output("o", 1, U32, 10)], (32, 1, 1),
                      [Node.store("o", gid, Expr.load("a", gid))], name="short")
    with pytest.raises(InvalidProgram, match="none of them"):
        multi.map(program, [np.ones(256, np.uint32)], devices=oracles(4), config=DispatchConfig(elements=256))
    data = np.arange(256, dtype=np.uint32)
    with pytest.raises(InvalidProgram, match="none of them"):  # the default grid covers a (256 elements)
        multi.map(program, [data], devices=oracles(4))
    small = DispatchConfig(elements=10)  # one workgroup: one device runs it all
    assert np.array_equal(multi.map(program, [data], devices=oracles(4), config=small)[0], data[:10])


def test_bad_inputs_name_the_buffer() -> None:
    class OnDevice:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<u4", "data": (0, False), "version": 3}

    with pytest.raises(InvalidProgram, match="device array"):
        multi.map(xor_program(), [OnDevice(), np.ones(4, np.uint32)], devices=oracles(2))
    with pytest.raises(InvalidProgram, match="'b'"):
        multi.map(xor_program(), [np.ones(4, np.uint32), np.ones(3, np.uint8)], devices=oracles(2))
    with pytest.raises(InvalidProgram, match="inputs"):
        multi.map(xor_program(), [np.ones(4, np.uint32)], devices=oracles(2))
    with pytest.raises(InvalidProgram, match="neither"):
        multi.map("xor", [], devices=oracles(2))
    with pytest.raises(InvalidProgram, match="non-empty list"):
        multi.map(xor_program(), [np.ones(4, np.uint32)] * 2, devices=[])


def test_handles_are_freed_after_success_and_failure() -> None:
    from vyre.driver.backend import Backend
    from vyre.driver.errors import UnsupportedFeature

    backends = multi.backends_for(oracles(2))
    before = [b.metrics()["reference_resident_bytes"] for b in backends]
    multi.map(xor_program(), [np.ones(640, np.uint32)] * 2, devices=backends)
    with pytest.raises(UnsupportedFeature):  # the base class has no resident buffers: that shard fails
        multi.map(xor_program(), [np.ones(640, np.uint32)] * 2, devices=[*backends, Backend()])
    assert [b.metrics()["reference_resident_bytes"] for b in backends] == before


def test_cuda_collective_declines_backends_without_devices() -> None:
    """The cuda collective says no (None) for backends it cannot address, so multi.map combines on the host."""
    from vyre_cuda._collectives import all_reduce

    backends = multi.backends_for(oracles(2))
    handles = [b.allocate_resident(16) for b in backends]
    try:
        assert all_reduce(backends, handles, np.uint32, "add") is None
    finally:
        for b, h in zip(backends, handles):
            b.free_resident(h)


def test_missing_nccl_is_said_once_with_the_fix(monkeypatch) -> None:
    """Where NCCL would combine a reduction but CuPy has none, a RuntimeWarning says so once and how to fix it."""
    import warnings

    from vyre_cuda import _collectives as collectives

    monkeypatch.setattr(collectives, "_missing_said", False)
    monkeypatch.setattr(collectives, "nccl_missing_reason", lambda: "no NCCL here")
    with pytest.warns(RuntimeWarning, match=r"NCCL is missing: no NCCL here; .* path 'peer'.*"
                                            r"Fix: pip install 'vyre-cuda\[cuda12\]'.*nvidia-nccl-cu12"):
        collectives._say_nccl_missing()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        collectives._say_nccl_missing()  # once per process
    monkeypatch.setattr(collectives, "_missing_said", False)
    monkeypatch.setattr(collectives, "nccl_missing_reason", lambda: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        collectives._say_nccl_missing()  # NCCL is there: nothing to say


def test_nccl_missing_reason_names_the_import_failure() -> None:
    from vyre_cuda._collectives import nccl_missing_reason, nccl_module

    try:
        import cupy  # noqa: F401
    except ImportError:
        assert nccl_missing_reason().startswith("cupy.cuda.nccl does not import (ModuleNotFoundError")
        assert nccl_module() is None
    else:
        assert (nccl_missing_reason() is None) == (nccl_module() is not None)


def test_scale_benchmark_runs_end_to_end_on_the_oracle(tmp_path) -> None:
    """The benchmark's code path (not its numbers) at toy sizes, so a GPU run does not die on a typo."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    import vyre

    if any(d.backend == "cuda" for d in vyre.devices()):
        pytest.skip("GPUs are listed: the benchmark would run at full size")
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "scale.json"
    subprocess.run([sys.executable, str(root / "benchmarks" / "bench_scale.py"), "--no-dask", "--json", str(out)],
                   check=True, capture_output=True, timeout=120)
    result = json.loads(out.read_text())
    assert [r["gpus"] for r in result["xor"]] == [1, 2]
    assert result["host_link"]["dispatch_equals"] and result["host_link"]["resident_equals"]
    saxpy = result["multi_saxpy"]
    assert [r["gpus"] for r in saxpy] == [1, 2]
    assert all(r[f"{kind}_equals"] for kind in ("host", "sharded") for r in saxpy)
    assert all(r["compiled_seconds"] > 0 for r in saxpy)
    assert [r["call"] for r in result["lib"]] == ["sort", "inclusive_scan", "histogram"]
    assert all(r["equals"] for r in result["lib"])
