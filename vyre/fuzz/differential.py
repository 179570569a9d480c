"""Differential fuzzing: generated programs on a backend vs the reference oracle.

On a mismatch the program is shrunk to a small case that still fails and written to a
regression corpus (``tests/fuzz/corpus`` by default) that the test suite replays. Shrinking runs
in the same process, after everything that ran before, so a mismatch that depends on earlier
programs still shrinks; the case records where it came from (``History``: seed, how many programs
ran before it, the path and coarsening setting) so ``replay`` can run those programs again first.

``long_process=True`` is the mode for such state-dependent bugs (``vyre.fuzz.paths``): every run
takes the next dispatch path in turn, each program the next coarsening setting, and the backend's
memory is dirtied between programs.

``wide=True`` generates programs that also use the 64-bit types (``generate_program(wide=True)``);
the default keeps to the 32-bit types, so a seed replays the same programs as before they existed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vyre import settings
from vyre.driver.config import DispatchConfig
from vyre.fuzz.corpus import CorpusCase, History, write_case
from vyre.fuzz.paths import COARSEN_ENV, COARSEN_SETTINGS, PATHS, dirty, run_path, set_coarsening
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


def mismatch(backend, program: Program, inputs: Sequence[np.ndarray], config: DispatchConfig,
             path: str = "host") -> str | None:
    """None when ``backend`` agrees with the oracle on this case run through ``path``
    (``vyre.fuzz.paths.PATHS``), else what differs."""
    from vyre.reference import run as reference_run
    from vyre.reference.ulp import assert_outputs_equal

    expected = reference_run(program, list(inputs), config)
    try:
        actual = run_path(backend, path, program, inputs, config)
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
    long_process: bool = False,
    stop_before: tuple[int, int] | None = None,
    path: str | None = None,
    wide: bool = False,
) -> FuzzReport:
    """Run ``count`` generated programs x ``input_sets`` random inputs on ``backend`` and the oracle
    (``long_process``: through every dispatch path in turn, see the module docstring; ``path``:
    every run through that one path of ``PATHS``; ``wide``: programs with 64-bit types too).
    ``stop_before=(i, k)`` ends the run just before input set ``k`` of program ``i``."""
    if path is not None and path not in PATHS:
        raise ValueError(f"path={path!r} is not a dispatch path. Fix: use one of {PATHS}.")
    from vyre.ir.generate import generate_case, random_inputs

    report = FuzzReport(seed)
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    saved = settings.variable(COARSEN_ENV)
    try:
        for i in range(count):
            case_seed = seed * 1_000_003 + i
            case = generate_case(case_seed, subgroups=(i % 4 == 3), wide=wide)
            coarsen = COARSEN_SETTINGS[i % len(COARSEN_SETTINGS)] if long_process else saved
            if long_process:
                set_coarsening(coarsen)
            report.programs += 1
            for k in range(input_sets):
                if (i, k) == stop_before:
                    return report
                inputs = case.inputs if k == 0 else random_inputs(case.program, case_seed * 7 + k)
                run = path or (PATHS[(i * input_sets + k) % len(PATHS)] if long_process else "host")
                report.runs += 1
                detail = mismatch(backend, case.program, inputs, case.config, run)
                if detail is None:
                    continue
                small = shrink(case.program, _fails_the_same_way(backend, inputs, case.config, run, detail))
                name = f"seed{case_seed}_{small.fingerprint().hex()[:12]}"
                history = History(seed, i, k, input_sets, long_process, run, coarsen, wide)
                if corpus is not None:
                    write_case(corpus, CorpusCase(name, small, list(inputs), case.config, detail[:2000],
                                                  history=history))
                report.mismatches.append(f"{name}: {detail[:500]}")
                break
            if long_process:
                dirty(backend, rng)
            if progress is not None:
                progress(i + 1, count)
    finally:
        set_coarsening(saved)
        report.seconds = time.perf_counter() - start
    return report


def _kind(detail: str) -> str:
    """What a mismatch is about: ``output 'NAME'`` for wrong values, else the exception's name."""
    return detail.split(":", 1)[0]


def _fails_the_same_way(backend, inputs: Sequence[np.ndarray], config: DispatchConfig, path: str,
                        detail: str) -> Callable[[Program], bool]:
    """The shrinker's test: a smaller program fails on the same output (or with the same error), so
    shrinking cannot drift to another failure (a store index made constant is a race, not the bug)."""
    kind = _kind(detail)

    def still_fails(program: Program) -> bool:
        found = mismatch(backend, program, inputs, config, path)
        return found is not None and _kind(found) == kind

    return still_fails


def replay(backend, case: CorpusCase) -> str | None:
    """Run ``case`` as it failed: first the runs that came before it in its fuzz run (when it
    records a ``History``; shrinks of earlier mismatches are not repeated), then the case through
    its path. None when it now agrees with the oracle."""
    h = case.history
    if h is None:
        return mismatch(backend, case.program, case.inputs, case.config)
    fuzz(backend, h.index + 1, h.seed, h.input_sets, long_process=h.long_process,
         stop_before=(h.index, h.input_set), wide=h.wide)
    saved = settings.variable(COARSEN_ENV)
    try:
        set_coarsening(h.coarsen)
        return mismatch(backend, case.program, case.inputs, case.config, h.path)
    finally:
        set_coarsening(saved)
