"""The kernel cache's paths under hostile filesystems (issue 30), all without a GPU or CuPy.

- every module load path hands the driver the verified bytes or a private copy, never a cache path;
- the cache root's parents, and the whole driver JIT subtree, pass the trust check as the root does;
- ``VYRE_PTX_DUMP_DIR`` never follows a planted symlink and refuses a directory others may write;
- nothing is created on disk until a backend really starts.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from vyre_cuda._runtime import settings
from vyre_cuda._runtime.cache import DiskCache, configure_driver_jit_cache
from vyre_cuda._runtime.loader import ModuleCache, dump_ptx
from vyre_cuda.testing import DeviceInfo

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="making files owned by another user needs root (chown)")
H100 = DeviceInfo(0, "NVIDIA H100 80GB HBM3", "90", 132, 32, 1024, (1024, 1024, 64), (2**31 - 1, 65535, 65535),
                  49152, 232448, True, 85 << 30, 50 << 20, 13000, 12090)
KEY = hashlib.sha256(b"k").hexdigest()


class RecordingRawModule:
    """Stands in for ``cupy.RawModule``: records the path it was given and what that file held then."""

    loads: list[tuple[Path, bytes]] = []

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        RecordingRawModule.loads.append((self.path, self.path.read_bytes()))
        self.module = object()


class FakeCupy:
    """Only ``RawModule``: the loader paths under test hand the driver a file through it."""

    RawModule = RecordingRawModule


@pytest.fixture
def cache(tmp_path: Path) -> DiskCache:
    c = DiskCache(tmp_path / "cache")
    assert c.put(KEY, b"genuine")
    return c


def _assert_private_copy(path: Path, data: bytes, cache: DiskCache) -> None:
    """``path`` holds ``data`` in a 0o700 directory of this user, outside the shared cache."""
    assert not path.resolve().is_relative_to(cache.root.resolve()), path
    parent = path.parent.stat()
    assert parent.st_uid == os.geteuid() and stat.S_IMODE(parent.st_mode) == 0o700
    assert path.read_bytes() == data


# ---- 3: every load path loads what was verified -------------------------------------------------------------
def test_the_cupy_loader_gets_a_private_copy_not_a_cache_path(monkeypatch, cache: DiskCache) -> None:
    monkeypatch.setenv(settings.LOADER, "cupy")
    RecordingRawModule.loads.clear()
    modules = ModuleCache(H100, cache)
    assert modules._try_load(FakeCupy, b"verified cubin", ".cubin") is not None
    ((path, seen),) = RecordingRawModule.loads
    assert seen == b"verified cubin"
    _assert_private_copy(path, b"verified cubin", cache)
    assert not (cache.root / "files").exists() or not any((cache.root / "files").iterdir())


def test_the_ptx_fallback_gets_a_private_copy_not_a_cache_path(cache: DiskCache) -> None:
    RecordingRawModule.loads.clear()
    modules = ModuleCache(H100, cache)
    modules._load_ptx(FakeCupy, KEY, ".version 8.0\n")
    ((path, seen),) = RecordingRawModule.loads
    assert seen == b".version 8.0\n"
    _assert_private_copy(path, b".version 8.0\n", cache)


# ---- 3: the root's parents are checked as the root is -------------------------------------------------------
def test_a_parent_writable_by_others_refuses_the_cache(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    cache = DiskCache(shared / "cache")
    assert cache.put(KEY, b"genuine")
    shared.chmod(0o777)  # anyone could rename cache/ away and put their own in its place
    fresh = DiskCache(shared / "cache")
    assert any("parent" in p and "writable by group or others" in p for p in fresh.problems()), fresh.problems()
    assert fresh.get(KEY) is None
    with pytest.warns(RuntimeWarning, match="a parent of"):
        assert not fresh.put(hashlib.sha256(b"x").hexdigest(), b"new")
    shared.chmod(0o1777)  # sticky, like /tmp: others cannot rename what is ours
    assert DiskCache(shared / "cache").get(KEY) == b"genuine"


@as_root
def test_a_parent_owned_by_another_user_refuses_the_cache(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    cache = DiskCache(theirs / "cache")
    assert cache.put(KEY, b"genuine")
    os.chown(theirs, NOBODY, NOBODY)
    fresh = DiskCache(theirs / "cache")
    assert any(f"owned by uid {NOBODY}" in p for p in fresh.problems()) and fresh.get(KEY) is None


# ---- 4: the driver JIT subtree is checked ----------------------------------------------------------------------
@pytest.mark.parametrize("plant", ["writable_file", "writable_dir", "symlink"])
def test_the_driver_jit_subtree_is_trust_checked(monkeypatch, cache: DiskCache, tmp_path: Path, plant: str) -> None:
    monkeypatch.delenv("CUDA_CACHE_PATH", raising=False)
    assert configure_driver_jit_cache(cache.root) == str(cache.root / "driver-jit")
    monkeypatch.delenv("CUDA_CACHE_PATH", raising=False)
    jit = cache.root / "driver-jit" / "ab"
    jit.mkdir(mode=0o700)
    if plant == "writable_file":
        (jit / "0123").write_bytes(b"jit output")
        (jit / "0123").chmod(0o666)
    elif plant == "writable_dir":
        jit.chmod(0o777)
    else:
        (tmp_path / "elsewhere").write_bytes(b"planted")
        (jit / "0123").symlink_to(tmp_path / "elsewhere")
    problems = cache.problems()
    assert any("driver-jit" in p for p in problems), problems
    assert configure_driver_jit_cache(cache.root) is None and "CUDA_CACHE_PATH" not in os.environ


@as_root
def test_a_driver_jit_file_owned_by_another_user_is_reported(cache: DiskCache) -> None:
    cache.ensure_trusted_dir("driver-jit")
    planted = cache.root / "driver-jit" / "index"
    planted.write_bytes(b"index")
    planted.chmod(0o600)
    os.chown(planted, NOBODY, NOBODY)
    assert any(f"owned by uid {NOBODY}" in p and "driver-jit" in p for p in cache.problems())


def test_nothing_is_created_until_a_backend_starts(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VYRE_", "CUDA_CACHE"))}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), PYTHONPATH=str(ROOT))
    code = "import vyre; vyre.acquire(allow_reference=True); print(sorted(b.id for b in vyre.registered_backends()))"
    for args in (["-m", "vyre.cli", "backends"], ["-c", code]):
        done = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=10,
                              check=False)
        assert done.returncode == 0, done.stderr
    assert list(home.rglob("*")) == [], list(home.rglob("*"))


# ---- 2: PTX dumps ---------------------------------------------------------------------------------------------
def test_a_dump_never_follows_a_planted_symlink(monkeypatch, tmp_path: Path) -> None:
    dumps, victim = tmp_path / "dumps", tmp_path / "victim"
    dumps.mkdir(mode=0o700)
    victim.write_text("precious")
    for suffix in (".ptx", ".log"):
        (dumps / f"vyre-{KEY[:16]}{suffix}").symlink_to(victim)
    monkeypatch.setenv(settings.PTX_DUMP_DIR, str(dumps))
    where = dump_ptx(".version 8.0\n", KEY, "refused")
    assert victim.read_text() == "precious"
    kept = dumps / f"vyre-{KEY[:16]}.ptx"
    assert str(kept) in str(where) and not kept.is_symlink() and kept.read_text() == ".version 8.0\n"
    assert (dumps / f"vyre-{KEY[:16]}.log").read_text() == "refused\n"


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o770])
def test_a_dump_directory_others_may_write_is_refused(monkeypatch, tmp_path: Path, mode: int) -> None:
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    dumps.chmod(mode)
    monkeypatch.setenv(settings.PTX_DUMP_DIR, str(dumps))
    where = dump_ptx(".version 8.0\n", KEY, "refused")
    assert list(dumps.iterdir()) == []
    assert "not kept" in str(where) and "writable by group or others" in str(where) and settings.PTX_DUMP_DIR in where


@as_root
def test_a_dump_directory_owned_by_another_user_is_refused(monkeypatch, tmp_path: Path) -> None:
    dumps = tmp_path / "dumps"
    dumps.mkdir(mode=0o700)
    os.chown(dumps, NOBODY, NOBODY)
    monkeypatch.setenv(settings.PTX_DUMP_DIR, str(dumps))
    where = dump_ptx(".version 8.0\n", KEY, "refused")
    assert list(dumps.iterdir()) == [] and f"owned by uid {NOBODY}" in str(where)


def test_a_missing_dump_directory_is_created_private(monkeypatch, tmp_path: Path) -> None:
    dumps = tmp_path / "new" / "dumps"
    monkeypatch.setenv(settings.PTX_DUMP_DIR, str(dumps))
    dump_ptx(".version 8.0\n", KEY, "refused")
    assert stat.S_IMODE(dumps.stat().st_mode) == 0o700 and (dumps / f"vyre-{KEY[:16]}.ptx").exists()


def test_a_private_copy_is_refused_under_a_directory_others_may_write(monkeypatch, tmp_path: Path) -> None:
    """A private directory in a parent that others may write could be renamed away and replaced."""
    from vyre_cuda._runtime import cache as cache_mod

    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    monkeypatch.setattr(cache_mod, "_private", {})  # this process has no private directory yet
    with pytest.raises(OSError, match="writable by group or others"):
        cache_mod.private_file(b"module", ".cubin")
    shared.chmod(0o1777)  # sticky, like /tmp
    assert cache_mod.private_file(b"module", ".cubin").read_bytes() == b"module"
