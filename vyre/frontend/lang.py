"""The kernel language as one namespace on the front end's floor: what ``vyre`` exports for kernel
bodies (element types, buffer kinds, ``Const``, the intrinsics, ``kernel`` and ``func``).

``vyre.lib`` sits below the public package, so its kernels cannot read ``vyre.u32``; they import
this module (``from vyre.frontend import lang as vk``) and write ``vk.u32``, ``vk.lid()``. Type
checkers read ``lang.pyi``, generated with ``vyre/__init__.pyi`` by ``python -m vyre.frontend.stubs --write``.
"""

from __future__ import annotations

from vyre.frontend.annotations import (
    In,
    InOut,
    Out,
    Uniform,
    bf16,
    boolean,
    f16,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
)
from vyre.frontend.consts import Const
from vyre.frontend.intrinsics import *  # noqa: F403 - gid, lid, atomic_add_relaxed, ...
from vyre.frontend.intrinsics import INTRINSICS as _INTRINSICS
from vyre.frontend.intrinsics import __all__ as _intrinsics
from vyre.frontend.kernel import func, kernel

abs, max, min, round = (_INTRINSICS[n] for n in ("abs", "max", "min", "round"))  # as vyre.min etc.

__all__ = ["Const", "In", "InOut", "Out", "Uniform", "bf16", "boolean", "f16", "f32", "f64", "func", "i8", "i16",
           "i32", "i64", "kernel", "u8", "u16", "u32", "u64", *_intrinsics]
