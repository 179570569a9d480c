"""Structural well-formedness of IR values, and the size limits shared by the validator and formats.

``Expr`` is one generic record (op, args, dtype, value, name); ``SHAPES`` (from the op table,
``vyre.ir.op``) says which of those fields each op uses, so the validator, the text printer/parser
and the wire codec agree on what a well-formed expression is without repeating per-op code. ``node_well_formed`` and
``buffer_well_formed`` do the same for statements and buffer declarations built field by field.
"""

from __future__ import annotations

from vyre.ir.expr import AtomicOp, Expr
from vyre.ir.node import Assign, Barrier, Block, If, Let, Loop, Node, Region, Return, Store
from vyre.ir.op import COLLECTIVE_OPS, OPS, Op
from vyre.ir.op import Shape as Shape
from vyre.ir.program import Access, BufferDecl
from vyre.ir.types import DataType

#: Deepest nesting accepted: statement levels plus the expression levels below them. Python's
#: structural equality and recursive passes use several stack frames per level, so 128 keeps
#: every recursive walk far from the interpreter's default recursion limit (1000).
MAX_DEPTH = 128
#: Most statements plus expression nodes (counted as a tree) in one program. The text parser also
#: counts buffer declarations. This bounds the time and memory of validating and decoding any input;
#: compile time is bounded separately, per backend (``vyre_cuda._codegen.limits``).
MAX_NODES = 65_536
#: Longest buffer, variable, op or program name, in UTF-8 bytes.
MAX_NAME_BYTES = 4096


#: which fields each op uses (the ``shape`` of its ``vyre.ir.op`` facts)
SHAPES: dict[Op, Shape] = {op: info.shape for op, info in OPS.items()}
#: Subgroup ops that exchange values between lanes: every lane of the subgroup must reach them.
SUBGROUP_COLLECTIVES = COLLECTIVE_OPS


def describe(v: object) -> str:
    """A short description of an arbitrary value for messages; never fails (no repr of IR trees)."""
    text = repr(v) if isinstance(v, (str, int, float, type(None), DataType, AtomicOp)) else f"a {type(v).__name__}"
    return text if len(text) <= 80 else text[:77] + "..."


def _value_problem(kind: str | None, e: Expr) -> str | None:
    v = e.value
    if kind is None:
        return None if v is None else f"{e.op} carries an unexpected value {describe(v)}"
    if kind == "atomic":
        return None if isinstance(v, AtomicOp) else f"atomic op {describe(v)} is not an AtomicOp"
    if isinstance(v, bool) or not isinstance(v, int):
        return f"{e.op} value {describe(v)} is not an int"
    if kind == "axis":
        return None if 0 <= v <= 2 else f"{e.op} axis {v} is not 0, 1 or 2"
    top = 1 if e.dtype is DataType.BOOL else (1 << (8 * e.dtype.size)) - 1
    return None if 0 <= v <= top else f"literal value {v} is outside [0, {top}] for {e.dtype.name}"


def shape_problem(e: Expr) -> str | None:
    """Why ``e`` itself (not its operands) is structurally malformed, or None when well formed."""
    shape = SHAPES.get(e.op)
    if shape is None:
        return f"unknown expression op {describe(e.op)}"
    args = e.args
    if type(args) is not tuple:
        return f"operands of {e.op} are not a tuple of Expr"
    for a in args:
        if not isinstance(a, Expr):
            return f"operands of {e.op} are not a tuple of Expr"
    n = len(args)
    if n < shape.min_args or (shape.max_args is not None and n > shape.max_args):
        want = f"{shape.min_args}" if shape.fixed_arity else f"{shape.min_args}..{shape.max_args or 'n'}"
        return f"{e.op} has {n} operands, expected {want}"
    if not (isinstance(e.dtype, DataType) if shape.dtype else e.dtype is None):
        return f"{e.op} has dtype {describe(e.dtype)}, expected {'a DataType' if shape.dtype else 'None'}"
    if e.op == Op.LIT and not e.dtype.is_arith:
        return f"literal of storage-only type {e.dtype.name}"
    if not (isinstance(e.name, str) if shape.name else e.name is None):
        return f"{e.op} has name {describe(e.name)}, expected {'a str' if shape.name else 'None'}"
    return _value_problem(shape.value, e)


def name_problem(name: object) -> tuple[str, str] | None:
    """``(code, message)`` when ``name`` cannot name a buffer, variable or op, else None."""
    if not isinstance(name, str):
        return "invalid_name", f"name {describe(name)} is not a str"
    if not name:
        return "empty_name", "name is empty"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "invalid_name", f"name {describe(name)} holds a lone surrogate (not encodable as UTF-8)"
    if size > MAX_NAME_BYTES:
        return "invalid_name", f"name of {size} UTF-8 bytes is longer than {MAX_NAME_BYTES}"
    return None


def buffer_well_formed(b: BufferDecl) -> bool:
    """Whether every field of ``b`` has the right Python type."""
    return (isinstance(b.name, str) and _is_int(b.binding) and isinstance(b.dtype, DataType)
            and _is_int(b.count) and isinstance(b.access, Access))


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


_NODE_FIELDS: dict[type, tuple[tuple[str, type], ...]] = {
    Let: (("name", str), ("value", Expr)),
    Assign: (("name", str), ("value", Expr)),
    Store: (("buffer", str), ("index", Expr), ("value", Expr)),
    If: (("cond", Expr), ("then", tuple), ("otherwise", tuple)),
    Loop: (("var", str), ("start", Expr), ("end", Expr), ("body", tuple)),
    Barrier: (),
    Block: (("body", tuple),),
    Region: (("generator", str), ("body", tuple)),
    Return: (),
}


def node_well_formed(node: object) -> bool:
    """Whether ``node`` is a known statement whose own fields have the right types (not recursive)."""
    fields = _NODE_FIELDS.get(type(node))
    if fields is None:
        return False
    for name, kind in fields:
        value = getattr(node, name, None)
        if not isinstance(value, kind):
            return False
        if kind is tuple and any(not isinstance(n, Node) for n in value):
            return False
    return True


def deeper_than(roots: object, limit: int = MAX_DEPTH) -> bool:
    """Whether statements and expressions under ``roots`` (a program's body, a node, an expression)
    nest more than ``limit`` levels; an iterative walk, so any depth is safe to ask about."""
    stack = [(root, 1) for root in (roots if isinstance(roots, (list, tuple)) else (roots,))]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, Expr):
            stack.extend((a, depth + 1) for a in item.args)
        elif isinstance(item, Node):
            for value in vars(item).values() if hasattr(item, "__dict__") else _fields(item):
                if isinstance(value, Expr):
                    stack.append((value, depth + 1))
                elif isinstance(value, (list, tuple)):
                    stack.extend((v, depth + 1) for v in value if isinstance(v, (Node, Expr)))
    return False


def _fields(node: Node) -> list[object]:
    import dataclasses

    return [getattr(node, f.name) for f in dataclasses.fields(node)] if dataclasses.is_dataclass(node) else []
