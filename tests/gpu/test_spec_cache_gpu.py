"""The specialisation cache on ``cuda``: a process that reads ``vyre.lib``'s programs from it
(instead of lowering them) gets the same results as the one that lowered and stored them, and the
same programs (so the kernel cache's program index finds the same cubins)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import hashlib, numpy as np, cupy
from vyre import lib
x = cupy.asarray(np.random.default_rng(3).integers(0, 1000, (1 << 20) + 5).astype(np.uint32))
outs = [lib.inclusive_scan(x), lib.exclusive_scan(x, "max", 7), lib.select_if(x, 10, 500),
        *lib.unique(x), lib.run_length_encode(x // 50)[0], cupy.asarray(lib.reduce(x))]
h = x.get()
assert (outs[0].get() == np.cumsum(h, dtype=np.uint32)).all()
print(hashlib.sha256(b"".join(cupy.asnumpy(o).tobytes() for o in outs)).hexdigest())
"""


def _run(cache: Path) -> str:
    env = {**os.environ, "VYRE_SPEC_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    env.pop("VYRE_SPEC_CACHE", None)
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[-1]


def test_programs_read_from_the_cache_give_the_same_results(tmp_path: Path) -> None:
    cold = _run(tmp_path)
    entries = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    assert entries
    assert _run(tmp_path) == cold
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == entries  # read, none written again
