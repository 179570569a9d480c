"""The composite dispatches the ``Backend`` base class builds on a backend's primitives: a backend
that provides only resident buffers and ``dispatch_resident`` runs library calls and device fixed
points, with the oracle's own results."""

from __future__ import annotations

import numpy as np
import pytest

from vyre import lib
from vyre.driver.backend import Backend
from vyre.driver.errors import VyreError
from vyre.lib import graph
from vyre.reference import ReferenceBackend


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(2711)


class PrimitivesOnly(Backend):
    """Resident buffers and ``dispatch_resident`` from an oracle; nothing composite of its own."""

    id = "primitives-only"

    def __init__(self) -> None:
        self.inner = ReferenceBackend()
        self.resident_dispatches = 0

    def supports_subgroup_ops(self) -> bool:
        return True

    def allocate_resident(self, nbytes):
        return self.inner.allocate_resident(nbytes)

    def upload_resident(self, handle, data, offset=0):
        self.inner.upload_resident(handle, data, offset)

    def download_resident(self, handle, offset=0, nbytes=None):
        return self.inner.download_resident(handle, offset, nbytes)

    def free_resident(self, handle):
        self.inner.free_resident(handle)

    def dispatch_resident(self, program, handles, config=None):
        self.resident_dispatches += 1
        self.inner.dispatch_resident(program, handles, config)


def test_library_calls_run_on_the_primitives(rng):
    be = PrimitivesOnly()
    x = rng.integers(0, 2**31, 5003).astype(np.uint32)
    np.testing.assert_array_equal(lib.inclusive_scan(x, backend=be), np.cumsum(x, dtype=np.uint32))
    np.testing.assert_array_equal(lib.sort(x, backend=be), np.sort(x))
    assert lib.reduce(x, "max", backend=be) == x.max()
    assert be.resident_dispatches > 3


def test_fixed_points_run_on_the_primitives(rng):
    be = PrimitivesOnly()
    n = 300
    src, dst = rng.integers(0, n, 400).astype(np.uint32), rng.integers(0, n, 400).astype(np.uint32)
    ptr, idx = graph.from_edges(n, np.concatenate([src, dst]), np.concatenate([dst, src]), backend="reference")
    want = graph.connected_components(ptr, idx, backend="reference")
    np.testing.assert_array_equal(graph.connected_components(ptr, idx, backend=be), want)


def test_composites_check_their_arguments_first():
    be = PrimitivesOnly()
    with pytest.raises(VyreError, match="Fix: "):
        be.dispatch_repeated([], [], -1)
    with pytest.raises(VyreError, match="Fix: "):
        be.dispatch_until([], object(), 3)
