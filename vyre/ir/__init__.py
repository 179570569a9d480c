"""The vyre IR: types, buffers, expressions, statements and programs."""

from vyre.ir.expr import AtomicOp, Expr
from vyre.ir.node import Assign, Barrier, Block, If, Let, Loop, Node, Region, Return, Store
from vyre.ir.op import Op
from vyre.ir.program import Access, BufferDecl, Program
from vyre.ir.types import DataType


def parse(text: str) -> Program:
    """Parse the readable text form (``program.to_text()``) back into a Program."""
    from vyre.ir.text import parse as _parse

    return _parse(text)


__all__ = [
    "Access", "Assign", "AtomicOp", "Barrier", "Block", "BufferDecl", "DataType", "Expr", "If",
    "Let", "Loop", "Node", "Op", "Program", "Region", "Return", "Store", "parse",
]
