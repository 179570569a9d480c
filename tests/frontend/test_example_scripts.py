"""The example scripts run as a user runs them: on the oracle without a GPU, saying so, and a backend
that cannot start is one error line with a Fix (no traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VYRE_BACKEND": ""}
    return subprocess.run([sys.executable, *args], cwd=ROOT / "examples", env=env, capture_output=True, text=True,
                          timeout=120)


def _has_gpu() -> bool:
    try:
        import cupy

        return bool(cupy.cuda.is_available())
    except Exception:  # noqa: BLE001 - any failure means no GPU
        return False


@pytest.mark.skipif(_has_gpu(), reason="a GPU is present: the script runs on cuda")
def test_script_runs_on_the_oracle_and_says_so():
    result = _run("saxpy.py", "-n", "500")
    assert result.returncode == 0, result.stderr
    assert "saxpy: ok on reference (the CPU reference oracle: no GPU backend started)" in result.stdout
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(_has_gpu(), reason="a GPU is present: cuda starts")
def test_unavailable_backend_is_one_error_line():
    result = _run("histogram.py", "-n", "500", "--backend", "cuda")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: backend 'cuda' could not start") and "Fix:" in result.stderr
