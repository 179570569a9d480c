"""DiskCache: real files, real threads and processes, real failing filesystems (no mocks)."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import random
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from vyre.driver.errors import InvalidSetting
from vyre_cuda._runtime.cache import (
    DiskCache,
    configure_driver_jit_cache,
    default_cache_dir,
    jit_cache_env,
    max_bytes_from_env,
    parse_size,
)

ROOT = Path(__file__).resolve().parents[2]


def key(n: object) -> str:
    return hashlib.sha256(repr(n).encode()).hexdigest()


def payload(n: object, size: int = 1000) -> bytes:
    seed = hashlib.sha256(f"payload {n!r}".encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def entry_file(cache: DiskCache, k: str, suffix: str = ".bin") -> Path:
    return cache.root / "entries" / f"{k}{suffix}"


def run_python(code: str, **env: str) -> dict:
    """Run ``code`` in a fresh interpreter that imports this checkout; it prints one JSON line."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---- basics ------------------------------------------------------------------------------------
def test_round_trip_and_counters(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path / "c")
    assert cache.get(key(1)) is None
    assert cache.put(key(1), payload(1))
    assert cache.get(key(1)) == payload(1)
    assert cache.get(key(1), ".cubin") is None  # suffixes are separate entries
    assert cache.put(key(1), b"", ".cubin") and cache.get(key(1), ".cubin") == b""
    assert cache.counters() == {"hits": 2, "misses": 2, "evictions": 0, "corrupt": 0, "untrusted": 0,
                                "write_errors": 0}


@pytest.mark.parametrize("bad", ["../etc/passwd", "ABCDEF" * 11, "a" * 63, "", "/" + "a" * 63])
def test_keys_must_be_sha256_hex(tmp_path: Path, bad: str) -> None:
    cache = DiskCache(tmp_path)
    with pytest.raises(ValueError):
        cache.put(bad, b"x")
    with pytest.raises(ValueError):
        cache.get(bad)
    with pytest.raises(ValueError):
        cache.put(key(1), b"x", suffix="/../x")


def test_created_dirs_are_0700_and_files_0600(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path / "a" / "b")
    cache.put(key(1), payload(1))
    path = cache.store_file(b"module bytes", ".cubin")
    assert path is not None and path.read_bytes() == b"module bytes"
    for d in (tmp_path / "a", tmp_path / "a" / "b", cache.root / "entries", cache.root / "files"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    for f in (entry_file(cache, key(1)), path):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f


def test_store_file_is_content_addressed_and_verified(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    first = cache.store_file(b"ptx text", ".ptx")
    assert first is not None and first.name == hashlib.sha256(b"ptx text").hexdigest() + ".ptx"
    assert cache.store_file(b"ptx text", ".ptx") == first
    first.write_bytes(b"tampered")  # a bad file under a content name is rewritten
    assert cache.store_file(b"ptx text", ".ptx") == first and first.read_bytes() == b"ptx text"
    assert cache.counters()["corrupt"] == 1


# ---- size cap and LRU -------------------------------------------------------------------------------
def test_lru_eviction_under_the_cap(tmp_path: Path) -> None:
    size = len(entry_bytes := payload(0)) + 80  # 80-byte header
    assert len(entry_bytes) == 1000
    cache = DiskCache(tmp_path, max_bytes=4 * size - 100)  # room for three entries
    for n in "abc":
        assert cache.put(key(n), payload(n))
    assert cache.get(key("a")) == payload("a")  # a hit makes "a" the most recently used
    assert cache.put(key("d"), payload("d"))
    assert cache.get(key("b")) is None  # the least recently used went first
    assert [cache.get(key(n)) for n in "acd"] == [payload(n) for n in "acd"]
    assert cache.counters()["evictions"] == 1
    assert int(cache.info()["bytes"]) <= cache.max_bytes


def test_entry_larger_than_the_cap_is_not_stored(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=500)
    assert not cache.put(key(1), payload(1))
    assert cache.get(key(1)) is None


def test_stale_temp_files_are_swept(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    cache.put(key(0), b"x")
    stale = cache.root / "entries" / ".tmp-999-dead"
    stale.write_bytes(b"half written")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    DiskCache(tmp_path).put(key(1), b"y")  # a fresh instance scans on its first write
    assert not stale.exists()


# ---- corruption ------------------------------------------------------------------------------------
def _flip_payload_byte(blob: bytes) -> bytes:
    return blob[:-1] + bytes([blob[-1] ^ 1])


CORRUPTIONS = {
    "bad checksum": _flip_payload_byte,
    "truncated": lambda blob: blob[: len(blob) // 2],
    "empty": lambda blob: b"",
    "bad magic": lambda blob: b"XXXX" + blob[4:],
    "extra bytes": lambda blob: blob + b"\0",
    "header only": lambda blob: blob[:80],
}


@pytest.mark.parametrize("corrupt", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_corrupt_entries_are_misses_and_removed(tmp_path: Path, corrupt) -> None:
    cache = DiskCache(tmp_path)
    cache.put(key(1), payload(1))
    path = entry_file(cache, key(1))
    path.write_bytes(corrupt(path.read_bytes()))
    assert cache.get(key(1)) is None
    assert not path.exists()
    assert cache.counters()["corrupt"] == 1
    assert cache.put(key(1), payload(1)) and cache.get(key(1)) == payload(1)


def test_an_entry_copied_under_another_key_is_rejected(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    cache.put(key(1), payload(1))
    entry_file(cache, key(2)).write_bytes(entry_file(cache, key(1)).read_bytes())
    assert cache.get(key(2)) is None
    assert cache.get(key(1)) == payload(1)


# ---- symlinks and special files ---------------------------------------------------------------------
def test_symlinked_entry_is_never_followed(tmp_path: Path) -> None:
    outside = DiskCache(tmp_path / "outside")
    outside.put(key(1), payload(1))  # a perfectly valid entry, but outside the cache
    target = entry_file(outside, key(1))
    before = target.read_bytes()
    cache = DiskCache(tmp_path / "cache")
    cache.put(key(0), b"x")  # creates the directories
    link = entry_file(cache, key(1))
    link.symlink_to(target)
    assert cache.get(key(1)) is None
    assert not link.is_symlink()  # the planted link was removed
    link.symlink_to(target)
    assert cache.put(key(1), b"new")  # replaces the link itself, never writes through it
    assert not link.is_symlink() and cache.get(key(1)) == b"new"
    assert target.read_bytes() == before


def test_symlinked_subdirectory_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / "cache"
    root.mkdir()
    (root / "entries").symlink_to(elsewhere)
    cache = DiskCache(root)
    with pytest.warns(RuntimeWarning, match="cannot write the kernel cache"):
        assert not cache.put(key(1), payload(1))
    assert cache.get(key(1)) is None
    assert list(elsewhere.iterdir()) == []


def test_fifo_at_an_entry_does_not_hang(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    cache.put(key(0), b"x")
    os.mkfifo(entry_file(cache, key(1)))
    assert cache.get(key(1)) is None


# ---- concurrency -------------------------------------------------------------------------------------
def test_readers_see_the_payload_or_a_miss_while_entries_are_replaced(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=1 << 30)
    keys = [key(n) for n in range(4)]
    expected = {k: payload(k, 256 * 1024) for k in keys}
    stop = threading.Event()
    wrong: list[str] = []
    seen = {"hits": 0, "misses": 0}

    def writer() -> None:
        while not stop.is_set():
            for k in keys:
                cache.put(k, expected[k])

    def clearer() -> None:
        while not stop.is_set():
            cache.clear()
            time.sleep(0.005)

    def reader() -> None:
        reads = DiskCache(tmp_path)  # a separate instance, like another component
        while not stop.is_set():
            for k in keys:
                got = reads.get(k)
                if got is None:
                    seen["misses"] += 1
                elif got != expected[k]:
                    wrong.append(k)
                else:
                    seen["hits"] += 1

    threads = [threading.Thread(target=f) for f in (writer, writer, clearer, reader, reader, reader)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join()
    assert not wrong
    assert seen["hits"] > 0


def _process_worker(root: str, seed: int) -> dict:
    cache = DiskCache(root, max_bytes=120_000)  # smaller than the working set: evictions race too
    rng = random.Random(seed)
    wrong = hits = 0
    for _ in range(200):
        n = rng.randrange(8)
        if rng.random() < 0.5:
            cache.put(key(n), payload(n, 20_000 + n))
        else:
            got = cache.get(key(n))
            if got is not None:
                hits += 1
                wrong += got != payload(n, 20_000 + n)
    return {"wrong": wrong, "hits": hits, **cache.counters()}


def test_concurrent_processes_never_see_wrong_data(tmp_path: Path) -> None:
    with multiprocessing.get_context("fork").Pool(4) as pool:
        results = pool.starmap(_process_worker, [(str(tmp_path), seed) for seed in range(4)])
    assert sum(r["wrong"] for r in results) == 0
    assert sum(r["hits"] for r in results) > 0
    assert sum(r["evictions"] for r in results) > 0
    assert int(DiskCache(tmp_path, max_bytes=120_000).info()["bytes"]) <= 120_000 + 8 * 20_100


# ---- failing filesystems: nothing raises, one warning ---------------------------------------------------
_FAILING_WRITE = """
    import json, os, resource, signal, sys, warnings
    from vyre_cuda._runtime.cache import DiskCache
    {setup}
    cache = DiskCache(sys.argv[1] if len(sys.argv) > 1 else {root!r})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stored = [cache.put("{k}", b"x" * 65536), cache.put("{k2}", b"y" * 65536)]
        path = cache.store_file(b"z" * 65536, ".cubin")
    print(json.dumps({{"stored": stored, "got": cache.get("{k}") is not None, "path": path is not None,
                      "warnings": [str(w.message) for w in caught], **cache.counters()}}))
"""


def _failing_write(root: str, setup: str = "") -> dict:
    return run_python(_FAILING_WRITE.format(setup=setup, root=root, k=key(1), k2=key(2)))


def _assert_not_stored_one_warning(result: dict) -> None:
    assert result["stored"] == [False, False] and not result["got"] and not result["path"]
    assert result["write_errors"] == 3
    assert len(result["warnings"]) == 1 and "Fix:" in result["warnings"][0]


def test_disk_full_efbig_is_not_an_error(tmp_path: Path) -> None:
    setup = ("signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
             "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))")
    result = _failing_write(str(tmp_path / "c"), setup)
    _assert_not_stored_one_warning(result)
    assert not [p for p in (tmp_path / "c").rglob("*") if p.is_file()]  # no half-written temp files left


def test_unwritable_directory_is_not_an_error(tmp_path: Path) -> None:
    base = Path(tempfile.mkdtemp(prefix="vyre-ro-"))  # outside pytest's 0o700 tmp tree, so others can enter
    try:
        DiskCache(base / "c").put(key(9), b"existing")
        if os.geteuid() == 0:  # root ignores permission bits: run the writer as an unprivileged user
            for p in (base, base / "c"):
                p.chmod(0o755)
            setup = "os.setgid(65534); os.setuid(65534)"
        else:
            (base / "c" / "entries").chmod(0o500)
            (base / "c").chmod(0o500)
            setup = ""
        _assert_not_stored_one_warning(_failing_write(str(base / "c"), setup))
    finally:
        for p in (base, base / "c", base / "c" / "entries"):
            p.chmod(0o700)
        import shutil

        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("root", ["/sys/kernel/vyre-cuda-cache", "/proc/vyre-cuda-cache"])
def test_read_only_filesystem_is_not_an_error(root: str) -> None:
    try:
        os.mkdir(root)
    except OSError:
        pass
    else:
        os.rmdir(root)
        pytest.skip(f"{root} is writable here")
    cache = DiskCache(root)
    with pytest.warns(RuntimeWarning, match="cannot write the kernel cache") as caught:
        assert not cache.put(key(1), payload(1))
        assert not cache.put(key(2), payload(2))
        assert cache.store_file(b"abc", ".ptx") is None
    assert len(caught) == 1
    assert cache.get(key(1)) is None
    info = cache.info()
    assert info["writable"] is False and info["entries"] == 0 and info["write_errors"] == 3
    assert cache.clear() == 0


# ---- info, clear, environment -------------------------------------------------------------------------
def test_info_and_clear(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=10**6)
    for n in range(3):
        cache.put(key(n), payload(n))
    cache.store_file(b"cubin", ".cubin")
    on_disk = sum(p.stat().st_size for sub in ("entries", "files") for p in (tmp_path / sub).iterdir())
    jit = tmp_path / "driver-jit"
    (jit / "7" / "a").mkdir(parents=True, mode=0o700)
    (jit / "7" / "a" / "0f3c9e21").write_bytes(b"j" * 10)  # the driver's names: hexadecimal, and its index
    (jit / "index").write_bytes(b"i" * 4)
    notes = [tmp_path / "entries" / "README", tmp_path / "files" / "mine.txt", jit / "NOTES.txt", jit / "7" / "keep"]
    for note in notes:  # names the cache never writes: not counted, never removed
        note.write_text("a user's notes")
    info = cache.info()
    assert (info["entries"], info["files"], info["bytes"]) == (3, 1, on_disk)
    assert (info["path"], info["max_bytes"], info["writable"], info["driver_jit_bytes"]) == (
        str(tmp_path), 10**6, True, 14 + 2 * len("a user's notes"))
    assert info["problems"] == []
    assert cache.clear() == 6
    info = cache.info()
    assert (info["entries"], info["files"], info["bytes"], info["driver_jit_bytes"]) == (
        0, 0, 0, 2 * len("a user's notes"))
    assert all(note.read_text() == "a user's notes" for note in notes)
    assert not (jit / "7" / "a").exists() and not (jit / "index").exists()
    assert cache.get(key(0)) is None


def test_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("VYRE_CUDA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir().parent == tmp_path / "xdg" / "vyre-cuda"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    assert default_cache_dir().parent == Path.home() / ".cache" / "vyre-cuda"
    monkeypatch.setenv("VYRE_CUDA_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine" and DiskCache().root == tmp_path / "mine"
    assert [parse_size(s) for s in ("1024", "2M", "1GiB", "3k")] == [1024, 2 << 20, 1 << 30, 3072]
    monkeypatch.setenv("VYRE_CUDA_CACHE_MAX_BYTES", "64M")
    assert max_bytes_from_env() == 64 << 20 and DiskCache().max_bytes == 64 << 20
    monkeypatch.setenv("VYRE_CUDA_CACHE_MAX_BYTES", "lots")
    with pytest.raises(InvalidSetting):  # a bad value is an error (tests/host/test_settings.py), not ignored
        max_bytes_from_env()


def test_driver_jit_cache_goes_inside_unless_the_user_set_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path
                                                             ) -> None:
    monkeypatch.setenv("VYRE_CUDA_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.delenv("CUDA_CACHE_PATH", raising=False)
    assert jit_cache_env() == {"CUDA_CACHE_PATH": str(tmp_path / "c" / "driver-jit")}
    assert configure_driver_jit_cache() == str(tmp_path / "c" / "driver-jit")
    assert os.environ["CUDA_CACHE_PATH"] == str(tmp_path / "c" / "driver-jit")
    assert stat.S_IMODE((tmp_path / "c" / "driver-jit").stat().st_mode) == 0o700
    monkeypatch.setenv("CUDA_CACHE_PATH", "/users/choice")
    assert jit_cache_env() == {} and configure_driver_jit_cache() == "/users/choice"
