"""One default backend per process: kernels, vyre.lib, the workloads, multi and dask share it."""

from __future__ import annotations

import numpy as np

import vyre
import vyre.lib as lib
from vyre.lib import ResidentArray
from vyre.lib.scratch import scratch_for


@vyre.kernel(workgroup_size=64)
def bump(x: vyre.InOut[vyre.u32]):
    i = vyre.gid()
    if i < len(x):
        x[i] = x[i] + 1


def test_every_default_is_the_same_backend() -> None:
    from vyre.dask import worker_backend
    from vyre.frontend.kernel import default_backend as kernel_default
    from vyre.lib.graph import backend_or_default
    from vyre.lib.io import default_backend as lib_default
    from vyre.lib.multi import backends_for

    shared = vyre.default_backend()
    assert shared is vyre.default_backend()
    assert kernel_default() is shared and lib_default() is shared and backend_or_default(None) is shared
    assert worker_backend() is shared
    if not vyre.devices():  # no backend lists devices here: multi runs on the default backend
        assert backends_for() == [shared]


def test_a_library_result_chains_into_a_kernel_and_back_with_the_defaults() -> None:
    """Library result -> kernel -> library call, all on the defaults (it was InvalidHandle: another backend)."""
    backend = vyre.default_backend()
    x = np.arange(1, 5001, dtype=np.uint32)
    handle = backend.allocate_resident(x.nbytes)
    try:
        backend.upload_resident(handle, x)
        scanned = lib.inclusive_scan(ResidentArray(handle, np.uint32))  # a new ResidentArray, on the default
        bump.dispatch_resident([scanned.handle])  # the kernel's default backend is the same one
        total = lib.reduce(scanned)
        assert total == np.uint32((np.cumsum(x, dtype=np.uint64) + 1).sum() % 2**32)
        backend.free_resident(scanned.handle)
    finally:
        backend.free_resident(handle)


def test_release_scratch_reaches_the_default_backend() -> None:
    lib.reduce(np.arange(10_000, dtype=np.uint32))
    backend = vyre.default_backend()
    assert scratch_for(backend).nbytes > 0
    assert lib.release_scratch() > 0  # no argument: the default backend
    assert lib.release_scratch(backend) == 0
