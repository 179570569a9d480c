"""Equality saturation on ``cuda``: e-class counts after each iteration equal egglog's and the
oracle's on the same terms and rules (commutativity and associativity of + and *, constants)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workloads"))

from test_egraph_saturate import CONSTANTS, SIG, vyre_classes  # noqa: E402

from benchmarks import egglog_oracle  # noqa: E402
from benchmarks.egglog_oracle import COMM_ASSOC, random_terms, terms_of_size  # noqa: E402
from vyre.lib import egraph  # noqa: E402

pytestmark = pytest.mark.gpu
needs_egglog = pytest.mark.skipif(not egglog_oracle.available(), reason="egglog is not installed (pip install egglog)")


@pytest.fixture(scope="module")
def oracle():
    from vyre.reference.backend import ReferenceBackend

    return ReferenceBackend()


@needs_egglog
@pytest.mark.parametrize("seed", range(4))
def test_comm_assoc_matches_egglog_after_each_iteration(backend, seed):
    terms = random_terms(seed, 200, 4)
    assert vyre_classes(terms, COMM_ASSOC, 4, backend) == egglog_oracle.egglog_classes(terms, COMM_ASSOC, 4)


@needs_egglog
def test_constants_match_egglog(backend):
    terms = [*random_terms(50, 60, 3), "(* x 1)", "(+ (+ y 0) (+ y 0))"]
    rules = COMM_ASSOC + CONSTANTS
    assert vyre_classes(terms, rules, 3, backend) == egglog_oracle.egglog_classes(terms, rules, 3)


@pytest.mark.parametrize("enodes", [1, 777, 5_000])
def test_saturate_equals_the_oracle(backend, oracle, enodes):
    terms = terms_of_size(enodes, seed=enodes)
    cols, _ = egraph.term_columns(terms, SIG)
    rules = COMM_ASSOC + CONSTANTS[:1]  # the other constants' rules grow these terms to 10**6 classes
    want = egraph.saturate(*cols, rules, 3, signature=SIG, backend=oracle)
    got = egraph.saturate(*cols, rules, 3, signature=SIG, backend=backend)
    assert got.history == want.history and np.array_equal(got.canonical, want.canonical)
    assert all(np.array_equal(a, b) for a, b in zip(got.columns, want.columns, strict=True))


@needs_egglog
def test_the_benchmark_terms_match_egglog(backend):
    terms = terms_of_size(2**16)
    cols, _ = egraph.term_columns(terms, SIG)
    with egraph.EGraph(*cols, backend=backend) as g:
        out = g.saturate(COMM_ASSOC, 3, signature=SIG)
    assert out.classes == egglog_oracle.egglog_seconds(terms, COMM_ASSOC, 3)[1]
