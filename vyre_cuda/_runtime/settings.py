"""Every ``VYRE_CUDA_*`` environment variable of the cuda backend (and ``VYRE_PTX_DUMP_DIR``), read in one place.

| variable | meaning | read |
|---|---|---|
| ``VYRE_CUDA_DEVICE`` | device ordinal (``N`` or ``cuda:N``) when ``acquire("cuda")`` names none | at acquire |
| ``VYRE_CUDA_SYNC_EACH=1`` | synchronise after every launch, name the failing program | at backend start |
| ``VYRE_CUDA_GRAPHS=0`` | launch sequences and pipelines eagerly instead of as CUDA graphs | each call |
| ``VYRE_CUDA_PDL=0`` | record plain launches instead of programmatic ones in graphs | each capture |
| ``VYRE_CUDA_CONDITIONAL=0`` | ``dispatch_until`` reads its flag back per batch (no conditional node) | each call |
| ``VYRE_CUDA_COARSEN`` | ``0``/``1``: never; a power of two 2..64: always; unset/``auto``: by size | each binding |
| ``VYRE_CUDA_LAUNCH`` | launch path: ``cupy`` (default), ``pyctypes`` or ``ctypes`` | each new plan |
| ``VYRE_CUDA_LOADER`` | module loading: ``driver`` (default, ``cuModuleLoadData``) or ``cupy`` | each load |
| ``VYRE_CUDA_MEMORY_LIMIT`` | device memory cap in bytes (``1073741824``, ``512M``, ``2GiB``) | at backend start |
| ``VYRE_CUDA_NVTX`` | NVTX ranges: ``1`` on, ``0`` off, unset: under a profiler | once (``profiler.refresh``) |
| ``VYRE_CUDA_HOST_PIN_LIMIT`` | host bytes page-locked for direct copies (default RAM/4; ``0``: off) | first use |
| ``VYRE_CUDA_CACHE_DIR``, ``VYRE_CUDA_CACHE_MAX_BYTES`` | the disk cache (``_runtime.cache``) | at cache start |
| ``VYRE_PTX_DUMP_DIR`` | keep the PTX of a kernel the driver refuses in this directory | on a failed load |

Switches accept ``1``, ``true``, ``on``, ``yes`` and ``0``, ``false``, ``off``, ``no`` (any case);
numbers are ASCII digits (``²`` and fullwidth digits are refused). An empty variable is unset.
Any other value raises ``InvalidSetting`` naming the variable and what it accepts; every setting
is also checked when the backend starts (``check``), and ``vyre doctor`` lists each bad one
(``problems``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from vyre.driver.errors import InvalidSetting

PREFIX = "VYRE_CUDA_"
DEVICE = "VYRE_CUDA_DEVICE"
SYNC_EACH = "VYRE_CUDA_SYNC_EACH"
GRAPHS = "VYRE_CUDA_GRAPHS"
PDL = "VYRE_CUDA_PDL"
CONDITIONAL = "VYRE_CUDA_CONDITIONAL"
COARSEN = "VYRE_CUDA_COARSEN"
LAUNCH = "VYRE_CUDA_LAUNCH"
LOADER = "VYRE_CUDA_LOADER"
MEMORY_LIMIT = "VYRE_CUDA_MEMORY_LIMIT"
HOST_PIN_LIMIT = "VYRE_CUDA_HOST_PIN_LIMIT"
NVTX = "VYRE_CUDA_NVTX"
CACHE_DIR = "VYRE_CUDA_CACHE_DIR"
CACHE_MAX_BYTES = "VYRE_CUDA_CACHE_MAX_BYTES"
PTX_DUMP_DIR = "VYRE_PTX_DUMP_DIR"

LAUNCH_MODES = ("cupy", "pyctypes", "ctypes")
LOADERS = ("driver", "cupy")
_ON = ("1", "true", "on", "yes")
_OFF = ("0", "false", "off", "no")
_SWITCH = "1/true/on/yes or 0/false/off/no"
_SIZE = re.compile(r"([0-9]+)\s*([kmgt]?)(?:i?b)?", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZES = "a byte count in ASCII digits, optionally with K, M, G or T (e.g. 1073741824, 512M, 2GiB)"
_COARSEN_FACTORS = (2, 4, 8, 16, 32, 64)


def raw(name: str, default: str = "") -> str:
    """The variable's value, stripped (``default`` when unset or empty)."""
    return os.environ.get(name, "").strip() or default


def switch(name: str, default: bool) -> bool:
    """A switch: ``default`` when unset, else on or off; ``InvalidSetting`` for any other value."""
    value = raw(name).lower()
    if not value:
        return default
    if value in _ON or value in _OFF:
        return value in _ON
    raise InvalidSetting(name, os.environ[name], _SWITCH)


def switched_off(name: str) -> bool:
    """Whether an on-by-default switch is set to 0/false/off/no."""
    return not switch(name, True)


def sync_each() -> bool:
    """``VYRE_CUDA_SYNC_EACH=1``."""
    return switch(SYNC_EACH, False)


def graphs() -> bool:
    """CUDA graph capture is on (``VYRE_CUDA_GRAPHS`` not off)."""
    return switch(GRAPHS, True)


def pdl() -> bool:
    """Programmatic dependent launches in recorded graphs are allowed (``VYRE_CUDA_PDL`` not off)."""
    return switch(PDL, True)


def conditional() -> bool:
    """``dispatch_until`` may loop on the device in a conditional graph node (``VYRE_CUDA_CONDITIONAL`` not off)."""
    return switch(CONDITIONAL, True)


def nvtx() -> bool | None:
    """``VYRE_CUDA_NVTX``: True (ranges always), False (never) or None when unset (when a profiler is attached)."""
    return switch(NVTX, True) if raw(NVTX) else None


def coarsen() -> int | None:
    """``VYRE_CUDA_COARSEN`` as a forced factor (1 = off), or None for the automatic choice."""
    value = raw(COARSEN, "auto").lower()
    if value == "auto":
        return None
    if value in ("1", *_OFF):
        return 1
    if value.isascii() and value.isdigit() and int(value) in _COARSEN_FACTORS:
        return int(value)
    raise InvalidSetting(COARSEN, os.environ[COARSEN], "auto, 0 (never coarsen) or one of 2, 4, 8, 16, 32, 64")


def choice(name: str, accepted: tuple[str, ...]) -> str:
    """One of ``accepted`` (any case; the first when unset); ``InvalidSetting`` otherwise."""
    value = raw(name, accepted[0]).lower()
    if value not in accepted:
        raise InvalidSetting(name, os.environ[name], " or ".join(accepted))
    return value


def launch() -> str:
    """``VYRE_CUDA_LAUNCH``: ``cupy`` (default), ``pyctypes`` or ``ctypes``."""
    return choice(LAUNCH, LAUNCH_MODES)


def loader() -> str:
    """``VYRE_CUDA_LOADER``: ``driver`` (default) or ``cupy``."""
    return choice(LOADER, LOADERS)


def device() -> str | None:
    """``VYRE_CUDA_DEVICE`` (``N`` or ``cuda:N``, ASCII digits) or None when unset."""
    value = raw(DEVICE)
    if not value:
        return None
    number = value.removeprefix("cuda:")
    if not (number.isascii() and number.isdigit()):
        raise InvalidSetting(DEVICE, os.environ[DEVICE], "a device ordinal in ASCII digits such as 0 (or cuda:0)")
    return value


def parse_size(text: str) -> int:
    """``"1073741824"``, ``"512M"``, ``"2GiB"`` -> bytes (ASCII digits only); ``ValueError`` otherwise."""
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise ValueError(f"not a size: {text!r}")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def size(name: str) -> int | None:
    """A byte count (``parse_size``) or None when unset; ``InvalidSetting`` when malformed."""
    value = raw(name)
    if not value:
        return None
    try:
        return parse_size(value)
    except ValueError:
        problem = "is negative" if value.startswith("-") else "is not a byte count"
        raise InvalidSetting(name, os.environ[name], _SIZES, problem) from None


def memory_limit() -> int | None:
    """``VYRE_CUDA_MEMORY_LIMIT`` in bytes (None when unset)."""
    return size(MEMORY_LIMIT)


def host_pin_limit() -> int | None:
    """``VYRE_CUDA_HOST_PIN_LIMIT`` in bytes (None when unset: a quarter of the host's memory)."""
    return size(HOST_PIN_LIMIT)


def cache_max_bytes() -> int | None:
    """``VYRE_CUDA_CACHE_MAX_BYTES`` in bytes (None when unset: the cache's default)."""
    return size(CACHE_MAX_BYTES)


def directory(name: str) -> Path | None:
    """A directory path with ``~`` expanded, or None when unset; ``InvalidSetting`` for an unknown ``~user``."""
    value = raw(name)
    if not value:
        return None
    try:
        return Path(value).expanduser()
    except RuntimeError:  # ~user of no such user, or no home directory to expand ~ to
        raise InvalidSetting(name, os.environ[name], "a path whose ~ or ~user names a home directory (or an "
                             "absolute path)", "names a home directory that cannot be found") from None


def cache_dir() -> Path | None:
    """``VYRE_CUDA_CACHE_DIR`` (None when unset: the default location)."""
    return directory(CACHE_DIR)


def ptx_dump_dir() -> Path | None:
    """``VYRE_PTX_DUMP_DIR`` (None when unset: PTX is not kept)."""
    return directory(PTX_DUMP_DIR)


#: every setting and its reader; ``check`` and ``problems`` read them all
READERS: dict[str, Callable[[], object]] = {
    DEVICE: device, SYNC_EACH: sync_each, GRAPHS: graphs, PDL: pdl, CONDITIONAL: conditional, COARSEN: coarsen,
    LAUNCH: launch, LOADER: loader, MEMORY_LIMIT: memory_limit, HOST_PIN_LIMIT: host_pin_limit, NVTX: nvtx,
    CACHE_DIR: cache_dir,
    CACHE_MAX_BYTES: cache_max_bytes, PTX_DUMP_DIR: ptx_dump_dir,
}


def problems() -> list[InvalidSetting]:
    """Every setting whose value is bad, as the error reading it raises (empty when all are fine)."""
    found = []
    for reader in READERS.values():
        try:
            reader()
        except InvalidSetting as exc:
            found.append(exc)
    return found


def unknown() -> list[str]:
    """``VYRE_CUDA_*`` variables that are set but are no setting (a misspelt name is otherwise ignored)."""
    return sorted(name for name in os.environ if name.startswith(PREFIX) and name not in READERS)


def check() -> None:
    """Raise the first ``InvalidSetting`` of ``problems`` (the backend calls this when it starts)."""
    found = problems()
    if found:
        raise found[0]
