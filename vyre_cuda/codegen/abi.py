"""The kernel ABI (docs/architecture.md), shared by the emitter and the launcher.

Parameters, in order: one ``.u64`` global pointer per non-workgroup buffer in binding order
(``program.bound_buffers``), then one ``.u64`` pointer to the *parameter block*: little-endian
u32 words ``[elements, count(bound buffer 0), count(bound buffer 1), ...]``. Counts are element
counts at run time; the block lives in device memory so a captured graph survives size changes.
A kernel coarsened along x (``emit_ptx(..., coarsen=K)`` with K > 1) reads one more word at the
end, after the counts: the logical grid x (workgroup count along x before coarsening).
"""

from __future__ import annotations

from vyre.ir.program import Program

#: every module holds one kernel, always under this name
ENTRY_NAME = "vyre_main"
#: word index of ``elements`` in the parameter block
ELEMENTS_WORD = 0


def param_name(index: int) -> str:
    """PTX name of kernel parameter ``index``."""
    return f"{ENTRY_NAME}_param_{index}"


def kernel_params(program: Program) -> list[str]:
    """Names of the buffers behind the kernel's pointer parameters, then ``"<param block>"``."""
    return [b.name for b in program.bound_buffers] + ["<param block>"]


def param_block_layout(program: Program, coarsen: int = 1) -> list[str]:
    """What each u32 word of the parameter block holds: ``["elements", "count:<buffer>", ...]``.

    The backend packs ``[elements] + [element count of b for b in program.bound_buffers]``, and
    for a kernel coarsened by ``coarsen`` > 1 one more word, ``"grid_x"``: the logical number of
    workgroups along x (the hardware grid x is ``ceil(grid_x / coarsen)``).
    """
    words = ["elements"] + [f"count:{b.name}" for b in program.bound_buffers]
    return words + ["grid_x"] if coarsen > 1 else words


def grid_x_word(program: Program) -> int:
    """Word index in the parameter block of the logical grid x (coarsened kernels only)."""
    return 1 + len(program.bound_buffers)


def count_word(program: Program, name: str) -> int:
    """Word index in the parameter block of the run-time element count of buffer ``name``."""
    for i, b in enumerate(program.bound_buffers):
        if b.name == name:
            return 1 + i
    raise KeyError(name)
