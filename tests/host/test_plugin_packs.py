"""The plugin packs installed as users install them: ``vyre ops``, ``vyre plugins``, the bswap32
lowering and vyre-trace's grid and Chrome-trace output.

The packs are pip-installed into the temporary venv of ``test_registry`` (its ``venv`` fixture);
commands run there with this worktree first on the path, so they test this code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_registry import venv  # noqa: F401 - the fixture that builds the venv with the packs

ROOT = Path(__file__).resolve().parents[2]
TRACE_PACK = ROOT / "plugins" / "vyre-trace"
BSWAP_PROGRAM = """program bswap workgroup(64, 1, 1)
buffer a: read u32[0] @0
buffer o: output u32[64] @1
store o[invocation_id(0)] = call("bits.bswap32", load(a, invocation_id(0)))
"""


def in_venv(python: Path, args: list[str], **env: str) -> subprocess.CompletedProcess:
    """Run ``python args`` in the venv with this worktree first on ``sys.path`` and every plugin enabled."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("VYRE_")}
    full_env.update({"PYTHONPATH": str(ROOT), "VYRE_DISABLE_PLUGINS": ""}, **env)
    return subprocess.run([str(python), *args], capture_output=True, text=True, env=full_env, cwd=ROOT, timeout=300)


def vyre_in(python: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    result = in_venv(python, ["-m", "vyre.cli", *args], **env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def table(stdout: str) -> tuple[list[str], dict[str, list[str]]]:
    """A whitespace table as (header, first column -> cells); multi-word cells are not split apart."""
    lines = [li for li in stdout.splitlines() if li and not li.startswith("warning:")]
    header = lines[0].split()
    return header, {li.split()[0]: li.split() for li in lines[1:]}


# ---- vyre ops / vyre plugins -------------------------------------------------------------------------
def test_ops_lists_each_pack_op_with_the_backends_that_run_it(venv):  # noqa: F811
    header, rows = table(vyre_in(venv, "ops").stdout)
    column = {name: header.index(name) for name in ("kind", "cuda", "reference", "fake-ok")}
    bswap, parity = rows["bits.bswap32"], rows["bits.parity"]
    assert "(u32) -> u32" in " ".join(bswap)
    # the signature "(u32) -> u32" is three whitespace cells: shift header positions after it by 2
    cell = {name: index + 2 for name, index in column.items()}
    assert bswap[cell["kind"]] == "primitive" and parity[cell["kind"]] == "composed"
    assert bswap[cell["cuda"]] == "yes", "the pack's prmt.b32 lowering is not seen by vyre ops"
    assert bswap[cell["reference"]] == "yes" and bswap[cell["fake-ok"]] == "?"
    assert parity[cell["fake-ok"]] == "yes"  # a composed op runs everywhere


def test_ops_says_no_for_a_primitive_op_that_a_backend_does_not_lower(venv):  # noqa: F811
    code = ("import vyre.cli_inspect as c, vyre.ops as o, numpy as np; "
            "op = o.OpDef('test.noop', (o.DataType.U32,), o.DataType.U32, reference=lambda x: x); "
            "print(c.runs_on(op, 'cuda'), c.runs_on(op, 'reference'))")
    result = in_venv(venv, ["-c", code])
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["no", "yes"]


def test_plugins_lists_the_packs_with_distribution_and_hooks(venv):  # noqa: F811
    rows = {li.split()[0]: li for li in vyre_in(venv, "plugins").stdout.splitlines()[1:]}
    assert "vyre-ops-bits 0.1.0" in rows["ops_bits"]
    assert rows["ops_bits"].endswith("vyre_cuda_register_lowerings, vyre_register_ops")
    assert "vyre-trace 0.1.0" in rows["trace"] and rows["trace"].endswith("(no hooks)")
    assert "vyre-fakegpu 0.0.1" in rows["fakegpu"]
    traced = {li.split()[0]: li for li in vyre_in(venv, "plugins", VYRE_TRACE="1").stdout.splitlines()[1:]}
    assert traced["trace"].endswith("vyre_after_dispatch")


# ---- bits.bswap32 on cuda: the PTX (the GPU run is tests/gpu/test_ops_bits.py) --------------------------
@pytest.mark.skipif(not os.environ.get("PATH") or not __import__("shutil").which("ptxas"),
                    reason="ptxas is not on PATH (install the CUDA toolkit)")
def test_bswap32_lowers_to_one_prmt_that_ptxas_assembles(venv, tmp_path: Path):  # noqa: F811
    source = tmp_path / "bswap.vyre"
    source.write_text(BSWAP_PROGRAM)
    ptx = tmp_path / "bswap.ptx"
    vyre_in(venv, "emit-ptx", str(source), "-o", str(ptx))
    text = ptx.read_text()
    assert [li.split()[0] for li in text.splitlines() if "prmt" in li] == ["prmt.b32"]
    assert "0x0123;" in text
    result = subprocess.run(["ptxas", "--gpu-name", "sm_90", str(ptx), "-o", str(tmp_path / "bswap.cubin")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_without_the_pack_bswap32_is_refused_with_a_fix(venv, tmp_path: Path):  # noqa: F811
    source = tmp_path / "bswap.vyre"
    source.write_text(BSWAP_PROGRAM)
    result = in_venv(venv, ["-m", "vyre.cli", "emit-ptx", str(source)], VYRE_DISABLE_PLUGINS="ops_bits")
    assert result.returncode == 2 and "Traceback" not in result.stderr and "Fix:" in result.stderr
    assert "bits.bswap32" in result.stderr


# ---- vyre-trace ----------------------------------------------------------------------------------------
TRACED_WORKLOAD = """
import os, threading, numpy as np, vyre
from vyre.driver.config import DispatchConfig
from vyre.ir import parse
xor = parse(open("examples/xor.vyre").read())
hist = parse(open("examples/histogram.vyre").read())
b = vyre.acquire("reference")
words = np.arange(1000, dtype=np.uint32) * np.uint32(2654435761)
b.dispatch(xor, [words, words], DispatchConfig(grid=(4, 1, 1)))
b.dispatch(hist, [words], DispatchConfig(elements=1000))
t = threading.Thread(target=lambda: b.dispatch(xor, [words, words]))
t.start(); t.join()
try:
    b.dispatch(xor, [words])
except vyre.errors.VyreError:
    pass
print(os.getpid(), threading.get_native_id(), t.native_id)
"""


def test_chrome_trace_has_one_complete_event_per_dispatch(venv, tmp_path: Path):  # noqa: F811
    path = tmp_path / "trace.json"
    result = in_venv(venv, ["-c", TRACED_WORKLOAD], VYRE_TRACE="1", VYRE_TRACE_FORMAT="chrome",
                     VYRE_TRACE_FILE=str(path))
    assert result.returncode == 0, result.stderr
    pid, main_tid, thread_tid = map(int, result.stdout.split())
    assert f"wrote 4 dispatches to {path}" in result.stderr
    trace = json.loads(path.read_text())
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert [e["name"] for e in events] == ["xor", "histogram", "xor", "xor"]
    assert all(e["pid"] == pid and e["cat"] == "dispatch" for e in events)
    assert [e["tid"] for e in events] == [main_tid, main_tid, thread_tid, main_tid]
    starts = [e["ts"] for e in events]
    assert starts[0] == 0 and starts == sorted(starts)
    assert all(isinstance(e["dur"], float) and e["dur"] > 0 for e in events)
    for before, after in zip(events, events[1:]):  # microseconds: dispatches in sequence do not overlap
        assert before["ts"] + before["dur"] <= after["ts"] + 1.0
    # the third derives its grid from the arrays (1000 words / 256); the fourth's inputs are refused
    assert [e["args"]["grid"] for e in events] == [[4, 1, 1], [4, 1, 1], [4, 1, 1], None]
    assert [e["args"]["grid_source"] for e in events] == ["grid", "elements", "buffer sizes", "buffer sizes"]
    assert events[-1]["args"]["error"].startswith("InvalidProgram") and events[0]["args"]["error"] is None
    names = {(e["name"], e["tid"]) for e in trace["traceEvents"] if e["ph"] == "M"}
    assert names == {("process_name", 0), ("thread_name", main_tid), ("thread_name", thread_tid)}


def test_each_trace_line_and_json_record_carries_the_grid(venv, tmp_path: Path):  # noqa: F811
    path = tmp_path / "trace.jsonl"
    result = vyre_in(venv, "run", "examples/xor.vyre", "-i", "a=@random:512", "-i", "b=@random:512",
                     "--backend", "reference", "--grid", "2,1,1", VYRE_TRACE="1", VYRE_TRACE_FILE=str(path))
    assert "vyre-trace: reference dispatch xor grid=2x1x1 " in result.stderr
    (record,) = [json.loads(li) for li in path.read_text().splitlines()]
    assert record["grid"] == [2, 1, 1] and record["grid_source"] == "grid" and record["label"] == "vyre run"
    default = vyre_in(venv, "run", "examples/xor.vyre", "-i", "a=@random:512", "-i", "b=@random:512",
                      "--backend", "reference", VYRE_TRACE="1")
    assert "vyre-trace: reference dispatch xor grid=2x1x1 " in default.stderr  # from the 512-word inputs


def test_an_unknown_trace_format_falls_back_to_jsonl_and_says_how_to_fix_it(venv, tmp_path: Path):  # noqa: F811
    path = tmp_path / "trace.jsonl"
    result = in_venv(venv, ["-c", TRACED_WORKLOAD], VYRE_TRACE="1", VYRE_TRACE_FORMAT="perfetto",
                     VYRE_TRACE_FILE=str(path))
    assert result.returncode == 0, result.stderr
    assert "VYRE_TRACE_FORMAT='perfetto'" in result.stderr and "Fix: set VYRE_TRACE_FORMAT=jsonl or chrome" \
        in result.stderr
    assert len(path.read_text().splitlines()) == 4


# ---- the trace pack's pure functions, in process ---------------------------------------------------------
@pytest.fixture
def trace_pack():
    sys.path.insert(0, str(TRACE_PACK))
    try:
        import vyre_trace.render
        import vyre_trace.tracer

        yield vyre_trace
    finally:
        sys.path.remove(str(TRACE_PACK))


def test_the_timeline_renders_a_chrome_trace_to_png(trace_pack, tmp_path: Path):
    pytest.importorskip("matplotlib")
    from vyre_trace.tracer import TraceRecord, chrome_trace

    records = [TraceRecord("reference", "dispatch", ("xor",), None, (4, 1, 1), "grid", 1_000_000 + 10_000 * i,
                           8_000, 7 + i % 2, None if i != 3 else "InvalidProgram: bad") for i in range(5)]
    trace = chrome_trace(records, pid=42)
    assert [e["ts"] for e in trace["traceEvents"] if e["ph"] == "X"] == [0.0, 10.0, 20.0, 30.0, 40.0]
    out = trace_pack.render.render(trace, tmp_path / "t.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="no complete"):
        trace_pack.render.render(chrome_trace([]), tmp_path / "empty.png")


def test_the_grid_comes_from_the_config_when_it_fixes_it(trace_pack):
    from vyre_trace.tracer import dispatch_grid

    from vyre.driver.config import DispatchConfig
    from vyre.ir import parse

    xor = parse((ROOT / "examples" / "xor.vyre").read_text())
    assert dispatch_grid(xor, DispatchConfig(grid=(3, 2, 1))) == ((3, 2, 1), "grid")
    assert dispatch_grid(xor, DispatchConfig(elements=257)) == ((2, 1, 1), "elements")
    assert dispatch_grid(xor, None) == (None, "buffer sizes")
    assert dispatch_grid(xor, None, (5, 1, 1)) == ((5, 1, 1), "buffer sizes")  # the host passed the grid
    assert dispatch_grid(None, None) == (None, "steps")
    assert np.ceil(257 / xor.workgroup_size[0]) == 2
