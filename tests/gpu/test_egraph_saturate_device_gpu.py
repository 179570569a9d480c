"""Equality saturation's device path (apply and compaction on the device) on ``cuda``: equal, bit
for bit, to the host path (``device=False``) on ``cuda`` and on the oracle, at sizes past the CPU
tests'; its LSD order of a million match rows equals numpy's lexicographic order."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workloads"))

from test_egraph_saturate_device import RULE_SETS, SIG  # noqa: E402

from benchmarks.egglog_oracle import COMM_ASSOC, random_terms, terms_of_size  # noqa: E402
from vyre.lib import egraph, egraph_device, graph  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def oracle():
    from vyre.reference.backend import ReferenceBackend

    return ReferenceBackend()


def same(a: egraph.Saturation, b: egraph.Saturation) -> bool:
    return (a.history == b.history and a.iterations == b.iterations and np.array_equal(a.canonical, b.canonical)
            and all(np.array_equal(x, y) for x, y in zip(a.columns, b.columns, strict=True)))


def test_the_benchmark_case_equals_the_host_path(backend):
    """The ``saturate`` benchmark row: 2**16 e-nodes, commutativity and associativity, 3 rounds."""
    cols, _ = egraph.term_columns(terms_of_size(2**16), SIG)
    dev = egraph.saturate(*cols, COMM_ASSOC, 3, signature=SIG, backend=backend)
    host = egraph.saturate(*cols, COMM_ASSOC, 3, signature=SIG, backend=backend, device=False)
    assert same(dev, host) and dev.columns[0].size > 10**6


@pytest.mark.parametrize("name", sorted(RULE_SETS))
def test_rule_sets_equal_the_host_path_on_the_oracle(backend, oracle, name):
    terms = [*random_terms(400 + sorted(RULE_SETS).index(name), 150, 3), "(* x 1)", "(+ (+ y 0) (+ y 0))",
             "(* (+ y z) (+ y 2))"]
    cols, _ = egraph.term_columns(terms, SIG)
    dev = egraph.saturate(*cols, RULE_SETS[name], 2, signature=SIG, backend=backend)
    host = egraph.saturate(*cols, RULE_SETS[name], 2, signature=SIG, backend=oracle, device=False)
    assert same(dev, host) and dev.iterations >= 1


@pytest.mark.parametrize("enodes", [1, 777, 20_000])
def test_comm_assoc_with_identity_equals_the_host_path(backend, enodes):
    cols, _ = egraph.term_columns(terms_of_size(enodes, seed=enodes), SIG)
    rules = COMM_ASSOC + ("(* ?a 1) => ?a",)
    dev = egraph.saturate(*cols, rules, 3, signature=SIG, backend=backend)
    host = egraph.saturate(*cols, rules, 3, signature=SIG, backend=backend, device=False)
    assert same(dev, host)


@pytest.mark.parametrize(("width", "largest"), [(3, 2**20), (5, 2**29)])
def test_order_of_a_million_rows_is_numpys(backend, width, largest):
    rng = np.random.default_rng(width)
    rows = rng.integers(0, largest, (1 << 20, width), dtype=np.uint32)
    rows[1000:5000] = rows[:4000]
    with graph.ResidentSet(backend) as res:
        slab = res.upload(rows.reshape(-1))
        order = egraph_device.order(backend, res, rows.shape[0], "matches", [slab],
                                    [egraph_device.bits(largest)] * width, width)
        perm = graph.read_u32(backend, order, rows.shape[0])
    assert np.array_equal(rows[perm], rows[np.lexsort(rows.T[::-1])])
