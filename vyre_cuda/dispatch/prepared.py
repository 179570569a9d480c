"""``PreparedProgram``: a program ready to launch on the ``cuda`` backend.

Made and cached by ``CudaBackend.prepared`` (per program, workgroup size and coarsening factor):
the loaded kernel, the bound buffers in kernel ABI order, the default ``LaunchPlan`` that
``dispatch`` / ``dispatch_resident`` rebind on each call, and the kernel's parameter words and
hardware grid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vyre.driver.config import DispatchConfig, default_elements
from vyre.ir.program import BufferDecl, Program
from vyre_cuda.dispatch.coarsening import launch_grid
from vyre_cuda.runtime.launch import LaunchPlan


@dataclass(eq=False)
class PreparedProgram:
    """A program ready to launch on this backend: module, kernel and its default launch plan."""

    program: Program
    name: str
    block: tuple[int, int, int]
    kernel: Any  # vyre_cuda.runtime.loader.LoadedKernel
    ptx: str
    bound: tuple[BufferDecl, ...]  # kernel ABI order (binding order)
    shared_bytes: int
    plan: LaunchPlan  # the default plan that dispatch / dispatch_resident rebind each call
    emit_ns: int = 0
    load_ns: int = 0
    coarsen: int = 1  # logical workgroups along x per hardware workgroup (codegen.coarsen)

    def elements(self, config: DispatchConfig | None, counts: dict[str, int]) -> int:
        """Word 0 of the parameter block: ``config.elements``, else the default-grid element count."""
        if config is not None and config.elements is not None:
            return config.elements
        return default_elements(self.program, counts)

    @property
    def nwords(self) -> int:
        """u32 words of the kernel's parameter block (``codegen.abi.param_block_layout``)."""
        return len(self.bound) + (2 if self.coarsen > 1 else 1)

    def words(self, counts: dict[str, int], elements: int,
              grid: Sequence[int] | None = None) -> tuple[int, ...]:
        """The parameter block: elements, each bound buffer's element count, then (coarsened
        kernels only) the logical grid x."""
        words = (elements, *(counts[b.name] for b in self.bound))
        if self.coarsen == 1:
            return words
        if grid is None:
            raise ValueError(f"program {self.name}: a coarsened kernel's parameter words need the grid. "
                             "Fix: pass the logical grid to words().")
        return (*words, int(grid[0]))

    def launch_grid(self, grid: Sequence[int]) -> tuple[int, int, int]:
        """The hardware grid that runs the logical ``grid``."""
        return launch_grid(grid, self.coarsen) if self.coarsen > 1 else tuple(grid)
