"""The target rows of ``benchmarks/bench_workloads.py`` (``benchmarks/workload_targets.py``) at toy sizes
on the CPU oracle: the whole section through the script's command line, so a GPU run does not die
on a typo, and the checks the section judges results with (each must refuse a wrong result)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_datalog import closure_pairs, same_generation_pairs

from benchmarks import workload_targets as targets
from vyre.lib import graph

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dev() -> targets.Device:
    """The section's arrays on the oracle: numpy."""
    import vyre

    device = targets.Device(vyre.acquire("reference"))
    assert device.xp is np and not device.on_gpu
    return device


def test_the_section_runs_at_toy_size_on_the_oracle(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, "benchmarks/bench_workloads.py", "--issue", "--toy", "--backend",
                           "reference", "--json", str(out)], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["card"].startswith("CPU oracle") and result["target_sizes"]["name"] == "toy"
    rows = result["targets"]
    toy = targets.TOY
    names = [f"kron{s}" for s in toy.kron_scales] + [f"grid{toy.grid_side}"]
    got = {(r["graph"], r["workload"], r["path"].split(",")[0]) for r in rows["graphs"]}
    assert got == {(g, w, p) for g in names for w in ("bfs", "components")
                   for p in ("vyre (numpy arrays in and out", "vyre (numpy in and out")}
    for name in names:  # components on the resident graph by both methods, the plain call by the default
        assert sorted(r["method"] for r in rows["graphs"] if r["graph"] == name and r["workload"] == "components") \
            == ["afforest", "afforest", "sweep"]
    for r in rows["graphs"]:
        assert r["seconds"] > 0
        if r["workload"] == "bfs":
            assert len(r["roots"]) == len(r["per_root_s"]) == toy.roots and r["gteps"] > 0
            if r["graph"].startswith("grid"):  # the corner first: 2 * side - 1 levels, every vertex reached
                assert r["roots"][0] == 0 and r["levels"][0] == 2 * toy.grid_side - 1
                assert r["reached"] == [toy.grid_side ** 2] * toy.roots
                assert r["traversed_tuples"] == [2 * toy.grid_side * (toy.grid_side - 1)] * toy.roots
    closures = [r for r in rows["datalog"] if r["workload"] == "transitive_closure"]
    assert [(r["vertices"], r["edges"]) for r in closures] == list(toy.closure)
    assert {r["path"] for r in rows["datalog"] if r["workload"] == "same_generation"} == {
        "bit matrices (default)", "sorted relations"}
    (first,) = [r for r in rows["datalog"] if r["workload"] == "first_call"]
    assert len(first["runs"]) == 2 and first["pairs"] == closures[0]["pairs"]
    (closure,) = rows["egraph"]
    assert closure["path"] == "hash" and closure["check"] == "Python union-find"
    assert closure["path"] == "hash" and closure["plain_call_s"] > 0  # no overflow at toy size
    (many,) = rows["text"]
    assert many["bytes"] == toy.text_bytes and many["matches"] >= toy.needles
    assert "targets" in (ROOT / "benchmarks" / "bench_workloads.py").read_text()


@pytest.mark.parametrize("scale", [5, 7])
def test_graph500_checks_pass_exact_levels_and_refuse_any_other(dev: targets.Device, scale: int) -> None:
    g = targets.kron_graph(dev, scale, 4, 3)
    for root in g.roots:
        levels = graph.reference_levels(g.host_indptr, g.host_indices, root)
        reached, depth, tuples = targets.check_levels(np, g.sources, g.indices, levels, root)
        seen = levels != graph.UNREACHED
        assert reached == int(seen.sum()) and depth == int(levels[seen].max()) + 1
        assert tuples == int(np.diff(g.host_indptr)[seen].sum()) // 2
        far = int(np.argmax(np.where(levels == graph.UNREACHED, -1, levels.astype(np.int64))))
        wrong = [levels.copy() for _ in range(4)]
        wrong[0][far] += 1                                   # one level too deep
        wrong[1][far] = graph.UNREACHED                      # a reached vertex left out
        wrong[2][far] = 0                                    # a second source
        wrong[3][levels == graph.UNREACHED] = depth          # unreached vertices given a level
        for bad in wrong[:3] + ([wrong[3]] if (levels == graph.UNREACHED).any() else []):
            with pytest.raises(AssertionError, match="wrong result"):
                targets.check_levels(np, g.sources, g.indices, bad, root)


def test_grid_levels_from_the_corner(dev: targets.Device) -> None:
    g = targets.grid_graph(dev, 5, 4)
    assert g.roots[0] == 0 and len(set(g.roots)) == 4 and g.tuples == 2 * 5 * 4
    levels = graph.reference_levels(g.host_indptr, g.host_indices, 0)
    assert levels.reshape(5, 5).tolist() == [[r + c for c in range(5)] for r in range(5)]
    assert targets.check_levels(np, g.sources, g.indices, levels, 0) == (25, 9, 40)


def test_graph500_roots_have_an_edge_other_than_a_self_loop() -> None:
    src = np.array([0, 1, 2, 3, 3], np.uint32)
    dst = np.array([0, 2, 1, 3, 4], np.uint32)
    assert sorted(targets.graph500_roots(6, src, dst, 10, seed=0)) == [1, 2, 3, 4]
    assert targets.graph500_roots(6, src, dst, 2, seed=0) == targets.graph500_roots(6, src, dst, 2, seed=0)


def test_forest_generations_equal_the_rules_run_in_python() -> None:
    for n, trees in [(40, 3), (120, 5), (7, 7)]:
        parent, child = targets.random_forest(n, trees)
        x, y = targets.forest_generations(n, parent, child)
        assert list(zip(x.tolist(), y.tolist())) == same_generation_pairs(n, parent, child)


def test_closure_check_takes_the_closure_and_refuses_a_pair_less_or_more() -> None:
    ((n, src, dst),) = targets.closure_graphs(((30, 40),))
    pairs = closure_pairs(n, src, dst)
    s, d = (np.array(col, np.uint32) for col in zip(*pairs))
    targets.check_closure(n, src, dst, s, d)
    with pytest.raises(AssertionError, match="wrong result"):
        targets.check_closure(n, src, dst, s[1:], d[1:])
    missing = next((a, c) for a in range(n) for c in range(n) if (a, c) not in set(pairs))
    more = sorted([*pairs, missing])
    with pytest.raises(AssertionError, match="wrong result"):
        targets.check_closure(n, src, dst, *(np.array(col, np.uint32) for col in zip(*more)))


def test_python_find_many_reports_overlaps_in_offset_then_needle_order() -> None:
    offsets, ids = targets.python_find_many(b"aaab aab", [b"aa", b"ab", b"aa"])
    assert list(zip(offsets.tolist(), ids.tolist())) == [(0, 0), (0, 2), (1, 0), (1, 2), (2, 1), (5, 0), (5, 2),
                                                         (6, 1)]
    assert targets.python_find_many(b"xyz", [b"q"])[0].size == 0
