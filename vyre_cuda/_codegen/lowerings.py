"""Registry of PTX lowerings for primitive ops (``Expr.call`` of an op with ``reference=``).

A plugin registers ``register_lowering(op_id, fn)``. The emitter calls
``fn(ctx, *arg_regs) -> result_reg`` where

- ``arg_regs`` are the registers holding the already evaluated arguments, in order: ``%rN``
  (``.b32``) for U32/I32/F32, ``%rdN`` (``.b64``) for U64/I64/F64, ``%pN`` (``.pred``) for BOOL;
- ``ctx`` is a ``LoweringContext``: ``ctx.emit("add.u32 %r9, %r1, %r2")`` appends one instruction
  (no trailing ``;``), ``ctx.reg(kind)`` returns a fresh register (``"r"`` .b32, ``"p"`` .pred,
  ``"rd"`` .b64, ``"h"`` .b16), ``ctx.arg_types`` / ``ctx.result_type`` give the op's types;
- the return value is the register holding the result (class matching ``result_type``).

Lowerings must not branch outside code they emit; labels from ``ctx.label()`` are unique.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vyre.ir.types import DataType
from vyre_cuda._codegen.builder import Builder

LoweringFn = Callable[..., str]
_LOWERINGS: dict[str, LoweringFn] = {}
_plugin_loader: list[Callable[[], object]] = []  # set from above (``vyre_cuda/__init__``): loads plugin lowerings


@dataclass
class LoweringContext:
    """What a lowering function may use: an instruction sink and fresh registers/labels."""

    builder: Builder
    arg_types: tuple[DataType, ...]
    result_type: DataType

    def emit(self, instruction: str) -> None:
        self.builder.ins(instruction.rstrip().rstrip(";"))

    def reg(self, kind: str = "r") -> str:
        return self.builder.regs.new(kind)

    def label(self) -> str:
        return self.builder.new_label()

    def place(self, label: str) -> None:
        self.builder.place(label)


def register_lowering(op_id: str, fn: LoweringFn) -> None:
    """Make ``fn`` the cuda lowering of primitive op ``op_id`` (a later registration replaces it)."""
    if not isinstance(op_id, str) or not callable(fn):
        raise TypeError("register_lowering(op_id: str, fn: callable). Fix: pass the op id and a function.")
    _LOWERINGS[op_id] = fn


def unregister_lowering(op_id: str) -> None:
    _LOWERINGS.pop(op_id, None)


def lowered_ops() -> frozenset[str]:
    """The op ids that have a lowering now (plugin lowerings load through ``vyre_cuda._factory``)."""
    return frozenset(_LOWERINGS)


def set_plugin_loader(load: Callable[[], object]) -> None:
    """Have ``get_lowering`` call ``load()`` on a miss (the package root installs
    ``vyre_cuda._factory.load_lowerings``: the code generator never imports upward)."""
    _plugin_loader[:] = [load]


def lowerings() -> dict[str, LoweringFn]:
    """Every lowering registered now, plugin lowerings loaded first: what a backend passes to ``emit_ptx``."""
    for load in _plugin_loader:
        try:
            load()
        except ImportError:
            break
    return dict(_LOWERINGS)


def get_lowering(op_id: str) -> LoweringFn | None:
    """The lowering registered for ``op_id``, or None.

    Plugin packs reach this registry through the ``vyre_cuda_register_lowerings`` hook, which
    ``vyre_cuda._factory.load_lowerings`` feeds into ``register_lowering`` (once per process; it is
    asked here on the first miss, through ``set_plugin_loader``, so ``emit_ptx`` alone sees plugin
    lowerings too).
    """
    if op_id not in _LOWERINGS:
        for load in _plugin_loader:
            try:
                load()
            except ImportError:
                return None
    return _LOWERINGS.get(op_id)
