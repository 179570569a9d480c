"""vyre.lib.datalog on the oracle against networkx and a Python fixed point."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from graphs import cases, counting_oracle

from vyre.driver.errors import InvalidProgram
from vyre.lib import datalog

CASES = cases(seed=5)


def closure_pairs(n: int, src, dst) -> list[tuple[int, int]]:
    """(a, c) with a path of >= 1 edges, from networkx (a vertex on a cycle reaches itself)."""
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(np.asarray(src).tolist(), np.asarray(dst).tolist()))
    pairs = set()
    for a in range(n):
        for c in nx.descendants(g, a):
            pairs.add((a, c))
        if any(g.has_edge(p, a) for p in nx.descendants(g, a) | {a}):
            pairs.add((a, a))
    return sorted(pairs)


def same_generation_pairs(n: int, parent, child) -> list[tuple[int, int]]:
    """The sg rules run to a fixed point in Python sets."""
    children: dict[int, set[int]] = {}
    for p, c in zip(np.asarray(parent).tolist(), np.asarray(child).tolist()):
        children.setdefault(p, set()).add(c)
    sg = {(x, y) for kids in children.values() for x in kids for y in kids if x != y}
    while True:
        new = {(x, y) for a, b in sg for x in children.get(a, ()) for y in children.get(b, ())} - sg
        if not new:
            return sorted(sg)
        sg |= new


def as_pairs(result) -> list[tuple[int, int]]:
    s, d = result
    assert s.dtype == np.uint32 and d.dtype == np.uint32
    return list(zip(s.tolist(), d.tolist()))


SMALL = ["chain", "self_loops", "no_edges", "one_vertex", "star", "reverse_chain"]


# dense=None: bit-matrix rounds on the device (the default at these sizes); False: sorted relations
PATHS = pytest.mark.parametrize("dense", [None, False], ids=["bits", "sorted"])


@PATHS
@pytest.mark.parametrize("name", SMALL + ["random"])
def test_transitive_closure_matches_networkx(oracle, name, dense):
    n, src, dst = CASES[name]
    if name == "random":
        n, src, dst = 60, src[:70] % 60, dst[:70] % 60
    if name in ("chain", "reverse_chain"):
        keep = (src < 40) & (dst < 40)          # 780 pairs: quick on the oracle
        n, src, dst = 40, src[keep], dst[keep]
    got = as_pairs(datalog.transitive_closure(n, src, dst, backend=oracle, dense=dense))
    assert got == closure_pairs(n, src, dst)


@PATHS
def test_transitive_closure_of_a_cycle_with_duplicate_edges(oracle, dense):
    src = np.array([0, 1, 2, 0, 0, 3], dtype=np.uint32)
    dst = np.array([1, 2, 0, 1, 1, 3], dtype=np.uint32)
    got = as_pairs(datalog.transitive_closure(5, src, dst, backend=oracle, dense=dense))
    assert got == [(a, c) for a in range(3) for c in range(3)] + [(3, 3)]


@PATHS
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_same_generation_matches_python(oracle, seed, dense):
    rng = np.random.default_rng(seed)
    n = 50
    child = rng.permutation(n)[: 45]
    parent = rng.integers(0, n, child.size)
    got = as_pairs(datalog.same_generation(n, parent, child, backend=oracle, dense=dense))
    assert got == same_generation_pairs(n, parent, child)


def test_bit_matrix_rounds_equal_sorted_relations_and_stay_on_the_device(oracle):
    # random graphs whose vertex count is not a multiple of 32 (a row's last word is partial), with
    # cycles, self loops and duplicate edges; a tree for same generation
    rng = np.random.default_rng(3)
    reads = set()
    for n, m in [(37, 60), (70, 90), (33, 200)]:
        src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
        want = datalog.transitive_closure(n, src, dst, backend=oracle, dense=False)
        child = rng.permutation(n)[: n - 3]
        parent = rng.integers(0, n, child.size)
        want_sg = datalog.same_generation(n, parent, child, backend=oracle, dense=False)
        backend = counting_oracle()
        try:
            got = datalog.transitive_closure(n, src, dst, backend=backend)
            got_sg = datalog.same_generation(n, parent, child, backend=backend)
            assert backend.loops == 2  # one device loop each, and as many reads whatever the rounds
            reads.add(backend.reads)
        finally:
            backend.shutdown()
        assert all(np.array_equal(a, b) for a, b in zip(got, want))
        assert all(np.array_equal(a, b) for a, b in zip(got_sg, want_sg))
    assert len(reads) == 1, reads


def test_same_generation_over_cyclic_parents():
    # not a forest: parent cycles of lengths 2 and 3 sharing a vertex, so facts keep coming for many rounds
    parent = np.array([0, 1, 1, 2, 3, 4, 4, 5], np.uint32)
    child = np.array([1, 0, 2, 3, 1, 5, 0, 4], np.uint32)
    want = same_generation_pairs(6, parent, child)
    for dense in (None, False):
        assert as_pairs(datalog.same_generation(6, parent, child, backend="reference", dense=dense)) == want


def test_dense_refuses_more_vertices_than_its_matrices_hold(oracle):
    with pytest.raises(InvalidProgram, match="Fix:"):
        datalog.transitive_closure((1 << 15) + 1, [0], [1], backend=oracle, dense=True)


def test_evaluator_runs_a_user_rule(oracle):
    """A rule written with the operators: reach(a, c) :- edge(a, c). reach(a, c) :- reach(a, b), edge(b, c)."""
    n, src, dst = 30, np.arange(29), np.arange(1, 30)
    ev = datalog.Evaluator(oracle)
    edges = datalog.edge_graph(n, src, dst, oracle)
    try:
        result = ev.fixpoint(ev.relation(src[:1], dst[:1]), lambda delta: ev.join("compose", delta, edges))
        s, d = result.pairs()
        result.close()
    finally:
        edges.close()
    assert s.tolist() == [0] * 29 and d.tolist() == list(range(1, 30))
    assert ev.iterations == 29


def test_bad_input(oracle):
    with pytest.raises(InvalidProgram, match="Fix:"):
        datalog.transitive_closure(3, [0, 1], [1], backend=oracle)
    with pytest.raises(InvalidProgram, match="Fix:"):
        datalog.transitive_closure(3, [0, 5], [1, 2], backend=oracle)
