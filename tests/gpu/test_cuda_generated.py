"""Generated programs (``vyre.ir.generate``) on fresh random inputs, judged by the oracle."""

from __future__ import annotations

import os
import struct

import pytest

pytestmark = pytest.mark.gpu

PROGRAMS = int(os.environ.get("VYRE_GPU_GENERATED", "1000"))
CHUNKS = 20


@pytest.mark.parametrize("subgroups", [False, True], ids=["plain", "subgroups"])
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_generated_programs(backend, chunk: int, subgroups: bool) -> None:
    _run_chunk(backend, chunk, subgroups, wide=False)


@pytest.mark.parametrize("subgroups", [False, True], ids=["plain", "subgroups"])
@pytest.mark.parametrize("chunk", range(CHUNKS // 4))
def test_generated_wide_programs(backend, chunk: int, subgroups: bool) -> None:
    """Programs that also use U64, I64 and F64 (``generate_case(wide=True)``)."""
    _run_chunk(backend, chunk, subgroups, wide=True)


def _run_chunk(backend, chunk: int, subgroups: bool, wide: bool) -> None:
    """One chunk of ``PROGRAMS / CHUNKS`` generated programs (a fifth of that with subgroups)."""
    generate = pytest.importorskip("vyre.ir.generate")
    from vyre.reference import run
    from vyre.reference.ulp import assert_outputs_equal

    base = struct.unpack("<I", os.urandom(4))[0]
    per = -(-PROGRAMS // CHUNKS) // (5 if subgroups else 1)
    failures = []
    for k in range(per):
        seed = (base + chunk * per + k) & 0xFFFFFFFF
        case = generate.generate_case(seed, subgroups=subgroups, wide=wide)
        inputs = generate.random_inputs(case.program, seed ^ 0x5EED)
        expected = run(case.program, inputs, case.config)
        try:
            actual = backend.dispatch(case.program, inputs, case.config)
            assert_outputs_equal(expected, actual, case.program)
        except Exception as exc:  # noqa: BLE001 - collected and reported with the seed
            failures.append(f"seed {seed}: {type(exc).__name__}: {str(exc)[:400]}; {_rerun(backend, case, inputs)}")
    assert not failures, f"{len(failures)} of {per} generated programs differ:\n" + "\n".join(failures[:10])


def _rerun(backend, case, inputs) -> str:
    """Whether the mismatch repeats (an emitter bug) or comes and goes (a race), for the report."""
    import numpy as np

    runs = [backend.dispatch(case.program, inputs, case.config) for _ in range(3)]
    same = all(all(np.array_equal(a.view(np.uint8), b.view(np.uint8)) for a, b in zip(runs[0], r)) for r in runs)
    return "deterministic on 3 reruns" if same else "NOT deterministic on reruns"
