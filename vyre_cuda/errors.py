"""Map CuPy and CUDA driver/runtime exceptions to vyre errors (SPEC section 6).

Matching is by exception class name, status name and message, so this module imports without CuPy.
Runtime names (``cudaErrorIllegalAddress``) and driver names (``CUDA_ERROR_ILLEGAL_ADDRESS``) are
both reduced to one canonical form (``ILLEGAL_ADDRESS``) and looked up in one table.
"""

from __future__ import annotations

import re
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

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
        return DeviceLost(f"{prefix}the CUDA context is lost ({text})")
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


__all__ = ["canonical", "cuda_errors", "is_cuda_exception", "status_name", "translate"]
