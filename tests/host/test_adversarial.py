"""The adversarial catalogue of issue 5 (docs/security.md), on the host: each entry with its expected outcome.

Hostile identifiers, absurd counts, workgroup sizes and grids, out-of-bounds and negative indices,
malformed inputs and deep nesting. Every rejection must be a ``VyreError`` (never a raw Python
exception) whose message ends with an actionable ``Fix: ...`` sentence.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import vyre
from vyre.driver.config import DispatchConfig
from vyre.driver.errors import InvalidProgram, ValidationError, VyreError
from vyre.fuzz.catalogue import (
    ATOMIC_TYPES,
    HOSTILE_NAMES,
    OOB_INDICES,
    STORAGE_TYPES,
    named_program,
    oob_atomic_case,
    oob_load_case,
    oob_store_case,
    poisoned,
)
from vyre.fuzz.wire_blobs import literal, signed, varint
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program, parse, wire
from vyre.reference import run

D = DataType
GID = Expr.invocation_id(0)
LID = Expr.local_id(0)
ROOT = Path(__file__).resolve().parents[2]
PTXAS = shutil.which("ptxas")


# ==== helpers ===================================================================================
def assert_actionable(err: BaseException) -> None:
    """``err`` is a vyre error and every message it carries ends with a ``Fix: ...`` sentence."""
    assert isinstance(err, VyreError), f"{type(err).__name__} is not a VyreError: {err}"
    text = str(err)
    if isinstance(err, ValidationError):
        findings = text.splitlines()[1:]
        assert findings, text
        for line in findings:
            assert re.search(r"\. Fix: \S.*\.$", line), f"finding without a Fix sentence: {line!r}"
    else:
        assert re.search(r"[.)] Fix: \S.*\.$", text, re.S), f"message without a final Fix sentence: {text!r}"


def raises_actionable(kind: type[VyreError], fn, *args, **kwargs) -> VyreError:
    """Call ``fn``; it must raise ``kind`` with a ``Fix:`` sentence. Returns the error."""
    with pytest.raises(kind) as info:
        fn(*args, **kwargs)
    assert_actionable(info.value)
    return info.value


def expect_codes(fn, *codes: str) -> ValidationError:
    """``fn()`` raises ValidationError carrying every code in ``codes``."""
    err = raises_actionable(ValidationError, fn)
    assert set(codes) <= set(err.codes), f"expected {codes}, got {err.codes}"
    return err


def strip_comments(ptx: str) -> str:
    return "\n".join(line.split("//", 1)[0].rstrip() for line in ptx.splitlines())


def assemble(ptx: str, tmp_path: Path, label: str) -> None:
    """Assemble ``ptx`` for sm_90 with ptxas; fails the test with ptxas' message."""
    src = tmp_path / f"{label}.ptx"
    src.write_text(ptx)
    proc = subprocess.run([PTXAS, "--gpu-name", "sm_90", "-o", str(tmp_path / f"{label}.cubin"), str(src)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"ptxas rejected the PTX of {label}:\n{proc.stderr}"


def run_capped(snippet: str, timeout: float = 120) -> dict:
    """Run ``snippet`` in a child Python under a 4 GiB address-space cap; report what it raised.

    Used for dispatches that a broken implementation would answer by allocating without bound
    (the cap turns that into MemoryError instead of an OOM kill of the test run). Returns
    ``{"error": type name, "vyre": is a VyreError, "message": str}`` or ``{"error": None}``.
    """
    code = textwrap.dedent("""
        import json, resource
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
        try:
            import numpy as np
            import vyre
            from vyre.driver.config import DispatchConfig
            from vyre.driver.errors import VyreError
            from vyre.ir import BufferDecl, DataType, Expr, Node, Program
            from vyre.reference import run
            out = {"error": None}
        """) + textwrap.indent(textwrap.dedent(snippet), "    ") + textwrap.dedent("""
        except BaseException as exc:
            out = {"error": type(exc).__name__, "vyre": isinstance(exc, VyreError), "message": str(exc)}
        print(json.dumps(out))
        """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, f"child died (rc {proc.returncode}):\n{proc.stderr[-2000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ==== hostile identifiers =========================================================================
#: names the validator must reject, with the code it reports
BAD_NAMES = {
    "long_100k": ("x" * 100_000, "invalid_name"),
    "lone_surrogate": ("ab\ud800", "invalid_name"),
    "empty": ("", "empty_name"),
}
BENIGN = named_program("benign")


@pytest.mark.parametrize("name", HOSTILE_NAMES.values(), ids=HOSTILE_NAMES.keys())
def test_hostile_name_is_valid_and_round_trips_exactly(name: str) -> None:
    program = named_program(name)
    vyre.validate(program)
    assert parse(program.to_text()) == program
    assert Program.from_wire(program.to_wire()) == program
    assert program.fingerprint() != BENIGN.fingerprint()


@pytest.mark.parametrize("name", HOSTILE_NAMES.values(), ids=HOSTILE_NAMES.keys())
def test_hostile_name_does_not_change_what_the_oracle_computes(name: str) -> None:
    data = np.random.default_rng(5).integers(0, 2**32, 64, dtype=np.uint32)
    expected = run(BENIGN, [data])[0]
    np.testing.assert_array_equal(run(named_program(name), [data])[0], expected)


def without_entry(ptx: str, entry: str) -> str:
    """``ptx`` with comments stripped and its one entry directive's name replaced by ``ENTRY``."""
    directive = f".visible .entry {entry}("
    lines = strip_comments(ptx).splitlines()
    assert lines.count(directive) == 1, f"no entry directive {directive!r}"
    return "\n".join(".visible .entry ENTRY(" if line == directive else line for line in lines)


@pytest.mark.parametrize("name", HOSTILE_NAMES.values(), ids=HOSTILE_NAMES.keys())
def test_hostile_name_never_reaches_ptx(name: str) -> None:
    """Only the kernel name comes from the program name, and only as a plain PTX identifier."""
    from vyre_cuda import emit_ptx, entry_name

    program = named_program(name)
    entry = entry_name(program)
    assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,63}", entry) and entry not in ("WARP_SZ", "vyre_smem", "vyre_main")
    benign, hostile = emit_ptx(BENIGN), emit_ptx(program)
    code = without_entry(hostile, entry)
    assert code == without_entry(benign, "benign"), "a name changed the emitted code"
    assert name not in code or name in benign, f"{name!r} reached the PTX text"
    for line in hostile.splitlines():
        comment = line.partition("//")[2]
        assert comment.isascii() and comment.isprintable(), f"unsanitised comment {line!r}"


@pytest.mark.skipif(PTXAS is None, reason="ptxas is not on PATH (install the CUDA toolkit)")
def test_ptx_of_hostile_names_assembles(tmp_path: Path) -> None:
    from vyre_cuda import emit_ptx

    for label, name in HOSTILE_NAMES.items():
        assemble(emit_ptx(named_program(name), sm="90"), tmp_path, label)


@pytest.mark.parametrize("name, code", BAD_NAMES.values(), ids=BAD_NAMES.keys())
@pytest.mark.parametrize("where", ["buffer", "variable", "program", "region"])
def test_unusable_name_is_rejected_everywhere(name: str, code: str, where: str) -> None:
    from vyre_cuda import emit_ptx

    dst = BufferDecl.output("dst", 0, D.U32, 4)
    if where == "buffer":
        program = Program([BufferDecl.read(name, 1, D.U32), dst], (4, 1, 1),
                          [Node.store("dst", GID, Expr.load(name, GID))])
    elif where == "variable":
        program = Program([dst], (4, 1, 1), [Node.let(name, GID), Node.store("dst", GID, Expr.var(name))])
    elif where == "program":
        program = Program([dst], (4, 1, 1), [Node.store("dst", GID, GID)], name=name or None)
    else:
        program = Program([dst], (4, 1, 1), [Node.region(name, [Node.store("dst", GID, GID)])])
    if where in ("program", "region") and code == "empty_name":
        vyre.validate(program)  # an empty program name / region generator means "none"
        return
    expect_codes(lambda: vyre.validate(program), code)
    expect_codes(lambda: run(program, [np.zeros(4, np.uint32)] if where == "buffer" else []), code)
    expect_codes(lambda: emit_ptx(program), code)
    if code == "empty_name":
        return  # the formats may carry an empty name; the validator rejects it
    expect_codes(program.to_wire, code)
    if code == "invalid_name" and len(name) > 4096:
        expect_codes(program.to_text, code)  # the text form carries only names parse reads back
    else:
        assert parse(program.to_text()) == program  # text may carry it exactly; validation rejects it


def test_encoding_error_says_how_to_fix_the_program() -> None:
    program = Program([BufferDecl.output("o", 0, D.U32, 4)], (4, 1, 1), [Node.let("x" * 5000, GID)])
    err = expect_codes(program.to_wire, "invalid_name")
    assert "to_wire() produced" not in err.fix, err.fix


# ==== absurd counts, workgroup sizes and grids ====================================================
STORE_ONE = [Node.store("o", GID, Expr.u32(1))]


@pytest.mark.parametrize("decl, code", [
    (BufferDecl.output("o", 0, D.U32, 0), "count_required"),
    (BufferDecl.uniform("o", 0, D.U32, 0), "count_required"),
    (BufferDecl.output("o", 0, D.U32, 2**32), "count_too_large"),
    (BufferDecl.output("o", 0, D.U32, 2**64 + 1), "count_too_large"),
    (BufferDecl.output("o", 0, D.U32, -1), "negative_count"),
    (BufferDecl.output("o", -1, D.U32, 4), "negative_binding"),
    (BufferDecl.workgroup("o", 2**32 - 1, D.U32), "workgroup_memory_too_large"),
    (BufferDecl.workgroup("o", 0, D.U32), "count_required"),
    (BufferDecl.output("o", 10**30, D.U32, 4), "binding_too_large"),
], ids=["output0", "uniform0", "2^32", "2^64+1", "negative", "negative_binding", "workgroup_2^32-1",
        "workgroup0", "binding_10^30"])
def test_absurd_buffer_counts_are_validation_errors(decl: BufferDecl, code: str) -> None:
    program = Program([decl], (64, 1, 1), [Node.store("o", LID, Expr.u32(1))])
    expect_codes(lambda: vyre.validate(program), code)
    expect_codes(lambda: run(program, []), code)


def test_largest_u32_count_is_valid_and_a_short_input_names_the_buffer() -> None:
    program = Program([BufferDecl.read("huge", 0, D.U32, 2**32 - 1), BufferDecl.output("o", 1, D.U32, 4)],
                      (4, 1, 1), [Node.store("o", GID, Expr.load("huge", GID))])
    vyre.validate(program)
    assert Program.from_wire(program.to_wire()) == parse(program.to_text()) == program
    err = raises_actionable(InvalidProgram, run, program, [np.zeros(4, np.uint32)])
    assert "'huge'" in str(err) and str(2**32 - 1) in str(err)


@pytest.mark.parametrize("wg, code", [
    ((0, 1, 1), "workgroup_size_invalid"),
    ((1, 0, 1), "workgroup_size_invalid"),
    ((-1, 1, 1), "workgroup_size_invalid"),
    ((2**31, 1, 1), "workgroup_size_too_large"),
    ((2**32 - 1, 2**32 - 1, 2**32 - 1), "workgroup_size_too_large"),
    ((64, 64, 1), "workgroup_size_too_large"),  # every axis fine, product 4096
    ((1024, 1024, 64), "workgroup_size_too_large"),
    ((1, 1, 65), "workgroup_size_too_large"),
], ids=str)
def test_absurd_workgroup_sizes_are_validation_errors(wg: tuple[int, int, int], code: str) -> None:
    from vyre_cuda import emit_ptx

    program = Program([BufferDecl.output("o", 0, D.U32, 4)], wg, STORE_ONE)
    expect_codes(lambda: vyre.validate(program), code)
    expect_codes(lambda: emit_ptx(program), code)


SMALL = Program([BufferDecl.output("o", 0, D.U32, 4)], (1, 1, 1), STORE_ONE, name="small")


@pytest.mark.parametrize("config", [
    DispatchConfig(grid=(2**31, 1, 1)),
    DispatchConfig(grid=(2**32 - 1, 1, 1)),
    DispatchConfig(grid=(1, 2**31, 1)),
    DispatchConfig(grid=(1, 1, 2**32 - 1)),
    DispatchConfig(grid=(2**64, 2**64, 2**64)),  # product over 2^64
    DispatchConfig(grid=(-1, 1, 1)),
    DispatchConfig(grid=(1, 1)),
    DispatchConfig(grid=(1.0, 1, 1)),
    DispatchConfig(grid=(True, 1, 1)),
    DispatchConfig(elements=2**40),
    DispatchConfig(elements=-1),
], ids=repr)
def test_absurd_grids_are_invalid_program(config: DispatchConfig) -> None:
    raises_actionable(InvalidProgram, vyre.acquire("reference").dispatch, SMALL, [], config)


@pytest.mark.parametrize("grid", [(0, 1, 1), (1, 0, 1), (5, 1, 0)])
def test_a_grid_with_a_zero_axis_runs_nothing(grid: tuple[int, int, int]) -> None:
    (out,) = run(SMALL, [], DispatchConfig(grid=grid))
    np.testing.assert_array_equal(out, np.zeros(4, np.uint32))


@pytest.mark.parametrize("config", [
    "DispatchConfig(workgroup_override=(0, 1, 1))",
    "DispatchConfig(grid=(1, 1, 1), workgroup_override=(0, 1, 1))",
    "DispatchConfig(grid=(1, 1, 1), workgroup_override=(-1, 1, 1))",
    "DispatchConfig(grid=(1, 1, 1), workgroup_override=(1, 1))",
    "DispatchConfig(grid=(1, 1, 1), workgroup_override=(2**31, 1, 1))",
    "DispatchConfig(grid=(1, 1, 1), workgroup_override=(64, 64, 1))",
])
def test_absurd_workgroup_override_is_invalid_program(config: str) -> None:
    result = run_capped(f"""
        program = Program([BufferDecl.output("o", 0, DataType.U32, 4)], (1, 1, 1),
                          [Node.store("o", Expr.invocation_id(0), Expr.u32(1))])
        run(program, [], {config})
    """)
    assert result["error"] in ("InvalidProgram", "ValidationError"), result
    assert "Fix: " in result["message"]


def test_grid_within_axis_limits_but_too_many_invocations_is_a_vyre_error() -> None:
    result = run_capped("""
        program = Program([BufferDecl.output("o", 0, DataType.U32, 4)], (1, 1, 1),
                          [Node.store("o", Expr.invocation_id(0), Expr.u32(1))])
        run(program, [], DispatchConfig(grid=(2**31 - 1, 65535, 65535)))
    """)
    assert result["error"] is not None and result["vyre"], result
    assert "Fix: " in result["message"]


# ==== out-of-bounds and negative indices ==========================================================
@pytest.mark.parametrize("index", OOB_INDICES.values(), ids=OOB_INDICES.keys())
@pytest.mark.parametrize("dtype", STORAGE_TYPES, ids=lambda t: t.name)
def test_out_of_bounds_load_gives_a_typed_zero(index: Expr, dtype: DataType) -> None:
    """Global and workgroup loads, stored into poisoned buffers so that the zero is observed."""
    case = oob_load_case(dtype, index)
    for out in run(case.program, case.inputs, case.config):
        assert not out.view(np.uint8).any()  # +0.0 / 0 / false: every bit clear


@pytest.mark.parametrize("index", OOB_INDICES.values(), ids=OOB_INDICES.keys())
@pytest.mark.parametrize("dtype", STORAGE_TYPES, ids=lambda t: t.name)
def test_out_of_bounds_store_does_nothing(index: Expr, dtype: DataType) -> None:
    case = oob_store_case(dtype, index)
    dst, shared_out = run(case.program, case.inputs, case.config)
    assert dst.tobytes() == case.inputs[1].tobytes()
    untouched = oob_store_case(dtype, None)  # the same program without the stores
    assert shared_out.tobytes() == run(untouched.program, untouched.inputs, untouched.config)[1].tobytes()


@pytest.mark.parametrize("index", OOB_INDICES.values(), ids=OOB_INDICES.keys())
@pytest.mark.parametrize("op", list(AtomicOp), ids=lambda op: op.name)
@pytest.mark.parametrize("dtype", ATOMIC_TYPES, ids=lambda t: t.name)
def test_out_of_bounds_atomic_returns_zero_and_writes_nothing(index: Expr, op: AtomicOp, dtype: DataType) -> None:
    case = oob_atomic_case(op, dtype, index)
    acc, old, old_shared, tile_out = run(case.program, case.inputs, case.config)
    poison = poisoned(dtype).tobytes()
    assert acc.tobytes() == poison and tile_out.tobytes() == poison
    assert old.tolist() == [0] * old.size and old_shared.tolist() == [0] * old_shared.size


# ==== malformed inputs ==============================================================================
INPUT_PROGRAM = Program(
    [BufferDecl.read("src", 0, D.U32, 8), BufferDecl.uniform("params", 1, D.U32, 2),
     BufferDecl.read_write("rw", 2, D.F32), BufferDecl.output("o", 3, D.U32, 8)],
    (8, 1, 1), [Node.store("o", GID, Expr.load("src", GID))], name="inputs")
SRC, PARAMS, RW = np.arange(8, dtype=np.uint32), np.ones(2, np.uint32), np.zeros(8, np.float32)
_XFAIL_INPUTS = "vyre/driver/inputs.py: "


def _bad(label: str, inputs: object, names: str, xfail: str | None = None):
    marks = [pytest.mark.xfail(strict=True, reason=_XFAIL_INPUTS + xfail)] if xfail else []
    return pytest.param(inputs, names, id=label, marks=marks)


@pytest.mark.parametrize("inputs, names", [
    _bad("too_few", [SRC, PARAMS], "src, params, rw"),
    _bad("too_many", [SRC, PARAMS, RW, RW], "src, params, rw"),
    _bad("none_at_all", [], "src, params, rw"),
    _bad("bare_array", SRC, "src, params, rw"),
    _bad("bare_bytes", SRC.tobytes(), "src, params, rw"),
    _bad("dict", {"src": SRC, "params": PARAMS, "rw": RW}, "src, params, rw"),
    _bad("shorter_than_declared", [SRC[:7], PARAMS, RW], "'src'"),
    _bad("short_uniform", [SRC, PARAMS[:1], RW], "'params'"),
    _bad("not_a_multiple_of_4_bytes", [SRC, PARAMS, np.zeros(5, np.uint8)], "'rw'"),
    _bad("odd_bytes", [SRC, PARAMS, b"\0" * 7], "'rw'"),
    _bad("list_of_ints", [list(range(8)), PARAMS, RW], "'src'"),
    _bad("str", [SRC, "abcdefgh", RW], "'params'"),
    _bad("none", [SRC, PARAMS, None], "'rw'"),
    _bad("float", [SRC, PARAMS, 1.5], "'rw'"),
    _bad("strided", [np.arange(16, dtype=np.uint32)[::2], PARAMS, RW], "'src'"),
    _bad("fortran_order", [SRC, PARAMS, np.asfortranarray(np.zeros((4, 4), np.float32))], "'rw'"),
    _bad("reversed", [SRC, PARAMS, np.zeros(8, np.float32)[::-1]], "'rw'"),
    _bad("inputs_is_none", None, "src, params, rw"),
    _bad("generator", (x for x in (SRC, PARAMS, RW)), "src, params, rw"),
    _bad("object_dtype", [SRC, PARAMS, np.array([object()] * 8, dtype=object)], "'rw'"),  # would leak addresses
    _bad("datetime_dtype", [SRC, PARAMS, np.zeros(8, "datetime64[s]")], "'rw'"),
])
def test_malformed_inputs_are_invalid_program_naming_the_buffer(inputs: object, names: str) -> None:
    err = raises_actionable(InvalidProgram, vyre.acquire("reference").dispatch, INPUT_PROGRAM, inputs)
    assert names in str(err)


def test_typed_inputs_of_another_dtype_are_refused_and_their_bytes_are_taken_raw() -> None:
    """A typed array must have the buffer's dtype; the same bytes passed untyped are reinterpreted."""
    as_f64 = SRC.view(np.float64)
    with pytest.raises(InvalidProgram, match=r"buffer 'src' is a float64 array.*U32 \(uint32\).*Fix:"):
        run(INPUT_PROGRAM, [as_f64, PARAMS.tobytes(), memoryview(RW)])
    assert run(INPUT_PROGRAM, [as_f64.view(np.uint8), PARAMS.tobytes(), memoryview(RW)])[1].tolist() == list(range(8))


# ==== deep nesting ==================================================================================
DEPTH = 10_000
DEEP_OUT = BufferDecl.output("o", 0, D.U32, 4)


def deep_expression_program() -> Program:
    e = GID
    for _ in range(DEPTH):
        e = Expr.add(e, Expr.u32(1))
    return Program([DEEP_OUT], (4, 1, 1), [Node.store("o", GID, e)])


def deep_if_program() -> Program:
    body = [Node.store("o", GID, Expr.u32(1))]
    for _ in range(DEPTH):
        body = [Node.if_(Expr.bool(True), body)]
    return Program([DEEP_OUT], (4, 1, 1), body)


DEEP = {"expression": deep_expression_program, "ifs": deep_if_program}


@pytest.mark.parametrize("build", DEEP.values(), ids=DEEP.keys())
def test_deep_ir_is_a_validation_error_in_validate_formats_and_emitter(build) -> None:
    from vyre_cuda import emit_ptx

    program = build()
    for entry in (lambda: vyre.validate(program), program.to_text, program.to_wire, program.fingerprint,
                  lambda: emit_ptx(program)):
        expect_codes(entry, "nesting_too_deep")


@pytest.mark.parametrize("build", DEEP.values(), ids=DEEP.keys())
def test_deep_ir_dispatch_is_a_validation_error(build) -> None:
    expect_codes(lambda: vyre.acquire("reference").dispatch(build(), []), "nesting_too_deep")


def test_deep_text_is_a_parse_error() -> None:
    head = "program workgroup(4, 1, 1)\nbuffer o: output u32[4] @0\n"
    ifs = head + "if true {\n" * DEPTH + "store o[u32:0] = u32:1\n" + "}\n" * DEPTH
    expression = head + "store o[u32:0] = " + "neg(" * DEPTH + "u32:1" + ")" * DEPTH + "\n"
    for text in (ifs, expression):
        err = expect_codes(lambda text=text: parse(text), "parse_error")
        assert "deeper than" in str(err)


def _deep_wire(statement_prefix: bytes, statement_suffix: bytes, innermost: bytes, depth: int = DEPTH) -> bytes:
    """A wire blob (valid digest): one output buffer ``o``, then ``prefix * depth + innermost + suffix * depth``."""
    ones = varint(2)  # zigzag(1)
    header = (varint(1) + varint(1) + b"o" + varint(0) + ones * 3 + varint(1) + varint(0)
              + bytes([wire.ACCESSES.index(DEEP_OUT.access), wire.DTYPES.index(D.U32)]) + varint(0) + varint(8))
    return signed(header + varint(1) + statement_prefix * depth + innermost + statement_suffix * depth)


#: ``if true { <next> } else {}`` around the innermost statement: tag, cond, then-count 1 ... else-count 0
IF_PREFIX, IF_SUFFIX = bytes([wire.IF]) + literal(D.BOOL, 1) + varint(1), varint(0)
STORE_0 = bytes([wire.STORE]) + varint(0) + literal(D.U32, 0)  # store o[u32:0] = <value>


def test_deep_wire_is_a_wire_limit_error() -> None:
    ifs = _deep_wire(IF_PREFIX, IF_SUFFIX, STORE_0 + literal(D.U32, 1))
    expression = _deep_wire(b"", b"", STORE_0 + bytes([wire.OPS.index("neg")]) * DEPTH + literal(D.U32, 1))
    for blob in (ifs, expression):
        expect_codes(lambda blob=blob: Program.from_wire(blob), "wire_limit")


def test_deep_wire_blobs_are_well_formed_apart_from_their_depth() -> None:
    """The hand-made blobs decode when shallow, so the test above can only pass on the depth check."""
    body = [Node.store("o", Expr.u32(0), Expr.u32(1))]
    for _ in range(3):
        body = [Node.if_(Expr.bool(True), body)]
    expected = Program([DEEP_OUT], (1, 1, 1), body)
    assert Program.from_wire(_deep_wire(IF_PREFIX, IF_SUFFIX, STORE_0 + literal(D.U32, 1), depth=3)) == expected


def test_released_memoryview_is_a_validation_error() -> None:
    from vyre.ir import wire

    view = memoryview(bytearray(64))
    view.release()
    with pytest.raises(ValidationError) as info:
        wire.from_wire(view)
    assert info.value.codes == ("wire_value",) and "released" in str(info.value) and "Fix:" in str(info.value)
