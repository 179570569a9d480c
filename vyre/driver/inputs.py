"""Dispatch inputs, as every backend takes them: typed arrays, sized buffers and a grid.

Every backend calls ``prepare_host_dispatch`` (or ``as_bytes_view`` per input) so that input
checking, run-time buffer sizes and the grid rule are the same everywhere; the CUDA backend's
device-array path checks dtypes with ``check_input_dtype`` and reuses ``check_byte_length`` and
``buffer_counts``. A typed array must hold the buffer's element type (docs/semantics.md,
"Dispatch inputs and the grid"); untyped bytes are raw little-endian data.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from vyre.driver.config import DispatchConfig, resolve_grid
from vyre.driver.errors import InvalidHandle, InvalidProgram
from vyre.ir.program import Access, BufferDecl, Program
from vyre.ir.types import DataType


@dataclass
class HostDispatch:
    """A dispatch ready to run on the host: one array per non-workgroup buffer, and the grid."""

    arrays: dict[str, np.ndarray]
    grid: tuple[int, int, int]
    counts: dict[str, int]

    def outputs(self, program: Program) -> list[np.ndarray]:
        """The arrays a dispatch returns, in declaration order."""
        return [self.arrays[b.name] for b in program.outputs]


_RAW = np.dtype(np.uint8)
_STORAGE = {t: t.np_dtype for t in DataType}


def element_dtype(data: object) -> str | None:
    """The element type of a typed array as a numpy-style name, or None for untyped bytes.

    Names are numpy's (``uint32``, ``float64``, ``>u4`` for a byte-swapped array, ``bfloat16``);
    torch dtypes lose their ``torch.`` prefix. ``bytes``, ``bytearray``, a ``memoryview`` of
    format ``B``, a uint8 array and objects that are not arrays at all give None.
    """
    if isinstance(data, (bytes, bytearray)):
        return None
    dtype = getattr(data, "dtype", None)
    if dtype is None:
        try:
            view = memoryview(data)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None
        if view.format == "B":
            return None
        try:
            dtype = np.asarray(view).dtype
        except (TypeError, ValueError):
            return view.format
    name = str(dtype) if isinstance(dtype, np.dtype) else str(dtype).removeprefix("torch.")
    return None if name == "uint8" else name


def accepted_dtypes(decl: BufferDecl) -> tuple[str, ...]:
    """Element types a typed input for ``decl`` may have (BF16: uint16 bits or bfloat16)."""
    own = str(decl.dtype.np_dtype)
    return (own, "bfloat16") if decl.dtype is DataType.BF16 else (own,)


def check_input_dtype(decl: BufferDecl, data: object) -> None:
    """A typed array must hold the buffer's element type; untyped bytes are taken as they are."""
    dtype = getattr(data, "dtype", None)
    want = _STORAGE[decl.dtype]
    if dtype is want or dtype is _RAW:  # numpy's built-in dtypes are singletons: the common case
        return
    if isinstance(dtype, np.dtype) and (dtype == want or dtype == _RAW):
        return
    got = element_dtype(data)
    if got is None or got in accepted_dtypes(decl):
        return
    want = decl.dtype.np_dtype.name
    if decl.dtype is DataType.BF16:
        fix = "pass bfloat16 values as their uint16 bits (or a bfloat16 array)"
    elif decl.dtype is DataType.BOOL:
        fix = "pass BOOL as uint32 0/1 words: numpy.asarray(x, dtype=numpy.uint32)"
    else:
        fix = f"convert it with numpy.asarray(x, dtype=numpy.{want}) (or x.astype(...) for device arrays)"
    raise InvalidProgram(
        f"input for buffer {decl.name!r} is a {got} array, but the buffer holds {decl.dtype.name} ({want})",
        f"{fix}; to reinterpret the bytes instead, pass them untyped (x.tobytes() or x.view(numpy.uint8)).",
    )


def is_bfloat16(data: object) -> bool:
    """True for arrays of a bfloat16 dtype (ml_dtypes/JAX ``bfloat16``, ``torch.bfloat16``)."""
    dtype = getattr(data, "dtype", None)
    if dtype is None or (isinstance(dtype, np.dtype) and dtype.kind != "V"):  # ml_dtypes' bfloat16 is kind V
        return False
    return str(dtype).endswith("bfloat16")


def bfloat16_bits(data: object) -> object:
    """A bfloat16 array (numpy/ml_dtypes, torch, JAX) as a 16-bit integer array over the same bits."""
    if isinstance(data, np.ndarray):
        return data.view(np.uint16)
    root = type(data).__module__.partition(".")[0]
    if root == "torch":
        return data.view(sys.modules["torch"].int16)  # type: ignore[attr-defined]
    if root in ("jax", "jaxlib"):
        jax = sys.modules["jax"]
        return jax.lax.bitcast_convert_type(data, jax.numpy.uint16)
    raise InvalidProgram(f"a bfloat16 array of type {type(data).__name__} cannot be read as bits",
                         "pass the bfloat16 values as their uint16 bits.")


def host_bytes(data: object, what: str) -> memoryview:
    """A flat byte view of a host buffer; ``what`` names it in errors (e.g. "input for buffer 'a'").

    Takes bytes, bytearray, memoryview, any C-contiguous buffer-protocol object, and host arrays
    that only offer ``__array__`` (torch and JAX CPU arrays). Non-native byte order is refused.
    """
    if isinstance(data, np.ndarray):
        kind = data.dtype.kind
        if kind == "V" and is_bfloat16(data):
            data = data.view(np.uint16)
        elif data.dtype.hasobject or kind in "OMmU":
            raise InvalidProgram(
                f"{what} is a numpy array of dtype {data.dtype}, which holds no plain numbers",
                "pass the values as a numeric array, e.g. numpy.asarray(x, dtype=numpy.uint32).",
            )
    elif is_bfloat16(data):  # torch and JAX host arrays
        data = bfloat16_bits(data)
    try:
        view = memoryview(data if isinstance(data, np.ndarray) else _buffer_object(data, what))  # type: ignore
    except (TypeError, ValueError):
        raise InvalidProgram(
            f"{what} is a {type(data).__name__}, not a buffer",
            "pass bytes, bytearray, memoryview or a C-contiguous numpy array (device arrays need the cuda backend).",
        ) from None
    if not view.c_contiguous:
        raise InvalidProgram(f"{what} is not C-contiguous", "pass numpy.ascontiguousarray(x).")
    if view.format[:1] in _FOREIGN_ORDER:
        raise InvalidProgram(f"{what} is an array in non-native byte order ({element_dtype(view)})",
                             "convert it to native order first: x.astype(x.dtype.newbyteorder('=')).")
    return view.cast("B") if view.ndim != 1 or view.format != "B" else view


#: struct-format prefixes of a byte order other than this machine's
_FOREIGN_ORDER = (">", "!") if sys.byteorder == "little" else ("<",)


def _buffer_object(data: object, what: str) -> object:
    """``data``, or a numpy array of it when it offers ``__array__`` but no buffer (torch, JAX on the CPU)."""
    if isinstance(data, (bytes, bytearray, memoryview, np.ndarray)) or not hasattr(data, "__array__"):
        return data
    try:
        memoryview(data)  # type: ignore[arg-type]
        return data
    except (TypeError, ValueError):
        pass
    try:
        return np.asarray(data)
    except Exception as exc:  # noqa: BLE001 - whatever the library raises, the caller passed it
        raise InvalidProgram(f"{what} is a {type(data).__name__} that numpy cannot read ({exc})",
                             "pass a numpy array (e.g. tensor.detach().cpu().numpy()).") from exc


def as_bytes_view(decl: BufferDecl, data: object) -> memoryview:
    """A flat byte view of a host input for ``decl``, its dtype checked; errors name the buffer."""
    if isinstance(data, (list, tuple)):
        raise _sequence_input(decl, data)
    check_input_dtype(decl, data)
    return host_bytes(data, f"input for buffer {decl.name!r}")


def _sequence_input(decl: BufferDecl, data: list | tuple) -> InvalidProgram:
    """The error for a Python list or tuple given as a buffer: how to make the typed array it stands for."""
    kind = f"a Python {type(data).__name__}"
    what = f"an empty {kind[2:]}" if not data else f"{kind} of {len(data)} items"
    want = "uint32" if decl.dtype is DataType.BOOL else decl.dtype.np_dtype.name
    return InvalidProgram(f"input for buffer {decl.name!r} is {what}, not an array of {decl.dtype.name}",
                          f"pass numpy.asarray(values, dtype=numpy.{want}); an empty input is "
                          f"numpy.zeros(0, dtype=numpy.{want}).")


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
