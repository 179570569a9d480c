"""Identifier sanitising: program text never reaches PTX except through these helpers."""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def sanitize(text: str | None, limit: int = 64) -> str:
    """``text`` reduced to ``[A-Za-z0-9_]`` (other characters become ``_``), at most ``limit`` long.

    Used only inside ``//`` comments, so no newline, ``;``, ``}`` or ``%`` can change the PTX.
    """
    if not text:
        return "unnamed"
    return _UNSAFE.sub("_", text[:limit])
