"""emit_ptx: determinism, name hygiene, ABI, lean element-wise code, op calls, no CuPy import."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from catalogue import all_programs
from codegen_support import assemble, elementwise, needs_ptxas

from vyre.driver.errors import UnsupportedFeature, ValidationError
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.ops import OpDef, register_op
from vyre_cuda import ENTRY_NAME, emit_ptx, param_block_layout, register_lowering
from vyre_cuda.testing import unregister_lowering

D = DataType
HOSTILE = ["a; ret; //", "}", "x\ny", "%r1", "ünï 名前", "$L1:", ".entry evil(", "\\", "a" * 4000, "b" * 10_000]


def _xor() -> Program:
    return elementwise(Expr.bitxor, (D.U32, D.U32), D.U32, name="xor")


def test_emit_is_deterministic() -> None:
    for name, program in list(all_programs().items())[::7]:
        assert emit_ptx(program) == emit_ptx(program), name
        assert emit_ptx(program, sm="80") == emit_ptx(program, sm="80"), name


def _named(names: list[str], program_name: str) -> Program:
    """A program using every kind of identifier: buffers, lets, loop variable, region, name."""
    a, b, out, wg, v, k = names
    i = Expr.var(v)
    return Program(
        [BufferDecl.read(a, 0, D.U32), BufferDecl.read(b, 1, D.F32), BufferDecl.output(out, 2, D.U32, 64),
         BufferDecl.workgroup(wg, 64, D.U32)],
        (64, 1, 1),
        [Node.let(v, Expr.invocation_id(0)),
         Node.store(wg, Expr.local_id(0), Expr.load(a, i)),
         Node.barrier(),
         Node.region(program_name, [Node.loop(k, Expr.u32(0), Expr.buf_len(a), [
             Node.store(out, i, Expr.add(Expr.load(wg, Expr.var(k)), Expr.cast(D.U32, Expr.load(b, Expr.var(k)))))])])],
        name=program_name)


def _strip_comments(ptx: str) -> str:
    """``ptx`` without comment lines, its kernel renamed ``ENTRY`` (the one place a program name goes)."""
    return "\n".join(re.sub(r"^\.visible \.entry \w+\(", ".visible .entry ENTRY(", line)
                     for line in ptx.splitlines() if not line.lstrip().startswith("//"))


@pytest.mark.parametrize("hostile", HOSTILE, ids=lambda s: repr(s[:12]))
def test_hostile_names_cannot_change_the_ptx(hostile: str) -> None:
    benign = emit_ptx(_named(["a", "b", "out", "wg", "i", "k"], "p"))
    names = [f"{hostile}{n}" for n in "abcdef"]
    try:
        text = emit_ptx(_named(names, hostile))
    except ValidationError as exc:  # over-long names are rejected before lowering
        assert "invalid_name" in exc.codes
        return
    assert _strip_comments(text) == _strip_comments(benign)
    for line in text.splitlines():
        if line.lstrip().startswith("//"):
            assert re.fullmatch(r"[ -~]*", line) and ";" not in line and "}" not in line


def test_abi_and_param_block_layout() -> None:
    program = Program(
        [BufferDecl.output("o", 2, D.U32, 8), BufferDecl.workgroup("w", 4, D.U32), BufferDecl.read("r", 0, D.U32)],
        (32, 1, 1), [Node.store("o", Expr.local_id(0), Expr.add(Expr.buf_len("r"), Expr.buf_len("o")))])
    assert param_block_layout(program) == ["elements", "count:r", "count:o"]
    ptx = emit_ptx(program)
    assert ptx.count(".param .u64") == 3 and f".visible .entry {ENTRY_NAME}(" in ptx  # unnamed: the fallback
    assert "[%rd2+4]" in ptx and "[%rd2+8]" in ptx  # count words 1 and 2 of the parameter block


def test_elementwise_kernel_is_lean() -> None:
    ptx = emit_ptx(_xor())
    body = _strip_comments(ptx)
    assert body.count("ld.global.nc.u32") == 5  # 3 counts from the parameter block + 2 inputs
    assert body.count("mul.wide.u32") == 3 and body.count("st.global.u32") == 1
    assert body.count("ld.param.u64") == 4 and "div" not in body and "bra" not in body


@needs_ptxas
def test_elementwise_kernel_registers() -> None:
    import shutil
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(emit_ptx(_xor()))
    out = subprocess.run([shutil.which("ptxas"), "-v", "--gpu-name", "sm_90", "-o", "/dev/null", f.name],
                         capture_output=True, text=True, check=True).stderr
    assert "0 bytes spill" in out and int(re.search(r"Used (\d+) registers", out).group(1)) <= 24


def test_ptx_version_choice() -> None:
    program = _xor()
    assert ".version 7.8\n.target sm_90" in emit_ptx(program)
    assert ".version 7.0\n.target sm_80" in emit_ptx(program, sm="sm_80")
    assert ".version 8.4\n" in emit_ptx(program, ptx_version="8.4")
    with pytest.raises(UnsupportedFeature):
        emit_ptx(program, sm="90", ptx_version="7.0")
    with pytest.raises(UnsupportedFeature):
        emit_ptx(program, sm="42")


def test_invalid_programs_are_rejected_before_lowering() -> None:
    bad = Program([BufferDecl.read("a", 0, D.U32)], (64, 1, 1), [Node.store("a", Expr.u32(0), Expr.u32(1))])
    with pytest.raises(ValidationError):
        emit_ptx(bad)


def _call_program(op_id: str, result: DataType = D.U32) -> Program:
    return elementwise(lambda a, b: Expr.call(op_id, a, b), (D.U32, D.U32), result)


def test_composed_op_is_expanded_with_arguments_evaluated_once() -> None:
    register_op(OpDef("codegen_test.sq_plus", (D.U32, D.U32), D.U32,
                      expand=lambda a, b: Expr.add(Expr.mul(a, a), b)))
    ptx = emit_ptx(_call_program("codegen_test.sq_plus"))
    assert "mul.lo.u32" in ptx and ptx.count("ld.global.nc.u32") == 5


@needs_ptxas
def test_primitive_op_uses_the_registered_lowering() -> None:
    import numpy as np

    register_op(OpDef("codegen_test.avg", (D.U32, D.U32), D.U32,
                      reference=lambda a, b: ((a.astype(np.uint64) + b) >> 1).astype(np.uint32)))
    with pytest.raises(UnsupportedFeature, match="codegen_test.avg"):
        emit_ptx(_call_program("codegen_test.avg"))

    def avg(ctx, a: str, b: str) -> str:
        assert ctx.arg_types == (D.U32, D.U32) and ctx.result_type is D.U32
        wide = ctx.reg("rd")
        ctx.emit(f"add.u64 {wide}, {ctx.reg('rd')}, 0")  # exercise fresh registers of every kind
        out = ctx.reg()
        ctx.emit(f"shr.u32 {out}, {a}, 1")
        ctx.emit(f"shr.u32 {out}, {b}, 1;")
        return out

    register_lowering("codegen_test.avg", avg)
    try:
        assert not assemble({"avg": emit_ptx(_call_program("codegen_test.avg"))}, "90")
    finally:
        unregister_lowering("codegen_test.avg")


def test_lowerings_passed_to_emit_ptx_replace_the_registry() -> None:
    import numpy as np

    register_op(OpDef("codegen_test.half", (D.U32,), D.U32, reference=lambda a: (a >> 1).astype(np.uint32)))

    def half(ctx, a: str) -> str:
        out = ctx.reg()
        ctx.emit(f"shr.u32 {out}, {a}, 1")
        return out

    program = elementwise(lambda a: Expr.call("codegen_test.half", a), (D.U32,), D.U32)
    assert "shr.u32" in emit_ptx(program, lowerings={"codegen_test.half": half})  # not registered: passed in
    register_lowering("codegen_test.half", half)
    try:
        with pytest.raises(UnsupportedFeature, match="codegen_test.half"):
            emit_ptx(program, lowerings={})  # registered, but the caller's table has none
    finally:
        unregister_lowering("codegen_test.half")


def test_importing_and_emitting_never_imports_cupy() -> None:
    code = ("import sys; import vyre_cuda; from vyre.ir import *; "
            "p = Program([BufferDecl.output('o', 0, DataType.U32, 4)], (32, 1, 1), "
            "[Node.store('o', Expr.local_id(0), Expr.u32(1))]); vyre_cuda.emit_ptx(p); "
            "assert 'cupy' not in sys.modules, 'cupy imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def _guarded_loop(cond: Expr) -> Program:
    """``for k in 0..1000: if (cond) { flag = k >= a[i] }``."""
    i = Expr.var("i")
    return Program(
        [BufferDecl.read("a", 0, D.U32), BufferDecl.read_write("out", 1, D.U32)], (64, 1, 1),
        [Node.let("i", Expr.invocation_id(0)), Node.let("flag", Expr.bool(False)),
         Node.loop("k", Expr.u32(0), Expr.u32(1000), [
             Node.if_(cond, [Node.assign("flag", Expr.ge(Expr.var("k"), Expr.load("a", i)))])]),
         Node.store("out", i, Expr.select(Expr.var("flag"), Expr.u32(1), Expr.u32(0)))],
        name="guarded")


@needs_ptxas
def test_a_loop_guarded_by_a_variable_stops_when_the_guard_turns() -> None:
    """``loop { if (not flag) ... }``: each trip's one exit test is ``past the end or flag`` (a trip
    that finds ``flag`` set ends the loop: later trips could do nothing); a guard that reads the
    loop variable keeps every trip. One test, not a second exit branch: ptxas 13.0 dropped a
    separate guard branch from nested loops (the sort's look-back then never stopped)."""
    stops = emit_ptx(_guarded_loop(Expr.not_(Expr.var("flag"))))
    keeps = emit_ptx(_guarded_loop(Expr.not_(Expr.eq(Expr.var("k"), Expr.u32(7)))))
    exit_test = re.compile(r"or\.pred (%p\d+), %p\d+, %p\d+;\n\t@\1 bra ")
    assert exit_test.search(stops) and not exit_test.search(keeps)
    assert assemble({"stops": stops, "keeps": keeps}, "90") == []


def _reads_uniform_word(index: Expr) -> Program:
    """``out[i] = sum over 3 trips of (p[index] + i)``, with ``p[index]`` also read again under a branch."""
    i, p = Expr.var("i"), Expr.load("p", index)
    return Program([BufferDecl.uniform("p", 0, DataType.U32, 4), BufferDecl.output("out", 1, DataType.U32, 64)],
                   (64, 1, 1),
                   [Node.let("i", Expr.invocation_id(0)), Node.let("acc", Expr.u32(0)),
                    Node.loop("k", Expr.u32(0), Expr.u32(3), [Node.assign("acc", Expr.add(Expr.var("acc"),
                                                                                           Expr.add(p, i)))]),
                    Node.if_(Expr.lt(i, p), [Node.assign("acc", Expr.add(Expr.var("acc"), p))]),
                    Node.store("out", i, Expr.var("acc"))], name="uniform_word")


@needs_ptxas
def test_a_uniform_word_at_a_literal_index_is_loaded_once_after_the_wait() -> None:
    """Codegen 5: one load of ``p[2]`` for its five uses, after ``griddepcontrol.wait`` (a previous
    kernel may write the buffer) and before the body; a uniform buffer at a varying index is not."""
    once = emit_ptx(_reads_uniform_word(Expr.u32(2)))
    loads = [ln for ln in once.splitlines() if "ld.global.nc" in ln and "+" not in ln]  # not param-block words
    assert len(loads) == 1
    assert once.index("griddepcontrol.wait;") < once.index(loads[0]) < once.index("bra")
    varying = emit_ptx(_reads_uniform_word(Expr.rem(Expr.var("i"), Expr.u32(4))))
    assert len([ln for ln in varying.splitlines() if "ld.global.nc" in ln and "+" not in ln]) == 3  # as written
    assert assemble({"once": once, "varying": varying}, "90") == []
