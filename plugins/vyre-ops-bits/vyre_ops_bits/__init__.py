"""vyre-ops-bits: bit-manipulation ops for ``Expr.call`` (see ``ops.OPS``)."""

from vyre_ops_bits.ops import OPS

__all__ = ["OPS"]
