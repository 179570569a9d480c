"""Hostile arguments to ``vyre.dask`` (issue 30): a clean error with a Fix before anything starts, or the
obvious intent carried out. Blocks run in this process (Dask's synchronous scheduler), on the oracle.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import vyre
from tests.refusals import refused

da = pytest.importorskip("dask.array", reason="vyre.dask needs the dask extra")
vdask = pytest.importorskip("vyre.dask")



@vyre.kernel(workgroup_size=64)
def add_k(k: vyre.u32, y: vyre.InOut[vyre.u32]):
    i = vyre.gid()
    if i < len(y):
        y[i] = y[i] + k


@vyre.kernel(workgroup_size=64)
def add(x: vyre.In[vyre.u32], z: vyre.InOut[vyre.u32]):
    i = vyre.gid()
    if i < len(x):
        z[i] = x[i] + z[i]


@pytest.mark.parametrize("value", [[1, 2, 3], np.arange(3, dtype=np.uint32)], ids=["list", "numpy"])
def test_reductions_refuse_what_is_not_a_dask_array(value) -> None:
    refused(lambda: vdask.reduce(value), "dask array", "from_array")
    refused(lambda: vdask.histogram(value, 4), "dask array")
    refused(lambda: vdask.inclusive_scan(value), "dask array")


def test_histogram_takes_numpy_integer_bins() -> None:
    x = da.from_array(np.array([0, 1, 1, 3, 9], np.uint32), chunks=2)
    counts = vdask.histogram(x, np.int64(4), backend="reference").compute(scheduler="synchronous")
    assert counts.tolist() == [1, 2, 0, 1]


def test_map_blocks_refuses_arrays_of_different_lengths() -> None:
    x = da.from_array(np.arange(10, dtype=np.uint32), chunks=5)
    z = da.from_array(np.arange(8, dtype=np.uint32), chunks=4)
    refused(lambda: vdask.map_blocks(add, x, z), "10", "8", "same length")


def test_map_blocks_packs_scalar_parameters() -> None:
    x = da.from_array(np.arange(10, dtype=np.uint32), chunks=4)
    out = vdask.map_blocks(add_k, 5, x, backend="reference")
    assert out.compute(scheduler="synchronous").tolist() == list(range(5, 15))


def test_map_blocks_refuses_a_scalar_of_the_wrong_kind() -> None:
    x = da.from_array(np.arange(10, dtype=np.uint32), chunks=4)
    refused(lambda: vdask.map_blocks(add_k, b"abcd", x), "'k'")


@pytest.mark.parametrize("n_workers", [-1, 0])
def test_local_cluster_refuses_no_workers_before_starting(n_workers: int) -> None:
    start = time.monotonic()
    refused(lambda: vdask.local_cluster(n_workers, backend="reference"), "n_workers")
    refused(lambda: vdask.worker_environments(n_workers), "n_workers")
    assert time.monotonic() - start < 5
