"""Kernel launches: geometry checks, packed arguments and the parameter block.

- ``DeviceLimits`` holds what the device allows; ``check_geometry`` and ``check_workgroup_memory``
  reject a launch before it reaches the driver, with the limit and a ``Fix:``.
- ``LaunchPlan(kernel_ptr, grid, block, shared_bytes, nargs)`` owns the kernel's argument array,
  packed once: ``bind(pointers, param_block_ptr)`` rewrites the ``c_uint64`` slots that the
  ``void**`` array points at, and ``launch(stream_ptr)`` is exactly one ``cuLaunchKernel`` call
  through CuPy's compiled ``cupy.cuda.driver.launchKernel`` (the default and the fastest;
  ``VYRE_CUDA_LAUNCH`` picks a ctypes path instead, see ``LAUNCH_MODES``) with an argument tuple
  built once per grid, stream and mode.
  A plan whose grid has a zero axis is ``empty``: callers skip the launch.
- ``launch_programmatic(stream_ptr)`` is the same launch through ``cuLaunchKernelEx`` (called
  through ``cuda.bindings``: ``_runtime.driver``) with programmatic stream serialization: the
  kernel may start while the previous kernel of the stream still runs, and waits for it with
  ``griddepcontrol.wait`` (``_codegen.module.grid_dependency``) before touching buffers.
  Sequences use it when recording CUDA graphs on sm_90+ (``programmatic_launches``;
  ``VYRE_CUDA_PDL=0`` turns it off).
- ``record_launch(memset, plan, zero, stream_ptr)`` is the one zero-fill-then-launch step (the
  eager ``DeviceRuntime.run`` and every recorded launch go through it).
- ``ParamBlock`` is the kernel's device-resident u32 word block (``[0]`` elements, then each bound
  buffer's element count). ``write(words, stream)`` copies from a pinned ring only when the words
  change, so a captured CUDA graph that reads the block stays valid when counts change.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre.driver.errors import DeviceOutOfMemory, DispatchFailed, InvalidProgram
from vyre.ir.layout import PORTABLE_WORKGROUP_BYTES, dynamic_workgroup_bytes, workgroup_bytes
from vyre.ir.program import Program
from vyre_cuda._runtime import driver, settings
from vyre_cuda._runtime.errors import cuda_errors, device_lost, translate

_WORD = 4
_CTX_ERRORS = (201, 3)  # CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_NOT_INITIALIZED
_STICKY = {700, 714, 715, 716, 717, 718, 719, 720, 999}  # illegal address, traps, launch failed...
_OOM = 2


@dataclass(frozen=True)
class DeviceLimits:
    """Launch limits of one device."""

    max_block: tuple[int, int, int] = (1024, 1024, 64)
    max_threads_per_block: int = 1024
    max_grid: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    max_shared_per_block: int = 48 * 1024
    max_shared_per_block_optin: int = 48 * 1024
    sm_count: int = 1
    warp_size: int = 32

    @classmethod
    def from_info(cls, info: Any) -> DeviceLimits:
        """Build from a ``vyre_cuda._runtime.device.DeviceInfo``."""
        return cls(
            max_block=tuple(info.max_block_dims),
            max_threads_per_block=info.max_threads_per_block,
            max_grid=tuple(info.max_grid_dims),
            max_shared_per_block=info.shared_mem_per_block,
            max_shared_per_block_optin=max(info.shared_mem_per_block_optin, info.shared_mem_per_block),
            sm_count=info.sm_count,
            warp_size=info.warp_size,
        )


def check_workgroup_memory(program: Program, limits: DeviceLimits) -> int:
    """The program's workgroup-buffer bytes, or ``InvalidProgram`` if the device cannot hold them.

    Up to 48 KiB is static shared memory (``limits.max_shared_per_block``); more is dynamic shared
    memory, up to the device's opt-in maximum (``cudaDevAttrMaxSharedMemoryPerBlockOptin``).
    """
    need = workgroup_bytes(program)
    dynamic = dynamic_workgroup_bytes(program)
    limit = limits.max_shared_per_block_optin if dynamic else limits.max_shared_per_block
    if need > limit:
        kind = "opt-in (dynamic)" if dynamic else "static"
        raise InvalidProgram(
            f"program {program.name or '<unnamed>'} declares {need} bytes of workgroup buffers, over the "
            f"device's {limit} bytes of {kind} shared memory per workgroup",
            f"declare at most {limit} bytes of workgroup buffers for this device (every device runs "
            f"{PORTABLE_WORKGROUP_BYTES}): shrink them or split the work across more workgroups.")
    return need


def check_geometry(name: str, grid: Sequence[int], block: Sequence[int], shared_bytes: int,
                   limits: DeviceLimits, kernel_max_threads: int | None = None) -> None:
    """Reject a launch the device cannot run, before it reaches the driver."""
    threads = block[0] * block[1] * block[2]
    if any(b < 1 for b in block):
        raise InvalidProgram(f"program {name}: workgroup size {tuple(block)} has an axis < 1",
                             "use positive workgroup sizes.")
    for axis, (b, lim) in enumerate(zip(block, limits.max_block)):
        if b > lim:
            raise InvalidProgram(f"program {name}: workgroup axis {axis} is {b}, over the device limit {lim}",
                                 f"keep workgroup sizes within {limits.max_block}.")
    cap = min(limits.max_threads_per_block, kernel_max_threads or limits.max_threads_per_block)
    if threads > cap:
        why = "the device limit" if cap == limits.max_threads_per_block else "this kernel's limit (registers)"
        raise InvalidProgram(f"program {name}: workgroup of {threads} invocations, over {why} of {cap}",
                             f"use at most {cap} invocations per workgroup.")
    for axis, (g, lim) in enumerate(zip(grid, limits.max_grid)):
        if g > lim:
            raise DispatchFailed("geometry", f"program {name}: grid axis {axis} has {g} workgroups, "
                                 f"over the device limit {lim}",
                                 "use fewer, larger workgroups or spread the grid over y and z.")
    if shared_bytes > limits.max_shared_per_block_optin:
        raise InvalidProgram(f"program {name}: needs {shared_bytes} bytes of shared memory per workgroup, "
                             f"over the device's {limits.max_shared_per_block_optin}",
                             "shrink the workgroup buffers.")


def check_cooperative(name: str, kernel_ptr: int, grid: Sequence[int], block: Sequence[int], shared_bytes: int,
                      limits: DeviceLimits, supported: bool) -> None:
    """A cooperative launch needs every workgroup resident at once: grid <= occupancy x SM count."""
    if not supported:
        raise DispatchFailed("cooperative", f"program {name}: this device does not support cooperative launches",
                             "drop DispatchConfig(cooperative=True) or use a device that supports them.")
    from cupy.cuda import driver

    threads = block[0] * block[1] * block[2]
    with cuda_errors(f"querying the occupancy of program {name}"):
        per_sm = int(driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel_ptr, threads, shared_bytes))
    most = per_sm * limits.sm_count
    total = grid[0] * grid[1] * grid[2]
    if total > most:
        raise DispatchFailed("cooperative", f"program {name}: cooperative grid of {total} workgroups exceeds the "
                             f"{most} that fit at once ({per_sm} per SM x {limits.sm_count} SMs)",
                             f"use at most {most} workgroups (loop inside the program over the remaining work).")


# ---- the driver entry point ------------------------------------------------------------------------
#: how ``LaunchPlan.launch`` reaches ``cuLaunchKernel`` (``VYRE_CUDA_LAUNCH`` overrides):
#: "cupy" - ``cupy.cuda.driver.launchKernel``, a compiled wrapper called with plain ints (the
#: default: the cheapest per call, it releases the GIL around the driver call); "pyctypes" -
#: libcuda through ``ctypes.PyDLL`` with pre-built ctypes arguments; "ctypes" - ``ctypes.CDLL``
#: with ``argtypes``. All pass the same pre-packed ``void**``.
LAUNCH_MODES = settings.LAUNCH_MODES
DEFAULT_LAUNCH_MODE = LAUNCH_MODES[0]


def launch_mode() -> str:
    """The launch path in use: ``VYRE_CUDA_LAUNCH`` (``InvalidSetting`` if bad), else the default;
    "cupy" without libcuda."""
    mode = settings.launch()
    return mode if mode == "cupy" or _cu_launch(mode) is not None else "cupy"


def _driver() -> Any:
    from cupy.cuda import driver

    return driver


@functools.lru_cache(maxsize=2)
def _cu_launch(mode: str) -> Any:
    """``cuLaunchKernel`` from libcuda through ctypes (``mode`` "ctypes" or "pyctypes"), or None."""
    try:
        lib = ctypes.PyDLL("libcuda.so.1") if mode == "pyctypes" else ctypes.CDLL("libcuda.so.1")
        fn = lib.cuLaunchKernel
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    if mode == "ctypes":
        u = ctypes.c_uint
        fn.argtypes = [ctypes.c_void_p, u, u, u, u, u, u, u, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    return fn


# ---- programmatic dependent launch ------------------------------------------------------------------
PDL_ENV = settings.PDL
PDL_MIN_CC = 90  # griddepcontrol and programmatic stream serialization: sm_90+


def programmatic_launches(compute_capability: str) -> bool:
    """Whether recorded sequences may overlap dependent kernels on a device of this capability.

    True on sm_90+ when ``cuda.bindings`` reaches the driver (``_runtime.driver``: ``cuLaunchKernelEx``)
    and ``VYRE_CUDA_PDL`` is not 0/false/off/no (read on each call: a change applies to graphs
    captured afterwards).
    """
    if not settings.pdl():
        return False
    return int(compute_capability.rstrip("a")) >= PDL_MIN_CC and driver.unavailable() is None


def launch_error(rc: int, name: str) -> Exception:
    """The vyre error for a failed ``cuLaunchKernel`` return code."""
    err = driver.error_name(rc)
    if rc == _OOM:
        return DeviceOutOfMemory(0, 0, f"the launch of {name} ran out of device memory ({err}); free memory.")
    if rc in _STICKY:
        return device_lost(f"launch of program {name} failed with {err}; the CUDA context is unusable")
    return DispatchFailed(err, f"cuLaunchKernel for program {name} returned {rc}",
                          "check the program's workgroup size and buffers; rerun with VYRE_CUDA_SYNC_EACH=1.")


class LaunchPlan:
    """One kernel launch with its arguments packed once (see the module docstring)."""

    __slots__ = ("kernel_ptr", "grid", "block", "shared_bytes", "name", "nargs", "empty", "mode", "_slots",
                 "_argv", "argv_ptr", "_fn", "_bound", "params", "_head", "_chead", "_stream", "_call",
                 "_call_fn", "_cooperative")

    def __init__(self, kernel_ptr: int, grid: Sequence[int], block: Sequence[int], shared_bytes: int,
                 nargs: int, name: str = "<kernel>", mode: str | None = None) -> None:
        self.kernel_ptr = int(kernel_ptr)
        self.block = tuple(int(b) for b in block)
        self.shared_bytes = int(shared_bytes)
        self.name = name
        self.nargs = nargs
        self._slots = (ctypes.c_uint64 * nargs)()
        base = ctypes.addressof(self._slots)
        self._argv = (ctypes.c_void_p * nargs)(*[base + 8 * i for i in range(nargs)])
        self.argv_ptr = ctypes.addressof(self._argv)
        self.mode = mode if mode in LAUNCH_MODES else launch_mode()
        self._fn = _cu_launch(self.mode) if self.mode != "cupy" else None
        if self._fn is None:
            self.mode = "cupy"
        self._bound: tuple[int, ...] = ()
        self._stream = -1  # the stream the call tuple was built for (-1: rebuild before the next launch)
        self._call: tuple = ()
        self._call_fn: Any = None
        self.params: ParamBlock | None = None  # the plan's own parameter block, when it has one
        self._cooperative = False
        self.set_grid(grid)

    @property
    def cooperative(self) -> bool:
        """Launch with ``cuLaunchCooperativeKernel`` (callers check it with ``check_cooperative``)."""
        return self._cooperative

    @cooperative.setter
    def cooperative(self, value: bool) -> None:
        value = bool(value)
        if value != self._cooperative:
            self._cooperative = value
            self._stream = -1

    def set_grid(self, grid: Sequence[int]) -> None:
        """Change the grid (callers check it with ``check_geometry`` first)."""
        self.grid = tuple(int(g) for g in grid)
        self.empty = 0 in self.grid
        self._head = (self.kernel_ptr, *self.grid, *self.block, self.shared_bytes)
        u = ctypes.c_uint
        self._chead = (ctypes.c_void_p(self.kernel_ptr), *(u(v) for v in self._head[1:]))
        self._stream = -1

    def bind(self, pointers: Sequence[int], param_block_ptr: int) -> None:
        """Point the argument slots at ``pointers`` (binding order) and the parameter block."""
        self.bind_values((*pointers, param_block_ptr))

    def bind_values(self, values: tuple[int, ...]) -> None:
        """``bind`` with the slot values as one tuple (buffers in binding order, then the block)."""
        if values == self._bound:
            return
        if len(values) != self.nargs:
            raise ValueError(f"{self.name}: bind got {len(values)} pointers, the kernel takes {self.nargs}. "
                             "Fix: pass one pointer per bound buffer plus the parameter block.")
        self._slots[:] = values
        self._bound = values

    def launch(self, stream_ptr: int) -> None:
        """Enqueue the kernel on ``stream_ptr``: one driver call."""
        if stream_ptr != self._stream:
            self._build_call(stream_ptr)
        try:
            rc = self._call_fn(*self._call)
        except Exception as exc:  # noqa: BLE001 - the "cupy" path raises; classified below
            rc = _status(exc)
            if rc is None or self._cooperative:
                raise translate(exc, f"launching program {self.name}") from exc
        if rc:
            self._failed(rc, stream_ptr)

    def launch_programmatic(self, stream_ptr: int) -> None:
        """``launch``, but the kernel may start before the previous kernel of the stream ends.

        The kernel must wait for that kernel itself (``griddepcontrol.wait``, sm_90+), as every
        sm_90 kernel of the emitter does. Used while recording graphs (a cold path: the
        configuration is built per call, through ``_runtime.driver``). Cooperative plans, and any
        plan when ``cuda.bindings`` cannot reach the driver, launch normally.
        """
        if self._cooperative or driver.unavailable() is not None:
            self.launch(stream_ptr)
            return
        args = (self.kernel_ptr, self.grid, self.block, self.shared_bytes, stream_ptr, self.argv_ptr)
        rc = driver.launch_programmatic(*args)
        if rc in _CTX_ERRORS:
            _bind_context()
            rc = driver.launch_programmatic(*args)
        if rc:
            raise launch_error(rc, self.name)

    def prebound(self, stream_ptr: int) -> tuple[Callable[..., int], tuple]:
        """``(fn, args)``: ``fn(*args)`` enqueues the plan on ``stream_ptr``; non-zero means it failed.

        On the "cupy" path this is ``cupy.cuda.driver.launchKernel`` with plain int arguments, on
        the "pyctypes" path ``cuLaunchKernel`` itself with its ctypes arguments built once (for
        callers that keep them in a closure); any other path goes through ``launch``. When the call
        raises or returns non-zero, call ``launch`` again: it retries a missing context and raises
        the vyre error. Rebinding or a new grid invalidates the pair.
        """
        if self._cooperative:
            return _launch_via_plan, (self, stream_ptr)
        if self.mode == "cupy":
            return _driver().launchKernel, (*self._head, stream_ptr, self.argv_ptr, 0)
        if self.mode != "pyctypes" or self._fn is None:
            return _launch_via_plan, (self, stream_ptr)
        return self._fn, (*self._chead, ctypes.c_void_p(stream_ptr), self._argv, None)

    @property
    def bound(self) -> tuple[int, ...]:
        """The slot values last bound (buffers in binding order, then the parameter block)."""
        return self._bound

    def _build_call(self, stream_ptr: int) -> None:
        """The driver entry point and its arguments for launches on ``stream_ptr``."""
        if self._cooperative:
            self._call_fn, self._call = _driver().launchCooperativeKernel, (*self._head, stream_ptr, self.argv_ptr)
        elif self.mode == "cupy":
            self._call_fn, self._call = _driver().launchKernel, (*self._head, stream_ptr, self.argv_ptr, 0)
        elif self.mode == "pyctypes":
            self._call_fn, self._call = self._fn, (*self._chead, ctypes.c_void_p(stream_ptr), self._argv, None)
        else:
            self._call_fn, self._call = self._fn, (*self._head, stream_ptr, self.argv_ptr, None)
        self._stream = stream_ptr

    def _failed(self, rc: int, stream_ptr: int) -> None:
        """Retry once when the thread had no current context; otherwise raise the vyre error."""
        if rc in _CTX_ERRORS:
            _bind_context()
            self._build_call(stream_ptr)
            try:
                rc = self._call_fn(*self._call)
            except Exception as exc:  # noqa: BLE001 - the "cupy" path raises
                status = _status(exc)
                if status is None:
                    raise translate(exc, f"launching program {self.name}") from exc
                rc = status
        if rc:
            raise launch_error(rc, self.name)

def _status(exc: BaseException) -> int | None:
    """The CUDA status of a ``cupy.cuda.driver.CUDADriverError`` (None for any other exception)."""
    status = getattr(exc, "status", None)
    return status if type(exc).__name__ == "CUDADriverError" and isinstance(status, int) and status else None


def _launch_via_plan(plan: LaunchPlan, stream_ptr: int) -> int:
    plan.launch(stream_ptr)
    return 0


def _bind_context() -> None:
    """Make the current device's primary context current on this thread."""
    from cupy.cuda import runtime

    runtime.setDevice(runtime.getDevice())
    runtime.free(0)  # forces the runtime to make the primary context current


# ---- zero fills and launches as one step ---------------------------------------------------------------
def zero_fills(memset: Callable[..., Any], zero: Sequence[tuple[int, int]], stream_ptr: int, name: str) -> None:
    """Enqueue ``memset(ptr, 0, nbytes, stream_ptr)`` for each ``(ptr, nbytes)``; CUDA errors become vyre errors."""
    try:
        for ptr, nbytes in zero:
            memset(ptr, 0, nbytes, stream_ptr)
    except Exception as exc:  # noqa: BLE001 - CuPy errors never reach users unwrapped
        raise translate(exc, f"zeroing the outputs of program {name}") from exc


def record_launch(memset: Callable[..., Any], plan: LaunchPlan, zero: Sequence[tuple[int, int]], stream_ptr: int,
                  after_kernel: bool = False, overlap: bool = False, name: str | None = None) -> bool:
    """THE zero-fill-then-launch step: the zero fills of ``(pointer, bytes)`` pairs, then ``plan``
    (skipped for an empty grid), with no counters, so it also runs inside a graph capture;
    ``DeviceRuntime.run`` wraps it with the counters of an eager launch.

    ``after_kernel``: the last work on the stream is a kernel. With ``overlap`` too and no zero fill
    in between, the launch is programmatic (``launch_programmatic``). ``name`` (default: the plan's)
    names the program in a zero fill's error. Returns whether a kernel is now the last work enqueued
    (with ``after_kernel`` false: whether ``plan`` was launched).
    """
    if zero:
        zero_fills(memset, zero, stream_ptr, name or plan.name)
        after_kernel = False
    if plan.empty:
        return after_kernel
    if overlap and after_kernel:
        plan.launch_programmatic(stream_ptr)
    else:
        plan.launch(stream_ptr)
    return True


# ---- the parameter block --------------------------------------------------------------------------
class PinnedRing:
    """Pinned host words written in order; wrapping around waits for the stream first (the whole
    device when a copy went on a caller's stream since the last wrap)."""

    def __init__(self, stream: Any, words: int = 16384, on_sync: Any = None) -> None:
        import cupy

        self.stream = stream
        self._mem = cupy.cuda.alloc_pinned_memory(words * _WORD)
        self._words = np.frombuffer(self._mem, np.uint32, words)
        self._base = self._mem.ptr
        self._pos = 0
        self._on_sync = on_sync
        self._foreign = False  # copied on another stream since the ring last wrapped

    def put(self, values: Sequence[int] | np.ndarray, stream: Any = None) -> int:
        """Copy ``values`` into the ring for a copy on ``stream`` (default: the ring's own); the host
        address of the copy (valid until the ring wraps: wrapping waits for every stream copied on)."""
        n = len(values)
        if n > len(self._words):
            raise ValueError(f"{n} parameter words do not fit the {len(self._words)}-word ring. "
                             "Fix: declare fewer buffers.")
        foreign = stream is not None and stream.ptr != self.stream.ptr
        if self._pos + n > len(self._words):
            with cuda_errors("waiting for the streams before reusing the parameter ring"):
                if self._foreign:  # the whole device: a caller's stream may be destroyed by now
                    from cupy.cuda import runtime

                    runtime.deviceSynchronize()
                else:
                    self.stream.synchronize()
            self._foreign = False
            if self._on_sync:
                self._on_sync()
            self._pos = 0
        if foreign:  # after the wrap: this copy is one the next wrap must wait for
            self._foreign = True
        start = self._pos
        self._words[start:start + n] = values
        self._pos = start + n + (-(start + n) % 4)  # keep 16-byte alignment
        return self._base + start * _WORD


class ParamBlock:
    """The kernel's device-resident parameter words; rewritten only when they change."""

    __slots__ = ("buffer", "ptr", "nwords", "_ring", "_last")

    def __init__(self, buffer: Any, nwords: int, ring: PinnedRing) -> None:
        self.buffer = buffer  # a DeviceBuffer of at least nwords * 4 bytes
        self.ptr = buffer.ptr
        self.nwords = nwords
        self._ring = ring
        self._last: tuple[int, ...] | None = None

    def write(self, words: tuple[int, ...], stream: Any) -> bool:
        """Enqueue a copy of ``words`` (elements, then counts) if they differ; True when copied."""
        if words == self._last:
            return False
        if len(words) != self.nwords or any(w < 0 or w > 0xFFFFFFFF for w in words):
            raise DispatchFailed("params", f"parameter words {words} do not fit {self.nwords} u32 values",
                                 "keep element counts below 2**32.")
        from cupy.cuda import runtime

        host = self._ring.put(words, stream)
        with cuda_errors("writing the kernel parameter block"):
            runtime.memcpyAsync(self.ptr, host, self.nwords * _WORD, 1, stream.ptr)
        self._last = words
        return True

    @property
    def last(self) -> tuple[int, ...] | None:
        """The words last written (None: unknown, the next ``write`` copies)."""
        return self._last

    def invalidate(self) -> None:
        """Forget the last words (the next ``write`` copies)."""
        self._last = None
