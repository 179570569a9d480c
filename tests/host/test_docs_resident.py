"""The worked example in docs/resident.md runs as written (on the oracle, at a small size)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from tests.graph_oracle import components

DOC = Path(__file__).resolve().parents[2] / "docs" / "resident.md"


def test_label_propagation_example_reaches_the_components() -> None:
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    code = code.replace('vyre.acquire("cuda")', 'vyre.acquire("reference")').replace("n = 1 << 20", "n = 3000")
    scope: dict = {}
    exec(compile(code, str(DOC), "exec"), scope)  # noqa: S102 - our own documentation
    offsets, edges = scope["offsets"], scope["edges"]
    assert np.array_equal(scope["components"], components(offsets, edges, np.arange(len(offsets) - 1)))
    assert 1 <= scope["iterations"] < 10_000
