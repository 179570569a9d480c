"""saxpy: y = a * x + y in f32 (mul then add, each rounded: no contraction), as a @vyre.kernel."""

from __future__ import annotations

import numpy as np
from _example import main

import vyre
from vyre.ir import Program


@vyre.kernel(workgroup_size=256)
def saxpy(a: vyre.f32, x: vyre.In[vyre.f32], y: vyre.InOut[vyre.f32]):
    """y[i] = a * x[i] + y[i] for every i < len(x)."""
    i = vyre.gid()
    if i < len(x):
        y[i] = a * x[i] + y[i]


def build() -> Program:
    """y[i] = a * x[i] + y[i] for every i < len(x)."""
    return saxpy.program


def demo(backend, program: Program, n: int) -> None:
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    (out,) = saxpy(1.5, x, y, backend=backend)  # the scalar a is passed as a Python number
    assert np.array_equal(out, np.float32(1.5) * x + y), "saxpy differs from numpy"


if __name__ == "__main__":
    main(build, demo, __file__)
