"""Bounded time and memory for hostile text, wire blobs and dispatches on the reference oracle.

Each hang or blow-up runs in a subprocess with a memory rlimit and a time limit, so a regression
fails the test instead of taking the machine down. Each bound is a ``vyre.errors`` exception with
a ``Fix:``.
"""

from __future__ import annotations

import functools
import os
import resource
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import vyre
from tests.stopwatch import stopwatch
from vyre.driver.config import DispatchConfig
from vyre.driver.errors import DeviceOutOfMemory, DispatchFailed, InvalidProgram, ValidationError
from vyre.fuzz.wire_blobs import body_head, literal, signed, varint
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program, parse, wire
from vyre.ir.generate import generate_case, random_inputs
from vyre.ir.text import MAX_LINE_CHARS, MAX_TEXT_CHARS, parse_with_source_map
from vyre.ir.validate import findings
from vyre.reference import grid as grid_mod

U32 = DataType.U32
GID = Expr.invocation_id(0)
HEAD = "program workgroup(4, 1, 1)\nbuffer o: output u32[4] @0\n"
ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30


def run_limited(code: str, seconds: float, memory: int = 2 * GIB) -> str:
    """Run ``code`` in a fresh interpreter under an address-space rlimit; its stdout, or fail on a hang."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              timeout=seconds, preexec_fn=limit, env=env, cwd=ROOT, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"did not finish within {seconds} s")
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def parse_error(text: str | bytes) -> str:
    with pytest.raises(ValidationError) as info:
        parse(text)
    (finding,) = info.value.findings
    assert finding.code == "parse_error" and finding.fix
    return finding.message


# ---- text ---------------------------------------------------------------------------------------
HOSTILE_TEXT = {
    "f32_digits_no_dot": 'HEAD + "let x = f32:" + "1" * 50_000 + "x\\n"',
    "f32_digits": 'HEAD + "let x = f32:" + "1" * 10_000_000 + "\\n"',
    "line_of_parens": 'HEAD + "let x = " + "(" * 50_000_000 + "\\n"',
    "long_string": 'HEAD + "let \\"" + "a" * 10_000_000 + "\\" = u32:1\\n"',
    "unterminated_string": 'HEAD + "let \\"" + "a" * 10_000_000 + "\\n"',
    "long_ident": 'HEAD + "let " + "a" * 10_000_000 + " = u32:1\\n"',
    "deep_calls": 'HEAD + "let x = " + "neg(" * 1_000_000 + "u32:1" + ")" * 1_000_000 + "\\n"',
    "many_blank_lines": 'HEAD + "\\n" * 60_000_000 + "frob\\n"',
    "many_comment_lines": 'HEAD + "# c\\n" * 20_000_000 + "frob\\n"',
    "many_closing_braces": 'HEAD + "}\\n" * 30_000_000',
    "many_buffers": 'HEAD + "buffer b: read u32[0] @9\\n" * 2_000_000',
}


@pytest.mark.parametrize("expr", HOSTILE_TEXT.values(), ids=HOSTILE_TEXT.keys())
def test_hostile_text_fails_fast_in_bounded_memory(expr: str) -> None:
    out = run_limited(f"""
        from vyre.ir import parse
        from vyre.driver.errors import ValidationError
        HEAD = {HEAD!r}
        text = {expr}
        try:
            parse(text)
            print("parsed")
        except ValidationError as err:
            print(err.codes[0], "Fix:" in str(err))
        """, seconds=20, memory=int(1.5 * GIB))
    assert out.split() == ["parse_error", "True"]


#: one line of just under ``MAX_LINE_CHARS``, each shape one long token (the regex once kept ~180 bytes a character)
LONG_LINE_TOKENS = {
    "string": '"let x = \\"" + "a" * (MAX_LINE_CHARS - 100) + "\\""',
    "escapes": '"let x = \\"" + "\\\\n" * (MAX_LINE_CHARS // 2 - 100) + "\\""',
    "unterminated_string": '"let x = \\"" + "a" * (MAX_LINE_CHARS - 100)',
    "literal": '"let x = u32:" + "1" * (MAX_LINE_CHARS - 100)',
    "dotted_literal": '"let x = f32:" + "1." * (MAX_LINE_CHARS // 2 - 100)',
    "name": '"let x = " + "a" * (MAX_LINE_CHARS - 100)',
    "many_strings": '"let x = min(" + ",".join(["\\"" + "a" * 60_000 + "\\""] * 17) + ")"',
}


@pytest.mark.parametrize("expr", LONG_LINE_TOKENS.values(), ids=LONG_LINE_TOKENS.keys())
def test_long_line_costs_little_memory(expr: str) -> None:
    """A line at the limit is refused with at most 64 MiB more address space than the parser started with."""
    out = run_limited(f"""
        import resource
        from vyre.ir import parse
        from vyre.ir.text import MAX_LINE_CHARS
        from vyre.driver.errors import ValidationError
        text = {HEAD!r} + {expr} + "\\n"
        assert len(text.splitlines()[2]) <= MAX_LINE_CHARS
        size = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmSize:"))
        resource.setrlimit(resource.RLIMIT_AS, (size + (64 << 20), size + (64 << 20)))
        try:
            parse(text)
            print("parsed")
        except ValidationError as err:
            print(err.codes[0], "Fix:" in str(err))
        """, seconds=10)
    assert out.split() == ["parse_error", "True"]


def test_f32_pattern_is_linear() -> None:
    with stopwatch() as watch:
        message = parse_error(HEAD + "let x = f32:" + "1" * 1000 + "x\n")
    assert watch.seconds < 0.5
    assert "bad f32 literal" in message
    assert parse(HEAD + "let x = f32:" + "1" * 1000 + "\nstore o[u32:0] = cast(u32, x)\n")  # within the cap


def test_caps_name_their_limit() -> None:
    assert f"limit of {MAX_LINE_CHARS}" in parse_error(HEAD + "let x = " + "(" * (MAX_LINE_CHARS + 1))
    assert "limit of 1024" in parse_error(HEAD + "let x = u32:" + "1" * 2000 + "\n")
    assert "limit of 65536" in parse_error(HEAD + "let " + "a" * 70_000 + " = u32:1\n")
    assert f"limit of {MAX_TEXT_CHARS}" in parse_error(b" " * (MAX_TEXT_CHARS + 1))


def test_to_text_refuses_what_parse_cannot_read() -> None:
    wide = Program([BufferDecl.output("o", 0, U32, 1)], (1, 1, 1),
                   [Node.let("x", Expr.call("f", *[Expr.var("v" * 100)] * 20_000))])
    with pytest.raises(ValidationError) as info:
        wide.to_text()
    assert info.value.codes == ("line_too_long",)


def test_bare_number_suggests_a_typed_literal() -> None:
    message = parse_error(HEAD + "store o[0] = u32:1\n")
    assert message.startswith("line 3: ") and "u32:0" in message and message.count("line 3") == 1
    assert "i32:-5" in parse_error(HEAD + "let x = -5\n")


def test_source_map_names_the_line_of_each_statement() -> None:
    text = HEAD + "let a = u32:1\nif true {\n  let b = u32:2\n} else {\n\n  store o[i32:0] = a\n}\n"
    program, source = parse_with_source_map(text)
    (finding,) = findings(program)
    assert finding.path == "body[1].otherwise[0].index"
    assert source.line_of(finding.path) == 8
    assert source.line_of("body[1].then[0].value") == 5
    assert source.line_of("body[1]") == 4
    assert source.line_of("buffers[0]") == 2 and source.line_of("workgroup_size") == 1
    assert source.line_of("buffers") == 2
    assert source.line_of("body[7]") is None


def test_cli_validate_prints_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.vyre"
    bad.write_text(HEAD + "let a = u32:1\nif true {\n  store o[i32:0] = a\n}\n")
    typo = tmp_path / "typo.vyre"
    typo.write_text(HEAD + "store o[0] = u32:1\n")
    done = subprocess.run([sys.executable, "-m", "vyre", "validate", str(bad), str(typo)], capture_output=True,
                          text=True, timeout=60, cwd=ROOT, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{bad}:5: [type_mismatch]" in done.stdout
    assert "(at body[1].then[0].index)" in done.stdout
    parse_lines = [line for line in done.stdout.splitlines() if "parse_error" in line]
    assert len(parse_lines) == 1 and parse_lines[0].count("line 3") == 1 and "u32:0" in parse_lines[0]
    assert "Fix:" in done.stdout


# ---- wire ---------------------------------------------------------------------------------------
@functools.cache
def varint_heavy_wires() -> dict[str, bytes]:
    let = bytes([wire.LET, 0])  # let <string 0> = ...
    u32_0, n, million = literal(U32, 0), 200_000, 10**6
    return {
        "one_mb_of_lets_bad_last_byte": signed(body_head("x") + varint(n) + (let + u32_0) * n + b"\0"),
        "call_with_a_million_args": signed(body_head("x") + varint(1) + let + bytes([wire.OPS.index("call")])
                                           + varint(0) + varint(million) + u32_0 * million),
        "five_byte_literals": signed(body_head("x") + varint(n) + (let + literal(U32, 0xFFFFFFFF)) * n),
        "million_barriers": signed(body_head() + varint(million) + bytes([wire.BARRIER]) * million),
        "million_buffer_decls": signed(varint(1) + varint(1) + b"b" + varint(0) + varint(2) * 3 + varint(million)
                                       + (varint(0) + bytes([0, 0]) + varint(0) + varint(0)) * million + b"\0"),
        "million_strings": signed(varint(million) + b"".join(varint(3) + b"%03x" % (i % 4096) for i in range(million))),
    }


@pytest.mark.parametrize("name", varint_heavy_wires())
def test_varint_heavy_wire_fails_early(name: str) -> None:
    blob = varint_heavy_wires()[name]
    tracemalloc.start()
    try:
        with stopwatch() as watch, pytest.raises(ValidationError) as info:
            wire.from_wire(blob)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert watch.seconds < 1.0, "decoding a rejected blob must stop early"
    assert peak < len(blob) // 4 + (1 << 20), (peak, len(blob))
    assert info.value.codes[0].startswith("wire_") and info.value.findings[0].fix


def test_noncanonical_varint_is_refused_where_it_is() -> None:
    body = body_head("x") + varint(1) + bytes([wire.LET, 0]) + literal(U32, 1)[:-1] + b"\x81\x00"
    with pytest.raises(ValidationError) as info:
        wire.from_wire(signed(body))
    assert info.value.codes == ("wire_noncanonical",) and "redundant zero" in str(info.value)


def test_oversized_wire_is_refused_before_hashing() -> None:
    blob = bytes(wire.MAX_WIRE_BYTES + 1)
    with stopwatch() as watch, pytest.raises(ValidationError) as info:
        wire.from_wire(blob)
    assert info.value.codes == ("wire_limit",)
    assert watch.seconds < 0.05


# ---- the oracle ---------------------------------------------------------------------------------
def long_loop() -> Program:
    return Program([BufferDecl.output("o", 0, U32, 1)], (1, 1, 1),
                   [Node.loop("i", Expr.u32(0), Expr.u32(0xFFFFFFFF), [Node.store("o", Expr.u32(0), Expr.var("i"))])])


def varying_loop() -> Program:
    """The same with a trip count that differs per invocation (the masked loop path)."""
    return Program([BufferDecl.output("o", 0, U32, 64)], (64, 1, 1),
                   [Node.loop("i", Expr.invocation_id(0), Expr.u32(0xFFFFFFFF),
                              [Node.store("o", Expr.invocation_id(0), Expr.var("i"))])])


@pytest.mark.parametrize("build", [long_loop, varying_loop])
def test_oracle_honours_timeout(build) -> None:
    backend = vyre.acquire("reference")
    start = time.perf_counter()
    with pytest.raises(DispatchFailed) as info:
        backend.dispatch(build(), [], DispatchConfig(timeout_s=0.3))
    assert info.value.code == "timeout" and "Fix:" in str(info.value)
    assert time.perf_counter() - start < 3.0
    assert backend.dispatch(build(), [], DispatchConfig(grid=(0, 1, 1)))[0].sum() == 0  # still usable


@pytest.mark.parametrize("bad", [-1, float("nan"), "1", True])
def test_oracle_rejects_a_bad_timeout(bad: object) -> None:
    with pytest.raises(InvalidProgram) as info:
        vyre.acquire("reference").dispatch(long_loop(), [], DispatchConfig(timeout_s=bad))
    assert "timeout_s" in str(info.value) and "Fix:" in str(info.value)


def test_dispatch_async_runs_in_the_background_and_times_out() -> None:
    backend = vyre.acquire("reference")
    start = time.perf_counter()
    pending = backend.dispatch_async(long_loop(), [], DispatchConfig(timeout_s=1.0))
    assert time.perf_counter() - start < 0.5 and not pending.done()
    with pytest.raises(TimeoutError):
        pending.result(timeout=0.05)
    with pytest.raises(DispatchFailed) as info:
        pending.result(timeout=10)
    assert info.value.code == "timeout"
    x = np.random.default_rng(7).integers(1, 2**32, 300, dtype=np.uint32)
    copy = Program([BufferDecl.read("x", 0, U32), BufferDecl.output("o", 1, U32, 300)], (64, 1, 1),
                   [Node.store("o", Expr.invocation_id(0), Expr.bitnot(Expr.load("x", Expr.invocation_id(0))))])
    pending = backend.dispatch_async(copy, [x])
    x[:] = 0  # the inputs were copied when the dispatch was made
    np.testing.assert_array_equal(pending.result(timeout=30)[0], ~np.random.default_rng(7).integers(
        1, 2**32, 300, dtype=np.uint32))


def test_huge_grid_with_workgroup_memory_stays_in_bounded_memory() -> None:
    out = run_limited("""
        import vyre
        from vyre.driver.config import DispatchConfig
        from vyre.driver.errors import DispatchFailed
        from vyre.ir import BufferDecl, DataType, Expr, Node, Program
        U32 = DataType.U32
        p = Program([BufferDecl.output("o", 0, U32, 4), BufferDecl.workgroup("w", 12288, U32)], (64, 1, 1),
                    [Node.store("w", Expr.local_id(0), Expr.u32(1)), Node.barrier(),
                     Node.store("o", Expr.u32(0), Expr.load("w", Expr.u32(3)))])
        try:
            vyre.acquire("reference").dispatch(p, [], DispatchConfig(grid=(1 << 20, 1, 1), timeout_s=2))
            print("finished")
        except DispatchFailed as err:
            print(err.code)
        """, seconds=60, memory=int(1.5 * GIB))
    assert out.split() == ["timeout"]  # before: MemoryError (48 GiB of workgroup memory at once)


def histogram_program(bins: int) -> Program:
    i, lid = Expr.invocation_id(0), Expr.local_id(0)
    return Program(
        [BufferDecl.read("data", 0, U32), BufferDecl.output("hist", 1, U32, bins),
         BufferDecl.workgroup("h", bins, U32)],
        (32, 1, 1),
        [Node.if_(Expr.lt(i, Expr.buf_len("data")), [
            Node.let("b", Expr.rem(Expr.load("data", i), Expr.u32(bins))),
            Node.let("old", Expr.atomic(AtomicOp.ADD, "h", Expr.var("b"), Expr.u32(1)))]),
         Node.barrier(),
         Node.if_(Expr.lt(lid, Expr.u32(bins)), [
             Node.let("g", Expr.atomic(AtomicOp.ADD, "hist", lid, Expr.load("h", lid)))])])


@pytest.mark.parametrize("chunk_lanes", [32, 96, 1 << 12])
def test_chunked_execution_matches_one_chunk(monkeypatch: pytest.MonkeyPatch, chunk_lanes: int) -> None:
    rng = np.random.default_rng(chunk_lanes)
    data = rng.integers(0, 2**32, 10_001, dtype=np.uint32)
    cases = [(histogram_program(32), [data], DispatchConfig(elements=data.size))]
    for seed in range(20):
        case = generate_case(4000 + seed, subgroups=seed % 2 == 1)
        cases.append((case.program, random_inputs(case.program, seed), case.config))
    whole = [vyre.reference.run(p, inputs, config) for p, inputs, config in cases]
    monkeypatch.setattr(grid_mod, "CHUNK_LANES", chunk_lanes)
    for (p, inputs, config), expected in zip(cases, whole):
        got = vyre.reference.run(p, inputs, config)
        for a, b in zip(got, expected):
            np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))
    np.testing.assert_array_equal(whole[0][0], np.bincount(data % 32, minlength=32))


def test_chunks_bound_workgroup_memory_and_lane_values() -> None:
    shared = Program([BufferDecl.workgroup("w", 12 * 1024, U32)], (1, 1, 1), [])
    sizes = [c.groups for c in grid_mod.chunks(shared, (1 << 20, 1, 1), (1, 1, 1))]
    assert max(sizes) * 48 * 1024 <= grid_mod.CHUNK_WORKGROUP_BYTES and sum(sizes) == 1 << 20
    small = Program([], (64, 1, 1), [Node.let("x", Expr.u32(1))])
    assert [c.first for c in grid_mod.chunks(small, (5, 3, 2), (64, 1, 1))] == [0]
    big = Program([], (64, 1, 1), [Node.let(f"x{k}", Expr.add(GID, Expr.u32(k))) for k in range(10_000)])
    lanes = [c.lanes for c in grid_mod.chunks(big, (1 << 12, 1, 1), (64, 1, 1))]
    assert max(lanes) * 8 * 40_000 <= grid_mod.CHUNK_VALUE_BYTES and sum(lanes) == 1 << 18


def test_resident_allocation_failure_is_device_out_of_memory() -> None:
    backend = vyre.acquire("reference")
    keep = backend.allocate_resident(16)
    backend.upload_resident(keep, np.arange(4, dtype=np.uint32))
    with pytest.raises(DeviceOutOfMemory) as info:
        backend.allocate_resident(2**40)
    assert info.value.requested == 2**40 and "Fix:" in str(info.value)
    np.testing.assert_array_equal(backend.download_resident(keep).view(np.uint32), np.arange(4, dtype=np.uint32))


def test_dispatch_allocation_failure_is_device_out_of_memory() -> None:
    out = run_limited("""
        import numpy as np, vyre
        from vyre.driver.config import DispatchConfig
        from vyre.driver.errors import DeviceOutOfMemory
        from vyre.ir import BufferDecl, DataType, Expr, Node, Program
        U32 = DataType.U32
        def program(count, dtype=U32):
            return Program([BufferDecl.output("o", 0, dtype, count)], (64, 1, 1),
                           [Node.store("o", Expr.invocation_id(0), Expr.u32(1))])
        b = vyre.acquire("reference")
        for p in (program(1 << 31), program(0xFFFFFFFF, DataType.U8)):
            try:
                b.dispatch(p, [], DispatchConfig(grid=(1, 1, 1)))
            except DeviceOutOfMemory as err:
                print("oom", "Fix:" in str(err))
        print(int(b.dispatch(program(64), [], DispatchConfig(grid=(1, 1, 1)))[0].sum()))
        """, seconds=60, memory=int(1.5 * GIB))
    assert out.split() == ["oom", "True", "oom", "True", "64"]
