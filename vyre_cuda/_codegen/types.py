"""PTX spellings of vyre types: register classes, instruction suffixes, immediates."""

from __future__ import annotations

import struct

from vyre.ir.types import DataType

U32, I32, F32, BOOL = DataType.U32, DataType.I32, DataType.F32, DataType.BOOL
U64, I64, F64 = DataType.U64, DataType.I64, DataType.F64


def reg_kind(dtype: DataType) -> str:
    """Register class holding an arithmetic value: BOOL in a predicate, 64-bit types in .b64, the rest in .b32."""
    if dtype is BOOL:
        return "p"
    return "rd" if dtype.is_wide else "r"


def suffix(dtype: DataType) -> str:
    """Instruction type suffix for arithmetic on ``dtype`` (``u32``, ``s32``, ``f32``, ``u64``, ``s64``, ``f64``)."""
    return {U32: "u32", I32: "s32", F32: "f32", U64: "u64", I64: "s64", F64: "f64"}[dtype]


def bits(dtype: DataType) -> str:
    """The untyped bits suffix of a register of ``dtype`` (``b32`` or ``b64``)."""
    return "b64" if dtype.is_wide else "b32"


def mov(dtype: DataType) -> str:
    """The copy instruction for a register of ``dtype``."""
    return "mov.pred" if dtype is BOOL else f"mov.{bits(dtype)}"


def f32_imm(x: float) -> str:
    """A PTX single-precision immediate (``0f...``) holding ``x`` rounded to binary32."""
    return "0f" + struct.pack(">f", x).hex().upper()


def f64_imm(x: float) -> str:
    """A PTX double-precision immediate (``0d...``) holding ``x`` exactly."""
    return "0d" + struct.pack(">d", x).hex().upper()


def b32_imm(bits: int) -> str:
    """A 32-bit pattern as a hex immediate."""
    return f"0x{bits & 0xFFFFFFFF:08X}"


def b64_imm(bits: int) -> str:
    """A 64-bit pattern as a hex immediate."""
    return f"0x{bits & 0xFFFFFFFFFFFFFFFF:016X}"


def float_imm(dtype: DataType, x: float) -> str:
    """``x`` as an immediate of float type ``dtype`` (F32 or F64)."""
    return f64_imm(x) if dtype is F64 else f32_imm(x)


SIGN_BIT = "0x80000000"
ABS_MASK = "0x7FFFFFFF"
F32_ONE = f32_imm(1.0)
F32_NAN = "0f7FFFFFFF"
F32_NEG_INF = "0fFF800000"
