"""Command-line errors about .vyre text programs speak .vyre text (issue 30): fixes name text syntax such
as ``cast(u32, ...)``, not the Python builder, and ``run``/``emit-ptx`` name the line like ``validate``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BAD = """\
program p workgroup(4, 1, 1)
buffer o: output u32[4] @0
let a = add(u32:1, i32:2)
store o[i32:0] = a
let d = div(u32:1, u32:0)
"""
BUILDER_WORDS = ("Expr.", "Node.", "DataType.", "BufferDecl")


def vyre_cli(tmp_path: Path, *args: str) -> str:
    """stdout and stderr of ``vyre ARGS`` on ``bad.vyre`` (exit status 2: a validation error)."""
    (tmp_path / "bad.vyre").write_text(BAD, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("VYRE_BACKEND", "VYRE_DEBUG")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-m", "vyre.cli", *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stdout + done.stderr
    return done.stdout + done.stderr


@pytest.mark.parametrize("verb", [["validate"], ["run", "--backend", "reference"], ["emit-ptx", "--sm", "80"]])
def test_text_program_errors_name_lines_and_text_syntax(tmp_path, verb):
    out = vyre_cli(tmp_path, verb[0], "bad.vyre", *verb[1:])
    for line in (3, 4, 5):
        assert f"bad.vyre:{line}:" in out, out
    assert "cast(u32, ...)" in out and "select(" in out, out
    assert not any(word in out for word in BUILDER_WORDS), out
