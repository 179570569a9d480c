"""The specialisation cache of ``vyre.lib``'s kernels (``vyre.frontend.spec_cache``): an entry read
back is the very program lowering makes (equal, same wire bytes) for every variant the library makes
here; no two variants share an entry; a corrupt, tampered or untrusted entry is never used;
``VYRE_SPEC_CACHE=0`` turns it off; kernels outside the package are never cached."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import vyre
from vyre import lib
from vyre.frontend import KernelTemplate
from vyre.frontend.lower import kernel_findings
from vyre.frontend.spec_cache import Undescribable, describe
from vyre.ir import Expr, Node, Program
from vyre.ir.program import BufferDecl
from vyre.ir.types import DataType

ROOT = Path(__file__).resolve().parents[2]


def _valid(program: Program) -> bool:
    return not kernel_findings(program)


def _library_variants(backend) -> list[tuple[KernelTemplate, dict]]:
    """Every (template, Const values) lowered in this process so far, after a spread of library calls."""
    rng = np.random.default_rng(7)
    for dtype in (np.uint32, np.int32, np.float32, np.uint64, np.int64, np.float64):
        for n in (1000, 9000):
            x = (rng.integers(0, 50, n) if np.dtype(dtype).kind != "f" else rng.random(n)).astype(dtype)
            for op in ("add", "min", "max"):
                lib.reduce(x, op, backend=backend)
                lib.inclusive_scan(x, op, backend=backend)
                lib.exclusive_scan(x, op, backend=backend)
            lib.select_if(x, x[0], x[1] + 1, backend=backend)
            lib.select(x, (x > x[5]).astype(np.uint32), backend=backend)
            lib.unique(x, backend=backend)
            lib.run_length_encode(x, backend=backend)
            lib.segmented_reduce(x, np.arange(0, n + 1, 97, dtype=np.uint32), backend=backend)
    lib.histogram(rng.integers(0, 64, 5000).astype(np.uint32), 64, backend=backend)
    lib.unique(rng.integers(10, 90, 3000).astype(np.uint32), key_range=(10, 90), backend=backend)
    templates = [t for t in gc.get_objects() if isinstance(t, KernelTemplate) and t.key is not None]
    return [(t, k.consts) for t in templates for k in t.specialisations]


def test_every_library_variant_reads_back_as_the_program_lowering_makes(backend, tmp_path, monkeypatch):
    variants = _library_variants(backend)
    monkeypatch.setenv("VYRE_SPEC_CACHE_DIR", str(tmp_path))  # empty: the first program() of each is a miss
    assert len(variants) > 50
    by_entry: dict[str, Program] = {}
    for template, values in variants:
        fresh = template.lower(values)
        assert template.bind(**values).program == fresh  # what the library ran is what lowering makes
        stored = template.key.program(values, lambda f=fresh: f, _valid)  # a miss: written

        read = template.key.program(values, no_lowering, _valid)
        assert read == fresh and stored is fresh
        assert read.to_wire() == fresh.to_wire()
        name = template.key.entry(values)
        assert by_entry.setdefault(name, fresh) == fresh, f"two variants share the entry {name}"
    assert len(set(os.listdir(tmp_path))) == len(by_entry)


def no_lowering() -> Program:
    raise AssertionError("the entry was not read back")


def _one_variant(backend) -> tuple[KernelTemplate, dict]:
    lib.reduce(np.arange(5000, dtype=np.uint32), backend=backend)
    template, values = next((t, k.consts) for t in gc.get_objects()
                            if isinstance(t, KernelTemplate) and t.key is not None and t.name == "lib_reduce_add_u32"
                            for k in t.specialisations)
    return template, values


def _other_valid_program() -> bytes:
    """A valid program in the wire format that is not the kernel's: what a tamperer could plant."""
    return Program([BufferDecl.output("out", 0, DataType.U32, 4)], (1, 1, 1),
                   [Node.store("out", Expr.u32(0), Expr.u32(7))], "planted").to_wire()


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage", "empty", "invalid_program"])
def test_a_damaged_entry_is_never_used_and_is_rebuilt(backend, tmp_path, monkeypatch, damage):
    monkeypatch.setenv("VYRE_SPEC_CACHE_DIR", str(tmp_path))
    template, values = _one_variant(backend)
    fresh = template.lower(values)
    template.key.program(values, lambda: fresh, _valid)
    entry = tmp_path / template.key.entry(values)
    good = entry.read_bytes()
    bad = {"flip": good[:-5] + bytes([good[-5] ^ 0x40]) + good[-4:], "truncate": good[: len(good) // 2],
           "garbage": os.urandom(600), "empty": b"",
           "invalid_program": Program([], (1, 1, 1), [Node.let("x", Expr.var("nowhere"))]).to_wire()}[damage]
    entry.write_bytes(bad)
    lowered = []
    got = template.key.program(values, lambda: lowered.append(1) or fresh, _valid)
    assert got == fresh and lowered == [1]
    assert entry.read_bytes() == good  # written again


def test_an_entry_another_user_could_write_is_not_read(backend, tmp_path, monkeypatch):
    monkeypatch.setenv("VYRE_SPEC_CACHE_DIR", str(tmp_path / "c"))
    template, values = _one_variant(backend)
    fresh = template.lower(values)
    template.key.program(values, lambda: fresh, _valid)
    entry = tmp_path / "c" / template.key.entry(values)
    entry.write_bytes(_other_valid_program())  # a valid program, but not the kernel's
    entry.chmod(0o666)
    got = template.key.program(values, lambda: fresh, _valid)
    assert got == fresh
    (tmp_path / "c").chmod(0o777)  # a directory others may write: neither read nor written
    entry.unlink()
    template.key.program(values, lambda: fresh, _valid)
    assert not entry.exists()


def test_a_symlinked_entry_is_not_followed(backend, tmp_path, monkeypatch):
    monkeypatch.setenv("VYRE_SPEC_CACHE_DIR", str(tmp_path / "c"))
    template, values = _one_variant(backend)
    fresh = template.lower(values)
    template.key.program(values, lambda: fresh, _valid)
    entry = tmp_path / "c" / template.key.entry(values)
    target = tmp_path / "planted"
    target.write_bytes(_other_valid_program())
    entry.unlink()
    entry.symlink_to(target)
    assert template.key.program(values, lambda: fresh, _valid) == fresh
    assert not entry.is_symlink() and target.read_bytes() == _other_valid_program()


def _entries_after_a_call(tmp_path: Path, disable: bool) -> list[str]:
    cache = tmp_path / ("off" if disable else "on")
    env = {**os.environ, "VYRE_SPEC_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT), "VYRE_BACKEND": "reference"}
    env.pop("VYRE_SPEC_CACHE", None)
    if disable:
        env["VYRE_SPEC_CACHE"] = "0"
    code = "import numpy as np; from vyre import lib; print(lib.reduce(np.arange(100, dtype=np.uint32)))"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0 and done.stdout.strip() == "4950", done.stderr
    return os.listdir(cache) if cache.exists() else []


def test_the_variable_turns_the_cache_off(tmp_path):
    assert _entries_after_a_call(tmp_path, disable=False)
    assert _entries_after_a_call(tmp_path, disable=True) == []


def test_kernels_outside_the_package_are_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("VYRE_SPEC_CACHE_DIR", str(tmp_path))

    @vyre.kernel
    def mine(x: vyre.InOut[vyre.u32], k: vyre.Const[int]):
        x[vyre.gid()] = x[vyre.gid()] + k

    assert mine.key is None
    assert mine.bind(3).program is not None and os.listdir(tmp_path) == []


@pytest.mark.parametrize("value", [object(), np.uint32(3), lambda: 1, np.zeros(2)])
def test_values_the_key_cannot_spell_out_are_refused(value):
    with pytest.raises(Undescribable):
        describe(value)


def test_the_key_tells_values_apart():
    assert len({describe(v) for v in (0, False, 0.0, -0.0, "0", None, (0,), [0], DataType.U32, DataType.I32)}) == 10
