"""Connected components by label propagation: one step per dispatch, repeated with dispatch_until.

Each step lowers both ends of every edge to the smaller label (atomic MIN, in a ``@vyre.func``
helper that the kernel inlines) and raises the ``changed`` flag; ``dispatch_until`` zeroes the
flag, runs the step, and repeats while it is set, all on resident buffers.
"""

from __future__ import annotations

import numpy as np
from _example import main

import vyre
from vyre.ir import Program


@vyre.func
def lower_label(labels, changed, node, label):
    """labels[node] = min(labels[node], label), and raise the changed flag."""
    vyre.atomic_min(labels, node, label)
    vyre.atomic_or(changed, 0, 1)


@vyre.kernel(workgroup_size=256)
def label_propagation(src: vyre.In[vyre.u32], dst: vyre.In[vyre.u32], labels: vyre.InOut[vyre.u32],
                      changed: vyre.InOut[vyre.u32, 1]):  # pyright: ignore  (a count is no type)
    """One label propagation step over an edge list (src[i], dst[i])."""
    i = vyre.gid()
    if i < len(src):
        u = src[i]
        v = dst[i]
        lu = labels[u]
        lv = labels[v]
        if lu < lv:
            lower_label(labels, changed, v, lu)
        if lv < lu:
            lower_label(labels, changed, u, lv)


def build() -> Program:
    """One label propagation step over an edge list (src[i], dst[i])."""
    return label_propagation.program


def components(n_nodes: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Smallest node id of each node's component (union-find), the expected fixed point."""
    parent = np.arange(n_nodes)

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for u, v in zip(src.tolist(), dst.tolist()):
        ru, rv = find(u), find(v)
        if ru != rv:
            parent[max(ru, rv)] = min(ru, rv)
    return np.array([find(x) for x in range(n_nodes)], dtype=np.uint32)


def demo(backend, program: Program, n: int) -> None:
    n_nodes = max(n // 4, 2)
    rng = np.random.default_rng(4)
    src = rng.integers(0, n_nodes, n_nodes // 2, dtype=np.uint32)
    dst = rng.integers(0, n_nodes, n_nodes // 2, dtype=np.uint32)
    arrays = [src, dst, np.arange(n_nodes, dtype=np.uint32), np.zeros(1, dtype=np.uint32)]
    handles = [backend.allocate_resident(a.nbytes) for a in arrays]
    try:
        for handle, array in zip(handles, arrays):
            backend.upload_resident(handle, array)
        iterations = backend.dispatch_until([(label_propagation.program, handles, None)], handles[3],
                                            max_iterations=n_nodes)
        labels = backend.download_resident(handles[2]).view(np.uint32)
    finally:
        for handle in handles:
            backend.free_resident(handle)
    assert np.array_equal(labels, components(n_nodes, src, dst)), "labels differ from union-find"
    print(f"converged after {iterations} steps")


if __name__ == "__main__":
    main(build, demo, __file__, default_n=1 << 12)
