"""vyre.lib.graph on the oracle against scipy.sparse.csgraph and a host BFS."""

from __future__ import annotations

import numpy as np
import pytest
from graphs import cases, counting_oracle, csr, symmetric
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components as scipy_components

import vyre
from vyre.driver.errors import InvalidProgram
from vyre.lib import graph

CASES = cases()


@pytest.fixture(scope="module")
def oracle():
    """An oracle that interprets the IR level loop of BFS (not its host search): these tests check the programs."""
    with vyre.acquire("reference") as backend:
        backend.unwrap().host_bfs = False
        yield backend


def expected_labels(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    n = indptr.size - 1
    matrix = csr_matrix((np.ones(indices.size), indices, indptr), shape=(n, n))
    _, comp = scipy_components(matrix, directed=True, connection="weak")
    smallest = np.full(comp.max() + 1 if n else 0, n, dtype=np.int64)
    np.minimum.at(smallest, comp, np.arange(n))
    return smallest[comp].astype(np.uint32)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("undirected", [False, True])
def test_components_match_scipy(oracle, name, undirected):
    n, src, dst = CASES[name]
    # one direction only: components must treat each stored edge as undirected; with undirected=True
    # every edge is stored both ways and the hook looks at each once
    indptr, indices = symmetric(n, src, dst) if undirected else csr(n, src, dst)
    labels = graph.connected_components(indptr, indices, backend=oracle, undirected=undirected)
    assert labels.dtype == np.uint32
    assert np.array_equal(labels, expected_labels(indptr, indices))


def test_components_of_long_chains_take_more_sweeps(oracle):
    # chains make parent paths deeper than the hops of one sweep: the forward chain's first sweep
    # flags and dispatch_until runs more; max_iterations=1 stops after one (labels may be partial)
    n = 700
    for src, dst in [(np.arange(n - 1, 0, -1), np.arange(n - 2, -1, -1)), (np.arange(n - 1), np.arange(1, n))]:
        indptr, indices = csr(n, src, dst)
        with graph.Graph(indptr, indices, backend=oracle) as g:
            assert np.array_equal(g.connected_components(), np.zeros(n, dtype=np.uint32))
            partial = g.connected_components(max_iterations=1)
            assert partial.dtype == np.uint32 and np.all(partial <= np.arange(n))


# alpha=0: top-down only; the default: Beamer's switching; alpha=inf, beta=0: bottom-up from level 1 on
DIRECTIONS = {"top_down": (0.0, 24.0), "beamer": (14.0, 24.0), "bottom_up": (float("inf"), 0.0)}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("undirected", [False, True])
@pytest.mark.parametrize("direction", sorted(DIRECTIONS))
def test_bfs_matches_host_bfs(oracle, name, undirected, direction):
    n, src, dst = CASES[name]
    indptr, indices = symmetric(n, src, dst) if undirected else csr(n, src, dst)
    alpha, beta = DIRECTIONS[direction]
    with graph.Graph(indptr, indices, backend=oracle, undirected=undirected) as g:
        for source in {0, n // 2, n - 1}:
            levels = g.bfs(source, alpha=alpha, beta=beta)
            assert np.array_equal(levels, graph.reference_levels(indptr, indices, source)), (name, source)


def test_bfs_switches_direction_both_ways(oracle):
    # a hub with a long tail: the hub's level is bottom-up (its edges dwarf the rest), the tail
    # top-down again; the result must equal the host BFS either way
    n = 400
    src = np.concatenate([np.zeros(199, np.int64), np.arange(199, n - 1)])
    dst = np.concatenate([np.arange(1, 200), np.arange(200, n)])
    indptr, indices = symmetric(n, src, dst)
    levels = graph.bfs(indptr, indices, 5, backend=oracle, undirected=True, alpha=3.0, beta=4.0)
    assert np.array_equal(levels, graph.reference_levels(indptr, indices, 5))
    trace: list = []  # the same steps driven one level per host call: the device's choices, level by level
    with graph.Graph(indptr, indices, backend=oracle, undirected=True) as g:
        assert np.array_equal(g.bfs(5, alpha=3.0, beta=4.0, trace=trace), levels)
    directions = [t[0] for t in trace]
    assert directions[:4] == ["top-down", "top-down", "bottom-up", "top-down"], directions  # the leaves: bottom-up
    assert [t[1] for t in trace] == np.bincount(levels[levels != graph.UNREACHED]).tolist()  # frontier sizes
    degrees = np.diff(indptr)  # each frontier's edges (Beamer's rule and the lanes per vertex steer by them),
    # counted also for vertices a bottom-up step found through their parent hint, reading no edge
    assert [t[2] for t in trace] == [int(degrees[levels == k].sum()) for k in range(len(trace))]


@pytest.mark.parametrize("name", ["chain", "random", "star", "two_halves"])
def test_search_and_components_loop_on_the_device(name):
    # no host read per level or sweep: one dispatch_until, and only the result comes back
    n, src, dst = CASES[name]
    indptr, indices = symmetric(n, src, dst)
    backend = counting_oracle()
    backend.host_bfs = False
    try:
        with graph.Graph(indptr, indices, backend=backend, undirected=True) as g:
            assert backend.loops == 0 and backend.reads < 8  # the symmetry check reads a few words
            backend.reads = 0
            levels = g.bfs(0)
            assert (backend.loops, backend.reads) == (1, 1)
            assert np.array_equal(levels, graph.reference_levels(indptr, indices, 0))
            labels = g.connected_components()
            assert (backend.loops, backend.reads) == (2, 2)
            assert np.array_equal(labels, expected_labels(indptr, indices))
    finally:
        backend.shutdown()


def test_the_device_picks_the_lanes_per_vertex_like_the_host():
    from vyre.lib import graph_kernels as kernels
    from vyre.reference.backend import ReferenceBackend

    backend = ReferenceBackend()
    program = kernels.decide_program(False, 14.0, 24.0)
    try:
        for size, edges in [(1, 0), (1, 1), (3, 100), (147, 266365), (1 << 20, 3 << 20), (1 << 27, 5000),
                            (1 << 30, 1 << 31), (5, 5 * 33), (5, 5 * 32)]:
            stats = backend.allocate_resident(8)
            backend.upload_resident(stats, np.array([size, edges], np.uint32))
            handles = [backend.allocate_resident(4 * 4), stats, backend.allocate_resident(24),
                       backend.allocate_resident(4)]
            (ctl,) = backend.dispatch_sequence([(program, handles, graph.ONE_INVOCATION)], reads=[(handles[2], 0, 24)])
            assert ctl.view(np.uint32)[kernels.SHIFT] == graph.lanes_shift(size, edges / size), (size, edges)
    finally:
        backend.shutdown()


def test_top_down_spreads_a_hub_over_many_invocations(oracle):
    assert graph.lanes_shift(147, 266365 / 147) == 11  # hubs in a small frontier: 2048 per vertex
    assert graph.lanes_shift(1, 21052.0) == 15  # one hub alone: 32768 invocations, an edge or none each
    assert graph.lanes_shift(1 << 20, 3.0) == 5  # low degrees: a subgroup per vertex
    assert graph.lanes_shift(1 << 27, 5000.0) == 3  # never a grid of 2**31 invocations
    n = 3001  # a star searched from its hub, then from a leaf: top-down steps of 4096 and 32 lanes
    indptr, indices = symmetric(n, np.zeros(n - 1, np.int64), np.arange(1, n))
    with graph.Graph(indptr, indices, backend=oracle, undirected=True) as g:
        for source in (0, 17):
            assert np.array_equal(g.bfs(source, alpha=0.0), graph.reference_levels(indptr, indices, source))


def test_out_of_range_neighbours_are_ignored(oracle):
    indptr = np.array([0, 2, 3, 3], dtype=np.uint32)
    indices = np.array([1, 0xFFFFFFFF, 7], dtype=np.uint32)
    assert graph.bfs(indptr, indices, 0, backend=oracle).tolist() == [0, 1, 0xFFFFFFFF]
    assert graph.connected_components(indptr, indices, backend=oracle).tolist() == [0, 0, 2]


def test_bad_inputs_are_errors_with_a_fix(oracle):
    good_ptr, good_idx = csr(4, np.array([0, 1]), np.array([1, 2]))
    for ptr, idx in [(np.zeros(0), good_idx), (np.array([0, 3, 1, 2, 2]), good_idx),
                     (good_ptr.astype(np.float32), good_idx), (good_ptr, np.array([-1, 2]))]:
        with pytest.raises(InvalidProgram, match="Fix:"):
            graph.connected_components(ptr, idx, backend=oracle)
    for source in (-1, 4, True, 1.5):
        with pytest.raises(InvalidProgram, match="Fix:"):
            graph.bfs(good_ptr, good_idx, source, backend=oracle)


def test_empty_graph(oracle):
    assert graph.connected_components(np.zeros(1, np.uint32), np.zeros(0, np.uint32), backend=oracle).size == 0


@pytest.mark.parametrize("name", sorted(CASES))
def test_from_edges_matches_a_stable_host_build(oracle, name):
    n, src, dst = CASES[name]
    indptr, indices = graph.from_edges(n, src, dst, backend=oracle)
    want_ptr, want_idx = csr(n, src, dst)
    assert indptr.dtype == np.uint32 and indices.dtype == np.uint32
    assert np.array_equal(indptr, want_ptr) and np.array_equal(indices, want_idx)


def test_from_edges_refuses_bad_edges(oracle):
    for n, src, dst in [(3, [0, 1], [1]), (3, [0, 3], [1, 2]), (3, [0], [-1]), (-1, [], []), (True, [], [])]:
        with pytest.raises(InvalidProgram, match="Fix:"):
            graph.from_edges(n, np.array(src), np.array(dst), backend=oracle)


def test_undirected_symmetry_is_checked_on_the_device(oracle):
    # sets, not multisets: duplicates and ids >= n (ignored by every traversal) do not break symmetry
    n, src, dst = CASES["dense"]
    indptr, indices = symmetric(n, np.concatenate([src, src[:50]]), np.concatenate([dst, dst[:50]]))
    with graph.Graph(indptr, indices, backend=oracle, undirected=True) as g:
        assert g.stored_both_ways()
    ptr, idx = np.array([0, 2, 3, 4], np.uint32), np.array([1, 9, 0, 0xFFFFFFFF], np.uint32)
    assert graph.bfs(ptr, idx, 1, backend=oracle, undirected=True).tolist() == [1, 0, graph.UNREACHED]
    # one edge of 1,600 without its reverse: refused, naming it, never wrong levels
    keep = np.ones(src.size * 2, bool)
    both_src, both_dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    lonely = np.flatnonzero(both_src != both_dst)[0]
    pair = (both_src[lonely], both_dst[lonely])
    keep[(both_src == pair[1]) & (both_dst == pair[0])] = False
    indptr, indices = csr(n, both_src[keep], both_dst[keep])
    with pytest.raises(InvalidProgram, match=rf"edge {pair[0]} -> {pair[1]} is not stored both ways(.|\n)*Fix:"):
        graph.Graph(indptr, indices, backend=oracle, undirected=True)
    with graph.Graph(indptr, indices, backend=oracle) as g:
        assert not g.stored_both_ways()


def random_graphs(seed: int) -> dict[str, tuple[int, np.ndarray, np.ndarray]]:
    """Random edge lists with duplicates, self loops, hubs (degrees over the host search's per-vertex
    threshold) and frontiers over its vectorised one, of a few sizes."""
    rng = np.random.default_rng(seed)
    out = {}
    for n, m in [(2, 3), (40, 60), (300, 900), (2000, 6000), (2500, 40000)]:
        src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
        hubs = rng.integers(0, n, 3)
        out[f"n{n}_m{m}"] = (n, np.concatenate([src, np.repeat(hubs, 50)]),
                             np.concatenate([dst, rng.integers(0, n, 150)]))
    return out


@pytest.mark.parametrize(("seed", "undirected"), [(1, False), (2, False), (3, False), (4, True)])
def test_host_search_equals_the_ir_level_loop(oracle, seed, undirected):
    # the oracle's default BFS (a host search) against its IR level loop, on the same graphs and
    # sources, with out-of-range neighbour ids (ignored by both) sprinkled into directed graphs
    host = vyre.acquire("reference")
    assert host.unwrap().host_bfs and not oracle.unwrap().host_bfs
    rng = np.random.default_rng(seed)
    try:
        for name, (n, src, dst) in random_graphs(seed).items():
            indptr, indices = symmetric(n, src, dst) if undirected else csr(n, src, dst)
            if not undirected:
                indices[rng.integers(0, indices.size, indices.size // 20)] = rng.choice([n, n + 7, 0xFFFFFFFF])
            with graph.Graph(indptr, indices, backend=oracle, undirected=undirected) as ir, \
                    graph.Graph(indptr, indices, backend=host, undirected=undirected) as fast:
                for source in {0, int(rng.integers(0, n)), n - 1}:
                    levels = fast.bfs(source)
                    assert np.array_equal(levels, ir.bfs(source)), (name, source)
                    assert np.array_equal(levels, graph.reference_levels(indptr, indices, source)), (name, source)
    finally:
        host.shutdown()


def test_the_oracle_searches_on_the_host_by_default():
    # no level loop and no read-back: one host search over the resident CSR, the same levels
    n, src, dst = CASES["random"]
    indptr, indices = symmetric(n, src, dst)
    backend = counting_oracle()
    try:
        with graph.Graph(indptr, indices, backend=backend, undirected=True) as g:
            backend.reads = 0
            levels = g.bfs(3)
            assert (backend.loops, backend.reads) == (0, 0)
            assert np.array_equal(levels, graph.reference_levels(indptr, indices, 3))
            with pytest.raises(InvalidProgram, match="Fix:"):
                g.bfs(n)
            with pytest.raises(ValueError):
                g.bfs(3, alpha="fast")  # checked as on the IR path
    finally:
        backend.shutdown()


def test_int32_csr_is_taken_without_a_copy():
    """scipy's int32 CSR arrays cross as they are (one scan for negatives, no u32 copy), so the
    host path sends the caller's own memory; negative or too-large ids are refused with a Fix."""
    indices = np.arange(1 << 16, dtype=np.int32)[::-1].copy()
    as_u32 = graph.u32_array("indices", indices, None)
    assert as_u32.dtype == np.uint32 and np.shares_memory(as_u32, indices)
    np.testing.assert_array_equal(as_u32, indices.astype(np.uint32))
    strided = graph.u32_array("indices", indices[::2], None)  # not contiguous: copied, same values
    np.testing.assert_array_equal(strided, indices[::2].astype(np.uint32))
    for bad in (np.array([0, -1], np.int32), np.array([0, 2**32], np.int64), np.array([-3], np.int8)):
        with pytest.raises(InvalidProgram, match="outside u32") as err:
            graph.u32_array("indices", bad, None)
        assert "Fix: " in str(err.value)


def test_host_graphs_upload_and_return_numpy(oracle):
    """Host CSR arrays are uploaded (nothing is bound in place, so nothing of the caller's is
    referenced) and give numpy results, on a graph and through the plain calls."""
    n, src, dst = CASES[sorted(CASES)[0]]
    indptr, indices = symmetric(n, src, dst)
    with graph.Graph(indptr, indices, backend=oracle, undirected=True) as g:
        assert g.bound == () and g.like == ()
        levels, labels = g.bfs(0), g.connected_components()
    assert type(levels) is np.ndarray and type(labels) is np.ndarray
    np.testing.assert_array_equal(levels, graph.reference_levels(indptr, indices, 0))
    np.testing.assert_array_equal(labels, expected_labels(indptr, indices))
    assert type(graph.bfs(indptr, indices, 0, backend=oracle)) is np.ndarray
    assert g.handles and not g._res.handles  # closed: every handle freed


def test_the_oracle_does_not_bind_device_arrays(oracle):
    """Binding in place is the ``cuda`` backend's ability; the oracle keeps uploading."""
    assert not graph.binds(oracle)


@pytest.mark.parametrize("n", [1, 255, 256, 1000])
def test_copy_program_copies_the_first_words(oracle, n):
    """The device-side result copy of graphs given as device arrays, checked on the oracle."""
    values = np.arange(n + 7, dtype=np.uint32) * np.uint32(2654435761)
    out = np.zeros(n, np.uint32)
    got = oracle.dispatch(graph.copy_program(), [values, out], graph._elements_config(n))
    np.testing.assert_array_equal(np.asarray(got[0]).view(np.uint32)[:n], values[:n])


def by_degree(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Each row's neighbours stably sorted by degree, highest first (ids >= n: degree 0), on the host."""
    n = indptr.size - 1
    degree = np.diff(indptr.astype(np.int64))
    rows = np.repeat(np.arange(n), degree)
    keys = np.where(indices < n, degree[np.minimum(indices, max(n - 1, 0))], 0) if n else indices
    return indices[np.lexsort((-keys, rows))] if indices.size else indices


@pytest.mark.parametrize("name", sorted(CASES))
def test_neighbours_by_degree_orders_each_row_and_keeps_every_result(oracle, name):
    n, src, dst = CASES[name]
    indptr, indices = symmetric(n, src, dst)
    indices = indices.copy()
    if indices.size:
        indices[indices.size // 2] = n + 5  # an id >= n: degree 0, last in its row, still ignored
    ptr2, idx2 = graph.neighbours_by_degree(indptr, indices, backend=oracle)
    assert ptr2 is indptr and idx2.dtype == np.uint32
    assert np.array_equal(idx2, by_degree(indptr, indices))
    assert np.array_equal(graph.connected_components(ptr2, idx2, backend=oracle),
                          graph.connected_components(indptr, indices, backend=oracle))
    for source in {0, n - 1} if n else ():
        assert np.array_equal(graph.bfs(ptr2, idx2, source, backend=oracle),  # an edge lost its reverse
                              graph.reference_levels(indptr, indices, source))


def test_neighbours_by_degree_refuses_what_graphs_refuse(oracle):
    with pytest.raises(InvalidProgram, match="Fix:"):
        graph.neighbours_by_degree(np.array([0, 3, 1]), np.array([1, 0, 1]), backend=oracle)
    ptr, idx = graph.neighbours_by_degree(np.zeros(4, np.uint32), np.zeros(0, np.uint32), backend=oracle)
    assert idx.size == 0 and ptr.size == 4
