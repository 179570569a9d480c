"""Data types of the vyre IR and their storage/arithmetic properties."""

from __future__ import annotations

import enum
import struct

import numpy as np


class DataType(enum.Enum):
    """Element types. Storage may use any; arithmetic uses U32, I32, F32 and BOOL."""

    U8 = "u8"
    U16 = "u16"
    U32 = "u32"
    I8 = "i8"
    I16 = "i16"
    I32 = "i32"
    F16 = "f16"
    BF16 = "bf16"
    F32 = "f32"
    BOOL = "bool"

    def __repr__(self) -> str:
        return f"DataType.{self.name}"

    @property
    def size(self) -> int:
        """Bytes per element in a buffer (BOOL is a 4-byte 0/1 word)."""
        return _SIZES[self]

    @property
    def np_dtype(self) -> np.dtype:
        """numpy dtype of a buffer of this type (BF16 is raw uint16 bits, BOOL is uint32)."""
        return np.dtype(_NP[self])

    @property
    def arith(self) -> DataType:
        """The type a load from a buffer of this type produces (loads widen)."""
        return _ARITH[self]

    @property
    def is_arith(self) -> bool:
        """True for the four types arithmetic happens on."""
        return self in ARITH_TYPES

    @property
    def is_float(self) -> bool:
        return self in (DataType.F16, DataType.BF16, DataType.F32)

    @property
    def is_signed(self) -> bool:
        return self in (DataType.I8, DataType.I16, DataType.I32)

    @property
    def is_int(self) -> bool:
        return self in (DataType.U8, DataType.U16, DataType.U32, DataType.I8, DataType.I16, DataType.I32)


_SIZES = {
    DataType.U8: 1, DataType.U16: 2, DataType.U32: 4, DataType.I8: 1, DataType.I16: 2,
    DataType.I32: 4, DataType.F16: 2, DataType.BF16: 2, DataType.F32: 4, DataType.BOOL: 4,
}
_NP = {
    DataType.U8: np.uint8, DataType.U16: np.uint16, DataType.U32: np.uint32, DataType.I8: np.int8,
    DataType.I16: np.int16, DataType.I32: np.int32, DataType.F16: np.float16,
    DataType.BF16: np.uint16, DataType.F32: np.float32, DataType.BOOL: np.uint32,
}
_ARITH = {
    DataType.U8: DataType.U32, DataType.U16: DataType.U32, DataType.U32: DataType.U32,
    DataType.I8: DataType.I32, DataType.I16: DataType.I32, DataType.I32: DataType.I32,
    DataType.F16: DataType.F32, DataType.BF16: DataType.F32, DataType.F32: DataType.F32,
    DataType.BOOL: DataType.BOOL,
}

ARITH_TYPES = (DataType.U32, DataType.I32, DataType.F32, DataType.BOOL)
INT_TYPES = (DataType.U32, DataType.I32)


def f32_bits(value: float) -> int:
    """IEEE binary32 bit pattern of a Python float (rounded to nearest even; overflow gives ±inf)."""
    with np.errstate(over="ignore"):
        return int(np.array(value, dtype=np.float64).astype(np.float32).view(np.uint32))


def bits_f32(bits: int) -> float:
    """Python float holding the binary32 value of a 32-bit pattern."""
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]
