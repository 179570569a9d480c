"""vyre-ops-bits: bit-manipulation ops for ``Expr.call`` (``ops.OPS``) and their cuda lowerings (``ptx.LOWERINGS``)."""

from vyre_ops_bits.ops import OPS
from vyre_ops_bits.ptx import LOWERINGS

__all__ = ["LOWERINGS", "OPS"]
