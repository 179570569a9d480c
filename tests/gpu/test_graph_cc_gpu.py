"""Connected components on ``cuda``: Afforest (the default) and the ECL-CC sweep give the same labels
as each other, as scipy's partition (each component labelled by its smallest vertex) and as the
oracle, on Kronecker graphs, grids, paths, the oracle tests' shapes and CuPy arrays."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workloads"))

from graphs import csr, symmetric  # noqa: E402
from test_graph_cc import SHAPES, giant_and_hub, grid, smallest_labels  # noqa: E402

from vyre.lib import graph  # noqa: E402
from vyre.lib import graph_cc as cc  # noqa: E402

pytestmark = pytest.mark.gpu
METHODS = ("afforest", "sweep")


@pytest.fixture(scope="module")
def oracle():
    from vyre.reference.backend import ReferenceBackend

    return ReferenceBackend()


def kron(scale: int, edge_factor: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """The Graph500 Kronecker graph (``graph.rmat_edges``, the target rows' seed) stored both ways."""
    src, dst = graph.rmat_edges(scale, edge_factor, seed=1)
    return symmetric(1 << scale, src, dst)


def both_methods(backend, indptr: np.ndarray, indices: np.ndarray, undirected: bool, calls: int = 2) -> np.ndarray:
    """The labels of both methods on one resident graph, each called ``calls`` times in turn (the
    captured loops replayed on the same scratch), all equal; returns them."""
    with graph.Graph(indptr, indices, backend=backend, undirected=undirected) as g:
        got = [g.connected_components(method=m) for _ in range(calls) for m in METHODS]
    for labels in got[1:]:
        assert np.array_equal(labels, got[0])
    return got[0]


@pytest.mark.parametrize("scale", [12, 16, 20])
def test_kronecker_graphs_equal_scipy(backend, scale):
    indptr, indices = kron(scale)
    assert np.array_equal(both_methods(backend, indptr, indices, True), smallest_labels(indptr, indices))


@pytest.mark.parametrize(("rows", "cols"), [(512, 512), (2048, 2048), (3, 1001), (1001, 3)])
def test_grids_equal_scipy(backend, rows, cols):
    indptr, indices = symmetric(*grid(rows, cols))
    assert np.array_equal(both_methods(backend, indptr, indices, True), np.zeros(rows * cols, np.uint32))


def test_one_way_kronecker_graph_equals_scipy(backend):
    src, dst = graph.rmat_edges(16, 8, seed=4)
    indptr, indices = csr(1 << 16, src, dst)
    assert np.array_equal(both_methods(backend, indptr, indices, False), smallest_labels(indptr, indices))


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shapes_equal_the_oracle(backend, oracle, name):
    n, src, dst = SHAPES[name]
    for undirected in (True, False):
        indptr, indices = symmetric(n, src, dst) if undirected else csr(n, src, dst)
        want = graph.connected_components(indptr, indices, backend=oracle, undirected=undirected)
        assert np.array_equal(both_methods(backend, indptr, indices, undirected), want), (name, undirected)


@pytest.mark.parametrize("hub_edges", [cc.SMALL - 1, cc.SMALL + 1, 40])
def test_a_hub_outside_the_giant_links_itself(backend, hub_edges):
    indptr, indices, n = giant_and_hub(hub_edges)
    assert np.array_equal(both_methods(backend, indptr, indices, True), np.zeros(n, np.uint32))


def test_paths_of_100000_vertices(backend):
    n = 100_000
    for src, dst in [(np.arange(n - 1), np.arange(1, n)), (np.arange(n - 1, 0, -1), np.arange(n - 2, -1, -1))]:
        indptr, indices = symmetric(n, src, dst)
        assert np.array_equal(both_methods(backend, indptr, indices, True), np.zeros(n, np.uint32))


def test_many_stars_and_small_components(backend):
    # 2,000 stars of 1 to 300 leaves (hubs outside the giant with many neighbours left) and pairs
    rng = np.random.default_rng(3)
    sizes = rng.integers(1, 300, 2000)
    hubs = np.repeat(np.cumsum(sizes + 1) - sizes - 1, sizes)
    leaves = np.arange(hubs.size) + np.repeat(np.arange(sizes.size) + 1, sizes)
    n = int(sizes.sum() + sizes.size) + 4000
    src = np.concatenate([hubs, np.arange(n - 4000, n, 2)])
    dst = np.concatenate([leaves, np.arange(n - 3999, n, 2)])
    perm = rng.permutation(n)  # hubs anywhere in the id order, leaves before and after them
    indptr, indices = symmetric(n, perm[src], perm[dst])
    assert np.array_equal(both_methods(backend, indptr, indices, True), smallest_labels(indptr, indices))


def test_cupy_graphs_keep_their_labels_on_the_device(backend):
    import cupy

    indptr, indices = kron(14)
    want = smallest_labels(indptr, indices)
    with graph.Graph(cupy.asarray(indptr), cupy.asarray(indices), backend=backend, undirected=True) as g:
        for method in METHODS:
            labels = g.connected_components(method=method)
            assert isinstance(labels, cupy.ndarray)
            assert np.array_equal(labels.get(), want), method


def test_hooks_that_give_up_under_real_contention(backend, monkeypatch):
    # one compare-exchange per hook: the device's own contention makes links give up; the redo word
    # and the loop must still give exact labels
    programs = (cc.cc_hook_program, cc.afforest_link_program, cc.afforest_finish_program,
                cc.afforest_finish_big_program)
    monkeypatch.setattr(cc, "_HOOK_TRIES", 1)
    for program in programs:
        program.cache_clear()
    try:
        for indptr, indices in (kron(16), symmetric(*grid(256, 256))):
            assert np.array_equal(both_methods(backend, indptr, indices, True), smallest_labels(indptr, indices))
    finally:
        monkeypatch.undo()
        for program in programs:
            program.cache_clear()


def test_memcheck_sized(backend, oracle):
    """Small enough for compute-sanitizer memcheck: every Afforest program (the big-vertex step
    included) and the sweep, on both kinds of graph, against the oracle."""
    graphs = [(kron(8, 4), True), (symmetric(*grid(9, 13)), True), (giant_and_hub(cc.SMALL + 3)[:2], True)]
    src, dst = graph.rmat_edges(7, 4, seed=2)
    graphs.append((csr(1 << 7, src, dst), False))
    for (indptr, indices), undirected in graphs:
        want = graph.connected_components(indptr, indices, backend=oracle, undirected=undirected)
        assert np.array_equal(both_methods(backend, indptr, indices, undirected, calls=1), want)
