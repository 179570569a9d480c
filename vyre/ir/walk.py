"""Generic traversals over IR trees, shared by every pass."""

from __future__ import annotations

from collections.abc import Iterator

from vyre.ir.expr import Expr
from vyre.ir.node import Assign, Block, If, Let, Loop, Node, Region, Store


def node_exprs(node: Node) -> tuple[Expr, ...]:
    """The expressions a statement evaluates itself (not those of nested statements)."""
    if isinstance(node, (Let, Assign)):
        return (node.value,)
    if isinstance(node, Store):
        return (node.index, node.value)
    if isinstance(node, If):
        return (node.cond,)
    if isinstance(node, Loop):
        return (node.start, node.end)
    return ()


def child_bodies(node: Node) -> tuple[tuple[Node, ...], ...]:
    """The nested statement lists of a statement."""
    if isinstance(node, If):
        return (node.then, node.otherwise)
    if isinstance(node, (Loop, Block, Region)):
        return (node.body,)
    return ()


def iter_nodes(body: tuple[Node, ...]) -> Iterator[Node]:
    """Every statement in ``body``, depth first, parents before children."""
    for node in body:
        yield node
        for child in child_bodies(node):
            yield from iter_nodes(child)


def iter_subexprs(e: Expr) -> Iterator[Expr]:
    """``e`` and all its sub-expressions, parents first."""
    stack = [e]
    while stack:
        cur = stack.pop()
        yield cur
        stack.extend(reversed(cur.args))


def iter_all_exprs(body: tuple[Node, ...]) -> Iterator[Expr]:
    """Every expression (and sub-expression) anywhere in ``body``."""
    for node in iter_nodes(body):
        for e in node_exprs(node):
            yield from iter_subexprs(e)
