"""The op definitions: two composed ops (IR expansions) and one primitive op (numpy semantics)."""

from __future__ import annotations

import numpy as np

from vyre.ir import DataType, Expr
from vyre.ops import OpDef

U32 = DataType.U32


def _parity(x: Expr) -> Expr:
    return Expr.bitand(Expr.popcount(x), Expr.u32(1))


def _lowest_set(x: Expr) -> Expr:
    return Expr.bitand(x, Expr.sub(Expr.u32(0), x))


def _bswap32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.uint32).byteswap()


OPS = (
    OpDef("bits.parity", (U32,), U32, expand=_parity, doc="popcount(x) & 1"),
    OpDef("bits.lowest_set", (U32,), U32, expand=_lowest_set, doc="x & -x: the lowest set bit, 0 for 0"),
    OpDef("bits.bswap32", (U32,), U32, reference=_bswap32, doc="the four bytes of x reversed"),
)
