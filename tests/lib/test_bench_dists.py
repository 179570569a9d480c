"""The report side of ``benchmarks/bench_lib.py --dists`` on made-up times: which rows meet their
target (sort at most 0.75x CuPy's time, argsort and sort_pairs at least 1.2x CuPy's speed), the
table, and the chart. The timed side needs a GPU (``tests/gpu/test_lib_gpu.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import bench_lib as B

# (primitive, vyre ms, CuPy ms) -> target met
CASES = [("sort", 0.75, 1.0, True), ("sort", 0.76, 1.0, False), ("argsort", 1.0, 1.2, True),
         ("argsort", 1.0, 1.19, False), ("sort_pairs", 2.0, 2.5, True), ("sort_pairs", 2.0, 2.0, False)]


def _report(vyre_ms: float, cupy_ms: float, primitive: str) -> dict:
    results = [{"dist": d, "primitive": primitive, "log2n": 20, "impl": impl, "ms": ms}
               for d in B.DISTS for impl, ms in (("vyre", vyre_ms), ("cupy", cupy_ms))]
    return {"device": "made up", "sizes": [20], "results": results}


@pytest.mark.parametrize(("primitive", "vyre_ms", "cupy_ms", "met"), CASES)
def test_target_met_per_distribution(primitive, vyre_ms, cupy_ms, met):
    rows = B.dist_rows(_report(vyre_ms, cupy_ms, primitive))
    assert [r["dist"] for r in rows] == list(B.DISTS)
    assert all(r["met"] is met and r["torch_over_vyre"] is None for r in rows)
    assert rows[0]["cupy_over_vyre"] == pytest.approx(cupy_ms / vyre_ms)
    table = B.dists_table(_report(vyre_ms, cupy_ms, primitive))
    assert table.count(f"| {'yes' if met else 'no'} (>= ") == len(B.DISTS)
    assert f"| 2^20 | zipf | {primitive} | {vyre_ms:.3f} | - | - | - | {cupy_ms:.3f} | - |" in table


def test_chart(tmp_path: Path):
    pytest.importorskip("matplotlib")
    report = _report(1.0, 1.5, "argsort")
    report["results"] += _report(1.0, 1.1, "sort")["results"]
    B.plot_dists(report, tmp_path / "dists.png")
    assert (tmp_path / "dists.png").stat().st_size > 1000
