"""The example programs: each ``.vyre`` file matches its script, and each demo passes on the oracle."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from vyre.ir import parse
from vyre.reference import ReferenceBackend

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAMES = ["histogram", "saxpy", "xor", "label_propagation"]


@pytest.fixture(scope="module", autouse=True)
def examples_on_path():
    sys.path.insert(0, str(EXAMPLES))
    yield
    sys.path.remove(str(EXAMPLES))


@pytest.mark.parametrize("name", NAMES)
def test_vyre_file_is_the_scripts_program(name):
    module = importlib.import_module(name)
    text = (EXAMPLES / f"{name}.vyre").read_text()
    assert parse(text) == module.build(), f"regenerate with: python3 examples/{name}.py --write"


@pytest.mark.parametrize("name", NAMES)
def test_demo_matches_numpy_on_the_oracle(name):
    module = importlib.import_module(name)
    with ReferenceBackend() as backend:
        module.demo(backend, module.build(), 1000)
