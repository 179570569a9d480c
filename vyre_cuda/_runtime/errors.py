"""Map CuPy and CUDA driver/runtime exceptions to ``vyre.errors``, and recover from
device faults.

Matching is by exception class name, status name and message, so this module imports without CuPy.
Runtime names (``cudaErrorIllegalAddress``) and driver names (``CUDA_ERROR_ILLEGAL_ADDRESS``) are
both reduced to one canonical form (``ILLEGAL_ADDRESS``) and looked up in one table.

Lost devices: a sticky CUDA error (illegal address, trap, ECC...) poisons the device's primary
context for the whole process. Whenever a ``DeviceLost`` is made here, ``note_device_lost`` asks
the current device whether its context really is poisoned (a fake or stale error is not); if so
the device is recorded as needing a reset and every backend watching it (``watch_device``) is told
(``backend.mark_lost()``: it refuses further use with ``DeviceLost``). The next backend started
on that device calls ``reset_device``, which drops every object of the old context and resets it.
Some drivers keep the fault for the whole process even then (seen on driver 580 / CUDA 13.0 on an
H100: every new context fails with the fault's status); the reset then ends in a
``BackendUnavailable`` whose Fix says to restart the process.
"""

from __future__ import annotations

import gc
import re
import sys
import threading
import traceback
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from vyre.driver.errors import (
    BackendUnavailable,
    DeviceLost,
    DeviceOutOfMemory,
    DispatchFailed,
    KernelCompileFailed,
    VyreError,
)

_STATUS_NAME = re.compile(r"\b(cudaError\w+|CUDA_ERROR_\w+)")
_CUPY_MODULES = ("cupy", "cupy_backends", "cupyx", "cuda.")

_OOM = frozenset({"MEMORY_ALLOCATION", "OUT_OF_MEMORY"})
_LOST = frozenset({
    "ILLEGAL_ADDRESS", "LAUNCH_FAILURE", "LAUNCH_FAILED", "ECC_UNCORRECTABLE", "HARDWARE_STACK_ERROR",
    "ILLEGAL_INSTRUCTION", "MISALIGNED_ADDRESS", "INVALID_ADDRESS_SPACE", "INVALID_PC", "ASSERT",
    "LAUNCH_TIMEOUT", "CONTEXT_IS_DESTROYED", "DEINITIALIZED", "CUDART_UNLOADING", "DEVICE_UNAVAILABLE",
})
_GEOMETRY = frozenset({"INVALID_CONFIGURATION", "LAUNCH_OUT_OF_RESOURCES", "COOPERATIVE_LAUNCH_TOO_LARGE"})
_PTX_VERSION = frozenset({"UNSUPPORTED_PTX_VERSION"})
_COMPILE = frozenset({
    "INVALID_PTX", "JIT_COMPILER_NOT_FOUND", "NO_KERNEL_IMAGE_FOR_DEVICE", "NO_BINARY_FOR_GPU",
    "INVALID_KERNEL_IMAGE", "INVALID_IMAGE", "INVALID_SOURCE", "JIT_COMPILATION_DISABLED",
    "INVALID_DEVICE_FUNCTION", "SHARED_OBJECT_INIT_FAILED", "NOT_FOUND", "SYMBOL_NOT_FOUND",
})
_UNAVAILABLE = frozenset({
    "INSUFFICIENT_DRIVER", "NO_DEVICE", "INVALID_DEVICE", "NOT_INITIALIZED", "INITIALIZATION_ERROR",
    "SYSTEM_DRIVER_MISMATCH", "COMPAT_NOT_SUPPORTED_ON_DEVICE", "DEVICES_UNAVAILABLE", "STUB_LIBRARY",
    "SYSTEM_NOT_READY",
})

FIX_GEOMETRY = ("lower the program's workgroup size (Program.workgroup_size or DispatchConfig.workgroup_override) "
                "or its workgroup (shared) memory; the device limits are in backend.device_profile()['limits']")
FIX_PTX_VERSION = ("upgrade the NVIDIA driver, or emit an older PTX ISA that this driver loads "
                   "(vyre emit-ptx --ptx-version, e.g. 8.0 for CUDA 12.x drivers)")
FIX_CAPTURE = "set VYRE_CUDA_GRAPHS=0 to run without CUDA graph capture, and report the program"
FIX_DRIVER = ("install an NVIDIA driver and a CuPy build that match (pip install 'vyre-cuda[cuda12]' or [cuda13]); "
              "without a GPU use vyre.acquire(allow_reference=True)")
FIX_LOST = ("acquire a new backend with vyre.acquire('cuda') (it resets the device and starts clean) after dropping "
            "the CuPy arrays, pipelines and handles made before the fault; rerun with VYRE_CUDA_SYNC_EACH=1 to find "
            "the faulting program")
FIX_RESET = ("restart the Python process: this driver keeps a device fault for the whole process (to contain "
             "faults of untrusted programs, run them in a subprocess)")


def status_name(exc: BaseException) -> str | None:
    """The CUDA status name in an exception's message (``cudaErrorX`` or ``CUDA_ERROR_X``), if any."""
    match = _STATUS_NAME.search(str(exc))
    return match.group(1) if match else None


def canonical(name: str) -> str:
    """``cudaErrorIllegalAddress`` and ``CUDA_ERROR_ILLEGAL_ADDRESS`` both give ``ILLEGAL_ADDRESS``."""
    if name.startswith("CUDA_ERROR_"):
        return name[len("CUDA_ERROR_"):]
    stem = name[len("cudaError"):] if name.startswith("cudaError") else name
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", stem).upper()


def is_cuda_exception(exc: BaseException) -> bool:
    """True for exceptions raised by CuPy or the CUDA driver/runtime (by class, message or traceback)."""
    if isinstance(exc, VyreError):
        return False
    if type(exc).__module__.startswith(_CUPY_MODULES):
        return True
    text = str(exc)
    if "libcuda" in text or _STATUS_NAME.search(text):
        return True
    return any(_is_cupy_file(frame.filename) for frame in traceback.extract_tb(exc.__traceback__))


def _is_cupy_file(filename: str) -> bool:
    path = filename.replace("\\", "/")
    return path.startswith(("cupy/", "cupy_backends/")) or "/cupy/" in path or "/cupy_backends/" in path


def _available_memory() -> int:
    """Free device memory from CuPy if it is already loaded and working, else 0."""
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return 0
    try:
        return int(cupy.cuda.runtime.memGetInfo()[0])
    except Exception:  # noqa: BLE001 - best effort inside an error path
        return 0


def _out_of_memory(exc: BaseException, requested: int | None) -> DeviceOutOfMemory:
    size = getattr(exc, "_size", None)
    total, limit = getattr(exc, "_total", 0), getattr(exc, "_limit", 0)
    available = max(0, limit - total) if limit else _available_memory()
    return DeviceOutOfMemory(int(size if size is not None else requested or 0), int(available))


def translate(exc: BaseException, context: str = "", *, requested: int | None = None) -> VyreError:
    """The vyre error for a CuPy/CUDA exception; ``context`` says what was being done."""
    if isinstance(exc, VyreError):
        return exc
    prefix = f"{context}: " if context else ""
    text = str(exc).strip() or type(exc).__name__
    if type(exc).__name__ == "OutOfMemoryError":
        return _out_of_memory(exc, requested)
    if "failed to load libcuda" in text:
        return BackendUnavailable(f"{prefix}no CUDA driver: {text}", FIX_DRIVER)
    if type(exc).__name__ == "CompileException":
        return KernelCompileFailed("cuda", f"{prefix}{text}")
    name = status_name(exc)
    key = canonical(name) if name else ""
    if key in _OOM:
        return _out_of_memory(exc, requested)
    if key in _LOST:
        return device_lost(f"{prefix}the CUDA context is lost ({text})")
    if key in _GEOMETRY:
        return DispatchFailed(name or "launch", f"{prefix}{text}", FIX_GEOMETRY)
    if key in _PTX_VERSION:
        return KernelCompileFailed("cuda", f"{prefix}{text}", FIX_PTX_VERSION)
    if key in _COMPILE:
        return KernelCompileFailed("cuda", f"{prefix}{text}")
    if key in _UNAVAILABLE:
        return BackendUnavailable(f"{prefix}CUDA is unavailable: {text}", FIX_DRIVER)
    if key.startswith("STREAM_CAPTURE") or "capturing" in text:
        return DispatchFailed(name or "capture", f"{prefix}{text}", FIX_CAPTURE)
    return DispatchFailed(name or getattr(exc, "status", None) or type(exc).__name__, f"{prefix}{text}")


@contextmanager
def cuda_errors(context: str, *, requested: int | None = None) -> Iterator[None]:
    """Re-raise CuPy/CUDA exceptions inside the block as vyre errors; other exceptions pass through."""
    try:
        yield
    except VyreError:
        raise
    except Exception as exc:
        if not is_cuda_exception(exc):
            raise
        raise translate(exc, context, requested=requested) from exc


# ---- lost devices and their reset ------------------------------------------------------------------------
_lost_lock = threading.RLock()
_needs_reset: set[int] = set()
_watchers: dict[int, weakref.WeakSet] = {}


def device_lost(message: str, fix: str = FIX_LOST) -> DeviceLost:
    """A ``DeviceLost`` error, after recording the current device as lost if its context is poisoned."""
    note_device_lost()
    return DeviceLost(message, fix)


def watch_device(index: int, backend: Any) -> None:
    """Call ``backend.mark_lost()`` when device ``index`` is found poisoned (held weakly)."""
    with _lost_lock:
        _watchers.setdefault(index, weakref.WeakSet()).add(backend)


def needs_reset(index: int) -> bool:
    """True when device ``index`` had a sticky error and has not been reset since."""
    return index in _needs_reset


def note_device_lost() -> int | None:
    """If the current device's context is poisoned, record it and tell its backends; the device or None."""
    index = _poisoned_device()
    if index is None:
        return None
    with _lost_lock:
        _needs_reset.add(index)
        backends = list(_watchers.get(index, ()))
    for backend in backends:
        backend.mark_lost()
    return index


def _poisoned_device() -> int | None:
    """The current device if CUDA calls on it fail with a lost-context status (no CuPy loaded: None)."""
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return None
    runtime = cupy.cuda.runtime
    try:
        index = int(runtime.getDevice())
    except Exception:  # noqa: BLE001 - no usable CUDA at all: nothing to reset
        return None
    try:
        runtime.memGetInfo()
        runtime.free(runtime.malloc(256))
    except Exception as exc:  # noqa: BLE001 - classified by its status name
        name = status_name(exc)
        return index if name and canonical(name) in _LOST else None
    return None


@contextmanager
def quiet_teardown() -> Iterator[None]:
    """Drop CUDA objects of a dead context: their destructors' errors are expected, so not printed."""
    hook = sys.unraisablehook
    sys.unraisablehook = lambda _unraisable: None
    try:
        yield
        gc.collect()
    finally:
        sys.unraisablehook = hook


def reset_device(index: int) -> None:
    """Make device ``index`` usable again after a sticky error (see the module docstring).

    Drops, while the old context still exists: the lost backends' CUDA objects
    (``backend.forget_device()``), CuPy's default device and pinned pools' cached blocks and
    CuPy's memoised modules (``cupy.clear_memo()``); then resets the primary context and checks
    that the device works. ``BackendUnavailable`` if it does not.
    """
    import cupy

    with _lost_lock:
        if index not in _needs_reset:
            return
        with quiet_teardown():
            for backend in list(_watchers.get(index, ())):
                backend.forget_device()
            for pool in (cupy.get_default_memory_pool(), cupy.get_default_pinned_memory_pool()):
                try:
                    pool.free_all_blocks()
                except Exception:  # noqa: BLE001, S110 - the frees fail on a poisoned context; the reset frees all
                    pass
            cupy.clear_memo()
        try:
            _reset_primary_context(cupy.cuda.runtime, index)
            runtime = cupy.cuda.runtime
            runtime.setDevice(index)
            runtime.free(runtime.malloc(256))
        except Exception as exc:  # noqa: BLE001 - reported with the reason
            raise BackendUnavailable(f"CUDA device {index} cannot be used again in this process after a device "
                                     f"fault: the reset did not clear it ({exc})", FIX_RESET) from exc
        _needs_reset.discard(index)


def _reset_primary_context(runtime: Any, index: int) -> None:
    """``cudaDeviceReset`` where CuPy has it, else the driver's primary-context reset
    (``_runtime.driver``, through cuda.bindings), made current again."""
    if hasattr(runtime, "deviceReset"):
        runtime.setDevice(index)
        runtime.deviceReset()
        return
    from vyre_cuda._runtime import driver

    driver.reset_primary_context(index)


__all__ = ["FIX_LOST", "canonical", "cuda_errors", "device_lost", "is_cuda_exception", "needs_reset",
           "note_device_lost", "quiet_teardown", "reset_device", "status_name", "translate", "watch_device"]
