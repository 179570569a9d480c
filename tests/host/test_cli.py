"""The ``vyre`` command line (SPEC 9), run as a user would: in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vyre.cli_run import random_elements
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def vyre_cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != "VYRE_BACKEND"}
    full_env.update(env)
    return subprocess.run([sys.executable, "-m", "vyre.cli", *args], capture_output=True, text=True,
                          env=full_env, cwd=ROOT, timeout=120)


def assert_clean_error(result: subprocess.CompletedProcess, code: int, *parts: str) -> None:
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "Fix:" in result.stdout + result.stderr
    for part in parts:
        assert part in result.stdout + result.stderr


@pytest.fixture
def invalid_file(tmp_path: Path) -> Path:
    program = Program([BufferDecl.read("a", 0, DataType.U32)], (64, 1, 1),
                      [Node.store("a", Expr.u32(0), Expr.u32(1))], name="bad")
    path = tmp_path / "bad.vyre"
    path.write_text(program.to_text())
    return path


def test_backends_lists_the_oracle_with_rank_and_availability():
    result = vyre_cli("backends")
    assert result.returncode == 0, result.stderr
    line = next(li for li in result.stdout.splitlines() if li.startswith("reference"))
    assert " 900 " in line and "available, device: vyre reference oracle" in line


def test_validate_accepts_the_examples():
    files = sorted(str(p) for p in EXAMPLES.glob("*.vyre"))
    assert len(files) >= 4
    result = vyre_cli("validate", *files)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count(": ok") == len(files)


def test_validate_prints_findings_with_codes_and_fix_lines(invalid_file: Path):
    result = vyre_cli("validate", str(invalid_file))
    assert_clean_error(result, 2, "1 finding(s)", "[")
    assert "    Fix: " in result.stdout


def test_run_on_the_oracle_with_seeded_random_inputs_and_out_dir(tmp_path: Path):
    result = vyre_cli("run", "examples/xor.vyre", "--input", "a=@random:1000", "--input", "b=@random:1000",
                      "--seed", "7", "--backend", "reference", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "backend: reference (CPU reference oracle)" in result.stdout
    rng = np.random.default_rng(7)
    a, b = random_elements(DataType.U32, 1000, rng), random_elements(DataType.U32, 1000, rng)
    assert np.array_equal(np.fromfile(tmp_path / "a.bin", dtype=np.uint32), a ^ b)
    assert f"sum={int((a ^ b).astype(np.int64).sum())}" in result.stdout


def test_run_reads_raw_binary_files_and_summarises_small_histograms(tmp_path: Path):
    data = np.arange(4096, dtype=np.uint32)
    (tmp_path / "data.bin").write_bytes(data.tobytes())
    result = vyre_cli("run", "examples/histogram.vyre", "--input", f"data={tmp_path / 'data.bin'}",
                      "--elements", "data", "--backend", "reference")
    assert result.returncode == 0, result.stderr
    assert "bins: u32[256] = [16, 16, 16" in result.stdout and "histogram: 16x256" in result.stdout


def test_run_without_a_gpu_falls_back_to_the_oracle_and_says_so():
    result = vyre_cli("run", "examples/saxpy.vyre", "--input", "a=@random", "--input", "x=@random:64",
                      "--input", "y=@random:64", VYRE_DISABLE_PLUGINS="cuda")
    assert result.returncode == 0, result.stderr
    assert "running on the CPU reference oracle" in result.stderr
    assert "backend: reference" in result.stdout and "y: f32[64]" in result.stdout


@pytest.mark.parametrize("args, parts", [
    (["--input", "a=@random:8"], ["no --input for buffer(s) b"]),
    (["--input", "a=@random:8", "--input", "b=@random", ], ["sized at dispatch time"]),
    (["--input", "a=@random:8", "--input", "b=@random:8", "--input", "zz=@random:1"], ["zz"]),
    (["--input", "a=nosuchfile.bin", "--input", "b=@random:8"], ["cannot read input file"]),
    (["--input", "a=@random:8", "--input", "b=@random:8", "--grid", "1,2"], ["--grid"]),
    (["--input", "a", "--input", "b=@random:8"], ["NAME=SOURCE"]),
])
def test_run_usage_errors_exit_2_with_a_fix_line(args, parts):
    assert_clean_error(vyre_cli("run", "examples/xor.vyre", "--backend", "reference", *args), 2, *parts)


def test_run_of_an_invalid_or_missing_program_exits_2(invalid_file: Path):
    assert_clean_error(vyre_cli("run", str(invalid_file), "--input", "a=@random:4"), 2, "finding")
    assert_clean_error(vyre_cli("run", "nosuch.vyre"), 2, "cannot read nosuch.vyre")


def test_an_unknown_backend_is_a_runtime_error_exit_1():
    result = vyre_cli("run", "examples/xor.vyre", "--input", "a=@random:8", "--input", "b=@random:8",
                      "--backend", "nosuch")
    assert_clean_error(result, 1, "no backend 'nosuch' is registered")


def test_no_command_prints_help_and_exits_2():
    result = vyre_cli()
    assert result.returncode == 2 and "backends" in result.stdout
