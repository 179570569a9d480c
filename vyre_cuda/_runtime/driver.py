"""CUDA driver calls off the hot path, through NVIDIA's ``cuda.bindings`` (cuda-python).

Every kernel launch stays on CuPy's compiled ``launchKernel`` (``_runtime.launch.LaunchPlan``,
measured fastest). What CuPy does not bind goes through this module, with the structs and enums
of ``cuda.h`` as ``cuda.bindings.driver`` defines them, so no struct layout is copied by hand:

- conditional WHILE graphs (``_runtime.conditional``): ``graph_create``, ``add_while_node``,
  ``capture_into``, ``instantiate``, ``graph_launch`` and the destroys;
- ``cuLaunchKernelEx`` with programmatic stream serialization (``launch_programmatic``);
- error names (``error_name``), kernel names (``function_name``) and the primary-context reset
  after a device fault (``reset_primary_context``).

``cuda.bindings`` comes with the ``cuda12``/``cuda13`` extras (the ``cuda-bindings`` wheel).
Without it, or without libcuda, ``unavailable()`` says why and each caller falls back: fixed-point
loops read their flag back per batch, recorded launches are plain launches, error names are
numbers, and the context reset is CuPy's ``deviceReset``. A failed call raises
``DriverCallFailed`` (a ``RuntimeError`` naming the call and the status); ``errors(context)``
turns it into the vyre error. ``vyre doctor`` does not use this module (it works without CuPy
and without cuda.bindings).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

FIX_INSTALL = "pip install 'vyre-cuda[cuda12]' (or '[cuda13]'), which brings cuda-bindings"


class DriverCallFailed(RuntimeError):
    """A driver call returned an error status: ``"<call> returned CUDA_ERROR_X (n)"``."""

    def __init__(self, call: str, status: int) -> None:
        self.call, self.status = call, status
        super().__init__(f"{call} returned {error_name(status)} ({status})")


@functools.lru_cache(maxsize=1)
def _module() -> Any | None:
    try:  # by name: some cuda-bindings releases ship the compiled module without type information
        return importlib.import_module("cuda.bindings.driver")
    except ImportError:
        return None


@functools.lru_cache(maxsize=1)
def unavailable() -> str | None:
    """Why this module cannot reach the driver (None: it can); checked once per process."""
    d = _module()
    if d is None:
        return f"cuda.bindings is not installed ({FIX_INSTALL})"
    try:
        status, _version = d.cuDriverGetVersion()
    except Exception as exc:  # noqa: BLE001 - cuda.bindings raises its own error when libcuda is missing
        return f"cuda.bindings cannot load libcuda.so.1 ({type(exc).__name__}: {exc})"
    return f"cuDriverGetVersion returned {int(status)}" if int(status) else None


def driver() -> Any:
    """The ``cuda.bindings.driver`` module; ``RuntimeError`` with ``unavailable()``'s reason if it cannot serve."""
    reason = unavailable()
    if reason is not None:
        raise RuntimeError(reason)
    return _module()


def call(name: str, *args: Any) -> Any:
    """``cuda.bindings.driver.<name>(*args)`` with its status checked: None, the one result, or a
    tuple of results; ``DriverCallFailed`` for an error status."""
    out = getattr(driver(), name)(*args)
    status = int(out[0])
    if status:
        raise DriverCallFailed(name, status)
    return None if len(out) == 1 else out[1] if len(out) == 2 else out[1:]


def error_name(status: int) -> str:
    """``CUDA_ERROR_X`` for a driver status (``cuGetErrorName``), or ``CUDA error <n>`` when unknown."""
    d = _module()
    if d is not None and unavailable() is None:
        try:
            err, name = d.cuGetErrorName(d.CUresult(status))
            if not int(err) and name:
                return name.decode()
        except Exception:  # noqa: BLE001, S110 - a status this binding has no name for
            pass
    return f"CUDA error {status}"


@contextmanager
def errors(context: str) -> Iterator[None]:
    """Turn ``DriverCallFailed`` inside the block into the vyre error (``_runtime.errors.translate``)."""
    try:
        yield
    except DriverCallFailed as exc:
        from vyre_cuda._runtime.errors import translate

        raise translate(exc, context) from exc


# ---- contexts and kernels --------------------------------------------------------------------------
def current_context() -> int:
    """The calling thread's current ``CUcontext`` (0: none)."""
    return int(call("cuCtxGetCurrent"))


def reset_primary_context(index: int) -> None:
    """Reset device ``index``'s primary context and make it current again (the handle CuPy keeps
    stays valid: a reset primary context is re-initialised in place on retain)."""
    device = call("cuDeviceGet", index)
    call("cuDevicePrimaryCtxReset", device)
    call("cuCtxSetCurrent", call("cuDevicePrimaryCtxRetain", device))


def function_name(kernel_ptr: int) -> str | None:
    """The name the driver knows a loaded kernel by (``cuFuncGetName``, CUDA 12.3+), or None."""
    if unavailable() is not None:
        return None
    try:
        name = call("cuFuncGetName", kernel_ptr)
    except Exception:  # noqa: BLE001 - an older driver or binding: the name is only informative
        return None
    return name.decode() if name else None


# ---- extended launches ----------------------------------------------------------------------------
def launch_programmatic(kernel_ptr: int, grid: Sequence[int], block: Sequence[int], shared_bytes: int,
                        stream_ptr: int, argv_ptr: int) -> int:
    """``cuLaunchKernelEx`` with ``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`` set: the
    kernel may start before the previous kernel of the stream ends. ``argv_ptr`` is the ``void**``
    argument array. Returns the status (0: launched)."""
    d = driver()
    (status,) = d.cuLaunchKernelEx(programmatic_config(d, grid, block, shared_bytes, stream_ptr), kernel_ptr,
                                   argv_ptr, 0)
    return int(status)


def programmatic_config(d: Any, grid: Sequence[int], block: Sequence[int], shared_bytes: int, stream_ptr: int) -> Any:
    """The ``CUlaunchConfig`` of ``launch_programmatic`` (``d``: ``cuda.bindings.driver``; builds
    without a driver, so its fields are checked on the host)."""
    config = d.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = (int(g) for g in grid)
    config.blockDimX, config.blockDimY, config.blockDimZ = (int(b) for b in block)
    config.sharedMemBytes = int(shared_bytes)
    config.hStream = d.CUstream(stream_ptr)
    attr = d.CUlaunchAttribute()
    attr.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attr.value.programmaticStreamSerializationAllowed = 1
    config.attrs = [attr]
    config.numAttrs = 1
    return config


# ---- conditional graphs ---------------------------------------------------------------------------
def graph_create() -> int:
    """A new empty ``CUgraph``."""
    return int(call("cuGraphCreate", 0))


def add_while_node(graph: int, context: int) -> tuple[int, int]:
    """Add a WHILE conditional node to ``graph``: ``(handle, body graph)``.

    The handle's value is reset to 1 at every launch (``CU_GRAPH_COND_ASSIGN_DEFAULT``), so the
    body runs at least once; the driver makes the empty body graph, to be filled by ``capture_into``.
    """
    d = driver()
    handle = call("cuGraphConditionalHandleCreate", graph, context, 1, d.CU_GRAPH_COND_ASSIGN_DEFAULT)
    params = while_params(d, handle, context)
    # CUDA 12's cuGraphAddNode_v2 (with edge data) is CUDA 13's cuGraphAddNode, same arguments
    add = "cuGraphAddNode_v2" if hasattr(d, "cuGraphAddNode_v2") else "cuGraphAddNode"
    call(add, graph, None, None, 0, params)
    bodies = params.conditional.phGraph_out  # written by the driver into params
    body = int(bodies[0]) if bodies else 0
    if not body:
        raise RuntimeError(f"{add} returned no body graph for the WHILE node")
    return int(handle), body


def while_params(d: Any, handle: Any, context: int) -> Any:
    """The ``CUgraphNodeParams`` of one WHILE node on conditional ``handle`` (``d``:
    ``cuda.bindings.driver``; builds without a driver, so its fields are checked on the host)."""
    params = d.CUgraphNodeParams()
    params.type = d.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
    params.conditional.handle = handle
    params.conditional.type = d.CUgraphConditionalNodeType.CU_GRAPH_COND_TYPE_WHILE
    params.conditional.size = 1
    params.conditional.ctx = context
    return params


def capture_into(stream_ptr: int, graph: int, record: Callable[[], None]) -> None:
    """Record what ``record()`` enqueues on ``stream_ptr`` into ``graph`` (relaxed capture mode);
    the capture always ends, and an error of ``record`` wins over the capture's."""
    d = driver()
    call("cuStreamBeginCaptureToGraph", stream_ptr, graph, None, None, 0,
         d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED)
    try:
        record()
    except BaseException:
        d.cuStreamEndCapture(stream_ptr)  # the capture is void; its status is not the error
        raise
    call("cuStreamEndCapture", stream_ptr)


def instantiate(graph: int) -> int:
    """The executable ``CUgraphExec`` of ``graph``."""
    return int(call("cuGraphInstantiate", graph, 0))


def graph_launch(graph_exec: int, stream_ptr: int) -> None:
    """Enqueue ``graph_exec`` on ``stream_ptr``."""
    call("cuGraphLaunch", graph_exec, stream_ptr)


def graph_exec_destroy(graph_exec: int) -> None:
    """Free an executable graph (status ignored: used in teardown)."""
    driver().cuGraphExecDestroy(graph_exec)


def graph_destroy(graph: int) -> None:
    """Free a graph and its child graphs (status ignored: used in teardown)."""
    driver().cuGraphDestroy(graph)


__all__ = ["FIX_INSTALL", "DriverCallFailed", "add_while_node", "call", "capture_into", "current_context",
           "driver", "error_name", "errors", "function_name", "graph_create", "graph_destroy", "graph_exec_destroy",
           "graph_launch", "instantiate", "launch_programmatic", "programmatic_config", "reset_primary_context",
           "unavailable", "while_params"]
