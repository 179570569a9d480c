"""The README's tour runs as written (on the oracle here), so the first thing users copy works."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_python_blocks_run(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    assert blocks, "the README has no python example"
    script = tmp_path / "tour.py"
    blocks = [b for b in blocks if not b.startswith("# docs-test: skip")]  # (a GPU-only block says so)
    script.write_text("\n".join(blocks), encoding="utf-8")  # kernels need a real source file
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VYRE_BACKEND": "reference"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
