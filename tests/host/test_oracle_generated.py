"""The oracle runs ~200 generated programs (vyre.ir.generate) without error, deterministically."""

from __future__ import annotations

import pytest

from vyre.driver.config import DispatchConfig, effective_workgroup
from vyre.driver.inputs import prepare_host_dispatch
from vyre.ir.program import Program
from vyre.reference.interpreter import execute
from vyre.reference.ulp import assert_outputs_equal

generate = pytest.importorskip("vyre.ir.generate", reason="the random program generator is not in this tree yet")


def generated(seed: int) -> tuple[Program, list, DispatchConfig | None]:
    """A generated program, its inputs and its dispatch config."""
    if hasattr(generate, "generate_case"):
        case = generate.generate_case(seed, subgroups=(seed % 4 == 3))
        return case.program, list(case.inputs), case.config
    program = generate.generate_program(seed)
    return program, list(generate.random_inputs(program, seed)), None


def run_oracle(program: Program, inputs: list, config: DispatchConfig | None) -> list:
    prepared = prepare_host_dispatch(program, inputs, config)
    execute(program, prepared.arrays, prepared.grid, effective_workgroup(program, config))
    return prepared.outputs(program)


@pytest.mark.parametrize("chunk", range(4))
def test_generated_programs_run_deterministically(chunk: int) -> None:
    for seed in range(chunk * 50, chunk * 50 + 50):
        program, inputs, config = generated(seed)
        first = run_oracle(program, inputs, config)
        assert len(first) == len(program.outputs)
        assert_outputs_equal(first, run_oracle(program, inputs, config), program)


@pytest.mark.parametrize("chunk", range(2))
def test_wide_generated_programs_run_deterministically(chunk: int) -> None:
    for seed in range(chunk * 40, chunk * 40 + 40):
        case = generate.generate_case(seed, subgroups=(seed % 4 == 3), wide=True)
        first = run_oracle(case.program, list(case.inputs), case.config)
        assert_outputs_equal(first, run_oracle(case.program, list(case.inputs), case.config), case.program)
