"""Thread coarsening along x (``emit_ptx(..., coarsen=K)``, ``vyre_cuda._dispatch.coarsening``) without a GPU.

The coarsened kernel of every construct and of generated programs assembles for sm_80/sm_90;
``coarsen=1`` is exactly the plain kernel; the loop, tail test, per-iteration workgroup-memory
zeroing and ``return_`` lowering have the documented shape; the backend's choice of K and the
parameter words it packs follow ``vyre_cuda._dispatch.coarsening``. The GPU check is tests/gpu/test_coarsen.py.
"""

from __future__ import annotations

import hashlib
import re

import pytest
from catalogue import all_programs, control_programs
from codegen_support import D, assemble, assemble_all_targets, elementwise, needs_ptxas

from vyre.driver.errors import InvalidProgram, InvalidSetting
from vyre.ir import BufferDecl, Expr, Node, Program
from vyre_cuda import emit_ptx, param_block_layout
from vyre_cuda._codegen.coarsen import MAX_FACTOR
from vyre_cuda._dispatch import coarsening as policy
from vyre_cuda.testing import grid_x_word

generate = pytest.importorskip("vyre.ir.generate", reason="vyre.ir.generate is not available yet")


def _xor() -> Program:
    return elementwise(Expr.bitxor, (D.U32, D.U32), D.U32, name="xor")


def _generated(count: int) -> dict[str, Program]:
    """``count`` generated programs, every other one with subgroup ops."""
    return {f"gen{seed}": generate.generate_program(7000 + seed, subgroups=seed % 2 == 1) for seed in range(count)}


# ---- assembly --------------------------------------------------------------------------------------
@needs_ptxas
@pytest.mark.parametrize("k", [2, 4])
def test_every_construct_assembles_coarsened(k: int) -> None:
    programs = all_programs()
    ptx = {sm: {name: emit_ptx(p, sm=sm, coarsen=k) for name, p in programs.items()} for sm in ("80", "90")}
    failures = assemble_all_targets(ptx)
    assert not failures, "\n".join(failures[:40])


@needs_ptxas
def test_generated_programs_assemble_coarsened() -> None:
    programs = _generated(160)
    assert sum("subgroup" in p.to_text() for p in programs.values()) >= 20
    ptx = {sm: {name: emit_ptx(p, sm=sm, coarsen=4) for name, p in programs.items()} for sm in ("80", "90")}
    failures = assemble_all_targets(ptx)
    assert not failures, "\n".join(failures[:40])


@needs_ptxas
def test_largest_factor_assembles() -> None:
    ptx = {name: emit_ptx(p, coarsen=MAX_FACTOR) for name, p in control_programs().items()}
    assert not assemble(ptx, "90")


# ---- K = 1 is the plain kernel ---------------------------------------------------------------------
def test_factor_one_is_the_plain_kernel() -> None:
    for name, program in list(all_programs().items())[::5]:
        plain = emit_ptx(program)
        assert emit_ptx(program, coarsen=1) == plain, name
        assert "coarsened" not in plain and f"+{4 * grid_x_word(program)}]" not in plain
    assert param_block_layout(_xor()) == param_block_layout(_xor(), 1) == ["elements", "count:in0", "count:in1",
                                                                          "count:out"]


#: sha-256 of the plain PTX (sm_80 then sm_90) of these catalogue programs, as emitted before coarsening
#: existed (codegen 1). Codegen 2 added the grid-dependency lines (``module.grid_dependency``) and
#: read-only-cache loads of some written buffers (``own_index``): without those two and with the old
#: header the text must still match byte for byte. Codegen 3 zeroes workgroup memory 16 bytes per
#: store (then the last 0-3 words): the digest was pinned again then, after checking that the
#: zeroing loop was the only difference from codegen 2's text. Codegen 4 sets each distinct literal
#: once in the prologue instead of before each use, and the digest was pinned again. Codegen 6 zeroes
#: the last 1-3 words in a strided loop too (workgroups smaller than the tail left words unzeroed) and
#: narrows f16/bf16 stores through the packed conversion on sm_80+: pinned again after a diff against
#: codegen 5's text showed only those lines (and register numbers) changed. Kernels are named after
#: their programs since then (``abi.entry_name``): the name goes back to ``vyre_main`` before hashing.
#: Pinned again for codegen 7 (proven workgroup indices unguarded): the same
#: normalised diff over every catalogue program showed only those changes. Pinned again for
#: codegen 8 (the workgroup-memory zero fill written out as up to 16 stores per thread, not a
#: loop): a diff over every catalogue program and every pinned library case showed only the
#: fill's lines changed.
PLAIN_SAMPLE = ("add.U32", "div.I32", "sin.F32", "cast.F32.I32", "mem.read_write.F16", "mem.workgroup.BF16",
                "atomic.COMPARE_EXCHANGE.I32.shared", "if_else", "loop_return", "ids.4x4x4", "subgroups")
PLAIN_DIGEST = "0faf929bcb17bf8f1b513281318ddc2d5f46e09aef26f9c64b4aaff55eb3d9af"


def _as_codegen_1(ptx: str) -> str:
    from vyre_cuda.testing import CODEGEN_VERSION

    lines = [re.sub(r"^\.visible \.entry \w+\(", ".visible .entry vyre_main(", ln)
             for ln in ptx.split("\n") if not ln.strip().startswith("griddepcontrol.")]
    return "\n".join(lines).replace(f"vyre-cuda codegen {CODEGEN_VERSION}:", "vyre-cuda codegen 1:", 1)


def test_plain_kernels_are_byte_identical_to_before_coarsening(monkeypatch) -> None:
    monkeypatch.setattr("vyre_cuda._codegen.memory.cached_read_write", lambda program: frozenset())
    programs = all_programs()
    digest = hashlib.sha256()
    for name in PLAIN_SAMPLE:
        for sm in ("80", "90"):
            digest.update(_as_codegen_1(emit_ptx(programs[name], sm=sm, coarsen=1)).encode())
    assert digest.hexdigest() == PLAIN_DIGEST


@pytest.mark.parametrize("bad", [0, 3, 6, 128, -4, True, 4.0, "4", None])
def test_factor_must_be_a_power_of_two(bad: object) -> None:
    with pytest.raises(InvalidProgram, match="power of two"):
        emit_ptx(_xor(), coarsen=bad)


# ---- the shape of a coarsened kernel -----------------------------------------------------------------
def _code(ptx: str) -> list[str]:
    return [ln.strip() for ln in ptx.splitlines() if ln.strip() and not ln.lstrip().startswith("//")]


def test_coarsened_kernel_shape() -> None:
    program = _xor()
    ptx = emit_ptx(program, coarsen=4)
    assert "// coarsened x4:" in ptx and ptx == emit_ptx(program, coarsen=4)
    assert param_block_layout(program, 4)[-1] == "grid_x" and len(param_block_layout(program, 4)) == 5
    word = grid_x_word(program)
    assert word == 4 and f"+{4 * word}];" in ptx  # the logical grid x, after the three counts
    code = _code(ptx)
    assert sum(ln == "ret;" for ln in code) == 1 and code[-2:] == ["ret;", "}"]
    head = next(k for k, ln in enumerate(code) if ln.startswith("mul.lo.u32") and ln.endswith(", 4;"))
    wg, ctaid = (r.rstrip(",") for r in code[head].split()[1:3])
    assert f"mov.u32 {ctaid}, %ctaid.x;" in code[:head]
    assert re.fullmatch(rf"add\.u32 %r\d+, {wg}, 4;", code[head + 1])
    assert code[head + 2].startswith("min.u32")
    top = code[head + 3]
    assert re.fullmatch(r"\$L\d+:", top)
    assert code[head + 4].startswith("setp.ge.u32") and wg in code[head + 4]
    assert code[head + 5].startswith("@%p") and "bra $L" in code[head + 5]
    # the global id along x is computed from the logical workgroup id inside the loop
    gid = next(ln for ln in code[head + 6:] if ln.startswith("mad.lo.u32"))
    assert gid.split()[2] == f"{wg},"
    assert code[-5:-2] == [f"add.u32 {wg}, {wg}, 1;", f"bra {top[:-1]};", code[-3]]
    assert "%ctaid.x" not in "\n".join(code[head + 1:])


def test_return_ends_only_the_logical_invocation() -> None:
    program = control_programs()["loop_return"]
    plain, coarse = _code(emit_ptx(program)), _code(emit_ptx(program, coarsen=4))
    assert sum(ln.endswith("ret;") for ln in plain) == 2  # the return_ and the end of the kernel
    assert sum(ln.endswith("ret;") for ln in coarse) == 1 and coarse[-2] == "ret;"
    next_label = coarse[coarse.index("ret;") - 4].rstrip(":")  # next: add; bra top; done: ret
    assert re.fullmatch(r"\$L\d+", next_label)
    assert coarse.count(f"bra {next_label};") == 1  # the return_, inside the loop


def test_workgroup_memory_is_zeroed_for_each_logical_workgroup() -> None:
    program = Program([BufferDecl.read("src", 0, D.U32), BufferDecl.output("dst", 1, D.U32, 1024),
                       BufferDecl.workgroup("tile", 64, D.U32)], (64, 1, 1),
                      [Node.store("tile", Expr.local_id(0), Expr.load("src", Expr.invocation_id(0))),
                       Node.barrier(),
                       Node.store("dst", Expr.invocation_id(0), Expr.load("tile", Expr.sub(Expr.u32(63),
                                                                                          Expr.local_id(0))))])
    plain, coarse = _code(emit_ptx(program)), _code(emit_ptx(program, coarsen=4))
    assert plain.count("bar.sync 0;") == 2  # after the zeroing, the program's barrier
    assert coarse.count("bar.sync 0;") == 3  # before and after the zeroing, the program's barrier
    zero = next(k for k, ln in enumerate(coarse) if "st.shared.v4.u32 [" in ln and ln.endswith("{0, 0, 0, 0};"))
    tail = next(k for k, ln in enumerate(coarse) if ln.startswith("@%p") and "bra" in ln)
    first_bar = coarse.index("bar.sync 0;")
    assert tail < first_bar < zero  # tail test, wait for the previous logical workgroup, then zero


def test_two_dimensional_ids_keep_y_and_z() -> None:
    program = control_programs()["ids.4x4x4"]
    ptx = emit_ptx(program, coarsen=2)
    assert "%ctaid.y" in ptx and "%ctaid.z" in ptx and ptx.count("%ctaid.x") == 1


# ---- the backend's policy -----------------------------------------------------------------------------
SM = 132


@pytest.mark.parametrize("env, grid, block, coop, expected", [
    (None, (4 * 8 * SM, 1, 1), (256, 1, 1), False, 4),  # the coarsened grid is one full wave
    (None, (4 * 8 * SM - 4, 1, 1), (256, 1, 1), False, 1),
    (None, (1 << 20, 1, 1), (256, 1, 1), True, 1),  # cooperative: never
    (None, (63, 4096, 1), (1024, 1, 1), False, 1),  # too few workgroups along x
    (None, (64, 4096, 1), (1024, 1, 1), False, 4),
    ("0", (1 << 20, 1, 1), (256, 1, 1), False, 1),
    ("off", (1 << 20, 1, 1), (256, 1, 1), False, 1),
    ("auto", (1 << 20, 1, 1), (256, 1, 1), False, 4),
    ("4", (1, 1, 1), (32, 1, 1), False, 4),  # the test hook: always, tails included
    ("8", (3, 2, 1), (32, 1, 1), False, 8),
    ("4", (0, 1, 1), (32, 1, 1), False, 1),  # an empty grid launches nothing
    ("4", (9, 1, 1), (32, 1, 1), True, 1),
])
def test_factor_policy(monkeypatch, env, grid, block, coop, expected) -> None:
    if env is None:
        monkeypatch.delenv(policy.ENV, raising=False)
    else:
        monkeypatch.setenv(policy.ENV, env)
    assert policy.factor(grid, block, SM, coop) == expected


@pytest.mark.parametrize("env", ["3", "128", "abc", "\uff14"])
def test_a_factor_the_setting_does_not_accept_is_an_error(monkeypatch, env) -> None:
    """Not a power of two up to 64 (or fullwidth digits): an error naming the setting, no longer ignored."""
    monkeypatch.setenv(policy.ENV, env)
    with pytest.raises(InvalidSetting, match="VYRE_CUDA_COARSEN"):
        policy.factor((1 << 20, 1, 1), (256, 1, 1), SM)


def test_workgroups_with_much_workgroup_memory_are_not_coarsened_automatically(monkeypatch) -> None:
    """Over ``AUTO_MAX_SHARED_BYTES`` auto picks 1 however large the grid; the test hook still forces."""
    big, wg, most = (1 << 20, 1, 1), (256, 1, 1), policy.AUTO_MAX_SHARED_BYTES
    monkeypatch.delenv(policy.ENV, raising=False)
    assert policy.factor(big, wg, SM, shared_bytes=most) == 4
    assert policy.factor(big, wg, SM, shared_bytes=most + 4) == 1
    assert policy.factor(big, wg, SM, shared_bytes=43044) == 1  # the single-pass radix sort's kernels
    monkeypatch.setenv(policy.ENV, "4")
    assert policy.factor(big, wg, SM, shared_bytes=43044) == 4


def test_launch_grid_rounds_x_up() -> None:
    assert policy.launch_grid((1, 3, 5), 4) == (1, 3, 5)
    assert policy.launch_grid((9, 2, 1), 4) == (3, 2, 1)
    assert policy.launch_grid((8, 1, 1), 4) == (2, 1, 1)


def test_prepared_program_words_and_grid() -> None:
    from vyre_cuda.backend import PreparedProgram

    program = _xor()

    def prep(k: int) -> PreparedProgram:
        return PreparedProgram(program, "xor", (64, 1, 1), None, program.bound_buffers, 0, None, lambda: "", coarsen=k)

    counts = {"in0": 10, "in1": 11, "out": 1024}
    plain, coarse = prep(1), prep(4)
    assert plain.nwords == 4 and coarse.nwords == 5 == len(param_block_layout(program, 4))
    assert plain.words(counts, 7) == plain.words(counts, 7, (9, 1, 1)) == (7, 10, 11, 1024)
    assert coarse.words(counts, 7, (9, 2, 1)) == (7, 10, 11, 1024, 9)
    assert plain.launch_grid((9, 2, 1)) == (9, 2, 1) and coarse.launch_grid((9, 2, 1)) == (3, 2, 1)
    with pytest.raises(ValueError, match="grid"):
        coarse.words(counts, 7)


def _fill_program(threads: int, words: int) -> Program:
    """Each invocation reads one word of ``words`` (never written) of workgroup memory out."""
    lid = Expr.local_id(0)
    return Program([BufferDecl.output("out", 0, D.U32, threads), BufferDecl.workgroup("mem", words, D.U32)],
                   (threads, 1, 1), [Node.store("out", Expr.invocation_id(0),
                                                Expr.load("mem", Expr.rem(lid, Expr.u32(words))))])


def _fill(code: list[str]) -> list[str]:
    """The zero fill's lines: from the first shared store of zeros to the barrier after it."""
    first = next(k for k, ln in enumerate(code) if "st.shared" in ln and ("], 0;" in ln or "{0, 0, 0, 0}" in ln))
    return code[first:code.index("bar.sync 0;", first)]


@pytest.mark.parametrize("threads, words, stores, guarded", [
    (256, 10761, 11, 2),  # a 43 KB sort pass: 10 whole rounds, a guarded 11th, one guarded tail word
    (256, 4096, 4, 0),  # 16 KB: every thread stores 4 x 16 bytes, no guard
    (64, 64, 1, 1),  # 16 chunks, fewer than the threads: one guarded store
    (32, 2048, 16, 0),  # 16 stores each: the most written out
])
def test_zero_fill_is_written_out_with_constant_offsets(threads: int, words: int, stores: int,
                                                         guarded: int) -> None:
    fill = _fill(_code(emit_ptx(_fill_program(threads, words))))
    st = [ln for ln in fill if "st.shared" in ln]
    assert len(st) == stores + (words % 4 > 0) and not any(ln.startswith("bra") for ln in fill)
    assert sum(ln.startswith("@%p") for ln in st) == guarded
    offsets = [int(m.group(1)) if (m := re.search(r"\+(\d+)\]", ln)) else 0 for ln in st if ".v4." in ln]
    assert offsets == [k * threads * 16 for k in range(stores)]


@pytest.mark.parametrize("threads, words", [(1, 100), (3, 257), (32, 2052)])
def test_zero_fill_of_more_than_16_stores_per_thread_loops(threads: int, words: int) -> None:
    fill = _fill(_code(emit_ptx(_fill_program(threads, words))))
    assert sum(ln.startswith("bra $L") for ln in fill) >= 1 and sum("st.shared.v4" in ln for ln in fill) == 1


@needs_ptxas
def test_zero_fill_shapes_assemble() -> None:
    programs = {f"fill_{t}_{w}": _fill_program(t, w) for t, w in
                ((256, 10761), (64, 64), (32, 2048), (1, 100), (3, 257), (5, 31))}
    assert not assemble({k: emit_ptx(p) for k, p in programs.items()}, "90")
