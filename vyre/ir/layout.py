"""Where a program's buffers live at run time: workgroup memory offsets and kernel parameters.

One definition serves the validator, the PTX emitter and the launcher, so that a program the
validator accepts is exactly a program that fits: workgroup buffers are laid out in declaration
order, each starting on a ``WORKGROUP_ALIGN``-byte boundary (8 bytes for the 64-bit types, whose
accesses must be naturally aligned), and the total is rounded up to ``WORKGROUP_ALIGN`` (the
emitted code zeroes workgroup memory one 4-byte word at a time).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from vyre.ir.program import BufferDecl, Program

#: every workgroup buffer starts on (and the total is padded to) this many bytes
WORKGROUP_ALIGN = 4
#: workgroup memory every device runs: static shared memory on every CUDA target (ptxas: 0xc000)
PORTABLE_WORKGROUP_BYTES = 48 * 1024
#: the most workgroup memory a program may declare: the largest per-block opt-in of any CUDA device
#: (227 KiB on sm_90 and sm_100; 163 KiB on sm_80, 99 KiB on sm_86/sm_89, 48 KiB before sm_70 opt-in)
MAX_WORKGROUP_BYTES = 227 * 1024
#: bytes of kernel parameter space each bound buffer (and the parameter block) takes: a 64-bit pointer
PARAM_POINTER_BYTES = 8
#: kernel parameter space on CUDA targets with PTX ISA 8.1 or newer (measured with ptxas: 0x7ffc)
MAX_PARAM_BYTES = 32764
#: non-workgroup buffers a program may declare: their pointers plus the parameter block's must fit
MAX_BOUND_BUFFERS = MAX_PARAM_BYTES // PARAM_POINTER_BYTES - 1
#: bindings are u32 slot numbers
MAX_BINDING = 0xFFFFFFFF


class WorkgroupLayout(NamedTuple):
    """Byte offset of each workgroup buffer from the start of workgroup memory, and the padded total."""

    offsets: dict[str, int]
    total: int


def _align(n: int, to: int = WORKGROUP_ALIGN) -> int:
    return -(-n // to) * to


def workgroup_layout(buffers: Program | Iterable[BufferDecl]) -> WorkgroupLayout:
    """Offsets and total bytes of the workgroup buffers among ``buffers`` (or a program's buffers).

    Buffers with a non-positive count take no space; a repeated name keeps its first offset.
    """
    decls = buffers.buffers if isinstance(buffers, Program) else buffers
    offsets: dict[str, int] = {}
    total = 0
    for d in decls:
        if d.is_workgroup and d.count > 0:
            start = _align(total, max(WORKGROUP_ALIGN, d.dtype.size))
            offsets.setdefault(d.name, start)
            total = _align(start + d.count * d.dtype.size)
    return WorkgroupLayout(offsets, total)


def workgroup_bytes(buffers: Program | Iterable[BufferDecl]) -> int:
    """Bytes of workgroup memory a workgroup of the program needs (alignment padding included)."""
    return workgroup_layout(buffers).total


def dynamic_workgroup_bytes(buffers: Program | Iterable[BufferDecl]) -> int:
    """Workgroup bytes a launch must request as dynamic shared memory: the padded total when it is
    over ``PORTABLE_WORKGROUP_BYTES`` (the kernel then declares one ``.extern .shared`` region and
    opts in to the size at load), else 0 (a static ``.shared`` array, as every program at or below it)."""
    total = workgroup_bytes(buffers)
    return total if total > PORTABLE_WORKGROUP_BYTES else 0


def param_bytes(bound_buffers: int) -> int:
    """Kernel parameter space of a program with ``bound_buffers`` non-workgroup buffers."""
    return (bound_buffers + 1) * PARAM_POINTER_BYTES


__all__ = [
    "MAX_BINDING", "MAX_BOUND_BUFFERS", "MAX_PARAM_BYTES", "MAX_WORKGROUP_BYTES", "PARAM_POINTER_BYTES",
    "PORTABLE_WORKGROUP_BYTES", "WORKGROUP_ALIGN", "WorkgroupLayout", "dynamic_workgroup_bytes", "param_bytes",
    "workgroup_bytes", "workgroup_layout",
]
