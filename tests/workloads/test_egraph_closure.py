"""Congruence closure's paths (hash, sorted) on the oracle: deep chains, cycles, odd sizes,
edge values, and the steps a call costs."""

from __future__ import annotations

import numpy as np
import pytest
from test_egraph import python_closure, random_egraph

from tests.codegen.codegen_support import assemble, needs_ptxas
from vyre.driver.errors import InvalidProgram
from vyre.lib import egraph
from vyre.reference.backend import ReferenceBackend

METHODS = ("hash", "sorted")


def columns(nodes: list[tuple[int, int, list[int]]]) -> tuple[np.ndarray, ...]:
    """``(eclass, op, offsets, lens, children)`` of e-nodes given as ``(eclass, op, children)``."""
    lens = np.array([len(kids) for _, _, kids in nodes], np.uint32)
    offsets = np.zeros(len(nodes), np.uint32)
    offsets[1:] = np.cumsum(lens)[:-1]
    children = np.array([c for _, _, kids in nodes for c in kids], np.uint32)
    return (np.array([c for c, _, _ in nodes], np.uint32), np.array([o for _, o, _ in nodes], np.uint32),
            offsets, lens, children)


def chains(length: int, descending: bool) -> tuple[np.ndarray, ...]:
    """Two chains ``a_i = f(a_{i-1})``, ``b_i = f(b_{i-1})`` whose first classes hold the same leaf:
    ``a_i ~ b_i`` only after ``a_{i-1} ~ b_{i-1}`` (``length`` rounds). ``descending`` numbers the
    chains' classes from the top, so every merge must move a class under a larger-numbered e-node's."""
    ids = list(range(2 * length))[::-1] if descending else list(range(2 * length))
    a, b = ids[:length], ids[length:]
    nodes = [(a[0], 5, []), (b[0], 5, [])]
    nodes += [(chain[i], 1, [chain[i - 1]]) for i in range(1, length) for chain in (a, b)]
    return columns(nodes)


def closure_of(cols: tuple[np.ndarray, ...], backend: object, method: str) -> list[int]:
    with egraph.EGraph(*cols, backend=backend) as g:
        labels = g.congruence_closure(method=method).tolist()
        assert g.path == method
        return labels


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("method", ["hash"])
def test_chains_of_100_close_completely(oracle, method, descending):
    cols = chains(100, descending)
    got = closure_of(cols, oracle, method)
    assert got == python_closure(*cols)
    a, b = (list(range(100)), list(range(100, 200))) if not descending else (list(range(199, 99, -1)),
                                                                              list(range(99, -1, -1)))
    assert all(got[x] == got[y] == min(x, y) for x, y in zip(a, b, strict=True))


def test_chains_on_the_sorted_path(oracle):
    cols = chains(12, True)
    assert closure_of(cols, oracle, "sorted") == python_closure(*cols)


def test_cycles(oracle):
    # 0 = f(1), 1 = f(0) and 2 = f(3), 3 = f(2); 0 and 2 hold the leaf x: then f(0) ~ f(2), so 1 ~ 3.
    # 4 = g(4, 5) and 6 = g(6, 7) with 5 ~ 7 (leaf y) stay apart: their first children differ.
    # 8 = h(8) and 9 = h(9) stay apart (a self cycle each, nothing merges 8 and 9).
    nodes = [(0, 1, [1]), (1, 1, [0]), (2, 1, [3]), (3, 1, [2]), (0, 9, []), (2, 9, []),
             (4, 2, [4, 5]), (6, 2, [6, 7]), (5, 10, []), (7, 10, []), (8, 3, [8]), (9, 3, [9])]
    cols = columns(nodes)
    want = python_closure(*cols)
    assert want == [0, 1, 0, 1, 4, 5, 6, 5, 8, 9]
    for method in METHODS:
        assert closure_of(cols, oracle, method) == want


@pytest.mark.parametrize("nodes", [1, 3, 77, 301])
def test_random_odd_sizes_agree_on_every_path(oracle, nodes):
    rng = np.random.default_rng(nodes)
    cols = random_egraph(rng, nodes, max(nodes // 3, 1), 3, 2)
    want = python_closure(*cols)
    for method in METHODS:
        assert closure_of(cols, oracle, method) == want


def test_empty_and_single(oracle):
    empty = [np.zeros(0, np.uint32)] * 5
    with egraph.EGraph(*empty, backend=oracle) as g:
        assert all(g.congruence_closure(method=method).size == 0 for method in METHODS)
    one = columns([(0, 0, [])])
    assert egraph.congruence_closure(*one, backend=oracle).tolist() == [0]
    self_loop = columns([(3, 0xFFFFFFFF, [3, 3])])  # ids below 3 hold no e-node: each its own class
    assert egraph.congruence_closure(*self_loop, backend=oracle).tolist() == [0, 1, 2, 3]


def test_edge_values(oracle):
    # operators 0 and 2**32 - 1, wide e-nodes, a sparse child id near 50,000
    big = 50_000
    nodes = [(0, 0xFFFFFFFF, []), (1, 0xFFFFFFFF, []), (2, 0, [0, big, 0, big]), (3, 0, [1, big, 1, big]),
             (big, 0, []), (4, 0, [0, big, 0]), (5, 0xFFFFFFFF, [2, 2]), (6, 0xFFFFFFFF, [3, 3])]
    cols = columns(nodes)
    want = python_closure(*cols)
    assert want[:7] == [0, 0, 2, 2, 4, 5, 5] and want[big] == big and len(want) == big + 1
    for method in METHODS:
        assert closure_of(cols, oracle, method) == want


def test_the_benchmark_egraph(oracle):
    from benchmarks.bench_workloads import egraph_columns

    cols = egraph_columns(11)
    want = python_closure(*cols)
    with egraph.EGraph(*cols, backend=oracle) as g:
        assert g.congruence_closure().tolist() == want and g.path == "hash"
        assert g.congruence_closure(method="sorted").tolist() == want
        assert g.congruence_closure().tolist() == want  # the kept buffers start over


class Recording(ReferenceBackend):
    """The oracle, counting what a call costs: allocations, uploads, sequences, reads, loops."""

    def __init__(self) -> None:
        super().__init__()
        self.allocs = self.uploads = self.reads = 0
        self.sequences: list[list[tuple]] = []
        self.loops: list[tuple[list[tuple], int]] = []

    def allocate_resident(self, nbytes):
        self.allocs += 1
        return super().allocate_resident(nbytes)

    def upload_resident(self, handle, data, offset=0):
        self.uploads += 1
        return super().upload_resident(handle, data, offset)

    def download_resident(self, handle, offset=0, nbytes=None):
        self.reads += 1
        return super().download_resident(handle, offset, nbytes)

    def dispatch_sequence(self, steps, reads=()):
        self.sequences.append(list(steps))
        self.reads += bool(reads)  # one synchronisation, however many ranges
        return super().dispatch_sequence(steps, reads)

    def dispatch_until(self, steps, flag_handle, max_iterations):
        rounds = super().dispatch_until(steps, flag_handle, max_iterations)
        self.loops.append((list(steps), rounds))
        return rounds


def test_a_call_is_one_loop_of_two_steps_and_one_read():
    cols = chains(20, True)
    backend = Recording()
    try:
        with egraph.EGraph(*cols, backend=backend) as g:
            first = g.congruence_closure()
            before = (backend.allocs, backend.uploads, backend.reads, len(backend.sequences))
            steps = backend.loops[-1][0]
            assert g.congruence_closure().tolist() == first.tolist() == python_closure(*cols)
            # the second call: no allocation or upload; an init sequence and one read after one loop
            assert (backend.allocs, backend.uploads) == before[:2]
            assert (backend.reads - before[2], len(backend.sequences) - before[3], len(backend.loops)) == (1, 2, 2)
            assert len(steps) == 2 and backend.loops[-1][0] == steps  # the same steps: one captured loop
            assert 20 <= backend.loops[-1][1] <= 23  # 20 links of the chains, then rounds that change nothing
    finally:
        backend.shutdown()


def test_unknown_method(oracle):
    with egraph.EGraph(*columns([(0, 0, [])]), backend=oracle) as g, pytest.raises(InvalidProgram, match="Fix:"):
        g.congruence_closure(method="fast")


@needs_ptxas
def test_the_closure_programs_assemble_for_sm90():
    from vyre_cuda import emit_ptx

    programs = {p.name: p for p in (egraph.closure_init_program(), egraph.closure_insert_program(),
                                    egraph.closure_jump_program())}
    failures = assemble({name: emit_ptx(p, sm="90") for name, p in programs.items()}, "90")
    assert not failures, "\n".join(failures)
