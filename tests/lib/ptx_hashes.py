"""PTX hashes recorded from a program's builder-written version before it was rewritten as a
``@vk.kernel`` (``<name>.json`` beside this file: ``"<case> sm_<sm>"`` -> the first 16 hex
digits of the sha256 of its PTX), and the cases whose PTX no longer matches.

Every recorded hash was taken again for each change of the emitter that changes much PTX, after a
diff over every case showed nothing else changed: codegen 7 (workgroup-memory guards left out
where the index is proven below the count; diffed with guards, predicates and comments
normalised away), codegen 8 (the workgroup-memory zero fill written out, at most 16 stores per
thread, not a loop; only the fill's lines changed) and codegen 9 (workgroup-memory indices that
are bit fields scaled inside the field; diffed with registers normalised, only ``mad.lo.u32``
address lines replaced by ``shr``/``and``/``add``, and register counts)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from vyre.ir import Program

SMS = ("80", "90")


def digest(program: Program, sm: str) -> str:
    from vyre_cuda import emit_ptx

    return hashlib.sha256(emit_ptx(program, sm=sm).encode()).hexdigest()[:16]


def recorded(name: str) -> dict[str, str]:
    return json.loads((Path(__file__).parent / f"{name}.json").read_text(encoding="utf-8"))


def record(name: str, cases: dict[str, Program]) -> None:
    """Write the hashes of ``cases`` (run once, on the builder version)."""
    hashes = {f"{case} sm_{sm}": digest(program, sm) for case, program in cases.items() for sm in SMS}
    (Path(__file__).parent / f"{name}.json").write_text(json.dumps(hashes, indent=0, sort_keys=True),
                                                       encoding="utf-8")


def changed(cases: dict[str, Program], expected: dict[str, str]) -> list[str]:
    """The keys of ``expected`` whose case's PTX hashes differently now (each case, each sm)."""
    return [key for key in sorted(expected) if digest(cases[key.split()[0]], key[-2:]) != expected[key]]
