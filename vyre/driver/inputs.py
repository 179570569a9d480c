"""The host side of SPEC section 3: turn dispatch inputs into typed arrays, sized buffers and a grid.

Every backend calls ``prepare_host_dispatch`` so that input checking, runtime buffer sizes and
the grid rule are the same everywhere (the CUDA backend has its own device-array path that
reuses ``check_byte_length`` and ``buffer_counts``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from vyre.driver.config import DispatchConfig, resolve_grid
from vyre.driver.errors import InvalidHandle, InvalidProgram
from vyre.ir.program import Access, BufferDecl, Program


@dataclass
class HostDispatch:
    """A dispatch ready to run on the host: one array per non-workgroup buffer, and the grid."""

    arrays: dict[str, np.ndarray]
    grid: tuple[int, int, int]
    counts: dict[str, int]

    def outputs(self, program: Program) -> list[np.ndarray]:
        """The arrays a dispatch returns, in declaration order."""
        return [self.arrays[b.name] for b in program.outputs]


def host_bytes(data: object, what: str) -> memoryview:
    """A flat byte view of a host buffer; ``what`` names it in errors (e.g. "input for buffer 'a'")."""
    if isinstance(data, np.ndarray) and (data.dtype.hasobject or data.dtype.kind in "OMmU"):
        raise InvalidProgram(
            f"{what} is a numpy array of dtype {data.dtype}, which holds no plain numbers",
            "pass the values as a numeric array, e.g. numpy.asarray(x, dtype=numpy.uint32).",
        )
    try:
        view = memoryview(data)
    except (TypeError, ValueError):
        raise InvalidProgram(
            f"{what} is a {type(data).__name__}, not a buffer",
            "pass bytes, bytearray, memoryview or a C-contiguous numpy array (device arrays need the cuda backend).",
        ) from None
    if not view.c_contiguous:
        raise InvalidProgram(f"{what} is not C-contiguous", "pass numpy.ascontiguousarray(x).")
    return view.cast("B") if view.ndim != 1 or view.format != "B" else view


def as_bytes_view(decl: BufferDecl, data: object) -> memoryview:
    """A flat byte view of a host input for ``decl``; errors name the buffer."""
    return host_bytes(data, f"input for buffer {decl.name!r}")


def check_byte_length(decl: BufferDecl, nbytes: int) -> int:
    """Element count of an input of ``nbytes``; errors name the buffer and say what fits."""
    size = decl.dtype.size
    if nbytes % size:
        raise InvalidProgram(
            f"input for buffer {decl.name!r} has {nbytes} bytes, not a multiple of {size} ({decl.dtype.name})",
            f"pass a whole number of {decl.dtype.name} elements.",
        )
    count = nbytes // size
    if decl.count and count < decl.count:
        raise InvalidProgram(
            f"input for buffer {decl.name!r} has {count} elements, fewer than its declared {decl.count}",
            f"pass at least {decl.count} elements or declare count=0 (sized at dispatch).",
        )
    return decl.count or count


def check_input_count(program: Program, inputs: Sequence[object]) -> None:
    """One input per read, read_write and uniform buffer, in declaration order."""
    wanted = program.inputs
    is_list = isinstance(inputs, (list, tuple))
    if not is_list or len(inputs) != len(wanted):
        names = ", ".join(b.name for b in wanted) or "none"
        got = len(inputs) if is_list else f"a {type(inputs).__name__} instead of a list"
        raise InvalidProgram(
            f"program {program.name or '<unnamed>'} takes {len(wanted)} inputs ({names}), got {got}",
            "pass a list with one input per read/read_write/uniform buffer, in declaration order.",
        )


def resident_decls(program: Program, handles: Sequence[object]) -> list[BufferDecl]:
    """The non-workgroup buffers ``handles`` bind, in declaration order, checked.

    One handle per buffer; a handle bound to a written (``read_write``/``output``) buffer may not
    be bound to any other buffer of the same dispatch (the result would depend on the order in
    which a backend reads and writes, and a backend may cache reads of buffers it does not write).
    """
    decls = [b for b in program.buffers if not b.is_workgroup]
    if len(handles) != len(decls):
        names = ", ".join(b.name for b in decls)
        raise InvalidProgram(
            f"program {program.name or '<unnamed>'} needs {len(decls)} handles ({names}), got {len(handles)}",
            "pass one resident handle per non-workgroup buffer, in declaration order.")
    for decl, handle in zip(decls, handles):
        if not decl.access.is_output:
            continue
        for other, h in zip(decls, handles):
            if h is handle and other is not decl:
                raise InvalidHandle(
                    f"{handle!r} is bound to buffer {decl.name!r}, which the program writes, and also to "
                    f"buffer {other.name!r} of program {program.name or '<unnamed>'}",
                    f"pass a separate handle for {decl.name!r} (copy the data into a second resident buffer).")
    return decls


def buffer_counts(program: Program, input_counts: Mapping[str, int]) -> dict[str, int]:
    """Run-time element counts of every non-workgroup buffer (outputs use their declared count)."""
    counts: dict[str, int] = {}
    for b in program.buffers:
        if b.access is Access.WORKGROUP:
            continue
        counts[b.name] = input_counts[b.name] if b.access.is_input else b.count
    return counts


def prepare_host_dispatch(program: Program, inputs: Sequence[object], config: DispatchConfig | None) -> HostDispatch:
    """Typed copies of the inputs, zeroed outputs, run-time counts and the grid."""
    check_input_count(program, inputs)
    arrays: dict[str, np.ndarray] = {}
    input_counts: dict[str, int] = {}
    for decl, data in zip(program.inputs, inputs):
        view = as_bytes_view(decl, data)
        count = check_byte_length(decl, view.nbytes)
        input_counts[decl.name] = count
        arr = np.frombuffer(view, dtype=decl.dtype.np_dtype, count=count).copy()
        arrays[decl.name] = arr
    counts = buffer_counts(program, input_counts)
    for b in program.buffers:
        if b.access is Access.OUTPUT:
            arrays[b.name] = np.zeros(b.count, dtype=b.dtype.np_dtype)
    grid = resolve_grid(program, config, counts)
    return HostDispatch(arrays, grid, counts)
