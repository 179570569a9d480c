"""Equality saturation's device path (``vyre.lib.egraph_device``: apply and compaction on the
device) against the host path (``device=False``) on the oracle: the same columns, canonical ids
and history, bit for bit, for rule sets with constants, leaves, nested and bare-variable right-hand
sides; its sort keys against numpy's lexicographic order; its programs assembled for sm_90."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.egglog_oracle import COMM_ASSOC, SIGNATURE, random_terms
from tests.codegen.codegen_support import assemble, needs_ptxas
from vyre.lib import egraph, egraph_device, graph
from vyre.lib.egraph_rules import Signature, parse_rule

SIG = Signature(SIGNATURE)
CONSTANTS = ("(* ?a 1) => ?a", "(+ ?a 0) => ?a", "(* ?a 0) => 0", "(+ ?a ?a) => (* 2 ?a)")
RULE_SETS = {
    "comm_assoc": COMM_ASSOC,
    "constants": COMM_ASSOC[:2] + CONSTANTS,
    "deeper": ("(* (+ ?a ?b) ?c) => (+ (* ?a ?c) (* ?b ?c))", "(+ (* ?a 2) (* ?b 2)) => (* (+ ?a ?b) 2)",
               "(+ ?a (+ ?b (+ ?c ?d))) => (+ (+ (+ ?a ?b) ?c) ?d)"),
    "leaves": ("x => (+ x 0)", "(* (+ ?a ?b) (+ ?a 2)) => ?a", "(+ ?a 0) => (+ 0 ?a)", COMM_ASSOC[0]),
    "repeated_subterms": ("(+ ?a ?b) => (* (+ ?b ?a) (+ ?b ?a))", "(* ?a ?a) => ?a", "(* ?a ?b) => 1"),
}


def assert_same(cols: tuple, rules: tuple[str, ...], iterations: int, backend: object) -> egraph.Saturation:
    """The device path's result equals the host path's exactly; returns it."""
    host = egraph.saturate(*cols, rules, iterations, signature=SIG, backend=backend, device=False)
    dev = egraph.saturate(*cols, rules, iterations, signature=SIG, backend=backend, device=True)
    assert dev.history == host.history and dev.iterations == host.iterations and dev.classes == host.classes
    assert dev.canonical.dtype == host.canonical.dtype and np.array_equal(dev.canonical, host.canonical)
    for a, b in zip(dev.columns, host.columns, strict=True):
        assert a.dtype == b.dtype == np.uint32 and np.array_equal(a, b)
    return dev


@pytest.mark.parametrize("name", sorted(RULE_SETS))
def test_device_path_equals_host_path(oracle, name):
    extra = ["(* x 1)", "(+ (+ y 0) (+ y 0))", "(* (+ y z) (+ y 2))"]
    terms = [*random_terms(300 + sorted(RULE_SETS).index(name), 4, 3), *extra]
    cols, _ = egraph.term_columns(terms, SIG)
    out = assert_same(cols, RULE_SETS[name], 3, oracle)
    assert out.iterations >= 1 and out.history[-1][2] > 0


def test_device_path_on_ids_with_gaps(oracle):
    """Input ids that hold no e-node and no child keep EMPTY as their canonical id on both paths
    (the host path indexed its remap with EMPTY in the second round before)."""
    cols = (np.array([0, 3, 5], np.uint32), np.array([SIG["x"], SIG["y"], SIG["+"]], np.uint32),
            np.array([0, 0, 0], np.uint32), np.array([0, 0, 2], np.uint32), np.array([0, 3], np.uint32))
    out = assert_same(cols, COMM_ASSOC, 3, oracle)
    assert out.canonical.size == 6 and out.canonical[1] == egraph.EMPTY == out.canonical[4]


def test_device_path_with_duplicate_enodes_and_overflowing_slabs(oracle):
    terms = ["(+ x (+ y (+ z (+ 1 (+ 2 0)))))", "(* x (* y (* z (* 1 (* 2 0)))))"]
    (eclass, op, offsets, lens, children), _ = egraph.term_columns(terms, SIG)
    n = eclass.size
    doubled = (np.concatenate([eclass, eclass + n]), np.concatenate([op, op]), np.concatenate([offsets, offsets]),
               np.concatenate([lens, lens]), children)
    out = assert_same(doubled, COMM_ASSOC, 3, oracle)
    assert any(out.history[k + 1][2] > max(out.history[k][1], 16) for k in range(len(out.history) - 1))


def test_device_path_saturates_and_stops_like_the_host(oracle):
    cols, _ = egraph.term_columns(["(* x 1)", "x", "(+ (* x 1) 2)", "(+ x 2)"], SIG)
    assert assert_same(cols, ("(* ?a 1) => ?a",), 5, oracle).iterations == 2
    assert assert_same(cols, ("(* (* ?a ?b) ?c) => (* ?a (* ?b ?c))",), 5, oracle).iterations == 0


def test_device_path_after_the_closure_overflows(oracle, monkeypatch):
    """An e-node that finds no hash-table slot sends the resident closure to the sorted path."""
    terms = random_terms(9, 4, 3)
    cols, _ = egraph.term_columns(terms, SIG)
    want = egraph.saturate(*cols, CONSTANTS, 2, signature=SIG, backend=oracle, device=False)
    sorted_closure = egraph.EGraph.sorted_congruence_closure
    calls = []

    def counted(self, *args, **kwargs):
        calls.append(kwargs.get("unions") is not None)
        return sorted_closure(self, *args, **kwargs)

    monkeypatch.setattr(egraph, "_MAX_PROBES", 0)
    monkeypatch.setattr(egraph.EGraph, "sorted_congruence_closure", counted)
    egraph.closure_insert_program.cache_clear()
    try:
        got = egraph.saturate(*cols, CONSTANTS, 2, signature=SIG, backend=oracle, device=True)
    finally:
        egraph.closure_insert_program.cache_clear()
    assert len(calls) == 1 + got.iterations and any(calls)  # every closure overflowed; some had unions
    assert got.history == want.history and np.array_equal(got.canonical, want.canonical)
    assert all(np.array_equal(a, b) for a, b in zip(got.columns, want.columns, strict=True))


def test_pack_keeps_fields_whole_and_in_order():
    assert egraph_device.pack([30, 3, 2, 30, 30]) == [((0, 3), (1, 0)), ((2, 60), (3, 30), (4, 0))]
    assert egraph_device.pack([8, 8, 8]) == [((0, 16), (1, 8), (2, 0))]
    assert egraph_device.pack([64, 1]) == [((0, 0),), ((1, 0),)]
    assert not egraph_device.is_wide(((0, 16), (1, 8), (2, 0)), [8, 8, 8])
    assert egraph_device.is_wide(((0, 32), (1, 0)), [1, 32])


@pytest.mark.parametrize(("width", "largest"), [(3, 200), (3, 2**29), (5, 2**20)])
def test_match_order_is_numpys_lexicographic_order(oracle, width, largest):
    rng = np.random.default_rng(width + largest)
    rows = rng.integers(0, largest, (300, width), dtype=np.uint32)
    rows[100:150] = rows[:50]  # equal rows
    rows[200:250, 0] = rows[0, 0]
    want = rows[np.lexsort(rows.T[::-1])]
    with graph.ResidentSet(oracle) as res:
        slab = res.upload(rows.reshape(-1))
        order = egraph_device.order(oracle, res, rows.shape[0], "matches", [slab],
                                    [egraph_device.bits(largest)] * width, width)
        perm = graph.read_u32(oracle, order, rows.shape[0])
    assert np.array_equal(rows[perm], want)


@needs_ptxas
def test_the_device_programs_assemble_for_sm90():
    from vyre_cuda import emit_ptx

    rules = [parse_rule(r, SIG) for rs in RULE_SETS.values() for r in rs]
    programs = {f"apply{k}": egraph_device.apply_program(r.rhs, r.variables) for k, r in enumerate(rules)}
    keys = {"narrow": ((0, 16), (1, 8), (2, 0)), "wide": ((0, 35), (1, 32), (2, 30), (3, 0)), "one": ((4, 0),)}
    for name, key in keys.items():
        for source in ("matches", "rows"):
            programs[f"key_{source}_{name}"] = egraph_device.key_program(source, 5, key, name == "wide")
    for name in ("iota", "copy", "canon", "rename", "compose", "heads", "keep", "starts", "differ"):
        programs[name] = getattr(egraph_device, f"{name}_program")()
    programs["zero"] = graph.zero_program()  # shared with the dense Datalog's matrices
    failures = assemble({name: emit_ptx(p, sm="90") for name, p in programs.items()}, "90")
    assert not failures, "\n".join(failures)


def test_id_fields_take_a_few_widths():
    assert [egraph_device.id_bits(c) for c in (1, 256, 257, 2**16 + 1, 2**21, 2**21 + 1, 2**30)] == [
        8, 8, 16, 21, 21, 32, 32]


def test_device_path_on_leaves_only(oracle):
    """No child words at all (a 1-word placeholder column on the device) until a rule adds some."""
    cols, _ = egraph.term_columns(["x", "y", "0"], SIG)
    assert cols[4].size == 0
    assert assert_same(cols, ("x => y",), 3, oracle).classes == 2
    out = assert_same(cols, ("x => (+ x 0)", "y => 1"), 3, oracle)
    assert out.columns[4].size > 0
