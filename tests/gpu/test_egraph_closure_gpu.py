"""Congruence closure on ``cuda``: every method equals the oracle and the Python union-find."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workloads"))

from test_egraph import python_closure, random_egraph  # noqa: E402
from test_egraph_closure import chains  # noqa: E402

from vyre.lib import egraph  # noqa: E402

pytestmark = pytest.mark.gpu
METHODS = ("hash", "sorted")


@pytest.fixture(scope="module")
def oracle():
    from vyre.reference.backend import ReferenceBackend

    return ReferenceBackend()


def labels(cols: tuple[np.ndarray, ...], backend: object, method: str) -> np.ndarray:
    with egraph.EGraph(*cols, backend=backend) as g:
        out = g.congruence_closure(method=method)
        assert g.path == method
        return out


@pytest.mark.parametrize("descending", [False, True])
def test_chains_of_100_on_every_method(backend, descending):
    cols = chains(100, descending)
    want = python_closure(*cols)
    for method in METHODS:
        assert labels(cols, backend, method).tolist() == want


@pytest.mark.parametrize("nodes", [1, 3, 777, 30_001])
def test_random_egraphs_equal_the_oracle(backend, oracle, nodes):
    cols = random_egraph(np.random.default_rng(nodes), nodes, max(nodes // 4, 1), 4, 2)
    want = labels(cols, oracle, "hash")
    assert np.array_equal(labels(cols, backend, "hash"), want)


def test_the_benchmark_egraph_takes_the_hash_path_and_repeats(backend):
    from benchmarks.bench_workloads import egraph_columns

    cols = egraph_columns(20)
    with egraph.EGraph(*cols, backend=backend) as g:
        want = g.sorted_congruence_closure()
        for _ in range(3):  # the kept buffers and the captured loop start over on every call
            assert np.array_equal(g.congruence_closure(), want) and g.path == "hash"
        assert np.array_equal(g.congruence_closure(method="sorted"), want)
