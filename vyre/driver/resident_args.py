"""Argument checks of the resident-buffer API, shared by every backend.

The oracle and ``cuda`` call these, so the same misuse (a freed, foreign or forged handle, a
byte range past a handle's end, a negative or bool repeat count, a malformed sequence step or
read, a flag shorter than a word) raises the same exception with the same message on both.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from vyre.driver.backend import Resident
from vyre.driver.errors import InvalidHandle, InvalidProgram

#: bytes of the flag word of ``dispatch_until``
FLAG_BYTES = 4


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_allocation(nbytes: object) -> int:
    """The byte count of ``allocate_resident``: a non-negative int."""
    if not _is_int(nbytes) or nbytes < 0:  # type: ignore[operator]
        raise InvalidProgram(f"cannot allocate {nbytes!r} bytes", "pass a non-negative int byte count.")
    return nbytes  # type: ignore[return-value]


def invalid_handle(handle: object, owner: int, issued: int, live: Container[int]) -> InvalidHandle:
    """Why ``handle`` is not a live handle of the store ``owner`` (``issued``: the highest id it gave out)."""
    if not isinstance(handle, Resident):
        return InvalidHandle(f"{handle!r} is not a Resident handle",
                             "pass a handle returned by this backend's allocate_resident().")
    if handle.owner != owner:
        return InvalidHandle(f"{handle!r} belongs to another backend instance",
                             "use a handle only with the backend that allocated it.")
    if isinstance(handle.id, int) and 0 < handle.id <= issued and handle.id not in live:
        return InvalidHandle(f"{handle!r} was already freed",
                             "do not use a handle after free_resident(); allocate a new one.")
    return InvalidHandle(f"{handle!r} was not issued by this backend (forged or copied)",
                         "pass the exact handle object that allocate_resident() returned.")


def check_byte_range(handle: Any, offset: object, nbytes: object, what: str = "byte range") -> None:
    """``[offset, offset + nbytes)`` must be ints within the handle's size (``InvalidHandle`` if not)."""
    ok = _is_int(offset) and _is_int(nbytes) and 0 <= offset and 0 <= nbytes  # type: ignore[operator]
    if not ok or offset + nbytes > handle.nbytes:  # type: ignore[operator]
        raise InvalidHandle(f"{what} offset={offset!r} nbytes={nbytes!r} is outside {handle!r}",
                            f"keep offset + nbytes within the handle's {handle.nbytes} bytes.")


def download_size(handle: Any, offset: object, nbytes: object) -> int:
    """The byte count of ``download_resident`` (None: to the end of the handle), range-checked."""
    if nbytes is None:
        nbytes = handle.nbytes - offset if _is_int(offset) else -1  # type: ignore[operator]
    check_byte_range(handle, offset, nbytes)
    return nbytes  # type: ignore[return-value]


def unpack_step(step: object) -> tuple[Any, tuple[Any, ...], Any]:
    """A sequence step ``(program, handles)`` or ``(program, handles, config)`` as a 3-tuple."""
    if not isinstance(step, (tuple, list)) or len(step) not in (2, 3):
        raise InvalidProgram(f"sequence step {step!r} is not (program, handles) or (program, handles, config)",
                             "pass each step as a tuple (program, [handle, ...], config_or_None).")
    try:
        handles = tuple(step[1])
    except TypeError:
        raise InvalidProgram(f"the handles of sequence step {step!r} are not a list",
                             "pass each step as a tuple (program, [handle, ...], config_or_None).") from None
    return step[0], handles, step[2] if len(step) == 3 else None


def unpack_read(read: object) -> tuple[Any, Any, Any]:
    """A read-back request ``(handle, offset, nbytes)``; its range is checked once the handle resolved."""
    if not isinstance(read, (tuple, list)) or len(read) != 3:
        raise InvalidProgram(f"read {read!r} is not (handle, offset, nbytes)",
                             "pass reads as (handle, offset, nbytes) tuples.")
    return read[0], read[1], read[2]


def check_repeat_count(count: object) -> int:
    """The ``count`` of ``dispatch_repeated``: a non-negative int (not a bool)."""
    if not _is_int(count) or count < 0:  # type: ignore[operator]
        raise InvalidProgram(f"repeat count {count!r} is not a non-negative int", "pass count >= 0.")
    return count  # type: ignore[return-value]


def check_max_iterations(max_iterations: object) -> int:
    """The ``max_iterations`` of ``dispatch_until``: a non-negative int (not a bool)."""
    if not _is_int(max_iterations) or max_iterations < 0:  # type: ignore[operator]
        raise InvalidProgram(f"max_iterations {max_iterations!r} is not a non-negative int",
                             "pass max_iterations >= 0.")
    return max_iterations  # type: ignore[return-value]


def check_flag(handle: Any) -> None:
    """The flag of ``dispatch_until`` is a resident handle holding at least one u32 word."""
    if not isinstance(handle, Resident):
        raise InvalidHandle(f"the flag of dispatch_until is {type(handle).__name__}, not a resident handle",
                            "pass a handle from backend.allocate_resident(4) or larger.")
    if handle.nbytes < FLAG_BYTES:
        raise InvalidProgram(f"the flag {handle!r} of dispatch_until has fewer than {FLAG_BYTES} bytes",
                             "pass a resident buffer of at least 4 bytes (its first u32 word is the flag).")
