"""Building blocks for hand-made wire blobs (fuzzers and hostile-input tests): varints, literals,
and a body behind a correct header and digest, so that the decoder itself sees it."""

from __future__ import annotations

import hashlib
import struct

from vyre.ir import wire
from vyre.ir.types import DataType


def varint(v: int) -> bytes:
    """Unsigned LEB128, as the wire format writes counts, indices and literal bits."""
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    return bytes(out + bytes([v]))


def literal(dtype: DataType, bits: int) -> bytes:
    """The wire expression of a literal of ``dtype`` with bit pattern ``bits``."""
    return bytes([wire.OPS.index("lit"), wire.DTYPES.index(dtype)]) + varint(bits)


def signed(body: bytes, version: int = wire.VERSION, flags: int = 0) -> bytes:
    """``body`` behind the magic, ``version``, ``flags`` and its correct BLAKE2b digest."""
    return struct.pack("<4sHH", wire.MAGIC, version, flags) + hashlib.blake2b(body, digest_size=32).digest() + body


def body_head(*strings: str) -> bytes:
    """The start of a body: a string table of ``strings``, no program name, workgroup (1, 1, 1), no
    buffers; a statement count and statements follow."""
    table = varint(len(strings)) + b"".join(varint(len(s.encode())) + s.encode() for s in strings)
    return table + varint(0) + varint(2) * 3 + varint(0)
