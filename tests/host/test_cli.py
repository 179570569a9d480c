"""The ``vyre`` command line, run as a user would: in a subprocess.

Every error case asserts its exit status, a ``Fix:`` line and no traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import vyre
from vyre.cli import cli_fix, run_command
from vyre.cli_run import MAX_GENERATED_ELEMENTS, count_arg, random_elements
from vyre.driver.errors import BackendUnavailable
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def vyre_cli(*args: str, module: str = "vyre.cli", **env: str) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k not in ("VYRE_BACKEND", "VYRE_DEBUG")}
    full_env.update(env)
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
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


def test_run_of_a_64_bit_program_with_random_f64_and_exact_u64_summary(tmp_path: Path):
    program = Program([BufferDecl.read("a", 0, DataType.F64), BufferDecl.read_write("b", 1, DataType.U64)],
                      (64, 1, 1), [Node.store("b", Expr.invocation_id(0), Expr.add(Expr.cast(
                          DataType.U64, Expr.mul(Expr.load("a", Expr.invocation_id(0)), Expr.f64(1e18))),
                          Expr.u64(2**64 - 1)))], name="wide")
    path = tmp_path / "wide.vyre"
    path.write_text(program.to_text())
    result = vyre_cli("run", str(path), "--input", "a=@random:8", "--input", "b=@zeros:8", "--seed", "3",
                      "--backend", "reference", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    rng = np.random.default_rng(3)
    a = random_elements(DataType.F64, 8, rng)
    assert a.dtype == np.float64 and len(set(a.astype(np.float32).tolist())) == 8
    b = np.fromfile(tmp_path / "b.bin", dtype=np.uint64)
    with np.errstate(invalid="ignore"):
        want = np.where(a > 0, (a * 1e18).astype(np.uint64), 0).astype(np.uint64) + np.uint64(2**64 - 1)
    assert b.tolist() == want.tolist()
    assert f"sum={sum(b.tolist())} min={min(b.tolist())}" in result.stdout


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


# ---- errors that used to be tracebacks ------------------------------------------------------------
XOR_INPUTS = ("--input", "a=@random:8", "--input", "b=@random:8", "--backend", "reference")


def test_run_refuses_an_out_path_that_is_a_file_before_running(tmp_path: Path):
    existing = tmp_path / "result.bin"
    existing.write_bytes(b"keep")
    result = vyre_cli("run", "examples/xor.vyre", *XOR_INPUTS, "--out", str(existing))
    assert_clean_error(result, 2, "is an existing file, not a directory", "--out DIR")
    assert "running" not in result.stderr and existing.read_bytes() == b"keep"


def test_emit_ptx_to_a_missing_directory_is_a_usage_error():
    assert_clean_error(vyre_cli("emit-ptx", "examples/xor.vyre", "-o", "/missing/dir/x.ptx"), 2,
                       "/missing/dir does not exist", "-o")


def test_a_program_file_that_is_not_utf8_is_refused(tmp_path: Path):
    path = tmp_path / "latin1.vyre"
    path.write_bytes("program caf\xe9 workgroup(1, 1, 1)\n".encode("latin-1"))
    for verb in (["validate"], ["run"], ["emit-ptx"]):
        result = vyre_cli(*verb, str(path))
        assert_clean_error(result, 2, "is not UTF-8 text (byte 0xe9 at offset 11)")


@pytest.mark.parametrize("args, parts", [
    (["--seed", "-1"], ["--seed -1 is negative"]),
    (["--show", "-3"], ["--show -3 is negative"]),
    (["--seed", "x"], ["invalid int value", "--help"]),
    (["--grid", "\u00b2,1,1"], ["is not X,Y,Z", "digits 0-9"]),
    (["--grid", "1,1,\u0663"], ["is not X,Y,Z"]),
    (["--elements", "\u00b2"], ["neither a number nor an input buffer"]),
])
def test_bad_numbers_on_the_command_line_are_usage_errors(args, parts):
    assert_clean_error(vyre_cli("run", "examples/xor.vyre", *XOR_INPUTS, *args), 2, *parts)


def test_generated_inputs_are_bounded_before_anything_is_allocated():
    result = vyre_cli("run", "examples/xor.vyre", "--input", "a=@zeros:99999999999999", "--input", "b=@random:8",
                      "--backend", "reference")
    assert_clean_error(result, 2, "asks for 99999999999999 elements", f"limited to {MAX_GENERATED_ELEMENTS} elements",
                       "a=@zeros:N")
    result = vyre_cli("run", "examples/xor.vyre", "--input", "a=@random:\u00b2", "--input", "b=@random:8",
                      "--backend", "reference")
    assert_clean_error(result, 2, "is not a number")


def test_only_ascii_digits_count_as_numbers():
    assert count_arg("42") == 42 and count_arg(" 7 ") == 7
    assert count_arg("\u00b2") is None and count_arg("\u0663") is None and count_arg("-1") is None


def test_a_device_number_in_non_ascii_digits_names_no_device():
    with pytest.raises(BackendUnavailable, match="not a device number"):
        vyre.acquire("reference:\u00b2")
    assert_clean_error(vyre_cli("run", "examples/xor.vyre", "--input", "a=@random:8", "--input", "b=@random:8",
                                "--backend", "reference:\u00b2"), 1, "not a device number")


def test_fuzzing_a_backend_that_cannot_start_prints_one_error():
    result = vyre_cli("--backend", "cuda", "--count", "1", module="vyre.fuzz", CUDA_VISIBLE_DEVICES="",
                      VYRE_DISABLE_PLUGINS="cuda")
    assert_clean_error(result, 1, "python -m vyre.fuzz: error: no backend 'cuda' is registered")
    assert_clean_error(vyre_cli("--count", "-1", module="vyre.fuzz"), 2, "out of range")


def test_wide_fuzzing_of_the_oracle_agrees(tmp_path: Path):
    result = vyre_cli("--backend", "reference", "--count", "6", "--wide", "--seed", "4", "--corpus",
                      str(tmp_path), module="vyre.fuzz")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 programs" in result.stdout and "0 mismatches" in result.stdout and not list(tmp_path.iterdir())


def test_fuzzing_cuda_without_a_gpu_prints_one_error():
    result = vyre_cli("--backend", "cuda", "--count", "1", module="vyre.fuzz", CUDA_VISIBLE_DEVICES="")
    assert_clean_error(result, 1, "backend 'cuda' could not start")


def test_an_unexpected_exception_is_one_line_and_a_fix_unless_debugging():
    code = "import sys; from vyre.cli import run_command; sys.exit(run_command(lambda: {}['missing']))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60,
                            env={k: v for k, v in os.environ.items() if k != "VYRE_DEBUG"})
    assert_clean_error(result, 1, "vyre: internal error: KeyError: 'missing'", "VYRE_DEBUG=1")
    debug = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60,
                           env={**os.environ, "VYRE_DEBUG": "1"})
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "KeyError" in debug.stderr


def test_run_command_maps_memory_and_os_errors_to_fix_lines(capsys):
    def no_memory():
        raise MemoryError

    def no_file():
        open("/missing/dir/file")  # noqa: SIM115 - the error is the point

    assert run_command(no_memory) == 1 and "out of host memory" in capsys.readouterr().err
    assert run_command(no_file) == 1
    err = capsys.readouterr().err
    assert "No such file or directory (/missing/dir/file)" in err and "Fix:" in err


# ---- command-line advice instead of Python advice ---------------------------------------------------
def test_the_grid_error_names_the_grid_flag(tmp_path: Path):
    program = Program([BufferDecl.read_write("a", 0, DataType.U32)], (8, 8, 1),
                      [Node.store("a", Expr.local_id(0), Expr.u32(1))], name="square")
    path = tmp_path / "square.vyre"
    path.write_text(program.to_text())
    result = vyre_cli("run", str(path), "--input", "a=@random:64", "--backend", "reference")
    assert_clean_error(result, 2, "no grid was given", "Fix: pass --grid X,Y,Z")
    assert "DispatchConfig" not in result.stderr


def test_an_old_ptx_version_names_the_ptx_version_flag():
    result = vyre_cli("emit-ptx", "examples/xor.vyre", "--ptx-version", "7.0")
    assert_clean_error(result, 1, "Fix: pass --ptx-version 7.8 or newer")
    assert "ptx_version=" not in result.stderr and "None" not in result.stderr


def test_an_unknown_target_names_the_sm_flag():
    assert_clean_error(vyre_cli("emit-ptx", "examples/xor.vyre", "--sm", "10"), 1, "Fix: pass --sm with one of sm_70")


def test_library_fixes_that_name_python_calls_read_as_flags():
    from vyre.driver.config import FIX_GRID
    from vyre_cuda.testing import FIX_DRIVER, FIX_LOST, FIX_NO_DEVICE, FIX_NO_DRIVER

    python_advice = [
        FIX_GRID, "pass DispatchConfig(grid=(gx, gy, gz)).", "pass DispatchConfig(elements=N).",
        "pass ptx_version='8.0' or newer (or None to choose automatically).",
        "install a GPU backend with its CuPy extra (pip install 'vyre-cuda[cuda12]') on a machine with a GPU, "
        "or run on the CPU oracle with acquire('reference') / acquire(allow_reference=True) / --backend reference.",
        FIX_NO_DEVICE, FIX_NO_DRIVER, FIX_DRIVER, FIX_LOST,
        "the device context is unusable: acquire a new backend (vyre.acquire()) and rerun.",
    ]
    for fix in python_advice:
        advice = cli_fix(fix)
        assert "acquire(" not in advice and "DispatchConfig" not in advice and "ptx_version" not in advice, advice
        assert "--" in advice or "rerun the command" in advice, advice
    assert cli_fix("declare the buffer read_write.") == "declare the buffer read_write."


# ---- vyre plugins / vyre ops (with the packs installed: tests/host/test_plugin_packs.py) --------------
def test_plugins_lists_each_plugin_with_its_distribution_and_hooks():
    result = vyre_cli("plugins")
    assert result.returncode == 0, result.stderr
    cuda = next(li for li in result.stdout.splitlines() if li.startswith("cuda "))
    assert "vyre-cuda" in cuda and "vyre_cli_commands" in cuda and "vyre_register_backends" in cuda
    reference = next(li for li in result.stdout.splitlines() if li.startswith("reference "))
    assert reference.endswith("vyre_register_backends")
    disabled = vyre_cli("plugins", VYRE_DISABLE_PLUGINS="cuda")
    assert "(disabled by VYRE_DISABLE_PLUGINS)" in next(li for li in disabled.stdout.splitlines()
                                                        if li.startswith("cuda "))


def test_ops_says_when_no_op_pack_is_installed():
    result = vyre_cli("ops", VYRE_DISABLE_PLUGINS="ops_bits")
    assert result.returncode == 0, result.stderr
    assert "(no ops registered: install an op pack" in result.stdout


def test_doctor_gives_command_line_advice():
    result = vyre_cli("doctor")
    assert "Traceback" not in result.stderr and result.returncode in (0, 1)
    assert "acquire(" not in result.stdout + result.stderr


def test_generated_inputs_larger_than_half_the_free_memory_are_refused(monkeypatch):
    import vyre.cli_run as cli_run
    from vyre.cli import UsageError

    decl = BufferDecl.read("a", 0, DataType.U32)
    monkeypatch.setattr(cli_run, "available_memory", lambda: 8000)
    rng = np.random.default_rng(0)
    assert cli_run.load_input(decl, "@zeros:1000", rng).nbytes == 4000  # exactly half: allowed
    with pytest.raises(UsageError, match=r"4004 bytes.*4000 bytes \(half the free memory\)") as info:
        cli_run.load_input(decl, "@random:1001", rng)
    assert info.value.fix == "write a smaller a=@random:N."


def test_no_backend_that_starts_is_explained_with_the_backend_flag():
    result = vyre_cli("run", "examples/xor.vyre", "--input", "a=@random:8", "--input", "b=@random:8",
                      VYRE_DISABLE_PLUGINS="cuda,reference")
    assert_clean_error(result, 1, "no backend could start", "--backend reference")
    assert "acquire(" not in result.stderr


def test_a_cuda_backend_that_cannot_start_gives_command_line_advice():
    result = vyre_cli("run", "examples/xor.vyre", "--input", "a=@random:8", "--input", "b=@random:8",
                      "--backend", "cuda", CUDA_VISIBLE_DEVICES="")
    assert_clean_error(result, 1, "backend 'cuda' could not start")
    assert "acquire(" not in result.stderr


def test_a_reader_that_stops_early_gets_no_broken_pipe_traceback():
    files = ["examples/xor.vyre"] * 5000
    proc = subprocess.Popen([sys.executable, "-m", "vyre.cli", "validate", *files], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT, text=True)
    assert proc.stdout.readline().startswith("examples/xor.vyre: ok")
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert err == "", err  # no traceback, and no error either: the reader chose to stop
