"""The kernel cache never serves planted code: trust checks, bounded reads and walks, verified bytes.

Threat model: another local user who can write the cache directory (or plant links in it). Files
owned by another user are made with ``chown``, so those tests run only as root; the permission-bit
and symlink tests run as any user. Hangs and blow-ups are checked in subprocesses with a time
limit and a memory limit.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import pytest

from vyre.driver.cache_fs import TreeWalk
from vyre_cuda._runtime import cache as cache_mod
from vyre_cuda._runtime.cache import DiskCache, configure_driver_jit_cache, private_file

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="making files owned by another user needs root (chown)")


def key(n: object) -> str:
    return hashlib.sha256(repr(n).encode()).hexdigest()


def forged_entry(k: str, payload: bytes) -> bytes:
    """An entry anyone can compute: the key and checksum come from public data."""
    digest = hashlib.sha256(payload).digest()
    return cache_mod._HEADER.pack(cache_mod.MAGIC, cache_mod.FORMAT_VERSION, 0, len(payload), bytes.fromhex(k),
                                  digest) + payload


def run_limited(code: str, timeout: float = 60, **env: str) -> dict:
    """Run ``code`` in a fresh interpreter; ``limit_memory(extra)`` caps its address space. Prints one JSON line."""
    prelude = textwrap.dedent("""
        import json, os, resource
        def limit_memory(extra):
            pages = int(open("/proc/self/statm").read().split()[0])
            cap = pages * os.sysconf("SC_PAGE_SIZE") + extra
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    """)
    done = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env}, timeout=timeout, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def cache(tmp_path: Path) -> DiskCache:
    c = DiskCache(tmp_path / "cache")
    assert c.put(key(0), b"genuine")  # creates root, entries/
    return c


# ---- point 10: bounded reads and walks ----------------------------------------------------------------
def test_a_deep_driver_jit_tree_does_not_crash_info_clear_or_doctor(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    out = run_limited(f"""
        from vyre_cuda._runtime.cache import DiskCache
        from vyre.driver import cache_fs
        import argparse, io, contextlib
        from vyre_cuda import cli
        root = {str(root)!r}
        c = DiskCache(root)
        c.put("{key(1)}", b"x")
        os.mkdir(os.path.join(root, "driver-jit"), 0o700)
        fd = os.open(os.path.join(root, "driver-jit"), os.O_RDONLY)
        for depth in range(5000):  # 10,000 characters of path: made through descriptors
            os.mkdir("a", 0o700, dir_fd=fd)
            child = os.open("a", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.close(os.open("0f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
        os.close(fd)
        limit_memory(256 << 20)
        info = c.info()
        os.environ["VYRE_CUDA_CACHE_DIR"] = root
        check = cli.check_cache()
        with contextlib.redirect_stdout(io.StringIO()) as text:
            cli.cmd_cache_info(argparse.Namespace(json=False))
            cli.cmd_cache_clear(argparse.Namespace())
        print(json.dumps({{"complete": info["driver_jit_complete"], "status": check.status, "entries": info["entries"],
                          "after": DiskCache(root).info()["entries"], "out": text.getvalue()}}))
    """, timeout=120)
    subprocess.run(["rm", "-rf", str(root)], check=True)  # shutil.rmtree recurses
    assert out["entries"] == 1 and out["after"] == 0
    assert out["complete"] is False and out["status"] == "WARN"
    assert "removed 1 file(s)" in out["out"]


def test_the_tree_walk_stops_at_its_limits(tmp_path: Path) -> None:
    for i in range(60):
        (tmp_path / f"{i:02x}").write_bytes(b"x")
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        walk = TreeWalk(max_entries=25)
        assert len(list(walk.walk(fd))) == 25 and not walk.complete
        walk = TreeWalk()
        assert len(list(walk.walk(fd))) == 60 and walk.complete
    finally:
        os.close(fd)


def test_get_checks_size_and_header_before_reading(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    out = run_limited(f"""
        import time
        from vyre_cuda._runtime.cache import DiskCache
        c = DiskCache({str(root)!r})
        c.put("{key(0)}", b"x")
        huge = os.path.join({str(root)!r}, "entries", "{key(1)}.bin")
        with open(huge, "wb") as f:  # 3 GiB, sparse: over the 1 GiB cap
            f.truncate(3 << 30)
        bad = os.path.join({str(root)!r}, "entries", "{key(2)}.bin")
        with open(bad, "wb") as f:  # 900 MiB under the cap, sparse, with no valid header
            f.truncate(900 << 20)
        limit_memory(128 << 20)
        start = time.perf_counter()
        got = [c.get("{key(1)}"), c.get("{key(2)}")]
        print(json.dumps({{"got": got, "seconds": time.perf_counter() - start, "corrupt": c.counters()["corrupt"],
                          "left": sorted(os.listdir(os.path.join({str(root)!r}, "entries")))}}))
    """)
    assert out["got"] == [None, None] and out["corrupt"] == 2
    assert out["seconds"] < 5
    assert out["left"] == [f"{key(0)}.bin"]


# ---- point 11: forged entries and untrusted directories are refused ---------------------------------------
def test_a_forged_entry_writable_by_others_is_refused(cache: DiskCache) -> None:
    path = cache.root / "entries" / f"{key(1)}.bin"
    path.write_bytes(forged_entry(key(1), b"planted cubin"))
    path.chmod(0o666)
    assert "writable by group or others" in " ".join(cache.problems())
    assert cache.get(key(1)) is None
    assert cache.counters()["untrusted"] == 1 and not path.exists()
    path.write_bytes(forged_entry(key(1), b"planted cubin"))
    path.chmod(0o600)
    assert cache.get(key(1)) == b"planted cubin"  # the same bytes, privately owned: the format itself is fine


@as_root
def test_a_forged_entry_owned_by_another_user_is_refused(cache: DiskCache) -> None:
    path = cache.root / "entries" / f"{key(1)}.bin"
    path.write_bytes(forged_entry(key(1), b"planted cubin"))
    path.chmod(0o600)
    os.chown(path, NOBODY, NOBODY)
    assert f"owned by uid {NOBODY}" in " ".join(cache.problems())
    assert cache.get(key(1)) is None and cache.counters()["untrusted"] == 1
    files = cache.root / "files"
    cache.store_file(b"module", ".ptx")
    planted = files / f"{hashlib.sha256(b'other').hexdigest()}.ptx"
    planted.write_bytes(b"other")
    os.chown(planted, NOBODY, NOBODY)
    assert cache.store_file(b"other", ".ptx") == planted  # rewritten by us, not reused
    assert planted.stat().st_uid == os.geteuid()


def _refused(cache: DiskCache, reason: str, whole: bool = True) -> None:
    """Nothing is read from or written to a refused cache (or its entries), and the refusal names ``reason``."""
    assert reason in " ".join(cache.problems())
    assert cache.get(key(0)) is None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not cache.put(key(5), b"new")
        assert (cache.store_file(b"module", ".ptx") is None) is whole
    assert "Fix:" in str(caught[0].message) and reason in str(caught[0].message)
    assert cache.info()["writable"] is False and cache.clear() == 1 - whole  # entries/ untouched


@pytest.mark.parametrize("where", ["root", "entries"])
def test_a_directory_writable_by_others_is_refused(cache: DiskCache, where: str) -> None:
    directory = cache.root if where == "root" else cache.root / "entries"
    directory.chmod(0o777)
    _refused(cache, "writable by group or others", whole=where == "root")
    assert (cache.root / "entries" / f"{key(0)}.bin").exists()  # refused, not cleared


@as_root
def test_a_directory_owned_by_another_user_is_refused(cache: DiskCache) -> None:
    os.chown(cache.root, NOBODY, NOBODY)
    _refused(cache, f"owned by uid {NOBODY}")


def test_a_symlinked_root_is_refused(tmp_path: Path, cache: DiskCache) -> None:
    link = tmp_path / "link"
    link.symlink_to(cache.root)
    linked = DiskCache(link)
    _refused(linked, "symbolic link")
    assert sorted(p.name for p in (cache.root / "entries").iterdir()) == [f"{key(0)}.bin"]
    assert cache.get(key(0)) == b"genuine"


def test_the_driver_jit_cache_is_not_pointed_at_an_untrusted_directory(monkeypatch: pytest.MonkeyPatch,
                                                                       cache: DiskCache) -> None:
    monkeypatch.delenv("CUDA_CACHE_PATH", raising=False)
    cache.root.chmod(0o777)
    assert configure_driver_jit_cache(cache.root) is None and "CUDA_CACHE_PATH" not in os.environ
    cache.root.chmod(0o700)
    assert configure_driver_jit_cache(cache.root) == str(cache.root / "driver-jit")


def test_doctor_and_cache_info_report_a_refused_cache(monkeypatch: pytest.MonkeyPatch, cache: DiskCache,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from vyre_cuda import cli

    monkeypatch.setenv("VYRE_CUDA_CACHE_DIR", str(cache.root))
    assert cli.check_cache().status == cli.OK
    (cache.root / "entries").chmod(0o775)
    check = cli.check_cache()
    assert check.status == cli.FAIL and "writable by group or others" in check.detail and "chmod" in check.fix
    cli.cmd_cache_info(argparse.Namespace(json=False))
    assert "refused" in capsys.readouterr().out


# ---- loading exactly the verified bytes -------------------------------------------------------------------
def test_a_symlink_swapped_in_is_never_followed(tmp_path: Path, cache: DiskCache) -> None:
    """get() returns bytes verified through one O_NOFOLLOW descriptor, whatever happens to the path meanwhile."""
    k = key(7)
    assert cache.put(k, b"genuine kernel")
    outside = tmp_path / "outside.bin"
    outside.write_bytes(forged_entry(k, b"planted kernel"))
    outside.chmod(0o600)
    entry = cache.root / "entries" / f"{k}.bin"
    genuine = entry.read_bytes()
    stop = threading.Event()

    def swapper() -> None:
        tmp = entry.with_name(".swap")
        while not stop.is_set():
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(outside)
            os.replace(tmp, entry)  # the symlink is in place...
            tmp.write_bytes(genuine)
            tmp.chmod(0o600)
            os.replace(tmp, entry)  # ...and gone again

    thread = threading.Thread(target=swapper)
    thread.start()
    seen = set()
    try:
        for _ in range(3000):
            seen.add(cache.get(k))
    finally:
        stop.set()
        thread.join()
    assert b"planted kernel" not in seen and b"genuine kernel" in seen


def test_private_file_is_a_copy_nobody_else_can_replace(tmp_path: Path) -> None:
    path = private_file(b"verified cubin", ".cubin")
    assert path.read_bytes() == b"verified cubin" and path.name == hashlib.sha256(b"verified cubin").hexdigest() + \
        ".cubin"
    st = path.parent.stat()
    assert st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700
    assert private_file(b"verified cubin", ".cubin") == path
    out = run_limited("""
        from vyre_cuda._runtime.cache import private_file
        parent = private_file(b"a", ".ptx")
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(w, str(private_file(b"a", ".ptx")).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        child = os.read(r, 4096).decode()
        print(json.dumps({"parent": str(parent), "child": child, "exists": parent.exists()}))
    """)
    assert out["exists"] and Path(out["parent"]).parent != Path(out["child"]).parent  # a fork gets its own
    assert not Path(out["parent"]).parent.exists()  # removed when the process ended
