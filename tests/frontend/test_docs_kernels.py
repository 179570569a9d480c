"""The code samples of docs/kernels.md and the README tour run as written (from a file, like a user's)."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _python_blocks(path: Path) -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)
    return [b for b in blocks if not b.startswith("# docs-test: skip")]  # GPU-only blocks say so


@pytest.mark.parametrize(("doc", "index"),
                         [("docs/kernels.md", 0), ("docs/kernels.md", 2), ("docs/kernels.md", 4), ("README.md", 0),
                          ("README.md", 1)])
def test_sample_runs(doc, index, tmp_path, capsys):
    blocks = _python_blocks(ROOT / doc)
    prelude = "import numpy as np\nimport vyre\n" if doc == "README.md" and index == 1 else ""
    script = tmp_path / "sample.py"
    script.write_text(prelude + blocks[index], encoding="utf-8")
    runpy.run_path(str(script), run_name="__main__")


def test_readme_first_sample_is_a_kernel():
    assert "@vyre.kernel" in _python_blocks(ROOT / "README.md")[0]
