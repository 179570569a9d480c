"""The programs of runs emit the PTX recorded in ``runs_ptx.json`` (hashes for sm_80 and sm_90 and
the params words checked): run lengths and ``unique(key_range=...)``'s values
(``vyre.lib._runs.kernels``, the same PTX, byte for byte, as the builder-written programs they
replaced, recorded before that rewrite), and the compaction that writes run lengths itself with
its tail step (``vyre.lib._select.kernels.compact_run_lengths``, also summing its own carry, and
``run_tail_lengths``: written with the front end, no builder twin; recorded when written), with
the params words of ``unique``'s plan whose sort counts the run starts (recorded when that was
added), and the single-pass run lengths (``runs_lookback``, every key type, on the params words
of ``run_length_encode``'s and ``unique``'s plans; recorded when written). A recorded run checks
that the library runs nothing else, with the single pass and without it.
All hashes were taken again for each emitter change listed in ``ptx_hashes`` (codegen 7, 8 and 9)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.lib.ptx_hashes import SMS, changed, recorded
from tests.lib.test_plan import RecordingBackend
from vyre import lib
from vyre.ir import DataType, Program
from vyre.lib._runs.kernels import offset_values, run_lengths
from vyre.lib._scan.topology import SCAN_GROUPS
from vyre.lib._select import topology as select_topology
from vyre.lib._select.api import VALUE_TYPES
from vyre.lib._select.kernels import (
    COMPACT_ITEMS,
    Predicate,
    compact_run_lengths,
    count_run_starts,
    run_tail_lengths,
)
from vyre.lib._select.runs_lookback import runs_lookback
from vyre.lib.blocks import PARAM_WORDS, WG

pytest.importorskip("vyre_cuda")


#: (n, span) params words of the compaction: run_length_encode's own plan, and unique's after its sort's
RUN_WORDS = ((0, 1), (5, 6))
#: (n, span) of unique's compaction whose run starts its sort counted (``COUNT_IN_SORT``; u32 bits)
COUNTED_WORDS = (8, 0)
#: (n, tiles) params words of the single pass: run_length_encode's own plan, and unique's after its sort
LOOKBACK_WORDS = ((0, 1), (5, 6))


def cases() -> dict[str, Program]:
    """Run lengths with n on any params word; the values of unique(key_range=) with bins and lo on
    the first eight words; the compaction writing run lengths (every key type, one segment or
    several) and its tail step on ``RUN_WORDS``."""
    out = {f"run_lengths_n{n}": run_lengths.__wrapped__(n) for n in range(PARAM_WORDS)}
    out |= {f"offset_values_bins{b}_lo{lo}": offset_values.__wrapped__(b, lo)
            for b, lo in itertools.product(range(8), repeat=2) if b != lo}
    for t, has_carry, (n, span) in itertools.product(VALUE_TYPES, (False, True), RUN_WORDS):
        name = f"rle_compact_{t.name.lower()}_carry{int(has_carry)}_n{n}_span{span}"
        out[name] = compact_run_lengths.__wrapped__(Predicate("run_start", t), COMPACT_ITEMS, has_carry, n, span)
        if has_carry:  # the carry summed by each workgroup (up to OWN_CARRY_GROUPS segments; recorded when written)
            out[f"{name}_own"] = compact_run_lengths.__wrapped__(Predicate("run_start", t), COMPACT_ITEMS, True, n,
                                                                 span, True)
    out |= {f"run_tail_lengths_n{n}_span{span}": run_tail_lengths.__wrapped__(SCAN_GROUPS, n, span)
            for n, span in RUN_WORDS}
    n, span = COUNTED_WORDS  # recorded when the sort began counting unique's run starts
    out[f"rle_compact_u32_counted_n{n}_span{span}"] = compact_run_lengths.__wrapped__(
        Predicate("run_start", DataType.U32), COMPACT_ITEMS, True, n, span)
    out[f"run_tail_lengths_counted_n{n}_span{span}"] = run_tail_lengths.__wrapped__(SCAN_GROUPS, n, span)
    for t, (n, tiles) in itertools.product(VALUE_TYPES, LOOKBACK_WORDS):  # recorded when written
        out[f"rle_lookback_{t.name.lower()}_n{n}_tiles{tiles}"] = runs_lookback.__wrapped__(
            Predicate("run_start", t), n, tiles)
    for t, (n, span) in itertools.product(VALUE_TYPES, RUN_WORDS):  # the counts with first run starts
        out[f"count_run_starts_{t.name.lower()}_n{n}_span{span}"] = count_run_starts.__wrapped__(
            Predicate("run_start", t), COMPACT_ITEMS, n, span)
    return out


EXPECTED = recorded("runs_ptx")
CASES = cases()


def test_the_grid_is_the_recorded_one() -> None:
    assert sorted(f"{name} sm_{sm}" for name in CASES for sm in SMS) == sorted(EXPECTED)


def test_runs_ptx_is_the_builders_byte_for_byte() -> None:
    different = changed(CASES, EXPECTED)
    assert not different, f"the PTX of {len(different)} programs of runs changed: {different[:8]}"


def test_every_program_of_runs_the_library_runs_is_checked(rng, monkeypatch) -> None:
    """``run_length_encode``, ``unique`` and ``unique(key_range=)`` dispatch checked programs only:
    in one pass past one workgroup's class, and with ``RUNS_LOOKBACK`` off in one segment and in
    several (the downsweep's own carries, and with ``OWN_CARRY_GROUPS`` 1 the scan of the counts
    and the tail step)."""
    be = RecordingBackend()
    for (lookback, own), dtype, n in itertools.product(((True, True), (False, True), (False, False)),
                                                       (np.uint32, np.int32, np.float32, np.uint64, np.int64,
                                                        np.float64), (300, 10000)):
        monkeypatch.setattr(select_topology, "RUNS_LOOKBACK", lookback)
        monkeypatch.setattr(select_topology, "OWN_CARRY_GROUPS", 2 * WG if own else 1)
        x = np.repeat(rng.integers(0, 5, n), rng.integers(1, 4, n))[:n].astype(dtype)
        lib.run_length_encode(x, backend=be)
        lib.run_length_encode(x, count="device", backend=be)
        lib.unique(x, backend=be)
    lib.unique(rng.integers(0, 100, 3000).astype(np.uint32), key_range=(0, 100), backend=be)
    lib.unique(rng.integers(-50, 100, 3000).astype(np.int32), key_range=(-50, 100), backend=be)
    names = ("lib_rle_compact", "lib_rle_compact_64", "lib_run_tail_lengths", "lib_unique_range_values",
             "lib_count_run_start_firsts", "lib_count_run_start_64_firsts", "lib_rle_lookback",
             "lib_rle_lookback_64")
    ran = {p for steps in be.sequences for p, _, _ in steps if p.name in (*names, "lib_run_lengths")}
    assert {p.name for p in ran} == set(names)  # the two-pass run lengths only with FUSED = False
    assert len(ran) >= 2 * 2 * 4 + 2 + 1 + 4  # 32-bit keys compare as u32 or f32 bits
    assert ran <= set(CASES.values()), sorted(p.name or "" for p in ran - set(CASES.values()))
