"""The functions a ``@vyre.kernel`` body may call: ``vyre.sqrt``, ``vyre.gid``, ``vyre.atomic_add`` ...

Each is an ``Intrinsic``: the front end recognises it by identity (so ``import vyre as v`` and
``from vyre import sqrt`` both work) and lowers the call to IR. Called outside a kernel, the
expression intrinsics build the same ``Expr`` from ``Expr`` arguments (Python numbers are lifted
to literals like the operator sugar does), so builder users can write ``vyre.sqrt(x)`` too.
"""

from __future__ import annotations

import builtins
from typing import Any

from vyre.ir.expr import BINARY_OPS, UNARY_OPS, AtomicOp, Expr
from vyre.ir.node import Node
from vyre.ir.sugar import lift
from vyre.ir.types import DataType
from vyre.ir.typing import FLOAT_UNARY, PREDICATE_UNARY, SHIFT_OPS

#: unary ops whose operand is a float (an int literal operand becomes an F32 literal)
F32_OPERAND_OPS = frozenset(FLOAT_UNARY) | frozenset(PREDICATE_UNARY)


class Intrinsic:
    """A vyre function usable in kernels; ``kind`` says how the front end lowers a call to it."""

    __slots__ = ("name", "kind", "op")

    def __init__(self, name: str, kind: str, op: Any = None) -> None:
        self.name, self.kind, self.op = name, kind, op

    def __repr__(self) -> str:
        return f"vyre.{self.name}"

    def __call__(self, *args: Any) -> Any:
        build = _OUTSIDE.get(self.kind)
        if build is None:
            raise TypeError(f"{self!r}() only has a meaning inside a @vyre.kernel body. "
                            "Fix: call it in a kernel, or build the IR with vyre.ir.Node/BufferDecl.")
        return build(self, *args)


def _lift_all(args: tuple[Any, ...], dtype: DataType | None = None) -> list[Expr]:
    peer = next((a for a in args if isinstance(a, Expr)), None)
    return [lift(a, peer, dtype) for a in args]


def _unary(f: Intrinsic, a: Any) -> Expr:
    return getattr(Expr, f.op)(lift(a, dtype=DataType.F32 if f.op in F32_OPERAND_OPS else None))


def _binary(f: Intrinsic, a: Any, b: Any) -> Expr:
    if f.op in SHIFT_OPS:
        return getattr(Expr, f.op)(lift(a), lift(b, dtype=DataType.U32))
    return getattr(Expr, f.op)(*_lift_all((a, b)))


def _atomic(f: Intrinsic, buffer: Any, index: Any, *values: Any) -> Expr:
    if f.op.base is AtomicOp.COMPARE_EXCHANGE:
        expected, value = values
        return Expr.atomic(f.op, buffer, lift(index, dtype=DataType.U32), lift(value), lift(expected))
    (value,) = values
    return Expr.atomic(f.op, buffer, lift(index, dtype=DataType.U32), lift(value))


_OUTSIDE = {
    "unary": _unary,
    "binary": _binary,
    "id": lambda f, axis=0: getattr(Expr, f.op)(axis),
    "leaf": lambda f: getattr(Expr, f.op)(),
    "select": lambda f, c, a, b: Expr.select(lift(c), *_lift_all((a, b))),
    "fma": lambda f, a, b, c: Expr.fma(*_lift_all((a, b, c))),
    "atomic": _atomic,
    "ballot": lambda f, c: Expr.subgroup_ballot(lift(c)),
    "shuffle": lambda f, v, lane: Expr.subgroup_shuffle(lift(v), lift(lane, dtype=DataType.U32)),
    "subgroup_add": lambda f, v: Expr.subgroup_add(lift(v)),
    "call": lambda f, op_id, *args: Expr.call(op_id, *_lift_all(args)),
    "bits": lambda f, bits: Expr.f32_from_bits(bits),
    "bits64": lambda f, bits: Expr.f64_from_bits(bits),
    "barrier": lambda f: Node.barrier(),
}

INTRINSICS: dict[str, Intrinsic] = {}


def _add(name: str, kind: str, op: Any = None) -> None:
    INTRINSICS[name] = Intrinsic(name, kind, op)


for _op in UNARY_OPS:
    _add(_op, "unary", _op)
for _op in BINARY_OPS:
    _add(_op, "binary", _op)
for _alias, _op in (("gid", "invocation_id"), ("lid", "local_id"), ("wid", "workgroup_id")):
    _add(_alias, "id", _op)
    _add(_op, "id", _op)
for _atomic_op in AtomicOp:
    _add(f"atomic_{_atomic_op.value}", "atomic", _atomic_op)
_add("subgroup_local_id", "leaf", "subgroup_local_id")
_add("subgroup_size", "leaf", "subgroup_size")
_add("subgroup_ballot", "ballot")
_add("subgroup_shuffle", "shuffle")
_add("subgroup_add", "subgroup_add")
_add("select", "select")
_add("fma", "fma")
_add("call", "call")
_add("f32_from_bits", "bits")
_add("f64_from_bits", "bits64")
_add("barrier", "barrier")
_add("shared", "shared")
_add("registers", "registers")
_add("block", "block")
_add("region", "region")

globals().update(INTRINSICS)
#: every intrinsic except those named like a builtin (abs, min, max, round): ``from vyre import *``
#: must not replace Python's own; they stay reachable as ``vyre.min`` and so on
__all__ = sorted(n for n in INTRINSICS if not hasattr(builtins, n))
