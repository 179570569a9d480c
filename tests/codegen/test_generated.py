"""Random valid programs from ``vyre.ir.generate`` emit and assemble for sm_80 and sm_90."""

from __future__ import annotations

import pytest
from codegen_support import assemble_all_targets, emit_for_targets, needs_ptxas

generate = pytest.importorskip("vyre.ir.generate", reason="vyre.ir.generate is not available yet")

#: (count, options): 320 programs in all, every option combination
VARIANTS = ((120, {}), (80, {"subgroups": True}), (60, {"approximate": True}),
            (60, {"subgroups": True, "approximate": True}))


@needs_ptxas
def test_generated_programs_assemble() -> None:
    programs = {}
    for offset, (count, opts) in enumerate(VARIANTS):
        for seed in range(count):
            programs[f"seed{seed}:{sorted(opts)}"] = generate.generate_program(1000 * offset + seed, **opts)
    assert len(programs) >= 300
    failures = assemble_all_targets(emit_for_targets(programs))
    assert not failures, "\n".join(failures[:40])
