"""Differential fuzzing: generated programs on a backend vs the reference oracle.

On a mismatch the program is shrunk to a small case that still fails and written to a
regression corpus (``tests/fuzz/corpus`` by default) that the test suite replays.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vyre.driver.config import DispatchConfig
from vyre.fuzz.corpus import CorpusCase, write_case
from vyre.fuzz.shrink import shrink
from vyre.ir.program import Program


@dataclass
class FuzzReport:
    """What a fuzzing run did."""

    seed: int
    programs: int = 0
    runs: int = 0
    mismatches: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        return (f"seed {self.seed}: {self.programs} programs x input sets = {self.runs} runs, "
                f"{len(self.mismatches)} mismatches, {self.seconds:.1f} s")


def mismatch(backend, program: Program, inputs: Sequence[np.ndarray], config: DispatchConfig) -> str | None:
    """None when ``backend`` agrees with the oracle on this case, else what differs."""
    from vyre.reference import run as reference_run
    from vyre.reference.ulp import assert_outputs_equal

    expected = reference_run(program, list(inputs), config)
    try:
        actual = backend.dispatch(program, list(inputs), config)
        assert_outputs_equal(expected, actual, program)
    except AssertionError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - any backend failure on a valid program is a finding
        return f"{type(exc).__name__}: {exc}"
    return None


def fuzz(
    backend,
    count: int,
    seed: int = 0,
    input_sets: int = 3,
    corpus: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> FuzzReport:
    """Run ``count`` generated programs x ``input_sets`` random inputs on ``backend`` and the oracle."""
    from vyre.ir.generate import generate_case, random_inputs

    report = FuzzReport(seed)
    start = time.perf_counter()
    for i in range(count):
        case_seed = seed * 1_000_003 + i
        case = generate_case(case_seed, subgroups=(i % 4 == 3))
        report.programs += 1
        for k in range(input_sets):
            inputs = case.inputs if k == 0 else random_inputs(case.program, case_seed * 7 + k)
            report.runs += 1
            detail = mismatch(backend, case.program, inputs, case.config)
            if detail is None:
                continue
            small = shrink(case.program,
                           lambda p, inp=inputs, cfg=case.config: mismatch(backend, p, inp, cfg) is not None)
            name = f"seed{case_seed}_{small.fingerprint().hex()[:12]}"
            if corpus is not None:
                write_case(corpus, CorpusCase(name, small, list(inputs), case.config, detail[:2000]))
            report.mismatches.append(f"{name}: {detail[:500]}")
            break
        if progress is not None:
            progress(i + 1, count)
    report.seconds = time.perf_counter() - start
    return report
