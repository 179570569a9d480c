"""The random program generator: valid, deterministic, race-free by construction, and broad."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from vyre.driver.config import DispatchConfig
from vyre.ir import AtomicOp, DataType, Expr, Program
from vyre.ir.expr import BINARY_OPS, UNARY_OPS
from vyre.ir.generate import (
    F32_UNARY_APPROX,
    ORDER_FREE_ATOMICS,
    Case,
    generate_case,
    generate_program,
    random_inputs,
)
from vyre.ir.node import Assign, Barrier, Block, If, Let, Loop, Region, Return, Store
from vyre.ir.program import Access
from vyre.ir.validate import validate
from vyre.ir.walk import iter_all_exprs, iter_nodes

OPTIONS = ({}, {"subgroups": True}, {"approximate": True}, {"max_depth": 5, "max_stmts": 30},
           {"subgroups": True, "approximate": True, "max_depth": 1, "max_stmts": 4})
SUBGROUP_OPS = {"subgroup_ballot", "subgroup_shuffle", "subgroup_add", "subgroup_local_id", "subgroup_size"}


def programs(count: int, **opts) -> list[Program]:
    return [generate_program(seed, **opts) for seed in range(count)]


@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: ",".join(o) or "default")
def test_generated_programs_are_valid(opts: dict) -> None:
    for seed in range(250):
        validate(generate_program(seed, **opts))


def test_deterministic_by_seed() -> None:
    for seed in range(40):
        a, b = generate_case(seed, subgroups=seed % 2 == 1), generate_case(seed, subgroups=seed % 2 == 1)
        assert isinstance(a, Case) and isinstance(a.config, DispatchConfig)
        assert a.program == b.program and a.config == b.config
        assert a.program == generate_program(seed, subgroups=seed % 2 == 1)
        assert all(x.tobytes() == y.tobytes() and x.dtype == y.dtype for x, y in zip(a.inputs, b.inputs))
        assert all(x.tobytes() == y.tobytes() for x, y in zip(a.inputs, random_inputs(a.program, seed)))
    assert len(set(programs(100))) >= 99


def test_op_and_statement_coverage() -> None:
    ops: Counter = Counter()
    nodes: Counter = Counter()
    atomics: set = set()
    storage: set = set()
    for p in programs(300, approximate=True) + programs(100, subgroups=True):
        for e in iter_all_exprs(p.body):
            ops[e.op] += 1
            if e.op == "atomic":
                atomics.add(e.value)
        nodes.update(type(n) for n in iter_nodes(p.body))
        storage.update((b.access, b.dtype) for b in p.buffers)
    assert set(BINARY_OPS) | set(UNARY_OPS) | {"select", "cast", "fma", "load", "buf_len", "atomic"} <= set(ops)
    assert SUBGROUP_OPS | {"invocation_id", "workgroup_id", "local_id", "lit", "var"} <= set(ops)
    assert {Let, Assign, Store, If, Loop, Barrier, Block, Region, Return} <= set(nodes)
    assert atomics == set(ORDER_FREE_ATOMICS)
    for access in (Access.READ, Access.OUTPUT):
        assert {t for a, t in storage if a is access} == {t for t in DataType if not t.is_wide}


def test_options_shape_the_programs() -> None:
    plain = programs(150)
    assert not any(e.op in F32_UNARY_APPROX or e.op == "inverse_sqrt" for p in plain for e in iter_all_exprs(p.body))
    assert not any(e.op in SUBGROUP_OPS for p in plain for e in iter_all_exprs(p.body))
    assert any(p.workgroup_size[1] > 1 or p.workgroup_size[2] > 1 for p in plain)
    assert any(b.count == 0 for p in plain for b in p.inputs)
    for p in programs(60, subgroups=True):
        assert p.workgroup_size in ((32, 1, 1), (64, 1, 1), (128, 1, 1))
    small = programs(50, max_depth=0, max_stmts=2)
    assert all(not isinstance(n, (If, Loop, Block, Region)) for p in small for n in iter_nodes(p.body))


def test_multi_dimensional_workgroups_get_explicit_grids() -> None:
    for seed in range(200):
        case = generate_case(seed)
        wx, wy, wz = case.program.workgroup_size
        if wy > 1 or wz > 1:
            assert case.config.grid is not None


def _gid_name(p: Program) -> str:
    first = p.body[0]
    assert isinstance(first, Let) and first.value.op in ("invocation_id", "add")
    return first.name


def test_race_freedom_by_construction() -> None:
    """Stores and loads of output buffers use the invocation's own index; atomics are write-only."""
    for seed in range(300):
        p = generate_program(seed, subgroups=seed % 3 == 0)
        gid = Expr.var(_gid_name(p))
        atomic_targets = {e.name for e in iter_all_exprs(p.body) if e.op == "atomic"}
        atomic_lets = {n.name for n in iter_nodes(p.body) if isinstance(n, Let) and n.value.op == "atomic"}
        used_vars = {e.name for e in iter_all_exprs(p.body) if e.op == "var"}
        assert not atomic_lets & used_vars
        for node in iter_nodes(p.body):
            if isinstance(node, Store) and p.buffer(node.buffer).access.is_output:
                assert node.buffer not in atomic_targets
                oob = (Expr.add(gid, Expr.buf_len(node.buffer)), Expr.u32(0xFFFFFFFF))
                assert node.index == gid or node.index in oob
        for e in iter_all_exprs(p.body):
            if e.op == "load" and p.buffer(e.name).access.is_output:
                assert e.name not in atomic_targets and e.args[0] == gid
            if e.op == "atomic":
                assert e.value in ORDER_FREE_ATOMICS and e.value is not AtomicOp.EXCHANGE


def test_subgroup_ops_are_used_and_valid() -> None:
    # where they may appear (uniform control flow, before any varying return) is the validator's check
    with_collectives = 0
    for seed in range(100):
        p = generate_program(seed, subgroups=True)
        validate(p)
        with_collectives += any(e.op in SUBGROUP_OPS - {"subgroup_size", "subgroup_local_id"}
                                for e in iter_all_exprs(p.body))
    assert with_collectives > 30


def test_random_inputs_match_the_buffers() -> None:
    seen = {t: np.zeros(0) for t in DataType}
    for seed in range(120):
        p = generate_program(seed)
        arrays = random_inputs(p, seed)
        assert len(arrays) == len(p.inputs)
        for buf, arr in zip(p.inputs, arrays):
            assert arr.dtype == buf.dtype.np_dtype and arr.ndim == 1
            if buf.count:
                assert arr.size == buf.count
            seen[buf.dtype] = np.concatenate([seen[buf.dtype].astype(arr.dtype), arr])
    f32 = seen[DataType.F32]
    assert np.isnan(f32).any() and np.isposinf(f32).any() and np.isneginf(f32).any()
    assert (np.signbit(f32) & (f32 == 0)).any()
    assert ((f32 != 0) & (np.abs(f32) < np.finfo(np.float32).tiny)).any()  # subnormals
    f16 = seen[DataType.F16]
    assert np.isnan(f16).any() and np.isinf(f16).any()
    for t in (DataType.U8, DataType.I16, DataType.U32, DataType.I32):
        info = np.iinfo(t.np_dtype)
        values = set(seen[t].tolist())
        assert {0, 1, info.max, info.min} <= values
    bf16 = seen[DataType.BF16]
    assert {0x7F80, 0x8000, 0x0001} <= set(bf16.tolist())


def test_divisors_that_expand_to_a_literal_zero_are_avoided() -> None:
    """A call as divisor may expand to a literal 0 (``first(0, x)``), which validation rejects: this
    seed made ``div(x, first_i32(0, 0))`` and stopped a 2000-program fuzz run on the device."""
    from vyre.ir.expand import expand_calls
    from vyre.ir.generate import generate_case

    expand_calls(generate_case(20261263784896, subgroups=True).program)
    for seed in range(300):
        expand_calls(generate_case(seed, subgroups=seed % 2 == 1).program)


def test_wide_programs_use_the_64_bit_types_validly() -> None:
    storage: set = set()
    atomics: set = set()
    ops: Counter = Counter()
    for seed in range(200):
        p = generate_program(seed, wide=True, subgroups=seed % 3 == 0, approximate=seed % 3 == 1)
        validate(p)
        storage.update(b.dtype for b in p.buffers)
        for e in iter_all_exprs(p.body):
            if e.op == "atomic":
                atomics.add(p.buffer(e.name).dtype)
            if e.op == "lit" and e.dtype.is_wide:
                ops["wide literal"] += 1
            if e.op == "cast" and e.dtype.is_wide:
                ops["wide cast"] += 1
            if e.op in ("subgroup_add", "subgroup_shuffle", "fma", "mul_high", "rotate_left", "div"):
                ops[e.op] += 1
    assert set(DataType) == storage
    assert {DataType.U64, DataType.I64} <= atomics
    assert min(ops.values()) > 0 and len(ops) == 8, ops


def test_wide_is_off_by_default_and_its_inputs_are_rich_in_edges() -> None:
    assert not any(b.dtype.is_wide for p in programs(150) for b in p.buffers)
    seen: dict = {t: [] for t in (DataType.U64, DataType.I64, DataType.F64)}
    for seed in range(150):
        p = generate_program(seed, wide=True)
        for buf, arr in zip(p.inputs, random_inputs(p, seed)):
            assert arr.dtype == buf.dtype.np_dtype
            if buf.dtype in seen:
                seen[buf.dtype].append(arr)
    f64 = np.concatenate(seen[DataType.F64])
    assert np.isnan(f64).any() and np.isposinf(f64).any() and np.isneginf(f64).any()
    assert (np.signbit(f64) & (f64 == 0)).any() and ((f64 != 0) & (np.abs(f64) < np.finfo(np.float64).tiny)).any()
    for t in (DataType.U64, DataType.I64):
        info = np.iinfo(t.np_dtype)
        assert {0, 1, info.max, info.min} <= set(np.concatenate(seen[t]).tolist())
