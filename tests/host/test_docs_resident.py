"""The worked example in docs/resident.md runs as written (on the oracle, at a small size)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

DOC = Path(__file__).resolve().parents[2] / "docs" / "resident.md"


def _components(offsets: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Smallest vertex id of each vertex's component, by union-find (independent of vyre)."""
    n = len(offsets) - 1
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for v in range(n):
        for e in edges[offsets[v]:offsets[v + 1]]:
            a, b = find(v), find(int(e))
            if a != b:
                parent[max(a, b)] = min(a, b)
    return np.array([find(i) for i in range(n)], dtype=np.uint32)


def test_label_propagation_example_reaches_the_components() -> None:
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    code = code.replace('vyre.acquire("cuda")', 'vyre.acquire("reference")').replace("n = 1 << 20", "n = 3000")
    scope: dict = {}
    exec(compile(code, str(DOC), "exec"), scope)  # noqa: S102 - our own documentation
    assert np.array_equal(scope["components"], _components(scope["offsets"], scope["edges"]))
    assert 1 <= scope["iterations"] < 10_000
