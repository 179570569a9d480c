"""The walk of one program through the runtime: which of the project's files a dispatch enters,
and its climbs (a call into a file that is already on the stack, made from another file below
it: a layer calling back up)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import vyre

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(vyre.__file__)))


@dataclass
class Walk:
    entries: list[tuple[int, str, str]] = field(default_factory=list)  # (depth, file, function)
    climbs: list[str] = field(default_factory=list)

    @property
    def files(self) -> list[str]:
        return list(dict.fromkeys(f for _, f, _ in self.entries))


def _ours(path: str) -> str | None:
    if path.startswith(ROOT) and ("/vyre/" in path or "/vyre_cuda/" in path):
        return os.path.relpath(path, ROOT)
    return None


def walk(call: Callable[[], object]) -> Walk:
    """Trace ``call()``: every entry into one of the project's files from another, and the climbs."""
    out, stack = Walk(), []

    def profile(frame, event, arg) -> None:  # noqa: ANN001 - sys.setprofile's signature
        if event == "call":
            here = _ours(frame.f_code.co_filename)
            ours = [s for s in stack if s is not None]
            if here is not None and (not ours or here != ours[-1]):
                out.entries.append((len(ours), here, frame.f_code.co_name))
                if here in ours:
                    out.climbs.append(" -> ".join([*ours[-3:], f"{here}:{frame.f_code.co_name}"]))
            stack.append(here)
        elif event == "return" and stack:
            stack.pop()

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return out
