"""Programs the validator accepts must assemble: workgroup memory, kernel parameter space, emit_ptx arguments."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest
from codegen_support import PTXAS, assemble, needs_ptxas

from vyre.driver.errors import InvalidProgram, UnsupportedFeature, ValidationError
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.ir.layout import (
    MAX_BOUND_BUFFERS,
    MAX_WORKGROUP_BYTES,
    PORTABLE_WORKGROUP_BYTES,
    dynamic_workgroup_bytes,
    workgroup_bytes,
    workgroup_layout,
)
from vyre.ir.validate import findings
from vyre_cuda import emit_ptx
from vyre_cuda._codegen.memory import SHARED_SYMBOL
from vyre_cuda.testing import PTX_VERSIONS, Buffers, Builder, launch, max_ptx_version_for_driver

D = DataType
GID = Expr.invocation_id(0)


def _shared_program(sizes: list[tuple[DataType, int]]) -> Program:
    """Workgroup buffers of ``sizes``; each invocation writes and reads back the last element of every one."""
    tiles = [BufferDecl.workgroup(f"t{i}", n, dt) for i, (dt, n) in enumerate(sizes)]
    body: list[Node] = []
    total = Expr.u32(0)
    for i, (dt, n) in enumerate(sizes):
        value = Expr.f32(1.0) if dt in (D.F32, D.F16, D.BF16) else Expr.u32(1)
        body.append(Node.store(f"t{i}", Expr.u32(n - 1), value))
        loaded = Expr.load(f"t{i}", Expr.u32(n - 1))
        total = Expr.add(total, Expr.cast(D.U32, loaded) if dt in (D.F32, D.F16, D.BF16) else loaded)
    body += [Node.barrier(), Node.store("out", GID, total)]
    return Program([BufferDecl.output("out", 0, D.U32, 64), *tiles], (64, 1, 1), body, name="shared")


# ---- point 5: one workgroup-memory layout for the validator, the emitter and the launcher ----------------
P = PORTABLE_WORKGROUP_BYTES
AT_LIMIT = {
    "one f32 buffer": [(D.F32, P // 4)],
    "u8 padded to 4": [(D.U8, 3), (D.U8, P - 4)],
    "u16 then u32": [(D.U16, 1), (D.U32, P // 4 - 1)],
    "odd u8 last": [(D.U32, 8), (D.U8, P - 32)],
}
ONE_OVER = {
    "one byte over": [(D.U8, P + 1)],
    # the raw sum is exactly 48 KiB, but the second buffer starts on a 4-byte boundary (ptxas: 0xc004 > 0xc000)
    "padding pushes it over": [(D.U8, 3), (D.U8, P - 3)],
    "u16 padding pushes it over": [(D.U16, 1), (D.U32, P // 4)],
    "64 KiB": [(D.U8, 3), (D.U32, 16 * 1024 - 1)],
    "100 KiB, u16": [(D.U32, 1), (D.U16, 50 * 1024 - 2)],
    "the IR ceiling": [(D.U32, MAX_WORKGROUP_BYTES // 4)],
}
EXTERN = f".extern .shared .align 16 .b8 {SHARED_SYMBOL}[];"


@needs_ptxas
@pytest.mark.parametrize("case", sorted(AT_LIMIT))
def test_48_kib_of_workgroup_memory_stays_a_static_array(case: str) -> None:
    program = _shared_program(AT_LIMIT[case])
    assert workgroup_bytes(program) == P and dynamic_workgroup_bytes(program) == 0
    assert findings(program) == []
    ptx = emit_ptx(program, sm="90")
    assert f"\t.shared .align 16 .b8 {SHARED_SYMBOL}[{P}];" in ptx and ".extern" not in ptx
    assert assemble({case: ptx}, "90") == []


@needs_ptxas
@pytest.mark.parametrize("case", sorted(ONE_OVER))
def test_more_than_48_kib_is_one_dynamic_region_at_the_same_offsets(case: str) -> None:
    """Over 48 KiB the program is valid up to the IR ceiling; its PTX declares one unsized extern
    region at module scope (no static array) and assembles for sm_80 and sm_90."""
    program = _shared_program(ONE_OVER[case])
    total = workgroup_bytes(program)
    assert P < total <= MAX_WORKGROUP_BYTES and dynamic_workgroup_bytes(program) == total
    assert findings(program) == []
    for sm in ("80", "90"):
        ptx = emit_ptx(program, sm=sm)
        head, _, body = ptx.partition(".visible .entry")
        assert EXTERN in head.splitlines() and ".shared .align" not in body
        assert f"// {total} bytes of workgroup memory: dynamic shared memory" in head
        for name, offset in workgroup_layout(program).offsets.items():
            assert offset == 0 or f"+{offset}]" in body, name
        assert assemble({case: ptx}, sm) == []


@needs_ptxas
def test_a_coarsened_kernel_over_48_kib_rezeroes_the_dynamic_region_and_assembles() -> None:
    program = _shared_program(ONE_OVER["64 KiB"])
    ptx = emit_ptx(program, sm="90", coarsen=4)
    assert EXTERN in ptx and "coarsened x4" in ptx and SHARED_SYMBOL + "[" not in ptx.replace(EXTERN, "")
    assert assemble({"coarsened": ptx}, "90") == [] and assemble({"coarsened": emit_ptx(program, sm="80", coarsen=4)},
                                                                 "80") == []


@pytest.mark.parametrize("sizes", [[(D.U8, MAX_WORKGROUP_BYTES + 1)], [(D.U8, 3), (D.U8, MAX_WORKGROUP_BYTES - 3)],
                                   [(D.U32, 2**30)]])
def test_workgroup_memory_over_the_ir_ceiling_is_a_validation_error(sizes: list[tuple[DataType, int]]) -> None:
    program = _shared_program(sizes)
    assert workgroup_bytes(program) > MAX_WORKGROUP_BYTES
    found = findings(program)
    assert [f.code for f in found] == ["workgroup_memory_too_large"]
    with pytest.raises(ValidationError, match=r"workgroup_memory_too_large.*Fix: shrink"):
        emit_ptx(program, sm="90")


@needs_ptxas
def test_ptxas_agrees_one_padded_word_over_48_kib_needs_dynamic_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """The layout matches the hardware: the first layout past 48 KiB is one ptxas refuses as a static array."""
    import vyre_cuda._codegen.module as module

    monkeypatch.setattr(module, "dynamic_workgroup_bytes", lambda program: 0)  # force the static declaration
    failures = assemble({"over": emit_ptx(_shared_program(ONE_OVER["padding pushes it over"]), sm="90")}, "90")
    assert failures and "0xc004" in failures[0]


def test_validator_emitter_and_launcher_share_one_layout() -> None:
    rng = np.random.default_rng(5)
    dtypes = [D.U8, D.I8, D.U16, D.I16, D.F16, D.BF16, D.U32, D.I32, D.F32, D.BOOL]
    for _ in range(300):
        sizes = [(dtypes[rng.integers(len(dtypes))], int(rng.integers(1, 700))) for _ in range(rng.integers(1, 7))]
        program = _shared_program(sizes)
        layout = workgroup_layout(program)
        buffers = Buffers(program, Builder())
        assert buffers.shared_bytes == layout.total == launch.workgroup_bytes(program)
        assert buffers.shared_offset == layout.offsets
        assert layout.total % 4 == 0 and all(off % 4 == 0 for off in layout.offsets.values())
        ends = sorted((off, off + dt.size * n) for off, (dt, n) in zip(layout.offsets.values(), sizes))
        assert all(a[1] <= b[0] for a, b in zip(ends, ends[1:])), "workgroup buffers overlap"
        assert ends[-1][1] <= layout.total


# ---- point 6: kernel parameter space and bindings ----------------------------------------------------
def _many_buffers(n: int) -> Program:
    buffers = [BufferDecl.read(f"b{i}", i, D.U32) for i in range(n - 1)] + [BufferDecl.output("out", n - 1, D.U32, 1)]
    return Program(buffers, (32, 1, 1), [Node.store("out", Expr.u32(0), Expr.load(f"b{n - 2}", Expr.u32(0)))])


@needs_ptxas
@pytest.mark.parametrize(("buffers", "version"), [(543, "7.8"), (544, "8.1"), (MAX_BOUND_BUFFERS, "8.1")])
def test_parameter_space_picks_a_version_that_holds_it_and_assembles(buffers: int, version: str) -> None:
    program = _many_buffers(buffers)
    assert findings(program) == []
    ptx = emit_ptx(program, sm="90")
    assert f".version {version}\n" in ptx
    assert assemble({f"{buffers} buffers": ptx}, "90") == []


def test_an_explicit_version_too_old_for_the_parameters_is_refused_up_front() -> None:
    with pytest.raises(UnsupportedFeature, match="8.1"):
        emit_ptx(_many_buffers(544), sm="90", ptx_version="8.0")


def test_more_buffers_than_parameter_space_is_a_validation_error() -> None:
    assert [f.code for f in findings(_many_buffers(MAX_BOUND_BUFFERS + 1))] == ["too_many_buffers"]


@pytest.mark.parametrize("binding", [2**32, 10**30])
def test_huge_bindings_fail_validation_not_to_wire(binding: int) -> None:
    program = Program([BufferDecl.read_write("a", binding, D.U32)], (1, 1, 1), [Node.store("a", GID, Expr.u32(1))])
    assert [f.code for f in findings(program)] == ["binding_too_large"]
    ok = Program([BufferDecl.read_write("a", 2**32 - 1, D.U32)], (1, 1, 1), [Node.store("a", GID, Expr.u32(1))])
    assert findings(ok) == [] and Program.from_wire(ok.to_wire()) == ok


# ---- point 7: emit_ptx argument checks -------------------------------------------------------------
SIMPLE = Program([BufferDecl.read_write("a", 0, D.U32)], (64, 1, 1), [Node.store("a", GID, Expr.u32(1))])
BAD_ARGUMENTS = [
    {"coarsen": 3}, {"coarsen": 0}, {"coarsen": 128}, {"coarsen": "4"}, {"coarsen": True}, {"coarsen": 4.0},
    {"ptx_version": 8.0}, {"ptx_version": 8}, {"ptx_version": b"8.0"}, {"ptx_version": "99.9"},
    {"ptx_version": "8.9"}, {"ptx_version": "\u0668.\u0660"}, {"ptx_version": "8.0 "}, {"ptx_version": "8"},
    {"ptx_version": "8.0\n.target sm_50"}, {"ptx_version": ""},
    {"sm": None}, {"sm": 90.0}, {"sm": True}, {"sm": -90}, {"sm": "\u0669\u0660"}, {"sm": "sm_9x"},
    {"sm": "90\n.target sm_50"}, {"sm": ""}, {"config": 3},
]


@pytest.mark.parametrize("kwargs", BAD_ARGUMENTS, ids=repr)
def test_bad_emit_ptx_arguments_are_invalid_program_with_a_fix(kwargs: dict) -> None:
    with pytest.raises(InvalidProgram, match="Fix: "):
        emit_ptx(SIMPLE, **kwargs)


def test_well_formed_but_unserved_targets_and_versions_are_unsupported() -> None:
    with pytest.raises(UnsupportedFeature, match="sm_42"):
        emit_ptx(SIMPLE, sm="42")
    with pytest.raises(UnsupportedFeature, match="7.8"):
        emit_ptx(SIMPLE, sm=90, ptx_version="7.0")


def _ptxas_max_version() -> str:
    out = subprocess.run([PTXAS, "--version"], capture_output=True, text=True, check=True).stdout
    major, minor = re.search(r"release (\d+)\.(\d+)", out).groups()
    return max_ptx_version_for_driver(int(major) * 1000 + int(minor) * 10)


@needs_ptxas
def test_every_accepted_version_assembles() -> None:
    """Nothing emit_ptx accepts is rejected later by ptxas (versions up to what this ptxas knows)."""
    assert len({emit_ptx(SIMPLE, sm=sm) for sm in ("90", 90, "sm_90", "SM_90")}) == 1
    newest = PTX_VERSIONS.index(_ptxas_max_version())
    for version in PTX_VERSIONS[PTX_VERSIONS.index("7.8"):newest + 1]:
        assert assemble({version: emit_ptx(SIMPLE, sm="90", ptx_version=version)}, "90") == [], version
