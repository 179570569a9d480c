"""Resource bounds of the reference oracle: a dispatch's deadline and host memory as device memory.

``Deadline`` is checked between statements, loop iterations and chunks of workgroups, so a
dispatch with ``DispatchConfig.timeout_s`` stops soon after its time is up with the error the
``cuda`` backend raises (``DispatchFailed('timeout')``). ``host_memory`` turns every failed host
allocation (``MemoryError``, numpy's "array is too big") into ``DeviceOutOfMemory``: for the
oracle, host memory is its device memory.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager

from vyre.driver.errors import DeviceOutOfMemory, DispatchFailed, InvalidProgram

FIX_TIMEOUT = ("raise DispatchConfig.timeout_s, or shrink the work (fewer workgroups, shorter loops); the "
               "oracle runs every invocation on the CPU and is far slower than a GPU.")
FIX_MEMORY = ("shrink the buffers or the grid, free resident buffers you no longer need, or run on a GPU "
              "backend; the oracle keeps every buffer in host memory.")


class Deadline:
    """When a dispatch must stop; ``check()`` raises ``DispatchFailed('timeout')`` once it has passed."""

    def __init__(self, timeout_s: float | None, name: str) -> None:
        if timeout_s is not None and (isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float))
                                      or math.isnan(timeout_s) or timeout_s < 0):
            raise InvalidProgram(f"timeout_s {timeout_s!r} is not a number of seconds >= 0",
                                 "pass DispatchConfig(timeout_s=seconds) as a non-negative number, or None.")
        self.timeout_s, self.name = timeout_s, name
        self.at = None if timeout_s is None or math.isinf(timeout_s) else time.monotonic() + timeout_s

    def check(self) -> None:
        if self.at is not None and time.monotonic() > self.at:
            raise DispatchFailed("timeout", f"program {self.name} did not finish within {self.timeout_s} s "
                                            "on the reference oracle", FIX_TIMEOUT)


NO_DEADLINE = Deadline(None, "")


def physical_memory() -> int:
    """Bytes of physical memory of this host (0 when the platform does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def available_memory() -> int:
    """Bytes of physical memory free now (0 when the platform does not say)."""
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def check_allocation(nbytes: int) -> None:
    """Refuse an allocation larger than the host's physical memory before trying it (a lazily
    committed array that large would only fail when written, by the kernel's OOM killer)."""
    total = physical_memory()
    if total and nbytes > total:
        raise DeviceOutOfMemory(nbytes, available_memory(), FIX_MEMORY)


_TOO_BIG = re.compile(r"array is too big|maximum (supported|possible) (dimension|size)|Maximum allowed size")


@contextmanager
def host_memory(requested: int = 0) -> Iterator[None]:
    """Map a failed host allocation inside the block to ``DeviceOutOfMemory``."""
    try:
        yield
    except MemoryError as err:
        shape, dtype = getattr(err, "shape", None), getattr(err, "dtype", None)
        size = requested
        if shape is not None and dtype is not None:
            size = int(dtype.itemsize) * int(_prod(shape))
        raise DeviceOutOfMemory(size, available_memory(), FIX_MEMORY) from None
    except ValueError as err:
        if not _TOO_BIG.search(str(err)):
            raise
        raise DeviceOutOfMemory(requested, available_memory(), FIX_MEMORY) from None


def _prod(shape: tuple) -> int:
    out = 1
    for n in shape:
        out *= int(n)
    return out
