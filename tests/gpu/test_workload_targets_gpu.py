"""The target rows of ``benchmarks/bench_workloads.py`` on ``cuda`` at toy sizes: CuPy arrays in and
out of the resident graph, the Graph500 checks run on the device, and the whole section (every
result checked against its host judge) before the lead's full-size run."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import workload_targets as targets
from vyre.lib import graph

pytestmark = pytest.mark.gpu


def test_resident_graph_keeps_cupy_results_and_the_device_checks_hold(backend) -> None:
    import cupy

    dev = targets.Device(backend)
    assert dev.on_gpu and dev.xp is cupy
    g = targets.kron_graph(dev, 10, 16, 4)
    assert isinstance(g.indptr, cupy.ndarray) and isinstance(g.indices, cupy.ndarray)
    with graph.Graph(g.indptr, g.indices, backend=backend, undirected=True) as resident:
        for root in g.roots:
            levels = resident.bfs(root)
            assert isinstance(levels, cupy.ndarray)
            want = graph.reference_levels(g.host_indptr, g.host_indices, root)
            assert np.array_equal(levels.get(), want)
            reached, depth, tuples = targets.check_levels(cupy, g.sources, g.indices, levels, root)
            assert reached == int((want != graph.UNREACHED).sum())
            bad = levels.copy()
            bad[int(np.argmax(np.where(want == graph.UNREACHED, -1, want.astype(np.int64))))] += 1
            with pytest.raises(AssertionError, match="wrong result"):
                targets.check_levels(cupy, g.sources, g.indices, bad, root)
        labels = resident.connected_components()
        assert isinstance(labels, cupy.ndarray)
        assert np.array_equal(labels.get(), targets.expected_labels(g)[0])


def test_the_section_at_toy_size_on_cuda(backend) -> None:
    result = targets.run(backend, "cuda", targets.TOY)
    paths = {r["path"] for r in result["graphs"]}
    assert "vyre (CuPy arrays in and out, Graph)" in paths
    assert result["text"][0]["path"] == "vyre (CuPy array in and out)"
    assert result["egraph"][0]["path"] == "hash"
    (first,) = [r for r in result["datalog"] if r["workload"] == "first_call"]
    assert first["pairs"] == result["datalog"][0]["pairs"]
