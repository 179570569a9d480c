"""Kernels are named after their programs (``abi.entry_name``): readable in profilers, valid PTX."""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

import pytest
from codegen_support import PTXAS, elementwise, needs_ptxas

from vyre.ir import DataType, Expr, Program
from vyre.lib._sort.onesweep import radix_digit_starts
from vyre.lib.blocks import zero_fill
from vyre_cuda import ENTRY_NAME, emit_ptx, entry_name
from vyre_cuda.testing import ENTRY_NAME_LIMIT

D = DataType
IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def _named(name: str | None) -> Program:
    return elementwise(Expr.bitxor, (D.U32, D.U32), D.U32, name=name)


def _entry_of(ptx: str) -> str:
    (entry,) = re.findall(r"^\.visible \.entry (\w+)\(", ptx, re.M)
    return entry


@pytest.mark.parametrize("name", ["saxpy", "lib_radix_onesweep_4", "Xor2", "u32", "a" * ENTRY_NAME_LIMIT])
def test_a_plain_identifier_is_the_kernel_name(name: str) -> None:
    program = _named(name)
    assert entry_name(program) == name
    assert _entry_of(emit_ptx(program)) == name


def test_an_unnamed_program_gets_the_fallback_name() -> None:
    assert entry_name(_named(None)) == ENTRY_NAME == _entry_of(emit_ptx(_named(None)))


@pytest.mark.parametrize("name", ["a-b", "a b", "9lives", "_private", "名前", "x" * (ENTRY_NAME_LIMIT + 1),
                                  "WARP_SZ", "vyre_main", "vyre_smem", "vyre_main_param_0", "a\nret;"])
def test_any_other_name_is_sanitised_bounded_and_tagged(name: str) -> None:
    entry = entry_name(_named(name))
    assert IDENTIFIER.fullmatch(entry) and len(entry) <= ENTRY_NAME_LIMIT
    assert entry != name and re.search(r"_[0-9a-f]{8}$", entry)
    assert entry == entry_name(_named(name))  # stable


def test_names_that_sanitise_alike_stay_apart() -> None:
    names = ["a-b", "a.b", "a b", "a_b", "x" * 100, "x" * 101, "vyre_main"]
    entries = {entry_name(_named(n)) for n in names}
    assert len(entries) == len(names)
    assert entry_name(_named("a-b")) == "a_b_" + entry_name(_named("a-b"))[-8:]


def test_the_kernel_name_is_pinned() -> None:
    """The tag is part of the cache key of every cached cubin: a change must be deliberate."""
    assert entry_name(_named("a-b")) == "a_b_" + hashlib.blake2b(b"a-b", digest_size=4).hexdigest()


def test_library_kernels_carry_their_program_names() -> None:
    for program in (zero_fill(1), radix_digit_starts()):
        assert program.name.startswith("lib_") and _entry_of(emit_ptx(program)) == program.name


@needs_ptxas
@pytest.mark.parametrize("name", ["saxpy", "u32", "WARP_SZ", "vyre_smem", "9lives", "名前", "x" * 300, None])
def test_ptxas_accepts_named_kernels(name: str | None, tmp_path: Path) -> None:
    """Each module as emitted (the codegen suite's batch assembly renames entries, so it cannot tell)."""
    src = tmp_path / "k.ptx"
    src.write_text(emit_ptx(_named(name), sm="90"))
    done = subprocess.run([PTXAS, "--gpu-name", "sm_90", "-o", str(tmp_path / "k.cubin"), str(src)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
