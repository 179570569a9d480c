"""Every ``VYRE_CUDA_*`` environment variable of the cuda backend, read in one place.

| variable | meaning | read |
|---|---|---|
| ``VYRE_CUDA_DEVICE`` | device ordinal when ``acquire("cuda")`` names none | at acquire |
| ``VYRE_CUDA_SYNC_EACH=1`` | synchronise after every launch, name the failing program | at backend start |
| ``VYRE_CUDA_GRAPHS=0`` | launch sequences and pipelines eagerly instead of as CUDA graphs | each call |
| ``VYRE_CUDA_PDL=0`` | record plain launches instead of programmatic ones in graphs | each capture |
| ``VYRE_CUDA_CONDITIONAL=0`` | ``dispatch_until`` reads its flag back per batch (no conditional node) | each call |
| ``VYRE_CUDA_COARSEN`` | ``0``: never coarsen; a power of two 2..64: always; unset/``auto``: by size | each binding |
| ``VYRE_CUDA_LAUNCH`` | launch path: ``pyctypes`` (default), ``ctypes`` or ``cupy`` | each new plan |
| ``VYRE_CUDA_LOADER`` | module loading: ``driver`` (default, ``cuModuleLoadData``) or ``cupy`` | each load |
| ``VYRE_CUDA_MEMORY_LIMIT`` | byte cap of the backend's device memory | at backend start |
| ``VYRE_CUDA_NVTX=1`` | NVTX profiler ranges | once (``profiler.refresh``) |
| ``VYRE_CUDA_CACHE_DIR``, ``VYRE_CUDA_CACHE_MAX_BYTES`` | the disk cache (``runtime.cache``) | at cache start |

Off-switches accept ``0``, ``false``, ``off`` and ``no`` (any case).
"""

from __future__ import annotations

import os

DEVICE = "VYRE_CUDA_DEVICE"
SYNC_EACH = "VYRE_CUDA_SYNC_EACH"
GRAPHS = "VYRE_CUDA_GRAPHS"
PDL = "VYRE_CUDA_PDL"
CONDITIONAL = "VYRE_CUDA_CONDITIONAL"
COARSEN = "VYRE_CUDA_COARSEN"
LAUNCH = "VYRE_CUDA_LAUNCH"
LOADER = "VYRE_CUDA_LOADER"
MEMORY_LIMIT = "VYRE_CUDA_MEMORY_LIMIT"
NVTX = "VYRE_CUDA_NVTX"
CACHE_DIR = "VYRE_CUDA_CACHE_DIR"
CACHE_MAX_BYTES = "VYRE_CUDA_CACHE_MAX_BYTES"

_OFF = ("0", "false", "off", "no")


def raw(name: str, default: str = "") -> str:
    """The variable's value, stripped (``default`` when unset)."""
    return os.environ.get(name, default).strip()


def switched_off(name: str) -> bool:
    """Whether an on-by-default switch is set to 0/false/off/no."""
    return raw(name, "1").lower() in _OFF


def sync_each() -> bool:
    """``VYRE_CUDA_SYNC_EACH=1``."""
    return raw(SYNC_EACH) == "1"


def graphs() -> bool:
    """CUDA graph capture is on (``VYRE_CUDA_GRAPHS`` not off)."""
    return not switched_off(GRAPHS)


def pdl() -> bool:
    """Programmatic dependent launches in recorded graphs are allowed (``VYRE_CUDA_PDL`` not off)."""
    return not switched_off(PDL)


def conditional() -> bool:
    """``dispatch_until`` may loop on the device in a conditional graph node (``VYRE_CUDA_CONDITIONAL`` not off)."""
    return not switched_off(CONDITIONAL)


def coarsen() -> int | None:
    """``VYRE_CUDA_COARSEN`` as a forced factor (1 = off), or None for the automatic choice."""
    value = raw(COARSEN).lower()
    if value in ("1", *_OFF):
        return 1
    if value.isdigit() and 2 <= int(value) <= 64 and int(value) & (int(value) - 1) == 0:
        return int(value)
    return None


def launch(default: str) -> str:
    """``VYRE_CUDA_LAUNCH`` (``default`` when unset)."""
    return raw(LAUNCH, default) or default


def loader() -> str:
    """``VYRE_CUDA_LOADER``: ``driver`` (default) or ``cupy``."""
    return "cupy" if raw(LOADER).lower() == "cupy" else "driver"


def nvtx() -> bool:
    """``VYRE_CUDA_NVTX=1``."""
    return raw(NVTX) == "1"


def device() -> str | None:
    """``VYRE_CUDA_DEVICE`` or None when unset or empty."""
    return raw(DEVICE) or None


def memory_limit() -> int | None:
    """``VYRE_CUDA_MEMORY_LIMIT`` in bytes (None when unset); ``ValueError`` with a Fix when malformed."""
    value = raw(MEMORY_LIMIT)
    if not value:
        return None
    try:
        limit = int(value)
    except ValueError:
        raise ValueError(f"{MEMORY_LIMIT}={value!r} is not a byte count. "
                         "Fix: set it to an integer number of bytes, or unset it.") from None
    if limit < 0:
        raise ValueError(f"{MEMORY_LIMIT}={value!r} is negative. Fix: set a byte count >= 0.")
    return limit
