"""The kernel ABI (docs/architecture.md), shared by the emitter and the launcher.

Parameters, in order: one ``.u64`` global pointer per non-workgroup buffer in binding order
(``program.bound_buffers``), then one ``.u64`` pointer to the *parameter block*: little-endian
u32 words ``[elements, count(bound buffer 0), count(bound buffer 1), ...]``. Counts are element
counts at run time; the block lives in device memory so a captured graph survives size changes.
A kernel coarsened along x (``emit_ptx(..., coarsen=K)`` with K > 1) reads one more word at the
end, after the counts: the logical grid x (workgroup count along x before coarsening).
"""

from __future__ import annotations

import hashlib
import re

from vyre.ir.program import Program

#: every module holds one kernel, named after its program (``entry_name``); this name is the
#: fallback for an unnamed program, and the stem of every kernel's parameter names
ENTRY_NAME = "vyre_main"
#: longest kernel name ``entry_name`` makes (Nsight and ``cuobjdump`` show it whole)
ENTRY_NAME_LIMIT = 64
_CLEAN_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_RESERVED = ("WARP_SZ",)  # PTX's one predefined identifier without a leading %
#: word index of ``elements`` in the parameter block
ELEMENTS_WORD = 0


def entry_name(program: Program) -> str:
    """The PTX name of ``program``'s kernel: its ``name`` when that is already a plain identifier.

    A name made of ``[A-Za-z][A-Za-z0-9_]*``, at most ``ENTRY_NAME_LIMIT`` long, not PTX's
    ``WARP_SZ`` and not in the emitter's own ``vyre_`` namespace, is the kernel name as it is
    (``saxpy``, ``lib_radix_onesweep_4``). Any other name is sanitised (other characters become
    ``_``, ``vyre_`` in front when it does not start with a letter), cut to fit, and followed by
    ``_`` and 8 hex digits of its BLAKE2b hash, so two names never share a kernel name by
    sanitising; an unnamed program's kernel is ``ENTRY_NAME``. Pure: the same name always gives
    the same kernel name.
    """
    name = program.name
    if not name:
        return ENTRY_NAME
    if (len(name) <= ENTRY_NAME_LIMIT and _CLEAN_NAME.fullmatch(name) and name not in _RESERVED
            and not name.startswith("vyre_")):
        return name
    tag = hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()
    stem = re.sub(r"[^A-Za-z0-9_]", "_", name)
    stem = stem if stem[0].isalpha() else f"vyre_{stem}"
    return f"{stem[:ENTRY_NAME_LIMIT - len(tag) - 1]}_{tag}"


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
