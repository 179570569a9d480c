"""The program index (``vyre_cuda._runtime.program_index``): what its keys cover, and misses that stay misses."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre_cuda._runtime import program_index
from vyre_cuda._runtime.program_index import INDEX_SUFFIX, index_key, indexable, module_key_of, source_identity
from vyre_cuda.testing import DiskCache, ModuleCache

U32 = DataType.U32


@dataclass(frozen=True)
class Device:
    compute_capability: str = "90"
    driver_version: int = 13000
    index: int = 0


def xor(salt: int = 0, name: str = "xor") -> Program:
    i = Expr.var("i")
    return Program([BufferDecl.read("a", 0, U32), BufferDecl.read_write("c", 1, U32)], (64, 1, 1),
                   [Node.let("i", Expr.invocation_id(0)),
                    Node.store("c", i, Expr.bitxor(Expr.load("a", i), Expr.u32(salt)))], name=name)


def key(program: Program, block=(64, 1, 1), coarsen: int = 1, device: Device = Device()) -> str | None:
    return index_key(program, program.fingerprint(), block, coarsen, device)


def test_the_key_covers_the_program_and_everything_its_binary_depends_on() -> None:
    base = key(xor())
    assert base == key(xor()) and len(base) == 64
    others = {key(xor(1)), key(xor(name="other")), key(xor(), block=(128, 1, 1)), key(xor(), coarsen=4),
              key(xor(), device=Device(compute_capability="80")), key(xor(), device=Device(driver_version=12080))}
    assert base not in others and len(others) == 6


def test_programs_that_call_registered_ops_are_never_indexed() -> None:
    i = Expr.var("i")
    p = Program([BufferDecl.read_write("c", 0, U32)], (64, 1, 1),
                [Node.let("i", Expr.invocation_id(0)), Node.store("c", i, Expr.call("some.op", Expr.load("c", i)))])
    assert not indexable(p) and key(p) is None
    assert indexable(xor())


def test_source_identity_changes_when_a_code_generator_file_changes(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "codegen").mkdir()
    source = tmp_path / "codegen" / "emit.py"
    source.write_text("A = 1\n")
    monkeypatch.setattr(program_index, "_source_dirs", lambda: (tmp_path / "codegen",))
    source_identity.cache_clear()
    try:
        first = source_identity()
        source.write_text("A = 2\n")
        os.utime(source, ns=(1, 1))
        source_identity.cache_clear()
        assert source_identity() != first
    finally:
        source_identity.cache_clear()


def test_the_real_identity_covers_the_emitter_and_the_ir() -> None:
    dirs = [d.name for d in program_index._source_dirs()]
    assert dirs == ["_codegen", "ir"] and all(d.is_dir() for d in program_index._source_dirs())


@pytest.mark.parametrize("payload", [None, b"", b"zz" * 32, b"A" * 64, b"0" * 63, b"0" * 64 + b"\n"])
def test_an_entry_that_is_not_a_module_key_is_no_entry(payload: bytes | None) -> None:
    assert module_key_of(payload) is None
    assert module_key_of(b"0f" * 32) == "0f" * 32


def test_an_index_entry_whose_cubin_is_gone_or_junk_is_a_miss(tmp_path: Path) -> None:
    disk = DiskCache(tmp_path / "cache")
    modules = ModuleCache(Device(), disk)
    index = key(xor())
    assert modules.load_indexed(index, "main") is None  # no entry at all
    assert disk.put(index, b"ab" * 32, INDEX_SUFFIX)  # names a cubin that is not cached
    assert modules.load_indexed(index, "main") is None
    assert disk.put(index, b"not a key", INDEX_SUFFIX)
    assert modules.load_indexed(index, "main") is None
    counts = modules.counters()
    assert counts["cuda_index_hits"] == 0 and counts["cuda_index_misses"] == 3
