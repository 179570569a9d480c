"""Programs with at most 48 KiB of workgroup memory keep their PTX byte for byte.

Cached cubins and program index entries are keyed on the PTX text, so dynamic shared memory
(programs over 48 KiB) must not change the text of any other program. The hashes are of the PTX
emitted before dynamic shared memory existed, for a sample of library kernels (the 64-bit keys-only
onesweep passes at 16 keys per invocation, in the form that reads each key three times,
``registers=False``; the digit histograms and scans) and a program holding exactly 48 KiB. The
onesweep passes' hashes were taken again when the emitter began making counter adds (their tile
counter) once per subgroup. All were taken again for codegen 7, which leaves out the guards of
workgroup-memory accesses whose index it proves below the count; a diff with guards and predicates
normalised away showed nothing else changed, and for codegen 8, whose zero fill of workgroup
memory is written out (at most 16 stores per thread): only the fill's lines changed. The onesweep
passes' were taken again when their look-back moved to u64 pair words (two tiles' words per load;
a library change, not the emitter's), and for codegen 9, which scales a workgroup-memory index that
is a bit field inside the field: only those address lines changed. The onesweep passes' were
taken again when the look-back's common trip (two aggregates) got its own short branch (a library
change), and when a pass stopped looking back for digits no key of it has (``SKIP_EMPTY``; a
library change). A segment
scan with a host ``init`` (a parameter word) keeps its PTX too: the variants that read ``init``
from a caller's device array are separate programs (the look-back scan's host-``init`` variants
are pinned in tests/lib/test_lookback_ptx.py).
"""

from __future__ import annotations

import hashlib

import pytest

from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.lib._scan import kernels as scan_kernels
from vyre.lib._sort import onesweep as K
from vyre.lib.monoid import monoid
from vyre_cuda import emit_ptx

U64, F64, I64, U32, U8 = DataType.U64, DataType.F64, DataType.I64, DataType.U32, DataType.U8


def _full_48_kib() -> Program:
    """Two u8 tiles padded to exactly 48 KiB, each read back."""
    gid = Expr.invocation_id(0)
    body = [Node.store("t1", gid, Expr.u32(7)), Node.barrier(),
            Node.store("out", gid, Expr.add(Expr.load("t1", Expr.u32(49147)), Expr.load("t0", Expr.u32(2))))]
    return Program([BufferDecl.output("out", 0, U32, 256), BufferDecl.workgroup("t0", 3, U8),
                    BufferDecl.workgroup("t1", 48 * 1024 - 4, U8)], (256, 1, 1), body, name="full_48_kib")


def sample() -> dict[str, Program]:
    """Programs whose PTX must not change (names are stable across versions)."""
    return {
        "onesweep_u64_first": K.radix_onesweep(0, I64, None, "none", 16, 0, 1, raw=U64, registers=False),
        "onesweep_u64_mid": K.radix_onesweep(24, None, None, "none", 16, 0, 1, raw=U64, registers=False),
        "onesweep_u64_last": K.radix_onesweep(56, None, F64, "none", 16, 0, 1, raw=U64, registers=False),
        "onesweep_u64_iota": K.radix_onesweep(8, None, None, "iota", 8, 0, 1, raw=U64, registers=False),
        "histograms_u64": K.radix_histograms(U64, K.HISTOGRAM_ITEMS, 0, 1),
        "digit_starts_8": K.radix_digit_starts(8),
        "full_48_kib": _full_48_kib(),
        "scan_segments_f32_add_init": scan_kernels.scan_segments(monoid("add", DataType.F32), scan_kernels.SCAN_ITEMS,
                                                                 True, True, 1, 2, 4),
    }


def digest(program: Program, sm: str) -> str:
    return hashlib.sha256(emit_ptx(program, sm=sm).encode()).hexdigest()[:16]


EXPECTED: dict[tuple[str, str], str] = {
    ("digit_starts_8", "80"): "39e0ac569a6d4b39",
    ("digit_starts_8", "90"): "5a396d3ecbd5997f",
    ("full_48_kib", "80"): "19419ce624e6a098",
    ("full_48_kib", "90"): "86ce76901067b0e0",
    ("histograms_u64", "80"): "26f2d329a13589f2",
    ("histograms_u64", "90"): "b45afce03ef82f94",
    ("onesweep_u64_first", "80"): "acd3438cafffd753",
    ("onesweep_u64_first", "90"): "1c2b1d46238b1d03",
    ("onesweep_u64_iota", "80"): "9e15dccef3f933a3",
    ("onesweep_u64_iota", "90"): "45843822cc9165a8",
    ("onesweep_u64_last", "80"): "3e8abd7b87fc4608",
    ("onesweep_u64_last", "90"): "17862e0d8f9c2c53",
    ("onesweep_u64_mid", "80"): "4ca13ddc97f23e9b",
    ("onesweep_u64_mid", "90"): "2a421523b9a2f2d8",
    ("scan_segments_f32_add_init", "80"): "0fc20c56202f6543",
    ("scan_segments_f32_add_init", "90"): "3d11411fdf44718b",
}


@pytest.mark.parametrize(("name", "sm"), sorted(EXPECTED))
def test_ptx_of_programs_within_48_kib_is_unchanged(name: str, sm: str) -> None:
    program = sample()[name]
    assert digest(program, sm) == EXPECTED[(name, sm)], f"the PTX of {name} for sm_{sm} changed"
