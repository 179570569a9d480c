"""The shrinker and the differential fuzz loop (``vyre.fuzz``), on the CPU.

The fuzzer is the thing under test: it runs against the reference backend (it must report
nothing) and against ``BitFlipBackend``, a real backend that is wrong on purpose (it must report,
shrink and write a corpus case that loads back).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import vyre
from vyre.driver.config import DispatchConfig
from vyre.fuzz import fuzz, mismatch, read_corpus, shrink
from vyre.fuzz.shrink import size
from vyre.ir import Barrier, DataType, Program
from vyre.ir.generate import Case, generate_case
from vyre.ir.walk import iter_all_exprs, iter_nodes
from vyre.reference import ReferenceBackend

#: bit flipped in the first element of every output: bit 0 of integers, the lowest exponent bit of
#: floats (so a NaN or infinity becomes finite and no NaN-equals-NaN rule can hide the flip)
_FLIP_BIT = {DataType.F32: 23, DataType.F16: 10, DataType.BF16: 7}


class BitFlipBackend(ReferenceBackend):
    """The oracle with one bit of every non-empty output flipped: wrong on every case that has output."""

    id = "bitflip"

    def dispatch(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None
                 ) -> list[np.ndarray]:
        outputs = super().dispatch(program, inputs, config)
        for out, decl in zip(outputs, program.outputs):
            if out.size:
                bits = out.view(f"u{out.itemsize}")
                bits[0] ^= 1 << _FLIP_BIT.get(decl.dtype, 0)
        return outputs


def uses(program: Program, op: str) -> bool:
    return any(e.op == op for e in iter_all_exprs(program.body))


def first_case_using(op: str) -> Case:
    return next(c for c in map(generate_case, range(500)) if uses(c.program, op))


def first_program_using(op: str) -> Program:
    return first_case_using(op).program


@pytest.mark.parametrize("op", ["rotate_left", "mul_high", "select"])
def test_shrink_keeps_the_failure_and_ends_tiny(op: str) -> None:
    original = first_program_using(op)
    seen: list[Program] = []

    def still_fails(candidate: Program) -> bool:
        vyre.validate(candidate)  # the shrinker only proposes valid programs
        seen.append(candidate)
        return uses(candidate, op)

    small = shrink(original, still_fails)
    vyre.validate(small)
    assert uses(small, op)
    assert small.buffers == original.buffers and small.workgroup_size == original.workgroup_size
    # at most: the op and its two operands, the store keeping it with its own-index variable, that
    # variable's let with a literal value, and the barriers the shrinker keeps on purpose
    barriers = sum(isinstance(n, Barrier) for n in iter_nodes(small.body))
    assert size(small) <= 7 + barriers < size(original), small.to_text()
    assert seen, "the predicate was never consulted"


def test_shrink_returns_the_program_unchanged_when_nothing_smaller_fails() -> None:
    original = first_program_using("rotate_left")
    assert shrink(original, lambda candidate: candidate == original) == original


def test_shrink_respects_its_try_budget() -> None:
    calls = []
    shrink(first_program_using("rotate_left"), lambda p: calls.append(p) is None, max_tries=5)
    assert 1 <= len(calls) <= 5


def test_fuzz_finds_nothing_when_the_backend_is_the_oracle(tmp_path: Path) -> None:
    progress: list[tuple[int, int]] = []
    report = fuzz(ReferenceBackend(), 30, seed=11, input_sets=2, corpus=tmp_path,
                  progress=lambda done, total: progress.append((done, total)))
    assert report.mismatches == []
    assert (report.programs, report.runs) == (30, 60)
    assert progress[-1] == (30, 30) and len(progress) == 30
    assert list(tmp_path.iterdir()) == []
    assert "0 mismatches" in report.summary()


def test_wide_fuzz_finds_nothing_when_the_backend_is_the_oracle(tmp_path: Path) -> None:
    report = fuzz(ReferenceBackend(), 24, seed=12, input_sets=2, corpus=tmp_path, wide=True)
    assert report.mismatches == [] and (report.programs, report.runs) == (24, 48)
    assert list(tmp_path.iterdir()) == []


def test_bitflip_backend_is_caught_by_mismatch() -> None:
    """The deliberately wrong backend is wrong (so the test below tests the fuzzer, not the fake)."""
    case = first_case_using("rotate_left")
    assert mismatch(ReferenceBackend(), case.program, case.inputs, case.config) is None
    assert "differ" in mismatch(BitFlipBackend(), case.program, case.inputs, case.config)


def test_fuzz_reports_shrinks_and_records_a_wrong_backend(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    report = fuzz(BitFlipBackend(), 8, seed=5, input_sets=2, corpus=corpus)
    assert len(report.mismatches) == report.programs == 8, report.summary()  # every program has output
    cases = read_corpus(corpus)
    assert sorted(c.name for c in cases) == sorted(m.split(":", 1)[0] for m in report.mismatches)
    for case in cases:
        vyre.validate(case.program)
        assert "differ" in case.note
        assert mismatch(BitFlipBackend(), case.program, case.inputs, case.config) is not None
        assert mismatch(ReferenceBackend(), case.program, case.inputs, case.config) is None
        # every statement is irrelevant to a backend that corrupts all output: shrinking removes them all
        # Only barriers may remain: the shrinker never drops one (that could add a race).
        assert all(isinstance(n, Barrier) for n in iter_nodes(case.program.body)), case.program.to_text()
