"""``InPlaceDispatcher``: dispatches on the caller's own device arrays, with no copy and no wait.

A call whose inputs include a device array (CuPy, torch, anything with ``__cuda_array_interface__``
or a CUDA ``__dlpack__``) and whose other inputs are small host values (scalars, parameter words:
at most ``HOST_WORDS`` words each) runs here when ``DispatchConfig.outputs`` is ``"auto"`` or
``"device"``:

- every device array is bound in place: the kernel reads it, and writes a ``read_write`` one, at
  the caller's pointer; a ``read_write`` array comes back as the very object passed in;
- each ``output`` buffer is a new array of the caller's kind (torch when any input is a torch
  tensor, else CuPy), allocated through that library's allocator in the caller's stream order,
  zero-filled when the kernel may leave part of it unwritten (``_codegen.written``);
- small host values reach the device through a ``ParamBlock`` (a pinned-ring copy in stream
  order, skipped while the value is unchanged);
- everything is enqueued on the caller's stream (``stream=``, else the current stream of the
  inputs' library): the work before it on that stream is done first and the work after it sees
  the results. Nothing waits for the host, so the call returns at once.

The first call of a program with a given shape of inputs (their kinds, types, sizes, the stream)
checks everything and makes a ``_Binding``: a ``BoundKernel`` (the kernel variant, its own launch
plan and parameter block on that stream, the zero fills) and the small-value blocks. Later calls
of that shape only read the arrays' pointers, re-point the kernel (``BoundKernel.point``: new
pointers rebuild nothing) and launch. A written buffer whose array overlaps another bound array runs on a private
copy copied back afterwards, so results equal the oracle's (which gives every buffer its own copy).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vyre.driver.backend import Resident
from vyre.driver.config import DispatchConfig, resolve_grid
from vyre.driver.errors import InvalidHandle, InvalidProgram
from vyre.driver.inputs import as_bytes_view, buffer_counts, check_byte_length, check_input_count
from vyre.driver.resident_args import check_byte_range
from vyre.ir.program import Access, BufferDecl, Program
from vyre.ir.types import DataType
from vyre_cuda._dispatch.bound import BoundKernel
from vyre_cuda._dispatch.prepared import ProgramCache
from vyre_cuda._runtime.arrays import (
    array_span,
    device_array,
    device_kind,
    device_pointer,
    new_device_array,
    stream_pointer,
)
from vyre_cuda._runtime.context import DeviceRuntime
from vyre_cuda._runtime.errors import cuda_errors
from vyre_cuda._runtime.launch import ParamBlock
from vyre_cuda._runtime.pools import D2D
from vyre_cuda._runtime.profiler import nvtx_range

HOST_WORDS = 64  # largest host input (u32 words) a device-array call takes along (scalars, parameters)
BINDINGS = 64  # bindings kept per dispatcher (the oldest is dropped first)


def takes(program: Program, inputs: Sequence[object], config: DispatchConfig | None) -> bool:
    """Whether a dispatch of ``inputs`` runs in place: some input is a device array, every other
    one is a small host value, and the config asks for ``auto`` or ``device`` outputs."""
    if config is not None and config.outputs not in ("auto", "device"):
        return False  # "host" wants numpy; anything else is reported by the regular path
    device = False
    for decl, data in zip(program.inputs, inputs):
        if device_kind(data) is not None:
            device = True
        elif decl.access is Access.READ_WRITE or _host_words(data) > HOST_WORDS:
            return False
    return device


def _host_words(data: Any) -> int:
    nbytes = getattr(data, "nbytes", None)
    if nbytes is None:
        try:
            nbytes = memoryview(data).nbytes
        except TypeError:
            return HOST_WORDS + 1  # not a buffer: the regular path reports it
    return -(-int(nbytes) // 4)


@dataclass(eq=False)
class _Binding:
    """One program on one shape of inputs and one stream, checked and bound once."""

    program: Program
    config: DispatchConfig | None
    shape: tuple  # what the inputs must look like for this binding to apply (``_shape``)
    stream: Any  # the caller's stream (a CuPy stream object)
    kernel: BoundKernel  # the kernel variant, its own plan (parameter block written on ``stream``), its zero fills
    counts: dict[str, int]
    uniforms: dict[str, ParamBlock]  # host inputs' device blocks
    outputs: tuple[BufferDecl, ...]  # ``output`` buffers, allocated per call
    kind: str  # the library results are made with
    written: tuple[str, ...]  # read_write buffers given as device arrays
    aligned: tuple[tuple[BufferDecl, int], ...]  # device inputs and their element size (pointers must divide)


class InPlaceDispatcher:
    """Dispatches on device arrays bound in place (see the module docstring)."""

    def __init__(self, runtime: DeviceRuntime, programs: ProgramCache) -> None:
        self.runtime = runtime
        self.programs = programs
        self.bindings: dict[tuple[int, int, int], _Binding] = {}
        self._streams: dict[int, Any] = {}  # handle -> CuPy stream object

    def dispatch(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None,
                 stream: object | None = None) -> list[Any]:
        """Run ``program`` on the caller's arrays; one array per ``read_write``/``output`` buffer."""
        rt = self.runtime
        with rt.lock, nvtx_range("vyre.cuda.dispatch"):
            if rt.closed:
                rt.check_open()
            rt.use_device()
            ptrs, spans, host, shape = _read_inputs(program, inputs, rt.device_id)
            handle = stream_pointer(stream, inputs if any(s[0] == "torch" for s in shape) else ())
            binding = self.bindings.get((id(program), id(config), handle))
            if binding is None or binding.program is not program or binding.shape != shape:
                binding = self._bind(program, inputs, config, handle, shape)
            return self._run(binding, inputs, ptrs, spans, host)

    # ---- one call ------------------------------------------------------------------------------------
    def _run(self, b: _Binding, inputs: Sequence[object], ptrs: dict[str, int], spans: dict[str, tuple[int, int]],
             host: dict[str, tuple[int, ...]]) -> list[Any]:
        rt, stream = self.runtime, b.stream
        for decl, size in b.aligned:
            if ptrs[decl.name] % size:
                _misaligned(decl, ptrs[decl.name])
        returned: dict[str, Any] = {}
        if b.outputs:
            with stream:  # allocated in the caller's stream order (CuPy's pool is per stream)
                for decl in b.outputs:
                    returned[decl.name], ptrs[decl.name] = new_device_array(b.kind, decl.dtype, b.counts[decl.name],
                                                                            rt.device_id)
        kernel = b.kernel
        with cuda_errors(f"dispatching program {kernel.prepared.name} on the caller's arrays"):
            for name, words in host.items():
                block = b.uniforms[name]
                block.write(words, stream)
                ptrs[name] = block.ptr
            back = self._private_copies(b, ptrs, spans) if b.written and len(spans) > 1 else ()
            kernel.point([ptrs[d.name] for d in kernel.prepared.bound])
            kernel.enqueue(stream.ptr)
            for private, caller, nbytes in back:
                rt.cuda.memcpyAsync(caller, private.data.ptr, nbytes, D2D, stream.ptr)
        rt.telemetry.add("cuda_inplace_dispatches")  # metrics() counts them into cuda_dispatches too
        for decl, data in zip(b.program.inputs, inputs):
            if decl.access is Access.READ_WRITE:
                returned[decl.name] = data
        return [returned[d.name] for d in b.program.outputs]

    def _private_copies(self, b: _Binding, ptrs: dict[str, int], spans: dict[str, tuple[int, int]]) -> list:
        """Written buffers whose arrays overlap another bound array run on a private copy (as the
        oracle's separate buffers do); returns the ``(private array, caller pointer, bytes)`` copies back."""
        import cupy

        back = []
        for name in b.written:
            span = spans[name]
            if any(_overlap(span, other) for other_name, other in spans.items() if other_name != name):
                with b.stream:
                    private = cupy.empty(span[1], cupy.uint8)
                self.runtime.cuda.memcpyAsync(private.data.ptr, span[0], span[1], D2D, b.stream.ptr)
                ptrs[name] = private.data.ptr
                back.append((private, span[0], span[1]))
        return back

    # ---- the first call of a shape -------------------------------------------------------------------------
    def _bind(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None, handle: int,
              shape: tuple) -> _Binding:
        """Check everything about this shape of call and bind it (see the module docstring)."""
        rt = self.runtime
        rt.check_open()
        check_input_count(program, inputs)
        prep = self.programs.prepared(program, config)
        input_counts: dict[str, int] = {}
        kinds = set()
        for decl, data in zip(program.inputs, inputs):
            kind = device_kind(data)
            if kind is not None:
                nbytes = device_pointer(decl, data, rt.device_id)[1]  # dtype, device and layout checked
                kinds.add(kind)
            else:
                nbytes = as_bytes_view(decl, data).nbytes
            input_counts[decl.name] = check_byte_length(decl, nbytes)
        counts = buffer_counts(program, input_counts)
        grid = resolve_grid(program, config, counts)
        prep = self.programs.for_grid(prep, grid, config)
        stream = self._stream(handle)
        plan = self.programs.plan_for(prep, [_Null()] * len(prep.bound), counts, grid, config=config, stream=stream)
        uniforms = {d.name: rt.param_block(-(-counts[d.name] * d.dtype.size // 4) or 1)
                    for d, data in zip(program.inputs, inputs) if device_kind(data) is None}
        binding = _Binding(
            program, config, shape, stream, BoundKernel(rt, prep, plan, grid, counts), counts, uniforms,
            tuple(d for d in program.buffers if d.access is Access.OUTPUT),
            "torch" if "torch" in kinds else "cupy",
            tuple(d.name for d, data in zip(program.inputs, inputs)
                  if d.access is Access.READ_WRITE and device_kind(data) is not None),
            tuple((d, d.dtype.size) for d, data in zip(program.inputs, inputs) if device_kind(data) is not None))
        key = (id(program), id(config), handle)
        old = self.bindings.pop(key, None)
        if old is not None:
            self._close(old)
        while len(self.bindings) >= BINDINGS:
            self._close(self.bindings.pop(next(iter(self.bindings))))
        self.bindings[key] = binding
        return binding

    def _close(self, b: _Binding) -> None:
        """Give a binding's blocks back once the device is past its last use of them (the whole
        device: the caller's stream may be gone by now)."""
        from cupy.cuda import runtime

        with cuda_errors("waiting for the device before reusing parameter blocks"):
            runtime.deviceSynchronize()
        self.runtime.telemetry.add("cuda_sync_points")
        self.programs.close_plan(b.kernel.plan)
        for block in b.uniforms.values():
            self.runtime.release_params(block)

    # ---- the caller's arrays in library sequences (``vyre.lib``) --------------------------------------
    def borrow(self, handle: Resident | None, array: object) -> Resident:
        """A resident handle over ``array``'s memory, no copy (``ResidentPool.borrow``); passing the
        handle this gave for the same role last time re-points it instead, so bindings and graphs
        over it are reused. Freeing the handle leaves the array alone."""
        rt = self.runtime
        with rt.lock:
            rt.check_open()
            ptr, nbytes = array_span(array, rt.device_id, "a device array passed to vyre.lib")
            if handle is not None:
                try:
                    rt.resident.repoint(handle, ptr, nbytes)
                    return handle
                except InvalidHandle:
                    pass  # freed by a shutdown or release_scratch: borrow anew
            return rt.resident.borrow(ptr, nbytes)

    def alias_resident(self, handle: Resident | None, source: Resident, nbytes: int) -> Resident:
        """``borrow`` over the first ``nbytes`` of the resident ``source``'s memory (a ``ResidentArray``
        of ``vyre.lib``); ``InvalidHandle`` for a freed or foreign ``source``. Freeing the alias
        leaves ``source`` alone; freeing ``source`` leaves the alias pointing at memory nobody owns,
        so a caller checks ``source`` (this does) before each use."""
        rt = self.runtime
        with rt.lock:
            rt.check_open()
            buf = rt.resident.resolve(source)
            check_byte_range(source, 0, nbytes, "alias")
            if handle is not None:
                try:
                    rt.resident.repoint(handle, buf.ptr, nbytes)
                    return handle
                except InvalidHandle:
                    pass  # freed by a shutdown or release_scratch: borrow anew
            return rt.resident.borrow(buf.ptr, nbytes)

    def new_array(self, like: Sequence[object], dtype: DataType, count: int, stream: Any) -> Any:
        """A new array of ``count`` elements for a result: torch when any of ``like`` is a torch
        tensor, else CuPy; allocated in ``stream``'s order (None: the current stream's, which is
        the call's stream when the caller passed no ``stream=``)."""
        kind = "torch" if any(device_kind(x) == "torch" for x in like) else "cupy"
        if stream is None:
            return new_device_array(kind, dtype, count, self.runtime.device_id)[0]
        with stream:
            return new_device_array(kind, dtype, count, self.runtime.device_id)[0]

    def as_cupy(self, array: object) -> Any:
        """A CuPy view of a device array on this device (CuPy, torch, CAI/DLPack): no copy; an
        ``InvalidProgram`` with a Fix for another device or a non-contiguous array."""
        return device_array(array, "a device array", self.runtime.device_id)

    def to_device(self, data: object, stream: Any) -> Any:
        """A CuPy copy of host ``data`` made in ``stream``'s order (host inputs of a device call)."""
        import cupy

        with cupy.cuda.Device(self.runtime.device_id), stream:
            return cupy.asarray(data)

    def stream_for(self, stream: object | None, arrays: Sequence[object] = ()) -> Any:
        """The CuPy stream object a call on ``arrays`` runs on: ``stream`` (CuPy, torch,
        ``__cuda_stream__`` or a handle), else the current stream of the arrays' library."""
        return self._stream(stream_pointer(stream, tuple(arrays)))

    def close(self) -> None:
        """Drop every binding (the backend is shutting down)."""
        for b in self.bindings.values():
            try:
                self._close(b)
            except Exception:  # noqa: BLE001, S110 - shutting down regardless
                pass
        self.bindings.clear()

    def _stream(self, handle: int) -> Any:
        import cupy

        stream = self._streams.get(handle)
        if stream is None:
            if len(self._streams) > BINDINGS:
                self._streams.clear()
            stream = self._streams[handle] = cupy.cuda.Stream.null if handle == 0 else _external(handle)
        return stream


class _Handle:
    """A raw stream handle in the ``__cuda_stream__`` protocol (what ``Stream.from_external`` takes)."""

    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)


def _external(handle: int) -> Any:
    """A CuPy stream object over a caller's stream handle (the stream stays the caller's)."""
    import cupy

    from_external = getattr(cupy.cuda.Stream, "from_external", None)
    if from_external is not None:
        return from_external(_Handle(handle))
    return cupy.cuda.ExternalStream(handle)


class _Null:
    """A stand-in buffer (pointer 0) for binding a plan before the first call's pointers are known."""

    ptr = 0


def _read_inputs(program: Program, inputs: Sequence[Any], device_id: int
                 ) -> tuple[dict[str, int], dict[str, tuple[int, int]], dict[str, tuple[int, ...]], tuple]:
    """Pointers and byte spans of the device inputs, host inputs as u32 words, and the call's shape:
    per input its library, dtype, bytes, contiguity and device (device arrays) or bytes and dtype
    (host). CuPy arrays and torch tensors are read directly; other device arrays are checked in full."""
    ptrs: dict[str, int] = {}
    spans: dict[str, tuple[int, int]] = {}
    host: dict[str, tuple[int, ...]] = {}
    shape = []
    for decl, data in zip(program.inputs, inputs):
        kind = device_kind(data)
        if kind == "cupy":
            ptr, nbytes = data.data.ptr, data.nbytes
            shape.append((kind, data.dtype, nbytes, data.flags.c_contiguous, data.device.id))
        elif kind == "torch":
            ptr, nbytes = data.data_ptr(), data.numel() * data.element_size()
            shape.append((kind, data.dtype, nbytes, data.is_contiguous(), data.device.index))
        elif kind is not None:
            ptr, nbytes = device_pointer(decl, data, device_id)
            shape.append((kind, str(getattr(data, "dtype", "")), nbytes))
        else:
            raw = data if type(data) is bytes else as_bytes_view(decl, data).tobytes()  # bytes: kernel scalars
            nbytes = len(raw)
            raw += b"\0" * (-nbytes % 4)
            host[decl.name] = struct.unpack(f"<{len(raw) // 4}I", raw) if raw else (0,)
            shape.append(("host", nbytes, getattr(data, "dtype", None)))
            continue
        ptrs[decl.name], spans[decl.name] = ptr, (ptr, nbytes)
    return ptrs, spans, host, tuple(shape)


def _misaligned(decl: BufferDecl, ptr: int) -> None:
    raise InvalidProgram(
        f"input for buffer {decl.name!r} is a device array at address 0x{ptr:x}, not a multiple of "
        f"{decl.dtype.size} bytes ({decl.dtype.name})",
        "pass an array that starts on an element boundary (slice at a multiple of the element size, "
        "or copy it: cupy.ascontiguousarray(x.copy()) / x.clone()).")


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[1] > 0 and b[1] > 0 and a[0] < b[0] + b[1] and b[0] < a[0] + a[1]


__all__ = ["HOST_WORDS", "InPlaceDispatcher", "takes"]
