"""The programs of runs (``vyre.lib._runs.kernels``: run lengths and ``unique(key_range=...)``'s
values, ``@vk.kernel`` functions) emit the same PTX, byte for byte, as the builder-written
programs they replaced: ``runs_ptx.json`` holds the hashes of the builder versions' PTX, recorded
before the rewrite, for sm_80 and sm_90 and the params words checked; a recorded run checks that
the library runs nothing else."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.lib.ptx_hashes import SMS, changed, recorded
from tests.lib.test_plan import RecordingBackend
from vyre import lib
from vyre.ir import Program
from vyre.lib._runs.kernels import offset_values, run_lengths
from vyre.lib.blocks import PARAM_WORDS

pytest.importorskip("vyre_cuda")


def cases() -> dict[str, Program]:
    """Run lengths with n on any params word; the values of unique(key_range=) with bins and lo on
    the first eight words."""
    out = {f"run_lengths_n{n}": run_lengths.__wrapped__(n) for n in range(PARAM_WORDS)}
    out |= {f"offset_values_bins{b}_lo{lo}": offset_values.__wrapped__(b, lo)
            for b, lo in itertools.product(range(8), repeat=2) if b != lo}
    return out


EXPECTED = recorded("runs_ptx")
CASES = cases()


def test_the_grid_is_the_recorded_one() -> None:
    assert sorted(f"{name} sm_{sm}" for name in CASES for sm in SMS) == sorted(EXPECTED)


def test_runs_ptx_is_the_builders_byte_for_byte() -> None:
    different = changed(CASES, EXPECTED)
    assert not different, f"the PTX of {len(different)} programs of runs changed: {different[:8]}"


def test_every_program_of_runs_the_library_runs_is_checked(rng) -> None:
    """``run_length_encode``, ``unique`` and ``unique(key_range=)`` dispatch checked programs only."""
    be = RecordingBackend()
    for dtype in (np.uint32, np.int32, np.float32, np.uint64):
        x = np.repeat(rng.integers(0, 5, 300), rng.integers(1, 4, 300)).astype(dtype)
        lib.run_length_encode(x, backend=be)
        lib.run_length_encode(x, count="device", backend=be)
        lib.unique(x, backend=be)
    lib.unique(rng.integers(0, 100, 3000).astype(np.uint32), key_range=(0, 100), backend=be)
    lib.unique(rng.integers(-50, 100, 3000).astype(np.int32), key_range=(-50, 100), backend=be)
    ran = {p for steps in be.sequences for p, _, _ in steps
           if p.name in ("lib_run_lengths", "lib_unique_range_values")}
    assert {p.name for p in ran} == {"lib_run_lengths", "lib_unique_range_values"}
    assert ran <= set(CASES.values()), sorted(p.name or "" for p in ran - set(CASES.values()))
