"""Every python block of README.md and docs/*.md runs as written, on its own (issue 30).

Each block is written to a file of its own (kernels need a real source file) and run in a fresh
interpreter, with no earlier block's names, on whatever backend ``vyre.acquire(allow_reference=True)``
finds: here, without a GPU, the CPU oracle. A block that cannot run here says so in its first line,
visibly in the rendered page: ``# docs-test: skip (reason)``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = re.compile(r"\A# docs-test: skip \((.+)\)\n")
SECONDS = 120  # the slowest block (a million-element vyre.lib tour on the oracle) takes about 15 s


def python_blocks() -> list[tuple[str, int, str]]:
    """``(doc, index, code)`` of every python block, in document order."""
    blocks = []
    for doc in DOCS:
        for index, code in enumerate(re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)):
            blocks.append((str(doc.relative_to(ROOT)), index, code))
    return blocks


BLOCKS = python_blocks()


@pytest.mark.parametrize(("doc", "index", "code"), BLOCKS, ids=[f"{d}[{i}]" for d, i, _ in BLOCKS])
def test_python_block_runs_on_its_own(doc, index, code, tmp_path):
    skip = SKIP.match(code)
    if skip:
        pytest.skip(f"{doc} block {index}: {skip[1]}")
    if re.search(r"^import dask|^from distributed", code, re.M):
        pytest.importorskip("distributed", reason="the vyre.dask examples need the dask extra")
    script = tmp_path / f"block_{index}.py"
    script.write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("VYRE_BACKEND", "VYRE_DEBUG")}
    env.update(PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    try:
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, env=env,
                              timeout=SECONDS)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{doc} block {index} did not finish within {SECONDS} s")
    assert done.returncode == 0, f"{doc} block {index} failed:\n{done.stderr[-3000:]}"


def test_every_doc_has_been_read():
    assert len(BLOCKS) >= 16 and any(d == "README.md" for d, _, _ in BLOCKS)
