"""The instruction sink every lowering writes into: body, prologue, registers and labels."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from typing import NamedTuple

from vyre.ir.types import DataType
from vyre_cuda._codegen.regs import Registers
from vyre_cuda._codegen.types import reg_kind


class Val(NamedTuple):
    """A lowered expression: the register holding it and its vyre type."""

    reg: str
    dtype: DataType


class Builder:
    """Collects PTX instructions of one kernel.

    Values that are the same for the whole invocation (special registers, buffer pointers,
    run-time counts) are computed once in the *prologue*, which dominates the whole body; see
    ``cached``. A coarsened kernel (``coarsen.Coarsening``) also has a per-iteration prologue,
    ``iteration``, for values that depend on the logical workgroup (the global id along x).
    Values read once from buffer memory go into ``loaded``, which follows the prologue and the
    grid dependency wait (``module.grid_dependency``): nothing above that wait reads a buffer.
    """

    def __init__(self) -> None:
        self.regs = Registers()
        self.prologue: list[str] = []
        self.loaded: list[str] = []
        self.body: list[str] = []
        self.iteration: list[str] = []
        self._out = self.body
        self._labels = 0
        self._cache: dict[object, str] = {}

    # ---- raw output ------------------------------------------------------------------------
    def ins(self, text: str, guard: str | None = None) -> None:
        """Emit one instruction (no trailing ``;``), predicated on ``guard`` if given."""
        self._out.append(f"\t@{guard} {text};" if guard else f"\t{text};")

    def op(self, opcode: str, kind: str, *srcs: str) -> str:
        """Emit ``opcode d, srcs...`` into a fresh register of class ``kind``; returns ``d``."""
        d = self.regs.new(kind)
        self.ins(f"{opcode} {d}, {', '.join(srcs)}")
        return d

    def val(self, opcode: str, dtype: DataType, *srcs: str) -> Val:
        """``op`` whose result is a vyre value of type ``dtype``."""
        return Val(self.op(opcode, reg_kind(dtype), *srcs), dtype)

    def comment(self, text: str) -> None:
        """A comment line; callers pass only sanitised text (see ``names.sanitize``)."""
        self._out.append(f"\t// {text}")

    # ---- control flow -------------------------------------------------------------------------
    def new_label(self) -> str:
        self._labels += 1
        return f"$L{self._labels}"

    def place(self, label: str) -> None:
        self._out.append(f"{label}:")

    # ---- prologue values ------------------------------------------------------------------------
    def cached(self, key: object, make: Callable[[], str], lines: list[str] | None = None) -> str:
        """The register ``make()`` computes, emitted once into the prologue (or ``lines``) and reused."""
        reg = self._cache.get(key)
        if reg is None:
            with self.into(self.prologue if lines is None else lines):
                reg = make()
            self._cache[key] = reg
        return reg

    @contextmanager
    def into(self, lines: list[str]):
        """Temporarily direct output to ``lines``."""
        saved, self._out = self._out, lines
        try:
            yield
        finally:
            self._out = saved
