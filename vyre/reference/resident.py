"""Host-memory emulation of resident buffers: checked handles over numpy byte arrays.

Lets programs written against the resident API (``allocate_resident`` ... ``dispatch_until``)
run on the reference oracle. A handle is valid only with the store that made it and only
until it is freed; anything else is ``InvalidHandle``, never a silent write.
"""

from __future__ import annotations

import itertools
import threading

import numpy as np

from vyre.driver.backend import Resident
from vyre.driver.errors import InvalidProgram
from vyre.driver.inputs import host_bytes
from vyre.driver.resident_args import check_allocation, check_byte_range, download_size, invalid_handle

_owners = itertools.count(1)


class HostResidentStore:
    """Resident buffers of one backend instance, kept as ``np.uint8`` arrays."""

    def __init__(self, backend_id: str) -> None:
        self.backend_id = backend_id
        self.owner = next(_owners)
        self._ids = itertools.count(1)
        self._buffers: dict[int, tuple[Resident, np.ndarray]] = {}
        self._issued = 0  # the highest handle id given out (tells freed handles from forged ones)
        self._lock = threading.Lock()

    @property
    def bytes_in_use(self) -> int:
        return sum(h.nbytes for h, _ in self._buffers.values())

    def allocate(self, nbytes: int) -> Resident:
        check_allocation(nbytes)
        with self._lock:
            handle = Resident(next(self._ids), nbytes, self.owner)
            self._issued = handle.id
            self._buffers[handle.id] = (handle, np.zeros(nbytes, dtype=np.uint8))
        return handle

    def storage(self, handle: object) -> np.ndarray:
        """The bytes behind ``handle``; freed, foreign or forged handles raise ``InvalidHandle``."""
        entry = self._buffers.get(handle.id) if isinstance(handle, Resident) and hasattr(handle, "id") else None
        if entry is None or entry[0] is not handle:
            raise invalid_handle(handle, self.owner, self._issued, self._buffers)
        return entry[1]

    def free(self, handle: object) -> None:
        self.storage(handle)
        with self._lock:
            del self._buffers[handle.id]  # type: ignore[union-attr]

    def upload(self, handle: object, data: object, offset: int = 0) -> None:
        dest = self.storage(handle)
        src = np.frombuffer(host_bytes(data, "upload data"), dtype=np.uint8)
        check_byte_range(handle, offset, src.size)
        dest[offset:offset + src.size] = src

    def download(self, handle: object, offset: int = 0, nbytes: int | None = None) -> np.ndarray:
        src = self.storage(handle)
        size = download_size(handle, offset, nbytes)
        return src[offset:offset + size].copy()

    def view(self, handle: object, dtype: object = np.uint8) -> np.ndarray:
        """A numpy array of ``dtype`` over the bytes behind ``handle`` (no copy; valid until freed)."""
        data = self.storage(handle)
        dt = np.dtype(dtype)  # type: ignore[call-overload]
        if data.size % dt.itemsize:
            raise InvalidProgram(f"{handle!r} holds {data.size} bytes, not a whole number of {dt} elements",
                                 f"view it with a dtype whose size divides {data.size}.")
        return data.view(dt)

    def free_all(self) -> None:
        with self._lock:
            self._buffers.clear()

