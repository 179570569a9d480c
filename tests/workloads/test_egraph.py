"""vyre.lib.egraph on the oracle against a Python reference (hash-free grouping, union-find)."""

from __future__ import annotations

import numpy as np
import pytest
from graphs import counting_oracle

from vyre.driver.errors import InvalidProgram
from vyre.lib import egraph


def random_egraph(rng: np.random.Generator, nodes: int, classes: int, ops: int, arity: int):
    """Columns of a random e-graph: few operators and classes, so many e-nodes coincide."""
    eclass = rng.integers(0, classes, nodes).astype(np.uint32)
    op = rng.integers(0, ops, nodes).astype(np.uint32)
    lens = rng.integers(0, arity + 1, nodes).astype(np.uint32)
    offsets = np.zeros(nodes, dtype=np.uint32)
    offsets[1:] = np.cumsum(lens)[:-1]
    children = rng.integers(0, classes, int(lens.sum())).astype(np.uint32)
    return eclass, op, offsets, lens, children


def python_pairs(eclass, op, offsets, lens, children) -> list[tuple[int, int]]:
    groups: dict[tuple, set[int]] = {}
    for r in range(len(eclass)):
        key = (int(op[r]), tuple(int(c) for c in children[offsets[r]:offsets[r] + lens[r]]))
        groups.setdefault(key, set()).add(int(eclass[r]))
    return sorted({(a, b) for g in groups.values() for a in g for b in g if a < b})


def python_closure(eclass, op, offsets, lens, children) -> list[int]:
    classes = int(max(eclass.max(initial=0), children.max(initial=0))) + 1
    parent = list(range(classes))

    def find(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    while True:
        canon_class = np.array([find(int(c)) for c in eclass], dtype=np.uint32)
        canon_children = np.array([find(int(c)) for c in children], dtype=np.uint32)
        pairs = python_pairs(canon_class, op, offsets, lens, canon_children)
        if not pairs:
            return [find(c) for c in range(classes)]
        for a, b in pairs:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)


@pytest.mark.parametrize("seed", range(4))
def test_structural_equivalence_matches_python(oracle, seed):
    cols = random_egraph(np.random.default_rng(seed), 300, 60, 4, 2)
    a, b = egraph.structural_equivalence(*cols, backend=oracle)
    assert a.dtype == np.uint32 and b.dtype == np.uint32
    assert list(zip(a.tolist(), b.tolist())) == python_pairs(*cols)


@pytest.mark.parametrize("seed", range(3))
def test_congruence_closure_matches_python(oracle, seed):
    cols = random_egraph(np.random.default_rng(100 + seed), 120, 50, 3, 2)
    want = python_closure(*cols)
    with egraph.EGraph(*cols, backend=oracle) as g:
        assert g.congruence_closure().tolist() == want and g.path == "hash"
        assert g.sorted_congruence_closure().tolist() == want and g.path == "sorted"


def _slot_hash(op: int, children: list[int]) -> int:
    """The hash path's table hash of an e-node, in Python (egraph's mix, then MurmurHash3's finaliser)."""
    def mix(h: int, value: int) -> int:
        h = ((h ^ value) * 0x9E3779B1) & 0xFFFFFFFF
        return ((h << 13) | (h >> 19)) & 0xFFFFFFFF

    h = mix(mix(0x811C9DC5, op), len(children))
    for c in children:
        h = mix(h, c)
    h = ((h ^ (h >> 16)) * 0x85EBCA6B) & 0xFFFFFFFF
    h = ((h ^ (h >> 13)) * 0xC2B2AE35) & 0xFFFFFFFF
    return h ^ (h >> 16)


def test_congruence_closure_takes_the_sorted_path_when_the_table_clusters(oracle):
    # 66 distinct leaves whose hashes share a slot of the 512-slot table (4 slots per e-node, 90
    # e-nodes): an e-node probes past 64 taken slots, the overflow word is set, and the exact
    # sorted path answers
    ops = [op for op in range(1, 200_000) if _slot_hash(op, []) & 511 == 0][:66]
    assert len(ops) == 66
    leaves = ops + ops[:8] + list(range(200_001, 200_017))   # 8 leaves repeated in other classes: merged
    n = len(leaves)
    cols = (np.arange(n, dtype=np.uint32), np.array(leaves, np.uint32), np.zeros(n, np.uint32),
            np.zeros(n, np.uint32), np.zeros(0, np.uint32))
    with egraph.EGraph(*cols, backend=oracle) as g:
        assert g.congruence_closure().tolist() == python_closure(*cols)
        assert g.path == "sorted"


def test_congruence_propagates_through_parents(oracle):
    # classes: 0 = x, 1 = y, 2 = f(x), 3 = f(y), 4 = g(f(x)), 5 = g(f(y)); x and y are merged by
    # giving them equal leaves (op 7, no children), so f(x) ~ f(y), then g(f(x)) ~ g(f(y)).
    eclass = np.array([0, 1, 2, 3, 4, 5], np.uint32)
    op = np.array([7, 7, 1, 1, 2, 2], np.uint32)
    lens = np.array([0, 0, 1, 1, 1, 1], np.uint32)
    offsets = np.array([0, 0, 0, 1, 2, 3], np.uint32)
    children = np.array([0, 1, 2, 3], np.uint32)
    assert egraph.congruence_closure(eclass, op, offsets, lens, children, backend=oracle).tolist() == [0, 0, 2, 2, 4, 4]
    a, b = egraph.structural_equivalence(eclass, op, offsets, lens, children, backend=oracle)
    assert list(zip(a.tolist(), b.tolist())) == [(0, 1)]  # only the leaves are equal as given


def test_empty_and_bad_columns(oracle):
    empty = [np.zeros(0, np.uint32)] * 5
    a, b = egraph.structural_equivalence(*empty, backend=oracle)
    assert a.size == 0 and b.size == 0
    with pytest.raises(InvalidProgram, match="Fix:"):
        egraph.structural_equivalence([0, 1], [0], [0, 0], [0, 0], [], backend=oracle)
    with pytest.raises(InvalidProgram, match="Fix:"):
        egraph.structural_equivalence([0], [0], [0], [3], [1], backend=oracle)


def test_congruence_rounds_loop_on_the_device():
    # three rounds find pairs (the leaves, then f(x) ~ f(y), then g(...)), all in one device loop
    eclass = np.array([0, 1, 2, 3, 4, 5], np.uint32)
    op = np.array([7, 7, 1, 1, 2, 2], np.uint32)
    lens = np.array([0, 0, 1, 1, 1, 1], np.uint32)
    offsets = np.array([0, 0, 0, 1, 2, 3], np.uint32)
    backend = counting_oracle()
    try:
        got = egraph.congruence_closure(eclass, op, offsets, lens, np.array([0, 1, 2, 3], np.uint32), backend=backend)
        assert got.tolist() == [0, 0, 2, 2, 4, 4]
        assert (backend.loops, backend.reads) == (1, 2)  # every round in one loop; the overflow word, the labels
    finally:
        backend.shutdown()
