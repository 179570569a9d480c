"""The specialisation cache: the lowered programs of ``@vyre.kernel`` functions defined inside the
``vyre`` package (``vyre.lib``), kept on disk in the wire format so that a new process reads a
program instead of lowering it again (lowering costs milliseconds per variant; see docs/kernels.md).

Key: SHA-256 of the kernel's module and qualified name, its decorator options, its ``Const`` values,
the values its free names find in its closure and in the locals of the function that defines it
(a library factory's monoid, predicate, buffer specs and helpers: described by ``describe``, which
refuses anything it cannot spell out exactly, and then nothing is cached), and a fingerprint of the
package's sources (path, size and modification time of every ``vyre/**/*.py``, read once per
process), so an edited or upgraded vyre never meets an old entry. Module constants read inside a
kernel body are covered by that fingerprint only (the library passes its knobs as ``Const`` values
instead): an experiment that sets one at run time must turn the cache off, or it reads the
program lowered with the old value.
Kernels defined elsewhere are never cached: their sources are not fingerprinted.

Trust: the directory (``VYRE_SPEC_CACHE_DIR``) and each entry are used only when this user alone can
write them (``vyre.driver.cache_fs``, as for the kernel cache); an entry is read through one
``O_NOFOLLOW`` descriptor, decoded by ``vyre.ir.wire.from_wire`` (size, magic, digest, bounds;
not the canonical re-encoding, which the validator makes redundant here) and validated. An entry
that fails any of it is a miss: the program is lowered and the entry written over (one that does
not decode is removed at once). ``VYRE_SPEC_CACHE=0`` turns the cache off. A failed write
(read-only or full disk) is silently skipped: the cache only saves time.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import functools
import hashlib
import os
import secrets
import stat
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from vyre import settings
from vyre.driver.cache_fs import UntrustedCache, open_private_dir, trust_problem
from vyre.driver.errors import ValidationError
from vyre.ir.program import Program
from vyre.ir.wire import from_wire
from vyre.version import __version__

#: bump when the key's layout or the meaning of an entry changes
FORMAT = b"vyre-spec-cache/1"
#: an entry larger than this is not read (library programs are tens of KiB)
MAX_ENTRY_BYTES = 4 * 1024 * 1024
#: how deep ``describe`` follows containers, dataclass fields and closures
MAX_DEPTH = 8
_PACKAGE = Path(__file__).resolve().parents[1]
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | _NOFOLLOW
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
_SUFFIX = ".vyrew"


class Undescribable(Exception):
    """A value the key cannot spell out exactly: the kernel is not cached."""


@functools.cache
def source_fingerprint() -> bytes:
    """SHA-256 over the relative path, size and modification time of every ``.py`` file of the package."""
    h = hashlib.sha256()
    stack = [str(_PACKAGE)]
    files = []
    while stack:
        with os.scandir(stack.pop()) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__":
                    stack.append(entry.path)
                elif entry.name.endswith(".py"):
                    st = entry.stat()
                    files.append(f"{os.path.relpath(entry.path, _PACKAGE)}\0{st.st_size}\0{st.st_mtime_ns}\n")
    for line in sorted(files):
        h.update(line.encode())
    return h.digest()


def describe(value: object, depth: int = 0) -> str:
    """An exact text of ``value`` for the key: numbers, strings, containers, enums, dataclasses,
    classes, modules and functions of the vyre package (name and closure); ``Undescribable`` else."""
    if depth > MAX_DEPTH:
        raise Undescribable("too deep")
    d = depth + 1
    if value is None or isinstance(value, (bool, int, str, bytes)):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, float):
        return f"float:{value.hex()}"
    if isinstance(value, enum.Enum):
        return f"enum:{_qualified(type(value))}.{value.name}"
    if isinstance(value, (tuple, list, frozenset, set)):
        parts = sorted(describe(v, d) for v in value) if isinstance(value, (set, frozenset)) else \
            [describe(v, d) for v in value]
        return f"{type(value).__name__}({','.join(parts)})"
    if isinstance(value, dict):
        return "dict(" + ",".join(sorted(f"{describe(k, d)}={describe(v, d)}" for k, v in value.items())) + ")"
    if isinstance(value, type):
        return f"class:{_qualified(value)}"
    if isinstance(value, types.ModuleType):
        return f"module:{_own(value.__name__)}"
    if isinstance(value, types.FunctionType):
        cells = [describe(c.cell_contents, d) for c in value.__closure__ or ()]
        return f"function:{_own(value.__module__)}.{value.__qualname__}[{','.join(cells)}]" \
               f"{describe(value.__defaults__, d)}"
    if dataclasses.is_dataclass(value):
        fields = ",".join(f"{f.name}={describe(getattr(value, f.name), d)}" for f in dataclasses.fields(value))
        return f"{_qualified(type(value))}({fields})"
    slots = getattr(type(value), "__slots__", None)
    if isinstance(slots, tuple) and not hasattr(value, "__dict__"):  # a small vyre value class (vyre.u32)
        fields = ",".join(f"{n}={describe(getattr(value, n, None), d)}" for n in slots)
        return f"{_qualified(type(value))}({fields})"
    fn = getattr(value, "fn", None)  # a @vyre.func helper: its function
    if isinstance(fn, types.FunctionType) and type(value).__module__ == "vyre.frontend.kernel":
        return f"func:{describe(fn, d)}"
    raise Undescribable(type(value).__name__)


def _qualified(cls: type) -> str:
    return f"{_own(cls.__module__)}.{cls.__qualname__}"


def _own(module: str) -> str:
    """``module`` when it is part of vyre (so the fingerprint covers it) or the standard library's
    ``builtins``/``typing``; ``Undescribable`` else (its code may change without the key seeing it)."""
    if module in ("builtins", "typing") or module == "vyre" or module.startswith("vyre."):
        return module
    raise Undescribable(module)


class KernelKey:
    """The part of a kernel's key that is the same for every specialisation; ``program`` adds the values."""

    def __init__(self, digest: bytes) -> None:
        self.digest = digest

    def entry(self, values: Mapping[str, Any]) -> str:
        """The file name of the entry for these Const values."""
        return hashlib.sha256(self.digest + describe(sorted(values.items())).encode()).hexdigest() + _SUFFIX

    def program(self, values: Mapping[str, Any], lower: Callable[[], Program],
                check: Callable[[Program], bool]) -> Program:
        """The cached program for ``values`` when there is a sound one (``check``: it validates), else
        ``lower()``, written to the cache for the next process."""
        name = self.entry(values)
        root = settings.spec_cache_dir(__version__)
        program = _read(root, name)
        if program is not None and check(program):
            return program
        program = lower()  # a miss, or an entry that failed validation: the write replaces it
        _write(root, name, program.to_wire())
        return program


def kernel_key(fn: Any, fndef: ast.FunctionDef, enclosing: Mapping[str, Any] | None,
               options: object) -> KernelKey | None:
    """The key of a kernel defined in the vyre package, None when it is not cached (defined
    elsewhere, a free name's value that ``describe`` refuses, or the cache turned off)."""
    if not settings.spec_cache_enabled() or fn is None:
        return None
    filename = getattr(getattr(fn, "__code__", None), "co_filename", "")
    if not filename or not Path(filename).resolve().is_relative_to(_PACKAGE):
        return None
    closure = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            closure[name] = cell.cell_contents
        except ValueError:
            return None
    local = {**(enclosing or {}), **closure}
    module = fn.__globals__
    # module globals (a module-level kernel's "enclosing" frame is its module) come from the sources
    used = sorted({n.id for n in ast.walk(fndef) if isinstance(n, ast.Name) and n.id in local
                   and not (n.id in module and module[n.id] is local[n.id])})
    try:
        env = describe([(n, local[n]) for n in used])
        opts = describe(options)
    except Undescribable:
        return None
    text = "\0".join((fn.__module__, fn.__qualname__, opts, env))
    return KernelKey(hashlib.sha256(FORMAT + source_fingerprint() + text.encode()).digest())


def _read(root: Path, name: str) -> Program | None:
    """The program in entry ``name`` when the directory and the entry are trusted and it decodes; else
    None (a bad entry is removed)."""
    try:
        dir_fd = open_private_dir(root, f"the specialisation cache {root}")
    except (OSError, UntrustedCache):
        return None
    try:
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or trust_problem(st, name) or st.st_size > MAX_ENTRY_BYTES:
                data = None
            else:
                data = os.read(fd, MAX_ENTRY_BYTES + 1)
        finally:
            os.close(fd)
        try:
            if data is not None and len(data) == st.st_size:
                return from_wire(data, canonical=False)  # validated next, by the caller
        except ValidationError:
            pass
        _unlink(dir_fd, name)
        return None
    finally:
        os.close(dir_fd)


def _write(root: Path, name: str, data: bytes) -> None:
    """Store ``data`` as entry ``name``, whole or not at all (a 0o600 temporary file renamed into place)."""
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        dir_fd = open_private_dir(root, f"the specialisation cache {root}")
    except (OSError, UntrustedCache):
        return
    tmp = f".tmp-{os.getpid()}-{secrets.token_hex(6)}"
    try:
        fd = os.open(tmp, _WRITE_FLAGS, 0o600, dir_fd=dir_fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError:
        _unlink(dir_fd, tmp)
    finally:
        os.close(dir_fd)


def _unlink(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass
