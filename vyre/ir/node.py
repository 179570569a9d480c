"""Statements of the vyre IR: immutable, hashable values with structural equality.

``Node`` is the base class and carries the public constructors (``Node.let`` ...); each
statement kind is its own small frozen dataclass so that passes can ``match`` on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar

from vyre.ir.expr import Expr, _buffer_name, _expr


def _nodes(body: Iterable[Node] | Node, what: str) -> tuple[Node, ...]:
    if isinstance(body, Node):
        body = (body,)
    out = tuple(body)
    for n in out:
        if not isinstance(n, Node):
            raise TypeError(f"{what} must hold Node values, got {n!r}. Fix: build statements with Node.*.")
    return out


def _name(name: object, what: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str, got {name!r}. Fix: pass a str.")
    return name


class Node:
    """Base of all statements; use the static constructors below."""

    __slots__ = ()
    if TYPE_CHECKING:  # every statement class is a frozen dataclass with a cached hash
        __dataclass_fields__: ClassVar[dict[str, Any]]
        _hash: int

    def __post_init__(self) -> None:
        # Hash once, bottom-up at construction, so hashing a deeply nested tree never recurses.
        key = (type(self).__name__, *(getattr(self, f.name) for f in fields(self)))
        object.__setattr__(self, "_hash", hash(key))

    def _cached_hash(self) -> int:
        return self._hash

    def _constructor_repr(self) -> str:
        """The ``Node.*`` call that builds this statement (statement lists shown as lists)."""
        values = (getattr(self, f.name) for f in fields(self))
        parts = [repr(list(v)) if isinstance(v, tuple) else repr(v) for v in values]
        return f"Node.{_CONSTRUCTOR[type(self).__name__]}({', '.join(parts)})"

    @staticmethod
    def let(name: str, value: Expr) -> Node:
        """Declare ``name`` with ``value`` for the rest of the enclosing block; names never shadow."""
        return Let(_name(name, "let name"), _expr(value, "value"))

    @staticmethod
    def assign(name: str, value: Expr) -> Node:
        """Give the variable ``name`` (declared by an enclosing ``let``, not a loop) a new value."""
        return Assign(_name(name, "assign name"), _expr(value, "value"))

    @staticmethod
    def store(buffer: object, index: Expr, value: Expr) -> Node:
        """Write ``value`` to ``buffer[index]`` (U32 index; narrowed to the storage type; out of bounds: nothing)."""
        return Store(_buffer_name(buffer), _expr(index, "index"), _expr(value, "value"))

    @staticmethod
    def if_(cond: Expr, then: Iterable[Node] | Node, otherwise: Iterable[Node] | Node = ()) -> Node:
        """Run ``then`` where ``cond`` (BOOL) holds, ``otherwise`` elsewhere."""
        return If(_expr(cond, "cond"), _nodes(then, "then"), _nodes(otherwise, "otherwise"))

    @staticmethod
    def loop(var: str, start: Expr, end: Expr, body: Iterable[Node] | Node) -> Node:
        """Run ``body`` with ``var`` = start, start+1, ..., end-1 (U32; bounds evaluated once)."""
        return Loop(_name(var, "loop variable"), _expr(start, "start"), _expr(end, "end"), _nodes(body, "body"))

    @staticmethod
    def barrier() -> Node:
        """Wait for every invocation of the workgroup; earlier writes become visible to all of them."""
        return Barrier()

    @staticmethod
    def block(nodes: Iterable[Node] | Node) -> Node:
        """A nested scope: ``let``s declared inside end with it."""
        return Block(_nodes(nodes, "block"))

    @staticmethod
    def region(generator: str, body: Iterable[Node] | Node) -> Node:
        """A named scope; ``generator`` records what produced it (an op pack, a front end)."""
        return Region(_name(generator, "region generator"), _nodes(body, "body"))

    @staticmethod
    def return_() -> Node:
        """End this invocation."""
        return Return()


@dataclass(frozen=True)
class Let(Node):
    """Declare an immutable-name, block-scoped variable (``assign`` may update it)."""

    name: str
    value: Expr


@dataclass(frozen=True)
class Assign(Node):
    """Update a variable declared by an enclosing ``let``."""

    name: str
    value: Expr


@dataclass(frozen=True)
class Store(Node):
    """Write ``value`` to ``buffer[index]``; out of bounds does nothing."""

    buffer: str
    index: Expr
    value: Expr


@dataclass(frozen=True)
class If(Node):
    cond: Expr
    then: tuple[Node, ...]
    otherwise: tuple[Node, ...] = ()


@dataclass(frozen=True)
class Loop(Node):
    """``for var in [start, end)`` over U32; bounds evaluated once."""

    var: str
    start: Expr
    end: Expr
    body: tuple[Node, ...]


@dataclass(frozen=True)
class Barrier(Node):
    """Workgroup barrier: also orders workgroup and global memory for the workgroup."""


@dataclass(frozen=True)
class Block(Node):
    """A scope: lets declared inside end with it."""

    body: tuple[Node, ...]


@dataclass(frozen=True)
class Region(Node):
    """A named scope (``generator`` records what produced it); runs like ``Block``."""

    generator: str
    body: tuple[Node, ...]


@dataclass(frozen=True)
class Return(Node):
    """End this invocation."""


_CONSTRUCTOR = {"Let": "let", "Assign": "assign", "Store": "store", "If": "if_", "Loop": "loop",
                "Barrier": "barrier", "Block": "block", "Region": "region", "Return": "return_"}
for _cls in (Let, Assign, Store, If, Loop, Barrier, Block, Region, Return):
    _cls.__hash__ = Node._cached_hash  # type: ignore[method-assign]
    _cls.__repr__ = Node._constructor_repr  # type: ignore[method-assign]
