"""f16/bf16 stores of selected f32 literals (the fuzzer's seed 777007 finding), judged by the oracle."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import F32_EDGES, check

from vyre.ir import parse

pytestmark = pytest.mark.gpu

LITERALS = ("1e-45", "-1e-45", "3e-45", "0.0", "-0.0", "1.0", "65504.0", "1e-8")


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("literal", LITERALS)
def test_selected_literals_narrow_exactly(backend, rng, dtype: str, literal: str) -> None:
    n = len(F32_EDGES) * 4
    program = parse(f"""program narrow workgroup(64, 1, 1)
buffer c: read i16[{n}] @0
buffer x: read f32[{n}] @1
buffer a: output {dtype}[{n}] @2
buffer b: output {dtype}[{n}] @3
let i = invocation_id(0)
store a[i] = select(cast(bool, load(c, i)), f32:0.0, f32:{literal})
store b[i] = select(cast(bool, load(c, i)), load(x, i), f32:{literal})
""")
    c = rng.integers(-2, 2, n, dtype=np.int16)
    x = np.resize(F32_EDGES, n).astype(np.float32)
    check(backend, program, [c, x])
