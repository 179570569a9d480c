"""Repeated library calls on device arrays: the call a loop makes again, run without re-checking.

A loop such as ``for _ in range(n): lib.reduce(x)`` on CuPy or torch arrays makes the same call
each time: the same function, the same static arguments (ops, bins, ``count=``), arrays of the
same kind, shape, dtype and layout, on the same stream. After such a call has run once through
its compiled form (``FastCall``), the function's wrapper (``library_call``) keeps a ``Repeat``
under a key made of exactly those facts (``describe``); a later call with an equal key runs the
compiled form directly with the new arrays, skipping the argument checks and plan lookups that
gave the same answer last time. ``ResidentArray``s (all of a call's arrays, on a backend that
compiles them: ``ScratchCache.compiles_resident``) are described by dtype and length, never by
handle or contents, and run on the backend's stream. Anything the key cannot describe (host
arrays, a mix of resident and device arrays, non-contiguous arrays, objects other than plain
scalars, strings, dtypes, tuples of ints and strings and ``@vyre.func`` transforms, the last by
identity) takes the full path. The compiled form
still checks what can change between equal keys (the arrays' addresses, freed handles, a handle
too short for the length) and refuses when it cannot run; the wrapper then drops the ``Repeat``
and takes the full path. A function whose plan depends on data it reads back (``unique``'s probe)
keeps no ``Repeat`` of that step (``Call.fast(repeat=False)``); a plan that checks its own guess
(``unique``'s histogram of the bins the probe chose) is repeated, and refuses when the words it
reads back say the guess was wrong (``MISSED``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre.frontend.kernel import Func

_SCALARS = (str, int, float, bool, type(None), np.dtype, type)
_PLAIN = (int, str, bool, type(None))  # what a tuple argument may hold to be described (by value and type)
_DEVICE_MODULES = ("cupy", "torch")
_KINDS: dict[type, str | None] = {}


class _NoType:
    """Stands for ``ResidentArray`` until ``vyre.lib.io`` names it (that module imports this one)."""


_RESIDENT_TYPE: list[type] = [_NoType]


def resident_type(t: type) -> None:
    """Name the ``ResidentArray`` type ``describe`` recognises (called by ``vyre.lib.io``)."""
    _RESIDENT_TYPE[0] = t


def _kind(t: type) -> str | None:
    """``"cupy"`` (a CuPy array type), ``"torch"`` (a torch tensor type) or None, learnt once per type."""
    root = t.__module__.partition(".")[0]
    device = root in _DEVICE_MODULES and (hasattr(t, "flags") if root == "cupy" else hasattr(t, "is_cuda"))
    _KINDS[t] = root if device else None
    return _KINDS[t]


def describe(args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, list[Any], bool] | None:
    """The key of a call's arguments (``stream=`` aside), its arrays and whether they are
    ``ResidentArray``s, or None when one is not describable: scalars by type and value, CuPy
    arrays and CUDA torch tensors by type, shape, dtype and device (contiguous ones only),
    ``ResidentArray``s by dtype and length (never by address, handle or contents; not mixed with
    device arrays), tuples of ints, strings, bools and None by value and element types, a
    transform's ``@vyre.func`` by identity."""
    parts: list[object] = []
    arrays: list[Any] = []
    resident = 0
    for name, value in (*enumerate(args), *kwargs.items()):
        t = type(value)
        if t is _RESIDENT_TYPE[0]:
            parts.append((name, t, value.dtype, value.n))
            arrays.append(value)
            resident += 1
            continue
        kind = _KINDS[t] if t in _KINDS else _kind(t)
        if kind == "cupy":
            if not value.flags.c_contiguous:
                return None
            device = value.device.id
        elif kind == "torch":
            if not (value.is_cuda and value.is_contiguous()):
                return None
            device = value.device.index
        elif name == "stream":
            continue
        elif isinstance(value, _SCALARS):  # floats by repr: -0.0 is not 0.0, and NaN equals NaN
            parts.append((name, t, repr(value) if isinstance(value, float) else value))
            continue
        elif t is tuple and all(type(v) in _PLAIN for v in value):  # key_range=(lo, hi), say
            parts.append((name, t, tuple(map(type, value)), value))
            continue
        elif t is Func:  # a transform's @vyre.func, by identity: lowered once per helper and input type
            parts.append((name, t, value))
            continue
        else:
            return None
        parts.append((name, t, value.shape, value.dtype, device))  # another device: the full path checks it
        arrays.append(value)
    if resident and resident != len(arrays):
        return None
    return tuple(parts), arrays, bool(resident)


class Missed:
    """What a ``Call.exact`` call's ``finish`` returns when the words read back say the plan's
    guess was wrong (``unique``'s bins): its results go back, the caller takes another plan, and
    a loop's repeat of it refuses (the full path runs). Its one instance is ``MISSED``."""

    def __repr__(self) -> str:
        return "MISSED"


MISSED = Missed()


@dataclass
class Ran:
    """What the last compiled call on a scratch cache ran: set by ``Call.fast`` for ``record``."""

    entry: Any  # the FastCall
    shape: Callable[[list[Any]], Any]
    result: Any  # what ``shape`` returned
    data: tuple  # the data of the call's arrays, in the order the call was given them


class Source:
    """The arrays of a repeated call, where ``FastCall.run`` looks for them (as it does in a ``Call``);
    ``stream`` None for ``ResidentArray``s (the backend's)."""

    __slots__ = ("stream", "data", "like", "alloc_stream", "scratch")

    def __init__(self, stream: Any, data: list[Any], alloc_stream: Any, scratch: Any) -> None:
        self.stream, self.data, self.alloc_stream, self.scratch = stream, data, alloc_stream, scratch
        self.like = tuple(data)

    def input_data(self, index: int) -> Any:
        return self.data[index]

    def resident_input(self, index: int) -> tuple[Any, int]:
        """The handle and byte length of the ``index``-th ``ResidentArray``."""
        array = self.data[index]
        return array.handle, array.n * array.dtype.itemsize


@dataclass
class Repeat:
    """A compiled call to run again: where its arrays are among the arguments, and which part of
    the compiled call's result the function returned (None: all of it)."""

    entry: Any
    shape: Callable[[list[Any]], Any]
    positions: tuple[int | str, ...]
    pick: int | None

    def run(self, scratch: Any, stream: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
        """The function's result for these arguments on ``stream`` (the call's, from
        ``stream_for``), or None when the compiled call refuses."""
        data = [args[p] if isinstance(p, int) else kwargs[p] for p in self.positions]
        alloc_stream = None if kwargs.get("stream") is None else stream
        out = self.entry.run(Source(stream, data, alloc_stream, scratch), self.shape)
        if out is None or out is MISSED:  # refused, or ran and found its guess wrong
            return None
        return out if self.pick is None else out[self.pick]


def record(ran: Ran | None, result: Any, args: tuple, kwargs: dict[str, Any]) -> Repeat | None:
    """A ``Repeat`` of the call that returned ``result``, when its last step was the compiled call
    ``ran`` (the result is ``ran``'s, or one item of it) and each of its arrays is an argument."""
    if ran is None:
        return None
    if result is ran.result:
        pick = None
    elif isinstance(ran.result, tuple) and any(result is item for item in ran.result):
        pick = next(i for i, item in enumerate(ran.result) if item is result)
    else:
        return None
    named: Sequence[tuple[int | str, object]] = (*enumerate(args), *kwargs.items())
    positions: list[int | str] = []
    for data in ran.data:
        where = next((name for name, value in named if value is data), None)
        if where is None:
            return None
        positions.append(where)
    return Repeat(ran.entry, ran.shape, tuple(positions), pick)
