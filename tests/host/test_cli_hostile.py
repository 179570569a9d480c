"""``vyre run`` and ``vyre validate`` given hostile programs and input paths (issue 30).

Output files stay inside ``--out`` whatever the buffer names, existing files are kept unless
``--force``, program-controlled names are printed with control characters escaped, and input and
program files are checked (regular file, size) before a byte is read. Each run is a subprocess
under an address-space rlimit and a time limit.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from vyre.cli import printable
from vyre.cli_run import output_file_name
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

ROOT = Path(__file__).resolve().parents[2]
XOR = str(ROOT / "examples" / "xor.vyre")
MEMORY = 1 << 30
TERMINAL_ESCAPE = "\x1b]0;owned\x07"


def vyre_limited(*args: str, seconds: float = 10) -> subprocess.CompletedProcess:
    """``python -m vyre.cli ARGS`` under a 1 GiB address-space rlimit; fails the test on a hang."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))

    env = {k: v for k, v in os.environ.items() if k not in ("VYRE_BACKEND", "VYRE_DEBUG")}
    env.update(PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    try:
        return subprocess.run([sys.executable, "-m", "vyre.cli", *args], capture_output=True, text=True, env=env,
                              cwd=ROOT, timeout=seconds, preexec_fn=limit, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"vyre {' '.join(args)} did not finish within {seconds} s")


def assert_usage_error(result: subprocess.CompletedProcess, *parts: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr and lines[-1].startswith("Fix: "), result.stderr
    for part in parts:
        assert part in result.stderr, result.stderr


def hostile_program(tmp_path: Path) -> Path:
    """A program whose output names climb out of a directory, are absolute or hold terminal escapes."""
    names = ["../escape", str(tmp_path / "absolute"), TERMINAL_ESCAPE, ".hidden", "%41", "A"]
    buffers = [BufferDecl.output(name, i, DataType.U32, 4) for i, name in enumerate(names)]
    body = [Node.store(b.name, Expr.invocation_id(0), Expr.u32(i + 1)) for i, b in enumerate(buffers)]
    path = tmp_path / "hostile.vyre"
    path.write_text(Program(buffers, (4, 1, 1), body, name=f"{TERMINAL_ESCAPE}prog").to_text())
    return path


# ---- --out ----------------------------------------------------------------------------------------
def test_output_names_stay_inside_the_out_directory(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = vyre_limited("run", str(hostile_program(tmp_path)), "--backend", "reference", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "escape.bin").exists() and not (tmp_path / "absolute.bin").exists()
    written = sorted(p.name for p in out.iterdir())
    assert len(written) == 6 and all(p.is_file() and p.parent == out for p in out.iterdir())
    assert not any(name.startswith(".") or "/" in name or "\x1b" in name for name in written), written
    assert "A.bin" in written  # a plain name keeps its plain file name
    assert len(set(written)) == 6


def test_program_names_are_printed_with_control_characters_escaped(tmp_path: Path) -> None:
    result = vyre_limited("run", str(hostile_program(tmp_path)), "--backend", "reference", "--out",
                          str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    for stream in (result.stdout, result.stderr):
        assert "\x1b" not in stream and "\x07" not in stream
    assert "\\x1b]0;owned\\x07" in result.stdout and "\\x1b]0;owned\\x07prog" in result.stderr


def test_existing_output_files_are_kept_unless_forced(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.bin").write_bytes(b"keep me")
    args = ("run", XOR, "--input", "a=@zeros:8", "--input", "b=@zeros:8", "--backend", "reference", "--out", str(out))
    assert_usage_error(vyre_limited(*args), "a.bin", "--force")
    assert (out / "a.bin").read_bytes() == b"keep me"
    result = vyre_limited(*args, "--force")
    assert result.returncode == 0, result.stderr
    assert (out / "a.bin").read_bytes() == bytes(32)


def test_a_forced_write_replaces_a_planted_symlink_instead_of_following_it(tmp_path: Path) -> None:
    out, victim = tmp_path / "out", tmp_path / "victim"
    out.mkdir()
    victim.write_bytes(b"precious")
    (out / "a.bin").symlink_to(victim)
    args = ("run", XOR, "--input", "a=@zeros:8", "--input", "b=@zeros:8", "--backend", "reference", "--out", str(out))
    assert_usage_error(vyre_limited(*args), "a.bin", "--force")
    assert vyre_limited(*args, "--force").returncode == 0
    assert victim.read_bytes() == b"precious"
    assert not (out / "a.bin").is_symlink() and (out / "a.bin").read_bytes() == bytes(32)


def test_output_file_names_are_safe_and_distinct() -> None:
    names = ["a", "A", "../x", "/abs/x", ".", "..", "", "a/b", "a%2Fb", "x" * 4096, "x" * 4095 + "y", "é", "-n",
             "con", "\0", "a.b"]
    files = [output_file_name(n) for n in names]
    assert len(set(files)) == len(files)
    for f in files:
        assert f.endswith(".bin") and "/" not in f and "\0" not in f and not f.startswith((".", "-"))
        assert len(f.encode()) <= 255 and f.isascii() and f.isprintable()
    assert output_file_name("a") == "a.bin" and output_file_name("a.b") == "a.b.bin"


def test_printable_escapes_control_and_format_characters() -> None:
    assert printable("plain name") == "plain name"
    assert printable("\x1b[2J\x07\u202e\n") == "\\x1b[2J\\x07\\u202e\\n"


# ---- reading files ----------------------------------------------------------------------------------
@pytest.mark.parametrize("source", ["/dev/zero", "fifo", "directory"])
def test_an_input_that_is_not_a_regular_file_is_refused_without_reading(tmp_path: Path, source: str) -> None:
    if source == "fifo":
        os.mkfifo(tmp_path / "fifo")
    if source == "directory":
        (tmp_path / "directory").mkdir()
    path = source if source.startswith("/") else str(tmp_path / source)
    result = vyre_limited("run", XOR, "--input", f"a={path}", "--input", "b=@zeros:8", "--backend", "reference")
    assert_usage_error(result, "not a regular file", path)


@pytest.mark.parametrize("source", ["/dev/zero", "fifo"])
@pytest.mark.parametrize("verb", ["run", "validate"])
def test_a_program_file_that_is_not_a_regular_file_is_refused(tmp_path: Path, source: str, verb: str) -> None:
    if source == "fifo":
        os.mkfifo(tmp_path / "fifo")
    path = source if source.startswith("/") else str(tmp_path / source)
    result = vyre_limited(verb, path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "not a regular file" in result.stdout + result.stderr and "Fix:" in result.stdout + result.stderr


def test_an_input_file_over_the_size_limit_is_refused_before_reading(tmp_path: Path) -> None:
    huge = tmp_path / "huge.bin"
    with open(huge, "wb") as f:
        f.truncate(1 << 42)  # sparse: 4 TiB, more than 2^32 - 1 u32 elements
    result = vyre_limited("run", XOR, "--input", f"a={huge}", "--input", "b=@zeros:8", "--backend", "reference")
    assert_usage_error(result, "bytes", "limit")


def test_a_program_file_over_the_text_limit_is_refused_before_reading(tmp_path: Path) -> None:
    huge = tmp_path / "huge.vyre"
    with open(huge, "wb") as f:
        f.truncate(1 << 36)  # sparse 64 GiB
    result = vyre_limited("validate", str(huge))
    assert result.returncode == 2 and "limit" in result.stdout + result.stderr, result.stdout + result.stderr
