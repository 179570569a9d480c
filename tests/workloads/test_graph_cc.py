"""Connected components' two methods (Afforest, the default, and the ECL-CC sweep) on the oracle,
against scipy's partition labelled by each component's smallest vertex."""

from __future__ import annotations

import numpy as np
import pytest
from graphs import csr, symmetric
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components as scipy_components

from tests.codegen.codegen_support import assemble_all_targets, emit_for_targets, needs_ptxas
from vyre.driver.errors import InvalidProgram
from vyre.ir import Program
from vyre.ir.validate import validate
from vyre.lib import graph
from vyre.lib import graph_cc as cc

METHODS = ("afforest", "sweep")


def smallest_labels(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """scipy's weak components (ids ``>= n`` dropped), each labelled by its smallest vertex."""
    n = indptr.size - 1
    rows = np.repeat(np.arange(n), np.diff(indptr.astype(np.int64)))
    kept = indices < n
    matrix = csr_matrix((np.ones(int(kept.sum())), (rows[kept], indices[kept])), shape=(n, n))
    _, comp = scipy_components(matrix, directed=True, connection="weak")
    smallest = np.full(comp.max() + 1 if n else 0, n, dtype=np.int64)
    np.minimum.at(smallest, comp, np.arange(n))
    return smallest[comp].astype(np.uint32)


def grid(rows: int, cols: int) -> tuple[int, np.ndarray, np.ndarray]:
    ids = np.arange(rows * cols).reshape(rows, cols)
    return (rows * cols, np.concatenate([ids[:, :-1].ravel(), ids[:-1, :].ravel()]),
            np.concatenate([ids[:, 1:].ravel(), ids[1:, :].ravel()]))


def forest(rng: np.random.Generator, n: int, trees: int) -> tuple[int, np.ndarray, np.ndarray]:
    """Random trees over a random permutation of ``n`` vertices (each vertex after a tree's first
    hangs under an earlier one of its tree)."""
    order = rng.permutation(n)
    src, dst = [], []
    for part in np.array_split(order, trees):
        for k in range(1, part.size):
            src.append(part[k])
            dst.append(part[rng.integers(0, k)])
    return n, np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)


def shapes(seed: int) -> dict[str, tuple[int, np.ndarray, np.ndarray]]:
    """R-MAT graphs, grids, paths, forests, stars, many small components and tiny or odd sizes."""
    rng = np.random.default_rng(seed)
    empty = np.zeros(0, np.int64)
    out: dict[str, tuple[int, np.ndarray, np.ndarray]] = {
        "n0": (0, empty, empty), "n1": (1, empty, empty), "n1_loop": (1, np.zeros(1, np.int64), np.zeros(1, np.int64)),
        "n2_apart": (2, empty, empty), "n2_edge": (2, np.array([1]), np.array([0])),
        "path_odd": (333, np.arange(332), np.arange(1, 333)),
        "path_backwards": (257, np.arange(256, 0, -1), np.arange(255, -1, -1)),
        "grid_7x9": grid(7, 9), "grid_16x16": grid(16, 16),
        "forest": forest(rng, 501, 7),
        "stars": (241, np.repeat([0, 120], 120)[:239], np.concatenate([np.arange(1, 120), np.arange(121, 241)])),
        "pairs_and_triangles": (301, np.concatenate([np.arange(0, 150, 2), np.arange(150, 297, 3),
                                                     np.arange(151, 298, 3)]),
                                np.concatenate([np.arange(1, 151, 2), np.arange(151, 298, 3), np.arange(152, 299, 3)])),
    }
    for scale in (6, 9):
        src, dst = graph.rmat_edges(scale, 4, seed=seed + scale)
        keep = rng.random(src.size) < 0.7  # drop some edges: more components than R-MAT's one
        out[f"rmat{scale}"] = (1 << scale, src[keep], dst[keep])
    n = 97
    src, dst = rng.integers(0, n, 150), rng.integers(0, n, 150)
    out["random_dup_loops"] = (n, np.concatenate([src, src, np.arange(0, n, 5)]),
                               np.concatenate([dst, dst, np.arange(0, n, 5)]))
    return out


SHAPES = shapes(5)


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("undirected", [True, False])
def test_both_methods_match_scipy(oracle, name, undirected):
    n, src, dst = SHAPES[name]
    indptr, indices = symmetric(n, src, dst) if undirected else csr(n, src, dst)
    want = smallest_labels(indptr, indices)
    with graph.Graph(indptr, indices, backend=oracle, undirected=undirected) as g:
        for method in METHODS:
            labels = g.connected_components(method=method)
            assert labels.dtype == np.uint32 and np.array_equal(labels, want), (name, method)


@pytest.mark.parametrize("method", METHODS)
def test_out_of_range_ids_loops_and_duplicates_on_one_way_graphs(oracle, method):
    rng = np.random.default_rng(7)
    n, src, dst = SHAPES["random_dup_loops"]
    indptr, indices = csr(n, src, dst)
    indices[rng.integers(0, indices.size, 20)] = rng.choice([n, n + 3, 0xFFFFFFFF])
    labels = graph.connected_components(indptr, indices, backend=oracle, method=method)
    assert np.array_equal(labels, smallest_labels(indptr, indices))


def giant_and_hub(hub_edges: int) -> tuple[np.ndarray, np.ndarray, int]:
    """A symmetric CSR: a 60-vertex clique (the giant) and a hub (vertex 0, so it is every label)
    whose first two neighbours are its own leaves and whose other ``hub_edges`` neighbours are in the
    clique, where the hub comes last in their lists: only the hub's own finish joins the two."""
    clique = np.arange(1, 61)
    leaves = np.array([61, 62])
    rows: list[list[int]] = [[*leaves, *clique[:hub_edges]]]
    for v in clique:
        rows.append([int(u) for u in clique if u != v] + ([0] if v <= hub_edges else []))
    rows += [[0], [0]]
    indptr = np.zeros(len(rows) + 1, np.uint32)
    np.cumsum([len(r) for r in rows], out=indptr[1:])
    return indptr, np.concatenate([np.array(r, np.uint32) for r in rows]), len(rows)


@pytest.mark.parametrize("hub_edges", [cc.SMALL - 1, cc.SMALL + 1, 40])
def test_afforest_skips_the_giant_and_finishes_the_rest(oracle, hub_edges):
    # the clique's vertices skip their edges; the hub (few or many neighbours left: its own loop or
    # the big-vertex step) is outside the voted root's set after sampling and must link itself
    indptr, indices, n = giant_and_hub(hub_edges)
    with graph.Graph(indptr, indices, backend=oracle, undirected=True) as g:
        labels = g.connected_components()
        table = oracle.download_resident(g.scratch("cc_table", 4 * cc.TABLE_WORDS)).view(np.uint32)
    voted = int(table[int(table[cc.BEST]) & (cc.TABLE_SLOTS - 1)])
    assert voted == 1  # the clique's root after sampling: its vertices skipped their edges
    assert np.array_equal(labels, np.zeros(n, np.uint32))


def test_one_way_edges_are_not_skipped(oracle):
    # the same graph stored one way: the clique -> hub edges exist only in the clique's lists,
    # after the sampled ones, so skipping the giant's vertices would lose them
    indptr, indices, n = giant_and_hub(cc.SMALL + 1)
    rows = np.repeat(np.arange(n), np.diff(indptr))
    one_way = (rows != 0) | (indices > 60)  # drop the hub's own edges to the clique
    indptr, indices = csr(n, rows[one_way], indices[one_way].astype(np.int64))
    for method in METHODS:
        labels = graph.connected_components(indptr, indices, backend=oracle, method=method)
        assert np.array_equal(labels, np.zeros(n, np.uint32)), method


PROGRAMS = (cc.cc_hook_program, cc.jump_program, cc.afforest_link_program, cc.afforest_compress_program,
            cc.afforest_count_program, cc.afforest_finish_program, cc.afforest_finish_big_program)


@pytest.fixture
def knobs(monkeypatch: pytest.MonkeyPatch):
    """Set ``graph_cc``'s constants (``knobs(_HOOK_TRIES=1)``) for the programs built in the test."""
    def set_knobs(**values: int) -> None:
        for name, value in values.items():
            monkeypatch.setattr(cc, name, value)
        for program in PROGRAMS:
            program.cache_clear()

    yield set_knobs
    monkeypatch.undo()
    for program in PROGRAMS:
        program.cache_clear()


@pytest.mark.parametrize("name", ["grid_16x16", "rmat9", "stars", "forest"])
def test_links_that_give_up_are_finished_later(oracle, knobs, name):
    # hooks that give up after one compare-exchange: the lanes of the oracle's vectors contend, so
    # sampled links give up (the finish then relinks every neighbour) and finishes take more iterations
    knobs(_HOOK_TRIES=1)
    n, src, dst = SHAPES[name]
    indptr, indices = symmetric(n, src, dst)
    want = smallest_labels(indptr, indices)
    with graph.Graph(indptr, indices, backend=oracle, undirected=True) as g:
        assert np.array_equal(g.connected_components(), want)
        table = oracle.download_resident(g.scratch("cc_table", 4 * cc.TABLE_WORDS)).view(np.uint32)
        if name == "grid_16x16":
            assert table[cc.REDO] == 1  # a sampled link gave up: the finish linked every neighbour
        assert np.array_equal(g.connected_components(method="sweep"), want)


@pytest.mark.parametrize("name", ["path_odd", "grid_16x16", "rmat9", "forest"])
def test_trees_left_deep_after_sampling(oracle, knobs, name):
    # finds of 2 hops and compressions of one halving: the vote sees a forest that is not flat, and
    # the finish and compression loop several times; the labels must not change
    knobs(_FIND_HOPS=2, _COMPRESS_HALVINGS=1, _JUMP_HOPS=2)
    n, src, dst = SHAPES[name]
    indptr, indices = symmetric(n, src, dst)
    want = smallest_labels(indptr, indices)
    with graph.Graph(indptr, indices, backend=oracle, undirected=True) as g:
        for method in METHODS:
            assert np.array_equal(g.connected_components(method=method), want), method


@pytest.mark.parametrize("method", METHODS)
def test_a_path_of_100000_vertices(oracle, method):
    n = 100_000
    indptr, indices = symmetric(n, np.arange(n - 1), np.arange(1, n))
    labels = graph.connected_components(indptr, indices, backend=oracle, undirected=True, method=method)
    assert np.array_equal(labels, np.zeros(n, np.uint32))


def test_an_unknown_method_is_an_error_with_a_fix(oracle):
    indptr, indices = csr(3, np.array([0]), np.array([1]))
    with pytest.raises(InvalidProgram, match=r"method 'bfs'(.|\n)*Fix:"):
        graph.connected_components(indptr, indices, backend=oracle, method="bfs")


def afforest_programs() -> dict[str, Program]:
    programs = [cc.afforest_init_program(), cc.afforest_link_program(0), cc.afforest_link_program(1),
                cc.afforest_compress_program(False), cc.afforest_compress_program(True), cc.afforest_count_program(),
                cc.afforest_finish_program(), cc.afforest_finish_big_program(1024),
                cc.afforest_finish_big_program(132 * 2048)]
    return {str(p.name): p for p in programs}


@needs_ptxas
def test_afforest_programs_validate_and_assemble():
    programs = afforest_programs()
    for program in programs.values():
        validate(program)
    assert assemble_all_targets(emit_for_targets(programs)) == []
