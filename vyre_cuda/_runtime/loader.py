"""Load PTX into CUDA modules once: an in-memory cache in front of the on-disk cubin cache.

``ModuleCache.load(ptx, entry)`` looks in this order:

1. memory: a module already loaded in this process for the same key;
2. disk: a cubin linked by an earlier process (``DiskCache`` entry ``<key>.cubin``), loaded with
   ``cuModuleLoadData`` from the very bytes the disk cache read and verified (no file is opened
   again, no PTX JIT at all);
3. miss: the PTX is linked to a cubin once with ``cupy.cuda.function.LinkState`` (stored on disk
   for the next process) and the cubin loaded the same way. If linking fails, the PTX is written
   to a private file (``cache.private_file``) and loaded from there (the driver JITs it), so a
   driver that cannot link still runs, and a bad PTX fails with the driver's own error and diagnostics.

``load_snippet(snippet, entry)`` loads a hand-written kernel (``_codegen.snippets``) written for this
device's target (``target()``: the compute capability and the ``.version`` its driver loads, the
same pair the emitter is given). Every kernel the backend launches is loaded by one of these.

``load_indexed(index, entry)`` finds a kernel without its PTX: through a program index entry
(``_runtime.program_index``) that names the cubin an earlier process linked; ``remember`` writes
such an entry after a load.

``allow_dynamic(kernel, nbytes)`` opts a kernel in to launches with more than 48 KiB of dynamic
shared memory (the kernels of programs with that much workgroup memory:
``vyre.ir.layout.dynamic_workgroup_bytes``), once per function.

``VYRE_CUDA_LOADER=cupy`` loads cubins through ``cupy.RawModule(path=...)`` instead (the path
of earlier versions, kept for comparison). Every path handed to the driver is a ``private_file``
copy of the bytes in hand (verified ones, for a cached cubin) in a 0o700 directory of this
process, never a path into the shared cache, which could be replaced after the check.

The key is SHA-256 over the PTX text, the compute capability, the driver version and the
vyre_cuda version: anything that changes the binary changes the key.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vyre.driver.cache_fs import open_private_dir
from vyre.driver.errors import DispatchFailed, KernelCompileFailed, VyreError
from vyre_cuda._codegen.versions import ptx_version_for_driver
from vyre_cuda._runtime import settings
from vyre_cuda._runtime.cache import DiskCache, cache_version, private_file, write_atomic
from vyre_cuda._runtime.device import DeviceInfo, import_cupy
from vyre_cuda._runtime.errors import cuda_errors, translate
from vyre_cuda._runtime.program_index import INDEX_SUFFIX, module_key_of

ENV_DUMP_DIR = settings.PTX_DUMP_DIR
PTXAS_LINES = 20
_KEY_SCHEMA = "vyre-cuda-module/1"
#: ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES``: the dynamic shared memory a launch may pass
MAX_DYNAMIC_SHARED_ATTRIBUTE = 8


@dataclass(frozen=True)
class LoadedKernel:
    """A kernel ready to launch: the module, its function and the raw ``CUfunction`` pointer."""

    key: str
    module: Any  # cupy.cuda.function.Module (or cupy.RawModule with VYRE_CUDA_LOADER=cupy)
    function: Any  # callable as function(grid, block, args): cupy.cuda.function.Function or cupy.RawKernel
    ptr: int
    cubin_cached: bool  # True when the module came from a cubin cached by an earlier process
    max_threads: int | None = None  # CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK (None: unknown)
    shared_bytes: int = 0  # CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES (static shared memory)
    dynamic_bytes: int = 0  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES as set by ``allow_dynamic``
    entry: str = ""  # the kernel's name in its module


def module_key(ptx: str, device: DeviceInfo) -> str:
    """SHA-256 (hex) over everything that changes the loaded binary; parts are length-prefixed."""
    digest = hashlib.sha256()
    for part in (_KEY_SCHEMA, ptx, device.compute_capability, str(device.driver_version), cache_version()):
        data = part.encode()
        digest.update(len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()


def _compile_range() -> AbstractContextManager[Any]:
    try:
        from vyre_cuda._runtime.profiler import nvtx_range
    except ImportError:
        return nullcontext()
    return nvtx_range("vyre.cuda.compile")


class ModuleCache:
    """Loaded modules of one device, shared by threads; one load per key even under concurrent first use."""

    def __init__(self, device: DeviceInfo, disk: DiskCache | None = None) -> None:
        self.device = device
        self.disk = disk
        self._lock = threading.Lock()
        self._modules: dict[str, tuple[Any, bool]] = {}  # key -> (RawModule, cubin_cached)
        self._kernels: dict[tuple[str, str], LoadedKernel] = {}
        self._key_locks: dict[str, threading.Lock] = {}
        self._counts: dict[str, int] = dict.fromkeys(
            ("cuda_module_cache_hits", "cuda_module_cache_misses", "cuda_disk_cache_hits", "cuda_disk_cache_misses",
             "cuda_cubin_link_failures", "cuda_index_hits", "cuda_index_misses"), 0)

    def load(self, ptx: str, entry: str) -> LoadedKernel:
        """The kernel ``entry`` of ``ptx``, loading the module on first use (see the module docstring)."""
        key = module_key(ptx, self.device)
        kernel = self._kernels.get((key, entry))
        if kernel is None:
            with self._key_lock(key):
                kernel = self._kernels.get((key, entry))
                if kernel is None:
                    return self._load_kernel(key, ptx, entry)
        self._count("cuda_module_cache_hits")
        return kernel

    def target(self) -> tuple[str, str]:
        """``(sm, ptx_version)``: the target and ``.version`` of PTX written for this device and driver."""
        cc = self.device.compute_capability
        return cc, ptx_version_for_driver(self.device.driver_version, cc)

    def load_snippet(self, snippet: Callable[[str, str], str], entry: str) -> LoadedKernel:
        """The kernel ``entry`` of ``snippet(sm, ptx_version)`` (a hand-written kernel) for this device's ``target``."""
        return self.load(snippet(*self.target()), entry)

    def load_indexed(self, index: str, entry: str) -> LoadedKernel | None:
        """The kernel ``entry`` of the cubin that program index entry ``index`` names, or None (no
        entry, no disk cache, or a cubin no longer cached or refused by the driver): then emit and ``load``."""
        module_key = module_key_of(self.disk.get(index, INDEX_SUFFIX)) if self.disk is not None else None
        kernel = self._kernels.get((module_key, entry)) if module_key is not None else None
        if kernel is None and module_key is not None:
            with self._key_lock(module_key):
                kernel = self._kernels.get((module_key, entry)) or self._load_cached_kernel(module_key, entry)
        self._count("cuda_index_hits" if kernel is not None else "cuda_index_misses")
        return kernel

    def allow_dynamic(self, kernel: LoadedKernel, nbytes: int) -> LoadedKernel:
        """``kernel`` opted in to launches with ``nbytes`` of dynamic shared memory (more than the
        48 KiB a launch may pass by default): ``cuFuncSetAttribute`` once per function, recorded in
        the returned kernel (which replaces ``kernel`` in the cache). The caller checks ``nbytes``
        against the device's opt-in maximum first."""
        if nbytes <= kernel.dynamic_bytes:
            return kernel
        with self._key_lock(kernel.key):
            current = self._kernels.get((kernel.key, kernel.entry), kernel)
            if nbytes <= current.dynamic_bytes:
                return current
            cupy = import_cupy()
            with cuda_errors(f"allowing {nbytes} bytes of dynamic shared memory"), cupy.cuda.Device(self.device.index):
                cupy.cuda.driver.funcSetAttribute(kernel.ptr, MAX_DYNAMIC_SHARED_ATTRIBUTE, int(nbytes))
            updated = replace(current, dynamic_bytes=int(nbytes))
            with self._lock:
                self._kernels[(kernel.key, kernel.entry)] = updated
            return updated

    def remember(self, index: str, kernel: LoadedKernel) -> None:
        """Write the program index entry ``index`` -> ``kernel``'s cubin (when there is a disk cache)."""
        if self.disk is not None:
            self.disk.put(index, kernel.key.encode(), INDEX_SUFFIX)

    def counters(self) -> dict[str, int]:
        """Telemetry: module cache entries/hits/misses, disk cache hits/misses."""
        with self._lock:
            return {"cuda_module_cache_entries": len(self._modules), **self._counts}

    def clear(self) -> None:
        """Forget loaded modules (kernels already handed out stay valid while referenced)."""
        with self._lock:
            self._modules.clear()
            self._kernels.clear()

    def __len__(self) -> int:
        return len(self._modules)

    # ---- loading -------------------------------------------------------------------------------
    def _load_kernel(self, key: str, ptx: str, entry: str) -> LoadedKernel:
        with self._lock:
            loaded = self._modules.get(key)
        if loaded is None:
            self._count("cuda_module_cache_misses")
            with cuda_errors("loading a CUDA module"):
                loaded = self._load_module(key, ptx)
            with self._lock:
                self._modules[key] = loaded
        else:
            self._count("cuda_module_cache_hits")
        module, cubin_cached = loaded
        cupy = import_cupy()
        with cuda_errors(f"finding kernel {entry!r} in its module"), cupy.cuda.Device(self.device.index):
            function = module.get_function(entry)
            ptr = int(function.kernel.ptr if hasattr(function, "kernel") else function.ptr)
            kernel = LoadedKernel(key, module, function, ptr, cubin_cached, *_attributes(cupy, ptr), entry=entry)
        with self._lock:
            self._kernels[(key, entry)] = kernel
        return kernel

    def _load_cached_kernel(self, key: str, entry: str) -> LoadedKernel | None:
        """``_load_kernel`` for a module that must come from memory or the disk cache (no PTX to link)."""
        with self._lock:
            loaded = self._modules.get(key)
        if loaded is None:
            cubin = self.disk.get(key, ".cubin") if self.disk is not None else None
            if cubin is None:
                return None
            cupy = import_cupy()
            with _compile_range(), cupy.cuda.Device(self.device.index), cuda_errors("loading a CUDA module"):
                module = self._try_load(cupy, cubin, ".cubin")
            if module is None:
                return None
            self._count("cuda_disk_cache_hits")
            with self._lock:
                self._modules[key] = (module, True)
        return self._load_kernel(key, "", entry)

    def _load_module(self, key: str, ptx: str) -> tuple[Any, bool]:
        cupy = import_cupy()
        with _compile_range(), cupy.cuda.Device(self.device.index):
            if self.disk is not None:
                cubin = self.disk.get(key, ".cubin")
                self._count("cuda_disk_cache_hits" if cubin is not None else "cuda_disk_cache_misses")
                if cubin is not None:
                    module = self._try_load(cupy, cubin, ".cubin")
                    if module is not None:
                        return module, True
                    self.disk.discard(key, ".cubin")
            ptx_bytes = ptx.encode()
            cubin = self._link(cupy, ptx_bytes)
            if cubin is not None:
                if self.disk is not None:
                    self.disk.put(key, cubin, ".cubin")
                module = self._try_load(cupy, cubin, ".cubin")
                if module is not None:
                    return module, False
            return self._load_ptx(cupy, key, ptx), False

    def _try_load(self, cupy: Any, image: bytes, suffix: str) -> Any | None:
        """A loaded module from ``image``, or None when the driver refuses it (not for OOM or a lost device)."""
        try:
            if settings.loader() == "driver":
                module = cupy.cuda.function.Module()
                module.load(bytes(image))  # cuModuleLoadData on these bytes
                return module
            module = cupy.RawModule(path=str(_private_path(image, suffix)))
            module.module  # noqa: B018 - RawModule loads lazily; load now so failures surface here
            return module
        except Exception as exc:  # noqa: BLE001 - sorted by translate below
            err = translate(exc, f"loading a {suffix} module")
            if not isinstance(err, (KernelCompileFailed, DispatchFailed)):
                raise err from exc
            return None

    def _link(self, cupy: Any, ptx_bytes: bytes) -> bytes | None:
        """PTX -> cubin for this device with the driver's linker, or None if it cannot."""
        try:
            state = cupy.cuda.function.LinkState()
            state.add_ptr_data(ptx_bytes + b"\0", "vyre.ptx")
            return bytes(state.complete())
        except Exception:  # noqa: BLE001 - the PTX load below reports the real error
            self._count("cuda_cubin_link_failures")
            return None

    def _load_ptx(self, cupy: Any, key: str, ptx: str) -> Any:
        """Load ``ptx`` through a private copy (the driver JITs it); ``KernelCompileFailed`` with diagnostics."""
        path = _private_path(ptx.encode(), ".ptx")
        try:
            module = cupy.RawModule(path=str(path))
            module.module  # noqa: B018 - force the lazy load
            return module
        except Exception as exc:  # noqa: BLE001
            err = translate(exc, "loading PTX")
            if not isinstance(err, (KernelCompileFailed, DispatchFailed)):
                raise err from exc
            fix = err.fix if isinstance(err, KernelCompileFailed) else None
            raise compile_failure(ptx, key, path, self.device.compute_capability, exc, fix) from exc

    def _key_lock(self, key: str) -> threading.Lock:
        with self._lock:
            return self._key_locks.setdefault(key, threading.Lock())

    def _count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1


def _private_path(data: bytes, suffix: str) -> Path:
    """A path holding exactly ``data`` that only this process can change (``private_file``), for an API that
    opens a path; ``KernelCompileFailed`` when none can be written."""
    try:
        return private_file(data, suffix)
    except OSError as exc:
        raise KernelCompileFailed("cuda", f"cannot write a {suffix} module file for the driver ({exc.strerror})",
                                  "free disk space in TMPDIR (or point TMPDIR at a writable directory).") from None


def _attributes(cupy: Any, ptr: int) -> tuple[int | None, int]:
    """The kernel's max threads per block and static shared bytes (``(None, 0)`` when unknown)."""
    try:
        driver = cupy.cuda.driver
        return int(driver.funcGetAttribute(0, ptr)), int(driver.funcGetAttribute(1, ptr))
    except Exception:  # noqa: BLE001 - attributes only sharpen the geometry check
        return None, 0


# ---- diagnostics for a failing load -----------------------------------------------------------------
def compile_failure(ptx: str, key: str, path: Path, cc: str, exc: BaseException, fix: str | None = None
                    ) -> KernelCompileFailed:
    """``KernelCompileFailed`` with the driver error, ptxas's diagnostics and where the PTX was dumped."""
    dump = dump_ptx(ptx, key, str(exc))
    diagnostics = ptxas_diagnostics(path, cc)
    message = f"the driver could not load the PTX ({exc})"
    if diagnostics:
        message += f"; ptxas --gpu-name sm_{cc} says:\n{diagnostics}"
    if dump is not None:
        message += f"\n{dump}"
    return KernelCompileFailed("cuda", message, fix)


def dump_ptx(ptx: str, key: str, reason: str) -> str | None:
    """Write ``ptx`` (and ``reason`` beside it) to ``VYRE_PTX_DUMP_DIR`` if set; a line saying where, or why not.

    The directory is created 0o700 if missing and must pass the cache's trust checks (this user's, written
    by no one else, nor its parents); each file is a new temporary file renamed into place, so a symlink
    planted at the name is replaced, never followed.
    """
    try:
        directory = settings.ptx_dump_dir()
    except VyreError as exc:
        return f"PTX not kept: {exc}"
    if directory is None:
        return None
    stem = f"vyre-{key[:16]}"
    try:
        os.makedirs(directory, 0o700, exist_ok=True)
        dir_fd = open_private_dir(directory, f"the PTX dump directory {directory}")
        try:
            write_atomic(dir_fd, stem + ".ptx", ptx.encode())
            write_atomic(dir_fd, stem + ".log", (reason + "\n").encode())
        finally:
            os.close(dir_fd)
    except OSError as exc:
        return (f"PTX not kept in {directory}: {exc.strerror or exc}. Fix: point {ENV_DUMP_DIR} at a directory "
                "only you can write (mkdir -m 700 DIR)")
    return f"PTX kept at {directory / (stem + '.ptx')}"


def ptxas_diagnostics(path: Path, cc: str, lines: int = PTXAS_LINES) -> str:
    """The first ``lines`` lines of ``ptxas --gpu-name sm_<cc>`` on ``path``; empty if ptxas is absent."""
    ptxas = shutil.which("ptxas")
    if ptxas is None or not re.fullmatch(r"\d+[a-z]?", cc):
        return ""
    try:
        done = subprocess.run([ptxas, "--gpu-name", f"sm_{cc}", "-o", os.devnull, str(path)],
                              capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"(ptxas could not run: {exc})"
    text = (done.stderr + done.stdout).strip()
    if done.returncode == 0:
        return "ptxas accepts this PTX, so the driver (not the PTX) refused it" + (f":\n{text}" if text else "")
    return "\n".join(text.splitlines()[:lines])


__all__ = ["ENV_DUMP_DIR", "LoadedKernel", "ModuleCache", "compile_failure", "dump_ptx", "module_key",
           "ptxas_diagnostics"]
