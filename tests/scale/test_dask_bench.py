"""The Dask sections of ``benchmarks/bench_scale.py`` and ``benchmarks/profile_dask.py`` at toy sizes on
oracle workers: their code paths (not their numbers), so a GPU run does not die on a typo, and the
structure they report (one task per block, inputs together, nothing moved, results equal numpy)."""

from __future__ import annotations

import pytest

pytest.importorskip("distributed", reason="vyre.dask needs dask[distributed]")


def test_bench_scale_dask_section_with_its_floor() -> None:
    from benchmarks import bench_scale

    row = bench_scale.dask_overhead(2, 8, 512, "reference")
    assert row["equals_numpy"] and row["numpy_equals"]
    assert row["tasks_per_block"] == 1.0 and row["blocks_with_inputs_together"] == 8
    assert row["bytes_between_workers"] == 0
    assert row["seconds"] > 0 and row["numpy_ms_per_block"] > 0


def test_bench_scale_in_process_baselines() -> None:
    import vyre
    from benchmarks import bench_scale

    backend = vyre.acquire("reference")
    assert bench_scale.direct_ms_per_block(backend, 4, 256) > 0
    assert bench_scale.direct_ms_per_block(backend, 4, 256, keep=True) > 0
    assert bench_scale.numpy_ms_per_block(4, 256) > 0


def test_profile_dask_breakdown() -> None:
    import vyre.dask
    from benchmarks import bench_scale, profile_dask

    result = profile_dask.measure(blocks=8, block=256, reps=1, workers=2)
    med = result["median"]
    assert med["tasks_per_block_vyre"] == med["tasks_per_block_numpy"] == 1.0
    wire = len(bench_scale.xor_program().to_wire())
    assert med["task_bytes_vyre"] <= med["task_bytes_numpy"] + wire + 50
    assert 0 <= med["own"] <= med["task"] and med["dispatch"] > 0
    assert result["worker_vyre"] == [vyre.dask.__file__]  # the workers ran this tree's vyre
