"""Regression corpus: a case as ``NAME.vyre`` (the program) + ``NAME.json`` (inputs, grid, note).

Cases written by the fuzzer carry no outputs (the oracle is the judge); hand-picked cases may also
carry ``expected`` outputs, worked out independently of the oracle, that pin the oracle itself.
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from vyre.driver.config import DispatchConfig
from vyre.ir.program import Program


@dataclass(frozen=True)
class History:
    """Where a fuzzer's case came from: program ``index`` of the run with ``seed`` (so programs
    ``0 .. index-1`` ran before it in that process), input set ``input_set`` of ``input_sets``,
    the run's mode, the dispatch path, the ``VYRE_CUDA_COARSEN`` value (None: unset) and whether
    the run generated 64-bit types (``wide``)."""

    seed: int
    index: int
    input_set: int
    input_sets: int
    long_process: bool
    path: str
    coarsen: str | None
    wide: bool = False


@dataclass
class CorpusCase:
    """One replayable case."""

    name: str
    program: Program
    inputs: list[np.ndarray]
    config: DispatchConfig
    note: str = ""
    expected: list[np.ndarray] | None = None  # outputs in program.outputs order, when known
    history: History | None = None  # the fuzz run that found it, to replay what ran before it


def _encode_arrays(arrays: list[np.ndarray]) -> list[dict]:
    return [{"dtype": arr.dtype.str, "data": base64.b64encode(np.ascontiguousarray(arr).tobytes()).decode()}
            for arr in arrays]


def _decode_arrays(items: list[dict]) -> list[np.ndarray]:
    return [np.frombuffer(base64.b64decode(i["data"]), dtype=np.dtype(i["dtype"])).copy() for i in items]


def write_case(directory: Path, case: CorpusCase) -> Path:
    """Write ``case`` into ``directory``; returns the ``.vyre`` path."""
    directory.mkdir(parents=True, exist_ok=True)
    meta = {
        "note": case.note,
        "grid": list(case.config.grid) if case.config.grid else None,
        "elements": case.config.elements,
        "inputs": _encode_arrays(case.inputs),
    }
    if case.expected is not None:
        meta["expected"] = _encode_arrays(case.expected)
    if case.history is not None:
        meta["history"] = asdict(case.history)
    (directory / f"{case.name}.json").write_text(json.dumps(meta, indent=1) + "\n")
    path = directory / f"{case.name}.vyre"
    path.write_text(case.program.to_text(), encoding="utf-8")
    return path


def read_case(vyre_path: Path) -> CorpusCase:
    """Load the case stored at ``vyre_path`` (and its ``.json`` beside it)."""
    from vyre.ir import parse

    program = parse(vyre_path.read_text(encoding="utf-8"))
    meta = json.loads(vyre_path.with_suffix(".json").read_text())
    grid = tuple(meta["grid"]) if meta.get("grid") else None
    config = DispatchConfig(grid=grid, elements=meta.get("elements"))
    expected = _decode_arrays(meta["expected"]) if "expected" in meta else None
    history = History(**meta["history"]) if meta.get("history") else None
    return CorpusCase(vyre_path.stem, program, _decode_arrays(meta["inputs"]), config, meta.get("note", ""), expected,
                      history)


def read_corpus(directory: Path) -> list[CorpusCase]:
    """Every case in ``directory``, sorted by name."""
    if not directory.is_dir():
        return []
    return [read_case(p) for p in sorted(directory.glob("*.vyre"))]
