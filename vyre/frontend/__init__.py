"""The Python front end: ``@vyre.kernel`` functions lowered to ``vyre.ir`` programs (docs/kernels.md).

``kernel``/``func`` decorate functions written in a restricted Python subset; ``to_python``
prints any ``Program`` back as such a function; ``kernel_from_source`` lowers kernel text.
"""

from vyre.frontend.annotations import (
    BY_EXPRESSION,
    In,
    InOut,
    Out,
    ScalarType,
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
from vyre.frontend.intrinsics import INTRINSICS, Intrinsic
from vyre.frontend.kernel import Func, Kernel, func, kernel, kernel_from_source
from vyre.frontend.printer import to_python
from vyre.frontend.template import KernelTemplate

__all__ = [
    "BY_EXPRESSION", "INTRINSICS", "Const", "Func", "In", "InOut", "Intrinsic", "Kernel", "KernelTemplate", "Out",
    "ScalarType", "Uniform", "bf16", "boolean",
    "f16", "f32", "f64", "func", "i8", "i16", "i32", "i64", "kernel", "kernel_from_source", "to_python", "u8", "u16",
    "u32", "u64",
]
