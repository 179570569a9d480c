"""Replay the regression corpus (``tests/fuzz/corpus/``): on the oracle here, on the ``cuda`` backend on a GPU.

Cases come from ``make_seed_corpus.py`` (hand-picked, with outputs worked out by hand) and from the
differential fuzzer (``python -m vyre.fuzz``), which writes every shrunk mismatch here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import vyre
from vyre.driver.errors import BackendUnavailable
from vyre.fuzz import mismatch, read_corpus
from vyre.fuzz.corpus import CorpusCase
from vyre.ir import parse
from vyre.reference import run
from vyre.reference.ulp import assert_outputs_equal

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
CASES = read_corpus(CORPUS)


def _replay(case: CorpusCase) -> list[np.ndarray]:
    return run(case.program, case.inputs, case.config)


def test_corpus_holds_the_seed_cases() -> None:
    import make_seed_corpus

    names = {case.name for case in CASES}
    assert {make().name for make in make_seed_corpus.SEEDS} <= names, "run tests/fuzz/make_seed_corpus.py"


def test_seed_files_are_what_the_script_writes(tmp_path: Path) -> None:
    """The committed seed files are current: regenerating them gives the same bytes."""
    import make_seed_corpus

    for path in make_seed_corpus.main(tmp_path):
        for written in (path, path.with_suffix(".json")):
            assert written.read_bytes() == (CORPUS / written.name).read_bytes(), f"{written.name} is stale"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_is_valid_and_its_text_is_canonical(case: CorpusCase) -> None:
    vyre.validate(case.program)
    text = (CORPUS / f"{case.name}.vyre").read_text(encoding="utf-8")
    assert case.program.to_text() == text
    assert parse(text) == case.program
    assert len(case.inputs) == len(case.program.inputs)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_runs_on_the_oracle(case: CorpusCase) -> None:
    outputs = _replay(case)
    assert [o.dtype for o in outputs] == [b.dtype.np_dtype for b in case.program.outputs]
    assert_outputs_equal(outputs, _replay(case), case.program)  # deterministic
    if case.expected is not None:
        assert_outputs_equal(case.expected, outputs, case.program)


@pytest.fixture(scope="module")
def cuda_backend():
    try:
        backend = vyre.acquire("cuda")
    except BackendUnavailable as exc:
        pytest.skip(f"no CUDA backend: {exc}")
    yield backend
    backend.shutdown()


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_on_cuda_matches_the_oracle(cuda_backend, case: CorpusCase) -> None:
    assert mismatch(cuda_backend, case.program, case.inputs, case.config) is None
