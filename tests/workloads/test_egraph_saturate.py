"""Equality saturation (``vyre.lib.egraph.saturate``) on the oracle against egglog and a pure-Python
e-graph: e-class counts after each iteration of the same rules on the same terms; the rule
language's errors; unions in congruence closure."""

from __future__ import annotations

import numpy as np
import pytest
from saturation_oracle import python_classes

from benchmarks import egglog_oracle
from benchmarks.egglog_oracle import COMM_ASSOC, SIGNATURE, random_terms
from tests.codegen.codegen_support import assemble, needs_ptxas
from vyre.driver.errors import InvalidProgram
from vyre.lib import egraph
from vyre.lib.egraph_rules import App, Signature, Var, parse_rule, parse_term
from vyre.lib.egraph_saturate import match_program

SIG = Signature(SIGNATURE)
needs_egglog = pytest.mark.skipif(not egglog_oracle.available(), reason="egglog is not installed (pip install egglog)")
CONSTANTS = ("(* ?a 1) => ?a", "(+ ?a 0) => ?a", "(* ?a 0) => 0", "(+ ?a ?a) => (* 2 ?a)")


def vyre_classes(terms: list[str], rules: tuple[str, ...], iterations: int, backend: object) -> list[int]:
    cols, _ = egraph.term_columns(terms, SIG)
    out = egraph.saturate(*cols, rules, iterations, signature=SIG, backend=backend)
    counts = [h[0] for h in out.history]
    return counts + counts[-1:] * (iterations + 1 - len(counts))  # saturated early: the count stays


def python_judge(terms: list[str], rules: tuple[str, ...], iterations: int) -> list[int]:
    return python_classes([parse_term(t, SIG) for t in terms], [parse_rule(r, SIG) for r in rules], iterations)


@needs_egglog
@pytest.mark.parametrize("seed", range(8))
def test_comm_assoc_matches_egglog_after_each_iteration(oracle, seed):
    terms = random_terms(seed, 4, 3)
    want = egglog_oracle.egglog_classes(terms, COMM_ASSOC, 4)
    assert vyre_classes(terms, COMM_ASSOC, 4, oracle) == want


@needs_egglog
@pytest.mark.parametrize("seed", range(4))
def test_rules_with_constants_and_repeated_variables_match_egglog(oracle, seed):
    terms = [*random_terms(100 + seed, 4, 3), "(* x 1)", "(+ (+ y 0) (+ y 0))"]
    rules = COMM_ASSOC[:2] + CONSTANTS
    assert vyre_classes(terms, rules, 3, oracle) == egglog_oracle.egglog_classes(terms, rules, 3)


@pytest.mark.parametrize("seed", range(4))
def test_comm_assoc_and_constants_match_the_python_egraph(oracle, seed):
    terms = random_terms(200 + seed, 3, 3)
    for rules in (COMM_ASSOC, COMM_ASSOC + CONSTANTS):
        assert vyre_classes(terms, rules, 3, oracle) == python_judge(terms, rules, 3)


def test_deeper_patterns_match_the_python_egraph(oracle):
    terms = random_terms(7, 5, 4)
    rules = ("(* (+ ?a ?b) ?c) => (+ (* ?a ?c) (* ?b ?c))", "(+ (* ?a 2) (* ?b 2)) => (* (+ ?a ?b) 2)",
             "(+ ?a (+ ?b (+ ?c ?d))) => (+ (+ (+ ?a ?b) ?c) ?d)")
    assert vyre_classes(terms, rules, 2, oracle) == python_judge(terms, rules, 2)


def test_leaf_and_nested_constant_patterns_match_the_python_egraph(oracle):
    terms = [*random_terms(11, 5, 3), "(* (+ y z) (+ y 2))"]
    rules = ("x => (+ x 0)", "(* (+ ?a ?b) (+ ?a 2)) => ?a", "(+ ?a 0) => (+ 0 ?a)", COMM_ASSOC[0])
    assert vyre_classes(terms, rules, 3, oracle) == python_judge(terms, rules, 3)


def test_one_iteration_by_hand(oracle):
    cols, roots = egraph.term_columns(["(+ 1 (+ 2 x))"], SIG)
    out = egraph.saturate(*cols, ["(+ ?a ?b) => (+ ?b ?a)", COMM_ASSOC[2]], 1, signature=SIG, backend=oracle)
    # 1, 2, x, (+ 2 x), the root; assoc adds (+ 1 2) to the root's class; comm adds nothing new
    assert out.classes == 6 and out.iterations == 1 and out.history[1][2] == 3  # 2 comm matches, 1 assoc
    assert out.canonical.size == 5 and len(set(out.canonical.tolist())) == 5


def test_identity_rule_merges_the_classes(oracle):
    cols, roots = egraph.term_columns(["(* x 1)", "x", "(+ (* x 1) 2)", "(+ x 2)"], SIG)
    out = egraph.saturate(*cols, ["(* ?a 1) => ?a"], 3, signature=SIG, backend=oracle)
    canon = out.canonical[roots]
    assert canon[0] == canon[1] and canon[2] == canon[3] and canon[0] != canon[2]
    assert out.iterations == 2  # the second iteration finds the same match and changes nothing: saturated


def test_saturate_on_a_resident_egraph_leaves_its_columns(oracle):
    cols, _ = egraph.term_columns(random_terms(3, 4, 3), SIG)
    with egraph.EGraph(*cols, backend=oracle) as g:
        out = g.saturate(COMM_ASSOC, 2, signature=SIG)
        assert out.classes == vyre_classes(random_terms(3, 4, 3), COMM_ASSOC, 2, oracle)[-1]
        assert g.congruence_closure().tolist() == list(range(cols[0].size))


def test_slabs_that_overflow_run_again(oracle):
    terms = ["(+ x (+ y (+ z (+ 1 (+ 2 0)))))", "(* x (* y (* z (* 1 (* 2 0)))))"]
    cols, _ = egraph.term_columns(terms, SIG)
    out = egraph.saturate(*cols, COMM_ASSOC, 4, signature=SIG, backend=oracle)
    assert any(out.history[k + 1][2] > max(out.history[k][1], 16) for k in range(len(out.history) - 1))
    assert [h[0] for h in out.history] == python_judge(terms, COMM_ASSOC, out.iterations)


def test_empty_egraph_and_zero_iterations(oracle):
    empty = [np.zeros(0, np.uint32)] * 5
    out = egraph.saturate(*empty, COMM_ASSOC, 3, signature=SIG, backend=oracle)
    assert out.classes == 0 and out.iterations == 0 and out.canonical.size == 0
    cols, _ = egraph.term_columns(["(+ x y)", "(+ y x)"], SIG)
    out = egraph.saturate(*cols, COMM_ASSOC, 0, signature=SIG, backend=oracle)
    assert out.classes == 4 and out.iterations == 0
    assert egraph.saturate(*cols, [], 2, backend=oracle).classes == 4


def test_rules_without_matches_stop_at_once(oracle):
    cols, _ = egraph.term_columns(["(+ x y)"], SIG)
    out = egraph.saturate(*cols, ["(* ?a ?b) => (* ?b ?a)"], 5, signature=SIG, backend=oracle)
    assert out.iterations == 0 and out.classes == 3


def test_parse_rule_builds_patterns():
    rule = parse_rule("(+ ?a (+ ?b ?c)) => (+ (+ ?a ?b) ?c)", SIG)
    add = SIG["+"]
    assert rule.lhs == App(add, (Var("a"), App(add, (Var("b"), Var("c")))))
    assert rule.rhs == App(add, (App(add, (Var("a"), Var("b"))), Var("c")))
    assert rule.variables == ("a", "b", "c")
    one = parse_rule("(* ?x 01) => ?x", SIG)
    assert one.lhs == App(SIG["*"], (Var("x"), App(SIG["1"]))) and one.rhs == Var("x")


@pytest.mark.parametrize(("text", "says"), [
    ("(+ ?a ?b)", "exactly one '=>'"),
    ("(+ ?a ?b) => (+ ?b ?a) => ?a", "exactly one '=>'"),
    ("(+ ?a ?b => ?a", "ends inside"),
    ("(+ ?a ?b)) => ?a", "text after"),
    (") => ?a", "no '('"),
    ("=> ?a", "no expression"),
    ("() => ?a", "empty list"),
    ("(?f ?a) => ?a", "operator position"),
    ("((+ ?a) ?b) => ?a", "operator position"),
    ("?a => (+ ?a 0)", "bare variable"),
    ("(+ ?a ?b) => (+ ?a ?c)", "?c is not bound"),
    ("(- ?a ?b) => ?a", "'-' is not in the signature"),
    ("(+ ? ?b) => ?b", "no name"),
])
def test_bad_rules_raise_with_a_fix(text, says):
    with pytest.raises(InvalidProgram, match="Fix") as err:
        parse_rule(text, SIG)
    assert says in str(err.value)


def test_string_rules_need_a_signature_and_terms_no_variables(oracle):
    cols, _ = egraph.term_columns(["(+ x y)"], SIG)
    with pytest.raises(InvalidProgram, match="no signature"):
        egraph.saturate(*cols, ["(+ ?a ?b) => (+ ?b ?a)"], 1, backend=oracle)
    with pytest.raises(InvalidProgram, match="iterations"):
        egraph.saturate(*cols, COMM_ASSOC, -1, signature=SIG, backend=oracle)
    with pytest.raises(InvalidProgram, match="a term has none"):
        parse_term("(+ ?a x)", SIG)
    with pytest.raises(InvalidProgram, match="cannot name"):
        Signature(["?x"])


def test_congruence_closure_with_unions(oracle):
    # f(a), f(b), a, b: merging a and b merges f(a) and f(b) by congruence
    cols = (np.array([0, 1, 2, 3], np.uint32), np.array([5, 5, 6, 7], np.uint32),
            np.array([0, 1, 2, 2], np.uint32), np.array([1, 1, 0, 0], np.uint32), np.array([2, 3], np.uint32))
    with egraph.EGraph(*cols, backend=oracle) as g:
        assert g.congruence_closure().tolist() == [0, 1, 2, 3]
        unions = (np.array([3], np.uint32), np.array([2], np.uint32))
        for method in ("hash", "sorted"):
            assert g.congruence_closure(method=method, unions=unions).tolist() == [0, 0, 2, 2]
        with pytest.raises(InvalidProgram, match="Fix"):
            g.congruence_closure(unions=(np.array([9], np.uint32), np.array([0], np.uint32)))


def test_the_benchmark_row_runs_on_the_oracle(oracle):
    from benchmarks.bench_workloads import bench_saturate

    (row,) = bench_saturate(oracle, nodes_log2=8, iterations=2, reps=1)
    assert row["enodes"] >= 256 and row["classes"] > 0 and row["vyre_s"] > 0 and row["vyre_host_s"] > 0
    assert row["x_host_path"] == row["vyre_host_s"] / row["vyre_s"]
    assert ("x_egglog" in row) == egglog_oracle.available()


@needs_ptxas
def test_the_match_programs_assemble_for_sm90():
    from vyre_cuda import emit_ptx

    rules = [*COMM_ASSOC, *CONSTANTS, "(* (+ ?a ?b) (+ ?a 2)) => ?a", "x => (+ x 0)"]
    programs = {f"rule{k}": match_program(parse_rule(r, SIG).lhs) for k, r in enumerate(rules)}
    failures = assemble({name: emit_ptx(p, sm="90") for name, p in programs.items()}, "90")
    assert not failures, "\n".join(failures)


def test_columns_with_duplicate_enodes_saturate_like_hash_consed_ones(oracle):
    terms = random_terms(5, 4, 3)
    (eclass, op, offsets, lens, children), _ = egraph.term_columns(terms, SIG)
    # every e-node twice, the copy in a class of its own whose children are the originals' classes
    n = eclass.size
    doubled = (np.concatenate([eclass, eclass + n]), np.concatenate([op, op]), np.concatenate([offsets, offsets]),
               np.concatenate([lens, lens]), children)
    want = egraph.saturate(eclass, op, offsets, lens, children, COMM_ASSOC, 3, signature=SIG, backend=oracle)
    got = egraph.saturate(*doubled, COMM_ASSOC, 3, signature=SIG, backend=oracle)
    assert got.history == want.history
    assert np.array_equal(got.canonical[:n], want.canonical) and np.array_equal(got.canonical[n:], want.canonical)


def test_matches_come_back_sorted(oracle):
    """Each rule's matches are in lexicographic row order, whatever order the slab's counter gave."""
    from vyre.lib import egraph_saturate as es

    terms = [*(f"(+ x{i % 5} (* x{(i * 3) % 5} x{i % 2}))" for i in range(40))]
    sig = egraph.Signature(["+", "*", *(f"x{i}" for i in range(5))])
    cols, _ = egraph.term_columns(terms, sig)
    cols, starts, _ = es.compact(tuple(np.asarray(c) for c in cols), np.arange(int(cols[0].max()) + 1))
    rules = [egraph.parse_rule(r, sig) for r in ("(+ ?a ?b) => (+ ?b ?a)", "(+ ?a (* ?b ?c)) => (* ?b (+ ?a ?c))")]
    found = es.find_matches(oracle, cols, starts, rules)
    assert [len(f) for f in found] == [10, 10]  # the 40 terms are 10 distinct ones (hash-consed)
    for rows in found:
        assert np.array_equal(rows, rows[np.lexsort(rows.T[::-1])])


def test_ids_with_gaps_keep_empty_canonical_ids(oracle):
    """Input ids that hold no e-node and no child keep ``EMPTY`` as their canonical id over several
    rounds (the second round indexed the round's remap with ``EMPTY`` before: an ``IndexError``)."""
    cols = (np.array([0, 3, 5], np.uint32), np.array([SIG["x"], SIG["y"], SIG["+"]], np.uint32),
            np.array([0, 0, 0], np.uint32), np.array([0, 0, 2], np.uint32), np.array([0, 3], np.uint32))
    out = egraph.saturate(*cols, COMM_ASSOC, 3, signature=SIG, backend=oracle)
    assert out.canonical.size == 6 and out.canonical[1] == egraph.EMPTY == out.canonical[4]
    assert out.classes == 3  # x, y and the class of (+ x y) = (+ y x)
