"""The long-process fuzz mode and the replay of state-dependent cases, on the oracle.

The GPU side (``tests/gpu/test_fuzz_long_process.py``) runs the same mode on the ``cuda`` backend.
Here a backend whose results go wrong only after it has run a number of dispatches stands in for a
state-dependent bug: the fuzzer must find it, shrink it in the same process, record where it came
from, and ``replay`` must reproduce it on a fresh backend where the case alone agrees.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from vyre.driver.config import DispatchConfig
from vyre.fuzz import fuzz, mismatch, read_case, replay
from vyre.fuzz.paths import COARSEN_ENV, PATHS, run_path
from vyre.reference.backend import ReferenceBackend


class WrongAfter:
    """The oracle, except that every dispatch after the first ``after`` flips a bit of element 0 of
    each non-empty output (a stand-in for state a backend carries from one program to the next)."""

    id = "wrong_after"

    def __init__(self, after: int) -> None:
        self.inner = ReferenceBackend()
        self.after = after
        self.calls = 0

    def dispatch(self, program, inputs, config: DispatchConfig | None = None):
        self.calls += 1
        outs = [np.array(o) for o in self.inner.dispatch(program, inputs, config)]
        if self.calls > self.after:
            for o in outs:
                if o.size:
                    o.view(np.uint8)[0] ^= 1
        return outs


def test_long_process_mode_takes_every_path_and_restores_the_setting(monkeypatch) -> None:
    monkeypatch.setenv(COARSEN_ENV, "0")
    seen: list[str] = []
    backend = ReferenceBackend()
    real = run_path

    def counting(be, path, *args):
        seen.append(path)
        return real(be, path, *args)

    monkeypatch.setattr("vyre.fuzz.differential.run_path", counting)
    report = fuzz(backend, 12, seed=5, input_sets=2, long_process=True)
    assert report.runs == 24 and not report.mismatches
    assert set(seen) == set(PATHS)
    assert os.environ[COARSEN_ENV] == "0"


@pytest.mark.parametrize("path", PATHS)
def test_every_path_gives_the_oracle_result(path: str) -> None:
    from vyre.ir.generate import generate_case

    backend = ReferenceBackend()
    for seed in range(8):
        case = generate_case(seed)
        assert mismatch(backend, case.program, case.inputs, case.config, path) is None


def test_a_state_dependent_mismatch_is_recorded_and_replays(tmp_path: Path) -> None:
    after = 25
    report = fuzz(WrongAfter(after), 40, seed=11, input_sets=3, corpus=tmp_path)
    assert report.mismatches, "the fuzzer missed results that went wrong after 25 dispatches"
    first = report.mismatches[0].split(":")[0]  # every later program fails too: take the first
    case = read_case(tmp_path / f"{first}.vyre")
    assert case.history is not None and case.history.seed == 11 and case.history.path == "host"
    assert case.history.index * 3 + case.history.input_set >= after - 2
    # alone, on a fresh backend, the case agrees; after the programs that ran before it, it fails again
    assert mismatch(WrongAfter(after), case.program, case.inputs, case.config) is None
    assert replay(WrongAfter(after), case) is not None


def test_a_case_without_history_replays_alone(tmp_path: Path) -> None:
    report = fuzz(WrongAfter(0), 1, seed=2, input_sets=1, corpus=tmp_path)
    assert report.mismatches
    case = read_case(tmp_path / f"{report.mismatches[0].split(':')[0]}.vyre")
    case.history = None
    assert replay(WrongAfter(0), case) is not None
    assert replay(ReferenceBackend(), case) is None
