"""Every IR construct assembles with ptxas for sm_80 and sm_90."""

from __future__ import annotations

from catalogue import all_programs
from codegen_support import assemble_all_targets, emit_for_targets, needs_ptxas


@needs_ptxas
def test_every_construct_assembles() -> None:
    programs = all_programs()
    assert len(programs) > 200
    failures = assemble_all_targets(emit_for_targets(programs))
    assert not failures, "\n".join(failures[:40])
