"""The on-disk kernel cache: content-addressed, checksummed, atomic, size-capped (LRU), never fatal.

Layout under the root (``VYRE_CUDA_CACHE_DIR``, default ``$XDG_CACHE_HOME/vyre-cuda/<version>``)::

    entries/<key><suffix>   checksummed entries (header + payload), e.g. linked cubins
    files/<sha256><suffix>  raw files named by their content (``store_file``; no loader hands these to the driver)
    driver-jit/             the CUDA driver's own JIT cache (``CUDA_CACHE_PATH``), capped by the driver

Writes go to a temporary file in the same directory, then ``os.replace``. Reads check the size
against the cap and the header (magic, format version, key, length) before reading the payload,
then its SHA-256; anything that does not verify is a miss and is removed. Every file is opened
relative to a directory descriptor with ``O_NOFOLLOW``, so a planted symlink is never followed,
and ``get`` returns the bytes it verified through that one descriptor.

Like ssh with its keys, the cache refuses a root that is a symlink, and directories or entries
that another user owns or that group or others may write (``cache_fs.trust_problem``): anyone who
can write there could plant a kernel whose key and checksum are computed from public data. The
root's parents must be this user's or root's and not writable by others unless sticky
(``cache_fs.parent_problem``), and every entry of ``driver-jit/`` is checked (``tree_problems``)
before the driver is pointed there.
``problems()`` lists what was refused (``vyre doctor`` and ``vyre cache info`` show it).
``clear`` and eviction touch only names the cache writes itself (``<sha256>.<suffix>`` and its
temporary files; in ``driver-jit/`` the driver's ``index`` and hexadecimal names).

A write that fails (read-only, full, no permission, refused) is counted and warned about once,
never raised: the cache only ever makes things faster.

Loaders: load ``get(key, suffix)``'s bytes directly (``cuModuleLoadData``); never a path to an
entry, which could be replaced between the check and the load. ``private_file(data, suffix)``
gives a path for APIs that need one: a copy in a 0o700 directory that only this process writes.
"""

from __future__ import annotations

import atexit
import errno
import functools
import hashlib
import os
import re
import secrets
import shutil
import stat
import struct
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple, TypedDict

from vyre.driver.cache_fs import (
    TreeWalk,
    UntrustedCache,
    open_private_dir,
    open_trusted_dir,
    parent_problem,
    tree_problems,
    trust_problem,
)
from vyre.settings import user_cache_base
from vyre_cuda._runtime import settings
from vyre_cuda._runtime.settings import parse_size

ENV_DIR = settings.CACHE_DIR
ENV_MAX_BYTES = settings.CACHE_MAX_BYTES
DEFAULT_MAX_BYTES = 1 << 30
MAGIC = b"VYRC"
FORMAT_VERSION = 1
ENTRIES, FILES, DRIVER_JIT = "entries", "files", "driver-jit"

_HEADER = struct.Struct("<4sHHQ32s32s")  # magic, format version, flags, payload length, key, sha256(payload)
_KEY = re.compile(r"[0-9a-f]{64}")
_SUFFIX = re.compile(r"\.[a-z0-9]{1,8}")
_TMP_PREFIX = ".tmp-"
#: every name the cache itself writes in entries/ and files/: content or key names and temporary files
_OWN_NAME = re.compile(r"[0-9a-f]{64}\.[a-z0-9]{1,8}|\.tmp-(?:probe-)?[0-9]+-[0-9a-f]+")
#: names the CUDA driver writes in its JIT cache (an ``index`` file, hexadecimal directories and files)
_DRIVER_NAME = re.compile(r"index|[0-9a-f]{1,64}")
_STALE_TMP_NS = 3600 * 10**9
_LOW_WATER = 0.9  # evict down to 90% of the cap so that not every write rescans
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)  # POSIX; the cache needs dir_fd support
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | _NOFOLLOW  # NONBLOCK: a planted FIFO can't hang us
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW


@functools.cache
def cache_version() -> str:
    """The vyre_cuda version that namespaces the default cache directory and every cache key.

    vyre and vyre_cuda ship in one distribution, so this is ``vyre.__version__``: a constant, read
    without ``importlib.metadata`` (whose lookup alone cost a warm start ~0.5 ms).
    """
    from vyre.version import __version__

    return str(__version__).replace(os.sep, "_")


def default_cache_dir() -> Path:
    """``VYRE_CUDA_CACHE_DIR``, else ``$XDG_CACHE_HOME/vyre-cuda/<version>`` (XDG default ``~/.cache``)."""
    explicit = settings.cache_dir()
    if explicit is not None:
        return explicit
    return user_cache_base("vyre-cuda") / "vyre-cuda" / cache_version()


def max_bytes_from_env() -> int:
    """The size cap: ``VYRE_CUDA_CACHE_MAX_BYTES`` (bytes, or with a K/M/G suffix; ``InvalidSetting`` if
    malformed), default 1 GiB."""
    cap = settings.cache_max_bytes()
    return DEFAULT_MAX_BYTES if cap is None else cap


def jit_cache_env(root: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """The environment that points the driver JIT cache inside ours; empty if the user set ``CUDA_CACHE_PATH``."""
    if os.environ.get("CUDA_CACHE_PATH"):
        return {}
    return {"CUDA_CACHE_PATH": str(Path(root) if root is not None else default_cache_dir()) + os.sep + DRIVER_JIT}


def configure_driver_jit_cache(root: str | os.PathLike[str] | None = None) -> str | None:
    """Apply ``jit_cache_env`` to ``os.environ``; call before the CUDA driver initialises. Returns the path in use."""
    for name, path in jit_cache_env(root).items():
        try:  # the driver loads what it finds there: only a tree nobody else can write
            if DiskCache(Path(path).parent).driver_jit_problems(create=True):
                return None
        except OSError:
            return None  # an unusable or untrusted directory: keep the driver's default
        os.environ[name] = path
    return os.environ.get("CUDA_CACHE_PATH")


def _make_dirs(path: Path) -> None:
    """Create ``path`` and missing parents with mode 0o700."""
    missing = []
    while not path.exists():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for part in reversed(missing):
        try:
            os.mkdir(part, 0o700)
        except FileExistsError:
            pass


def _pack(key: str, payload: bytes) -> bytes:
    digest = hashlib.sha256(payload).digest()
    return _HEADER.pack(MAGIC, FORMAT_VERSION, 0, len(payload), bytes.fromhex(key), digest) + payload


def _read_entry_payload(fd: int, key: str, size: int) -> bytes | None:
    """The payload of the ``size``-byte entry open at ``fd`` if it is a complete, intact entry for ``key``.

    The header is read and checked before the payload, so a bad or oversized file costs one small read.
    """
    if size < _HEADER.size:
        return None
    header = _read_all(fd, _HEADER.size - 1)
    if len(header) != _HEADER.size:
        return None
    magic, version, _flags, length, stored_key, digest = _HEADER.unpack(header)
    if (magic, version, stored_key) != (MAGIC, FORMAT_VERSION, bytes.fromhex(key)) or length != size - _HEADER.size:
        return None
    payload = _read_all(fd, length)
    if len(payload) != length:
        return None
    return payload if hashlib.sha256(payload).digest() == digest else None


def _read_all(fd: int, size: int) -> bytes:
    """Up to ``size + 1`` bytes (one more than expected, so that growth shows up as a bad length)."""
    chunks, left = [], size + 1
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _touch(fd: int) -> None:
    """Mark an entry as recently used (fine-grained clock, so LRU order is exact)."""
    now = time.time_ns()
    try:
        os.utime(fd, ns=(now, now))
    except OSError:
        pass  # read-only cache: LRU order just doesn't advance


def write_atomic(dir_fd: int, name: str, data: bytes) -> None:
    """Write ``name`` in ``dir_fd`` as a whole or not at all (0o600 temp file + ``os.replace``)."""
    tmp = f"{_TMP_PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
    fd = os.open(tmp, _WRITE_FLAGS, 0o600, dir_fd=dir_fd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            _touch(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        _unlink(dir_fd, tmp)
        raise


def _unlink(dir_fd: int, name: str) -> bool:
    try:
        os.unlink(name, dir_fd=dir_fd)
        return True
    except OSError:
        return False


class _File(NamedTuple):
    mtime_ns: int
    size: int
    sub: str
    name: str


class CacheInfo(TypedDict):
    """What ``DiskCache.info`` reports (``vyre cache info --json`` prints it as is)."""

    path: str
    entries: int
    files: int
    bytes: int
    max_bytes: int
    driver_jit_path: str
    driver_jit_bytes: int
    writable: bool
    driver_jit_complete: bool
    problems: list[str]
    hits: int
    misses: int
    evictions: int
    corrupt: int
    untrusted: int
    write_errors: int


class DiskCache:
    """A directory of cached blobs shared by threads and processes; see the module docstring."""

    def __init__(self, root: str | os.PathLike[str] | None = None, max_bytes: int | None = None) -> None:
        self.root = Path(root).expanduser() if root is not None else default_cache_dir()
        self.max_bytes = max_bytes_from_env() if max_bytes is None else int(max_bytes)
        self._lock = threading.Lock()
        self._counts: dict[str, int] = dict.fromkeys(
            ("hits", "misses", "evictions", "corrupt", "untrusted", "write_errors"), 0)
        self._approx_bytes: int | None = None  # unknown until the first scan
        self._warned = False
        self._parents_trusted = False  # parent_problem found nothing (checked until it does)

    def __repr__(self) -> str:
        return f"DiskCache({str(self.root)!r}, max_bytes={self.max_bytes})"

    # ---- entries ------------------------------------------------------------------------
    def get(self, key: str, suffix: str = ".bin") -> bytes | None:
        """The payload stored under ``key``, or None (missing, corrupt, untrusted, unreadable: all misses).

        The bytes returned are the very bytes verified, read through one ``O_NOFOLLOW`` descriptor.
        """
        name = _entry_name(key, suffix)
        try:
            with self._dir(ENTRIES, create=False) as dir_fd:
                payload = self._read_entry(dir_fd, name, key)
        except OSError:
            payload = None
        self._count("hits" if payload is not None else "misses")
        return payload

    def put(self, key: str, payload: bytes, suffix: str = ".bin") -> bool:
        """Store ``payload`` under ``key``; False (never an exception) when it could not be stored."""
        blob = _pack(key, bytes(payload))
        name = _entry_name(key, suffix)
        if len(blob) > self.max_bytes:
            return False
        return self._write(ENTRIES, name, blob)

    def discard(self, key: str, suffix: str = ".bin") -> None:
        """Remove an entry (e.g. one the driver refused to load)."""
        name = _entry_name(key, suffix)
        try:
            with self._dir(ENTRIES, create=False) as dir_fd:
                _unlink(dir_fd, name)
        except OSError:
            pass

    def store_file(self, data: bytes, suffix: str) -> Path | None:
        """A shared file holding ``data`` (named by its SHA-256); None if unwritable.

        Whoever opens the path later opens it again: load ``data`` itself, or use ``private_file``.
        """
        digest = hashlib.sha256(data).hexdigest()
        name = _entry_name(digest, suffix)
        try:
            with self._dir(FILES, create=True) as dir_fd:
                if self._file_matches(dir_fd, name, digest):
                    return self.root / FILES / name
                if len(data) > self.max_bytes:
                    return None
                write_atomic(dir_fd, name, data)
        except OSError as exc:
            self._write_failed(exc)
            return None
        self._after_write(len(data))
        return self.root / FILES / name

    # ---- reporting and maintenance -------------------------------------------------------
    def counters(self) -> dict[str, int]:
        """hits, misses, evictions, corrupt (bad files removed), untrusted (files refused and removed),
        write_errors (entries not stored)."""
        with self._lock:
            return dict(self._counts)

    def info(self) -> CacheInfo:
        """Path, entry/file counts, bytes, cap, driver JIT cache size (and whether the bounded walk saw all
        of it), writability, problems (see ``problems``) and counters."""
        files = self._scan(clean=False)
        jit_bytes, jit_complete = self._driver_jit_usage()
        counts = self.counters()
        return CacheInfo(
            path=str(self.root),
            entries=sum(f.sub == ENTRIES for f in files),
            files=sum(f.sub == FILES for f in files),
            bytes=sum(f.size for f in files),
            max_bytes=self.max_bytes,
            driver_jit_path=str(self.root / DRIVER_JIT),
            driver_jit_bytes=jit_bytes,
            writable=self.writable(),
            driver_jit_complete=jit_complete,
            problems=self.problems(),
            hits=counts["hits"], misses=counts["misses"], evictions=counts["evictions"], corrupt=counts["corrupt"],
            untrusted=counts["untrusted"], write_errors=counts["write_errors"],
        )

    def problems(self) -> list[str]:
        """Why (parts of) this cache are refused: a symlinked root, directories or entries that another
        user owns or that group or others may write. Empty when the cache is trusted (or absent)."""
        found: list[str] = []
        try:
            os.close(self._open_root(create=False))
        except FileNotFoundError:
            return found
        except OSError as exc:
            return [exc.strerror or str(exc)]
        for sub in (ENTRIES, FILES, DRIVER_JIT):
            try:
                with self._dir(sub, create=False) as dir_fd:
                    if sub == DRIVER_JIT:
                        found += tree_problems(dir_fd, f"the cache directory {self.root / sub}")
                        continue
                    for name, st in _listing(dir_fd):
                        problem = trust_problem(st, f"{sub}/{name}") if _OWN_NAME.fullmatch(name) else None
                        if problem is not None:
                            found.append(problem)
            except FileNotFoundError:
                continue
            except OSError as exc:
                found.append(exc.strerror or str(exc))
        return found

    def writable(self) -> bool:
        """Whether a file can really be created here now (as root, permission bits say little)."""
        try:
            with self._dir(ENTRIES, create=True) as dir_fd:
                tmp = f"{_TMP_PREFIX}probe-{os.getpid()}-{secrets.token_hex(4)}"
                os.close(os.open(tmp, _WRITE_FLAGS, 0o600, dir_fd=dir_fd))
                _unlink(dir_fd, tmp)
            return True
        except OSError:
            return False

    def clear(self) -> int:
        """Remove every entry, module file and driver JIT file; returns the number of files removed.

        Only names the cache (or, in ``driver-jit/``, the driver) writes are removed: anything else
        someone keeps there stays, and nothing is removed from a refused (untrusted) cache.
        """
        removed = 0
        fresh = time.time_ns() - _STALE_TMP_NS
        for sub in (ENTRIES, FILES):
            try:
                with self._dir(sub, create=False) as dir_fd:
                    for name, st in _listing(dir_fd):
                        if stat.S_ISDIR(st.st_mode) or not _OWN_NAME.fullmatch(name):
                            continue
                        if name.startswith(_TMP_PREFIX) and st.st_mtime_ns > fresh:
                            continue  # another writer's file in flight: its rename would fail
                        removed += _unlink(dir_fd, name)
            except OSError:
                continue
        removed += self._clear_driver_jit()
        with self._lock:
            self._approx_bytes = None
        return removed

    # ---- internals -------------------------------------------------------------------------
    def _open_root(self, create: bool) -> int:
        """A descriptor of the root: a real directory (not a symlink) that this user owns and only they write."""
        if create and not os.path.lexists(self.root):
            _make_dirs(self.root)
        if os.path.islink(self.root):
            raise UntrustedCache(f"the cache directory {self.root} is a symbolic link")
        if not self._parents_trusted:
            problem = parent_problem(self.root)
            if problem is not None:
                raise UntrustedCache(problem)
            self._parents_trusted = True  # only their owners (this user, root) could change that
        return open_trusted_dir(self.root, f"the cache directory {self.root}")  # O_NOFOLLOW: no swap after the check

    def ensure_trusted_dir(self, sub: str) -> None:
        """Create ``root/sub`` if missing; ``OSError`` unless it is a real directory that passes the trust check."""
        with self._dir(sub, create=True):
            pass

    def driver_jit_problems(self, create: bool = False) -> list[str]:
        """Why the driver JIT tree must not be used (``tree_problems`` of every entry in it); ``OSError`` when
        the directory itself is missing (unless ``create``) or refused."""
        with self._dir(DRIVER_JIT, create=create) as top:
            return tree_problems(top, f"the cache directory {self.root / DRIVER_JIT}")

    @contextmanager
    def _dir(self, sub: str, create: bool) -> Iterator[int]:
        """A descriptor of ``root/sub``: a real directory (never a symlink) that passes ``trust_problem``."""
        root_fd = self._open_root(create)
        try:
            if create:
                try:
                    os.mkdir(sub, 0o700, dir_fd=root_fd)
                except FileExistsError:
                    pass
            fd = open_trusted_dir(sub, f"the cache directory {self.root / sub}", dir_fd=root_fd)
        finally:
            os.close(root_fd)
        try:
            yield fd
        finally:
            os.close(fd)

    def _driver_jit_usage(self) -> tuple[int, bool]:
        """Bytes of the driver JIT cache and whether the bounded walk saw all of it."""
        walk = TreeWalk()
        try:
            with self._dir(DRIVER_JIT, create=False) as top:
                total = sum(st.st_size for _, _, st in walk.walk(top) if not stat.S_ISDIR(st.st_mode))
        except OSError:
            return 0, True
        return total, walk.complete

    def _clear_driver_jit(self) -> int:
        """Remove the driver's files (and emptied directories) from ``driver-jit/``; the number of files removed."""
        removed = 0
        try:
            with self._dir(DRIVER_JIT, create=False) as top:
                for parent, name, st in TreeWalk().walk(top, descend=_DRIVER_NAME.fullmatch):
                    if not _DRIVER_NAME.fullmatch(name):
                        continue
                    if stat.S_ISDIR(st.st_mode):
                        try:
                            os.rmdir(name, dir_fd=parent)
                        except OSError:
                            pass  # still holds something that is not the driver's, or too deep to walk
                    else:
                        removed += _unlink(parent, name)
        except OSError:
            pass
        return removed

    def _read_entry(self, dir_fd: int, name: str, key: str) -> bytes | None:
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # a symlink where an entry should be: never followed, removed
                self._remove_bad(dir_fd, name, None)
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None
            if trust_problem(st, name):
                self._remove_bad(dir_fd, name, st, "untrusted")
                return None
            payload = _read_entry_payload(fd, key, st.st_size) if st.st_size <= self.max_bytes else None
            if payload is None:
                self._remove_bad(dir_fd, name, st)
                return None
            _touch(fd)
            return payload
        finally:
            os.close(fd)

    def _file_matches(self, dir_fd: int, name: str, digest: str) -> bool:
        """True if ``name`` is a regular file whose content hashes to ``digest`` (a bad one is removed)."""
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self._remove_bad(dir_fd, name, None)
            return False
        try:
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode) and trust_problem(st, name):
                self._remove_bad(dir_fd, name, st, "untrusted")
                return False
            if stat.S_ISREG(st.st_mode) and st.st_size <= self.max_bytes \
                    and hashlib.sha256(_read_all(fd, st.st_size)).hexdigest() == digest:
                _touch(fd)
                return True
            self._remove_bad(dir_fd, name, st)
            return False
        finally:
            os.close(fd)

    def _remove_bad(self, dir_fd: int, name: str, seen: os.stat_result | None, counter: str = "corrupt") -> None:
        """Remove a corrupt (or untrusted) entry, unless another writer has meanwhile replaced it with a new file."""
        self._count(counter)
        try:
            now = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return
        if seen is None or (now.st_ino, now.st_dev) == (seen.st_ino, seen.st_dev):
            _unlink(dir_fd, name)

    def _write(self, sub: str, name: str, blob: bytes) -> bool:
        try:
            with self._dir(sub, create=True) as dir_fd:
                write_atomic(dir_fd, name, blob)
        except OSError as exc:
            self._write_failed(exc)
            return False
        self._after_write(len(blob))
        return True

    def _write_failed(self, exc: OSError) -> None:
        self._count("write_errors")
        with self._lock:
            warn, self._warned = not self._warned, True
        if warn:
            reason = exc.strerror or type(exc).__name__
            warnings.warn(f"vyre-cuda: cannot write the kernel cache at {self.root} ({reason}); kernels will be "
                          f"compiled again in every process. Fix: set {ENV_DIR} to a writable directory with free "
                          "space.", RuntimeWarning, stacklevel=4)

    def _after_write(self, nbytes: int) -> None:
        with self._lock:
            if self._approx_bytes is not None:
                self._approx_bytes += nbytes
            over = self._approx_bytes is None or self._approx_bytes > self.max_bytes
        if over:
            self._enforce_cap()

    def _enforce_cap(self) -> None:
        """Evict least recently used files until the total is under the low-water mark."""
        files = self._scan(clean=True)
        total = sum(f.size for f in files)
        if total > self.max_bytes:
            target = int(self.max_bytes * _LOW_WATER)
            for f in sorted(files):
                if total <= target:
                    break
                if self._evict(f):
                    self._count("evictions")
                total -= f.size
        with self._lock:
            self._approx_bytes = total

    def _evict(self, f: _File) -> bool:
        try:
            with self._dir(f.sub, create=False) as dir_fd:
                return _unlink(dir_fd, f.name)
        except OSError:
            return False

    def _scan(self, clean: bool) -> list[_File]:
        """Regular cache files; with ``clean``, also remove symlinks and stale temp files."""
        found: list[_File] = []
        now = time.time_ns()
        for sub in (ENTRIES, FILES):
            try:
                with self._dir(sub, create=False) as dir_fd:
                    for name, st in _listing(dir_fd):
                        if not _OWN_NAME.fullmatch(name):
                            continue  # not ours: never counted, evicted or removed
                        if name.startswith(_TMP_PREFIX):
                            if clean and now - st.st_mtime_ns > _STALE_TMP_NS:
                                _unlink(dir_fd, name)
                        elif stat.S_ISREG(st.st_mode):
                            found.append(_File(st.st_mtime_ns, st.st_size, sub, name))
                        elif stat.S_ISLNK(st.st_mode) and clean:
                            _unlink(dir_fd, name)
            except OSError:
                continue
        return found

    def _count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1


def _entry_name(key: str, suffix: str) -> str:
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise ValueError(f"cache keys are lowercase hex SHA-256 digests, not {key!r}")
    if not _SUFFIX.fullmatch(suffix):
        raise ValueError(f"bad cache file suffix {suffix!r}")
    return key + suffix


def _listing(dir_fd: int) -> Iterator[tuple[str, os.stat_result]]:
    """Names and lstat results in a directory; files that vanish meanwhile are skipped."""
    for entry in os.scandir(dir_fd):
        try:
            yield entry.name, entry.stat(follow_symlinks=False)
        except OSError:
            continue




_PRIVATE_LOCK = threading.Lock()
_private: dict[int, str] = {}  # pid -> this process's private directory


def private_file(data: bytes, suffix: str) -> Path:
    """A path to exactly ``data`` in a 0o700 directory that only this process writes (removed at exit).

    For loaders that must hand a path to an API that opens it (``cupy.RawModule(path=...)``):
    unlike a shared cache file, nobody else can replace it between the check and the load (the
    directory and its parents pass ``open_private_dir``). Raises ``OSError`` when no such file can be
    written (e.g. TMPDIR is full) or the directory is refused (``UntrustedCache``).
    """
    name = _entry_name(hashlib.sha256(data).hexdigest(), suffix)
    directory = _private_dir()
    dir_fd = open_private_dir(directory, f"the private module directory {directory}")
    try:
        try:
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            write_atomic(dir_fd, name, bytes(data))
    finally:
        os.close(dir_fd)
    return Path(directory) / name


def _private_dir() -> str:
    """This process's private directory (``mkdtemp``: 0o700, a fresh one after a fork)."""
    pid = os.getpid()
    with _PRIVATE_LOCK:
        if pid not in _private:
            _private[pid] = tempfile.mkdtemp(prefix="vyre-cuda-private-")
            atexit.register(_remove_private_dir, pid)
        return _private[pid]


def _remove_private_dir(pid: int) -> None:
    if os.getpid() == pid:  # a forked child inherits the handler, not the directory
        shutil.rmtree(_private.pop(pid, ""), ignore_errors=True)


_DEFAULTS: dict[tuple[str, int], DiskCache] = {}
_DEFAULTS_LOCK = threading.Lock()


def default_disk_cache() -> DiskCache:
    """The process-wide cache for the current environment (one instance per directory and cap)."""
    root, cap = default_cache_dir(), max_bytes_from_env()
    with _DEFAULTS_LOCK:
        if (str(root), cap) not in _DEFAULTS:
            _DEFAULTS[str(root), cap] = DiskCache(root, cap)
        return _DEFAULTS[str(root), cap]


__all__ = [
    "DEFAULT_MAX_BYTES", "ENV_DIR", "ENV_MAX_BYTES", "DiskCache", "cache_version", "configure_driver_jit_cache",
    "default_cache_dir", "default_disk_cache", "jit_cache_env", "max_bytes_from_env", "parse_size", "private_file",
    "write_atomic",
]
