"""Registered ops for ``Expr.call``: definitions contributed by op packs through hooks.

An op is either *composed* (``expand`` builds IR from its arguments, so every backend runs it by
expansion, call by value: ``vyre.ir.expand``) or *primitive* (``reference`` gives its semantics
as a numpy function over whole lanes, and each backend needs its own lowering, else
``UnsupportedFeature``).

Ops whose id starts with ``GENERATOR_OP_PREFIX`` belong to the random program generator
(``vyre.ir.generate``), which registers them when imported; looking one up imports it, so stored
generated programs (fuzz corpora) run in any process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vyre.ir.types import DataType


@dataclass(frozen=True)
class OpDef:
    """One op: ``id``, argument and result types, and its meaning (``expand`` or ``reference``)."""

    id: str
    arg_types: tuple[DataType, ...]
    result_type: DataType
    expand: Callable[..., object] | None = None  # (*arg Exprs: literals or variables) -> Expr
    reference: Callable[..., object] | None = None  # (*numpy arrays) -> numpy array
    doc: str = ""

    def __post_init__(self) -> None:
        if (self.expand is None) == (self.reference is None):
            raise ValueError(
                f"op {self.id!r} must give exactly one of expand= or reference=. "
                "Fix: compose it from IR (expand) or give its numpy semantics (reference)."
            )


_OPS: dict[str, OpDef] = {}
_plugin_loader: list[Callable[[], None]] = []  # see set_plugin_loader
#: id prefix of the composed ops that ``vyre.ir.generate`` registers
GENERATOR_OP_PREFIX = "vyre.generate."


def register_op(op: OpDef) -> None:
    """Add ``op``; registering a different definition under a taken id is an error."""
    old = _OPS.get(op.id)
    if old is not None and old != op:
        raise ValueError(f"op {op.id!r} is already registered by another pack. Fix: choose a unique op id.")
    _OPS[op.id] = op


def get_op(op_id: str) -> OpDef | None:
    """The op registered as ``op_id`` (loading plugins first), or None."""
    if op_id not in _OPS:
        if isinstance(op_id, str) and op_id.startswith(GENERATOR_OP_PREFIX):
            import vyre.ir.generate  # noqa: F401 - registers the generator's ops
        _load_plugin_ops()
    return _OPS.get(op_id)


def registered_ops() -> dict[str, OpDef]:
    """Every registered op by id (plugin ops loaded first)."""
    _load_plugin_ops()
    return dict(_OPS)


def set_plugin_loader(load: Callable[[], None]) -> None:
    """Have lookups call ``load()`` first (``vyre.driver.registry`` installs ``load_plugin_ops`` when it
    loads, so this table is filled from above and never imports upward)."""
    _plugin_loader[:] = [load]


def _load_plugin_ops() -> None:
    for load in _plugin_loader:
        load()
