"""Data types of the vyre IR and their storage/arithmetic properties."""

from __future__ import annotations

import enum
import struct

import numpy as np


class DataType(enum.Enum):
    """Element types. Storage may use any; arithmetic uses U32, I32, F32, BOOL, U64, I64 and F64."""

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
    U64 = "u64"
    I64 = "i64"
    F64 = "f64"

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
        """True for the seven types arithmetic happens on."""
        return self in ARITH_TYPES

    @property
    def is_float(self) -> bool:
        return self in (DataType.F16, DataType.BF16, DataType.F32, DataType.F64)

    @property
    def is_signed(self) -> bool:
        return self in (DataType.I8, DataType.I16, DataType.I32, DataType.I64)

    @property
    def is_int(self) -> bool:
        return self in (DataType.U8, DataType.U16, DataType.U32, DataType.I8, DataType.I16, DataType.I32,
                        DataType.U64, DataType.I64)

    @property
    def bits(self) -> int:
        """Width of an arithmetic value of this type (shift amounts are masked to ``bits - 1``)."""
        return 8 * self.size if self is not DataType.BOOL else 1

    @property
    def is_wide(self) -> bool:
        """True for the 64-bit types U64, I64 and F64."""
        return self in WIDE_TYPES


_SIZES = {
    DataType.U8: 1, DataType.U16: 2, DataType.U32: 4, DataType.I8: 1, DataType.I16: 2,
    DataType.I32: 4, DataType.F16: 2, DataType.BF16: 2, DataType.F32: 4, DataType.BOOL: 4,
    DataType.U64: 8, DataType.I64: 8, DataType.F64: 8,
}
_NP = {
    DataType.U8: np.uint8, DataType.U16: np.uint16, DataType.U32: np.uint32, DataType.I8: np.int8,
    DataType.I16: np.int16, DataType.I32: np.int32, DataType.F16: np.float16,
    DataType.BF16: np.uint16, DataType.F32: np.float32, DataType.BOOL: np.uint32,
    DataType.U64: np.uint64, DataType.I64: np.int64, DataType.F64: np.float64,
}
_ARITH = {
    DataType.U8: DataType.U32, DataType.U16: DataType.U32, DataType.U32: DataType.U32,
    DataType.I8: DataType.I32, DataType.I16: DataType.I32, DataType.I32: DataType.I32,
    DataType.F16: DataType.F32, DataType.BF16: DataType.F32, DataType.F32: DataType.F32,
    DataType.BOOL: DataType.BOOL, DataType.U64: DataType.U64, DataType.I64: DataType.I64,
    DataType.F64: DataType.F64,
}

ARITH_TYPES = (DataType.U32, DataType.I32, DataType.F32, DataType.BOOL, DataType.U64, DataType.I64, DataType.F64)
INT_TYPES = (DataType.U32, DataType.I32, DataType.U64, DataType.I64)
WIDE_TYPES = (DataType.U64, DataType.I64, DataType.F64)
#: integer type -> its twin of the other signedness (casts between twins keep the bits)
SIGN_TWIN = {DataType.U32: DataType.I32, DataType.I32: DataType.U32, DataType.U64: DataType.I64,
             DataType.I64: DataType.U64}


def f32_bits(value: float) -> int:
    """IEEE binary32 bit pattern of a Python float (rounded to nearest even; overflow gives ±inf)."""
    with np.errstate(over="ignore"):
        return int(np.array(value, dtype=np.float64).astype(np.float32).view(np.uint32))


def bits_f32(bits: int) -> float:
    """Python float holding the binary32 value of a 32-bit pattern."""
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


def f64_bits(value: float) -> int:
    """IEEE binary64 bit pattern of a Python float."""
    return struct.unpack("<Q", struct.pack("<d", value))[0]


def bits_f64(bits: int) -> float:
    """Python float holding the binary64 value of a 64-bit pattern."""
    return struct.unpack("<d", struct.pack("<Q", bits & 0xFFFFFFFFFFFFFFFF))[0]
