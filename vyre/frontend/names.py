"""How a kernel's free names resolve, and constant expressions evaluated without ``eval``.

Free names (not parameters or variables) are looked up in the function's closure, then (for a
kernel defined inside a function) that function's locals, then its module's globals, then
builtins, once, when the kernel is decorated: ``vyre`` and its functions,
``@vyre.func`` helpers, and numbers (which become literals). Annotations, ``vyre.shared`` sizes
and decorator arguments are constant expressions: names, attributes, subscripts, tuples, dicts,
unary minus and integer ``+ - * // <<`` on integers of at most 64 bits (operands and results: a
count or size beyond that is refused before the arithmetic can take time or memory).
``Annotated[T, spec]`` annotations mean ``spec`` (``annotation_value``).
"""

from __future__ import annotations

import ast
import builtins
import operator
import typing
from collections.abc import Callable, Mapping
from typing import Any

from vyre.driver.errors import ValidationError
from vyre.frontend.source import SourceFile

#: integer arithmetic allowed in constant expressions (annotation counts, shared sizes)
_STATIC_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
               ast.LShift: operator.lshift}
#: operands and results of constant arithmetic stay within this many bits (counts are U32 anyway)
STATIC_INT_BITS = 64


def short_text(node: ast.AST, limit: int = 80) -> str:
    """The source text of ``node``, cut to ``limit`` characters for messages."""
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def namespace_of(fn: Any, enclosing: Mapping[str, Any] | None = None) -> Callable[[str], Any]:
    """Free-name lookup of a Python function: closure cells, then ``enclosing`` (the locals of the
    function that defined it, for names only its annotations use), then globals, then builtins."""
    closure = {}
    if getattr(fn, "__closure__", None):
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                closure[name] = cell.cell_contents
            except ValueError:
                pass
    return chain_lookup(closure, enclosing or {}, fn.__globals__)


def enclosing_locals(fn: Any, frame: Any) -> dict[str, Any] | None:
    """A copy of the locals of ``frame`` when it runs the function that defines ``fn`` (``fn``'s code
    is one of its constants), else None. Under ``from __future__ import annotations`` an annotation
    is text, so a local that only annotations name is no closure cell: this is where it is found."""
    code = getattr(fn, "__code__", None)
    defines = frame is not None and code is not None and any(c is code for c in frame.f_code.co_consts)
    return dict(frame.f_locals) if defines else None


def chain_lookup(*maps: Mapping[str, Any]) -> Callable[[str], Any]:
    def lookup(name: str) -> Any:
        for m in maps:
            if name in m:
                return m[name]
        return getattr(builtins, name)  # AttributeError when absent

    return lookup


def static_value(node: ast.expr, namespace: Callable[[str], Any], source: SourceFile) -> Any:
    """Evaluate a constant expression (names, attributes, subscripts, tuples, dicts) without ``eval``."""
    try:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return namespace(node.id)
        if isinstance(node, ast.Attribute):
            return getattr(static_value(node.value, namespace, source), node.attr)
        if isinstance(node, ast.Subscript):
            return static_value(node.value, namespace, source)[static_value(node.slice, namespace, source)]
        if isinstance(node, ast.Tuple):
            return tuple(static_value(e, namespace, source) for e in node.elts)
        if isinstance(node, ast.Dict) and None not in node.keys:
            return {static_value(k, namespace, source): static_value(v, namespace, source)
                    for k, v in zip(node.keys, node.values) if k is not None}
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -static_value(node.operand, namespace, source)
        if isinstance(node, ast.BinOp) and type(node.op) in _STATIC_OPS:
            left, right = static_value(node.left, namespace, source), static_value(node.right, namespace, source)
            if isinstance(left, int) and isinstance(right, int):
                return _static_arith(node, left, right, source)
    except (AttributeError, KeyError, TypeError) as exc:
        reason, _, fix = str(exc).partition(". Fix: ")  # vyre's own TypeErrors carry their Fix
        raise source.error(node, f"`{short_text(node)}` cannot be resolved ({reason})",
                           fix.rstrip(".") or "use vyre type names (vyre.In[vyre.f32], vyre.f32) and module-level "
                           "constants") from None
    raise source.error(node, f"`{ast.unparse(node)}` is not a constant expression",
                       "use vyre type names (vyre.In[vyre.f32], vyre.f32) and module-level constants")


def annotation_value(node: ast.expr, namespace: Callable[[str], Any], source: SourceFile) -> Any:
    """The vyre meaning of a parameter or variable annotation: ``static_value`` of it, except that
    ``typing.Annotated[T, spec]`` means its last metadata item ``spec`` (type checkers read ``T``).

    This is how a kernel states what a type checker cannot read: a count (``Annotated[vyre.Uniform[vyre.u32],
    PARAMS]`` with ``PARAMS = vyre.Uniform[vyre.u32, 32]``) or an element type chosen by the code that
    defines the kernel (``Annotated[vyre.In[vyre.u32], vyre.In[dtype]]`` with ``dtype`` a closure variable).
    """
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and len(node.slice.elts) >= 2:
        try:
            is_annotated = static_value(node.value, namespace, source) is typing.Annotated
        except ValidationError:
            is_annotated = False
        if is_annotated:
            return static_value(node.slice.elts[-1], namespace, source)
    return static_value(node, namespace, source)


def _static_arith(node: ast.BinOp, left: int, right: int, source: SourceFile) -> int:
    """``left <op> right`` with operands, shift amount and result bounded to ``STATIC_INT_BITS`` bits."""
    fix = (f"counts and sizes are integers of at most {STATIC_INT_BITS} bits: write a smaller constant, "
           "or compute it at module level")
    for value in (left, right):
        if value.bit_length() > STATIC_INT_BITS:
            raise source.error(node, f"`{short_text(node)}` has an operand beyond {STATIC_INT_BITS} bits", fix)
    if isinstance(node.op, ast.LShift) and not 0 <= right <= STATIC_INT_BITS:
        raise source.error(node, f"`{short_text(node)}` shifts by {right}, outside 0 .. {STATIC_INT_BITS}", fix)
    if isinstance(node.op, ast.FloorDiv) and right == 0:
        raise source.error(node, f"`{short_text(node)}` divides by zero", "divide by a non-zero constant")
    result = _STATIC_OPS[type(node.op)](left, right)
    if result.bit_length() > STATIC_INT_BITS:
        raise source.error(node, f"`{short_text(node)}` is beyond {STATIC_INT_BITS} bits", fix)
    return result
