"""Buffers and programs of the vyre IR."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from vyre.ir.node import Node, _nodes
from vyre.ir.types import DataType


class Access(enum.Enum):
    """How a program uses a buffer (see docs/semantics.md)."""

    READ = "read"
    READ_WRITE = "read_write"
    OUTPUT = "output"
    UNIFORM = "uniform"
    WORKGROUP = "workgroup"

    def __repr__(self) -> str:
        return f"Access.{self.name}"

    @property
    def is_input(self) -> bool:
        """Takes a dispatch input (read, read_write, uniform)."""
        return self in (Access.READ, Access.READ_WRITE, Access.UNIFORM)

    @property
    def is_output(self) -> bool:
        """Returned by a dispatch (read_write, output)."""
        return self in (Access.READ_WRITE, Access.OUTPUT)

    @property
    def writable(self) -> bool:
        return self in (Access.READ_WRITE, Access.OUTPUT, Access.WORKGROUP)


def _check_count(count: object) -> int:
    if isinstance(count, bool) or not isinstance(count, int):
        raise TypeError(f"buffer count must be an int, got {count!r}. Fix: pass an int (0 = sized at dispatch).")
    return count


@dataclass(frozen=True, repr=False)
class BufferDecl:
    """One buffer of a program. ``binding`` is -1 for workgroup buffers; ``count`` 0 = runtime-sized.

    Build it with a constructor: ``read``, ``read_write``, ``output``, ``uniform`` take
    ``(name, binding, dtype, count)``; ``workgroup`` takes ``(name, count, dtype)`` (no binding).
    Every argument may also be passed by keyword (``name=``, ``binding=``, ``dtype=``, ``count=``).
    """

    name: str
    binding: int
    dtype: DataType
    count: int
    access: Access

    @staticmethod
    def read(name: str, binding: int, dtype: DataType, count: int = 0) -> BufferDecl:
        """An input the program only reads; ``count=0``: sized at dispatch from the input."""
        return BufferDecl(name, binding, dtype, _check_count(count), Access.READ)

    @staticmethod
    def read_write(name: str, binding: int, dtype: DataType, count: int = 0) -> BufferDecl:
        """An input the program may read and write; returned by the dispatch. ``count=0``: sized at dispatch."""
        return BufferDecl(name, binding, dtype, _check_count(count), Access.READ_WRITE)

    @staticmethod
    def output(name: str, binding: int, dtype: DataType, count: int) -> BufferDecl:
        """An output of ``count`` elements: takes no input, zero-filled before the dispatch, returned."""
        return BufferDecl(name, binding, dtype, _check_count(count), Access.OUTPUT)

    @staticmethod
    def uniform(name: str, binding: int, dtype: DataType, count: int) -> BufferDecl:
        """A small read-only input of ``count`` elements (parameters)."""
        return BufferDecl(name, binding, dtype, _check_count(count), Access.UNIFORM)

    @staticmethod
    def workgroup(name: str, count: int, dtype: DataType) -> BufferDecl:
        """Shared memory of ``count`` elements per workgroup, zeroed at the start of each workgroup.

        The order is ``(name, count, dtype)``; keywords (``count=``, ``dtype=``) work too and avoid
        mixing it up with the ``(name, binding, dtype, count)`` order of the other constructors.
        """
        if isinstance(count, DataType) and not isinstance(dtype, DataType):
            raise TypeError(f"BufferDecl.workgroup takes (name, count, dtype), got dtype {count!r} as the count. "
                            f"Fix: write BufferDecl.workgroup({name!r}, count={dtype!r}, dtype={count!r}).")
        return BufferDecl(name, -1, dtype, _check_count(count), Access.WORKGROUP)

    def __repr__(self) -> str:
        """The constructor call that builds this declaration."""
        access = self.access.value if isinstance(self.access, Access) else None
        if access == "workgroup":
            return f"BufferDecl.workgroup({self.name!r}, {self.count!r}, {self.dtype!r})"
        if access in ("read", "read_write") and self.count == 0:
            return f"BufferDecl.{access}({self.name!r}, {self.binding!r}, {self.dtype!r})"
        if access is not None:
            return f"BufferDecl.{access}({self.name!r}, {self.binding!r}, {self.dtype!r}, {self.count!r})"
        return (f"BufferDecl(name={self.name!r}, binding={self.binding!r}, dtype={self.dtype!r}, "
                f"count={self.count!r}, access={self.access!r})")

    @property
    def is_workgroup(self) -> bool:
        return self.access is Access.WORKGROUP


@dataclass(frozen=True)
class Program:
    """A compute program: buffers, a 3-D workgroup size and a body of statements."""

    buffers: tuple[BufferDecl, ...]
    workgroup_size: tuple[int, int, int]
    body: tuple[Node, ...]
    name: str | None = None

    def __init__(
        self,
        buffers: Iterable[BufferDecl],
        workgroup_size: Iterable[int],
        body: Iterable[Node] | Node,
        name: str | None = None,
    ) -> None:
        bufs = tuple(buffers)
        for b in bufs:
            if not isinstance(b, BufferDecl):
                raise TypeError(f"buffers must be BufferDecl values, got {b!r}. Fix: use BufferDecl.read/...")
        wg = tuple(workgroup_size)
        if len(wg) != 3 or any(isinstance(v, bool) or not isinstance(v, int) for v in wg):
            raise TypeError(f"workgroup_size must be 3 ints, got {workgroup_size!r}. Fix: pass e.g. (256, 1, 1).")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"program name must be a str or None, got {name!r}. Fix: pass a str.")
        object.__setattr__(self, "buffers", bufs)
        object.__setattr__(self, "workgroup_size", wg)
        object.__setattr__(self, "body", _nodes(body, "body"))
        object.__setattr__(self, "name", name)

    def __repr__(self) -> str:
        """The constructor call; a program nested too deeply to print (which the validator refuses)
        shows its buffers and a note instead of its body, rather than exhausting the stack."""
        from vyre.ir.shape import MAX_DEPTH, deeper_than

        if deeper_than(self.body, 4 * MAX_DEPTH):
            body = f"<a body nesting deeper than {4 * MAX_DEPTH} levels, not shown>"
        else:
            body = repr(list(self.body))
        return f"Program({list(self.buffers)!r}, {self.workgroup_size!r}, {body}, name={self.name!r})"

    # ---- lookups ---------------------------------------------------------------------------
    def buffer(self, name: str) -> BufferDecl | None:
        """The declaration named ``name``, or None."""
        for b in self.buffers:
            if b.name == name:
                return b
        return None

    @cached_property
    def bound_buffers(self) -> tuple[BufferDecl, ...]:
        """Non-workgroup buffers in binding order (the kernel ABI order)."""
        return tuple(sorted((b for b in self.buffers if not b.is_workgroup), key=lambda b: b.binding))

    @cached_property
    def inputs(self) -> tuple[BufferDecl, ...]:
        """Buffers that take a dispatch input, in declaration order."""
        return tuple(b for b in self.buffers if b.access.is_input)

    @cached_property
    def outputs(self) -> tuple[BufferDecl, ...]:
        """Buffers a dispatch returns, in declaration order."""
        return tuple(b for b in self.buffers if b.access.is_output)

    # ---- formats (implemented in vyre.ir.text / vyre.ir.wire) --------------------------
    def to_text(self) -> str:
        from vyre.ir.text import to_text

        return to_text(self)

    def to_wire(self) -> bytes:
        from vyre.ir.wire import to_wire

        return to_wire(self)

    @staticmethod
    def from_wire(data: bytes) -> Program:
        from vyre.ir.wire import from_wire

        return from_wire(data)

    def fingerprint(self) -> bytes:
        """32-byte BLAKE2b digest of the wire body."""
        from vyre.ir.wire import fingerprint

        return fingerprint(self)
