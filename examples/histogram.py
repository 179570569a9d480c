"""Histogram of the low byte of u32 data: workgroup-local bins, a barrier, then global atomics.

By default the grid covers the largest buffer (the data, not the 256 bins); passing
``DispatchConfig(elements=len(data))`` (``vyre run ... --elements data``) says the same explicitly.
"""

from __future__ import annotations

import numpy as np
from _example import main

import vyre
from vyre.ir import Program

BINS = 256
MASK = BINS - 1  # module-level numbers are literals inside kernels


@vyre.kernel(workgroup_size=BINS)
def histogram(data: vyre.In[vyre.u32], bins: vyre.Out[vyre.u32, BINS]):  # pyright: ignore  (a count is no type)
    """256-bin histogram of (data & 255), per-workgroup bins merged with atomics."""
    local_bins = vyre.shared(vyre.u32, BINS)
    i = vyre.gid()
    if i < len(data):
        vyre.atomic_add(local_bins, data[i] & MASK, 1)
    vyre.barrier()
    count = local_bins[vyre.lid()]
    if count != 0:
        vyre.atomic_add(bins, vyre.lid(), count)


def build() -> Program:
    """256-bin histogram of (data & 255), per-workgroup bins merged with atomics."""
    return histogram.program


def demo(backend, program: Program, n: int) -> None:
    data = np.random.default_rng(1).integers(0, 2**32, n, dtype=np.uint32)
    (bins,) = histogram(data, backend=backend, elements=n)
    expected = np.bincount(data & MASK, minlength=BINS).astype(np.uint32)
    assert np.array_equal(bins, expected), "histogram differs from numpy"


if __name__ == "__main__":
    main(build, demo, __file__)
