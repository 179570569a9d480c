"""Fixed-point loops on the device: a WHILE conditional CUDA graph node (drivers of CUDA 12.4+).

CuPy has no binding for conditional nodes, so this module calls libcuda through ctypes:

1. ``cuGraphCreate`` makes an outer graph and ``cuGraphConditionalHandleCreate`` a handle whose
   value is reset to 1 at every launch (``CU_GRAPH_COND_ASSIGN_DEFAULT``): the body runs at least once;
2. ``cuGraphAddNode_v2`` adds one conditional node of type WHILE; the driver makes its empty body graph;
3. ``cuStreamBeginCaptureToGraph`` records one iteration into that body: the caller's
   ``record(stream_ptr, handle)`` enqueues the iteration's steps and then a one-thread kernel
   (``condition_ptx``) that counts the iteration in a control block and calls
   ``cudaGraphSetConditional(handle, flag != 0 && count < cap)``; when it goes on, it also clears
   the flag for the next iteration (the caller clears it before the first), so an iteration is
   its steps plus one tiny kernel, which on sm_90+ may start while the last step runs (it waits
   with ``griddepcontrol.wait``);
4. ``cuGraphInstantiateWithFlags`` once; each ``cuGraphLaunch`` then runs the whole loop with no
   host round trip.

``cudaGraphSetConditional`` is a builtin of the device runtime that ptxas resolves by itself (as it
does ``vprintf``): the condition kernel is plain PTX with an ``.extern .func`` declaration, linked
and loaded by the module cache like any other kernel, without the device runtime library.

The control block is two u32 words: ``[0]`` iterations run so far (the caller writes 0 before each
launch), ``[1]`` the iteration cap. ``WhileGraph`` owns the graph and its executable and frees both
in ``close``. ``unavailable_reason`` says why a loop must take the batched readback path instead;
it is pure, so it is tested without a GPU.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any

from vyre_cuda.runtime.errors import translate

MIN_DRIVER = 12040  # cuDriverGetVersion of CUDA 12.4: conditional nodes set from device code
CONDITION_ENTRY = "vyre_while_condition"
CONTROL_WORDS = 2  # [0] iterations run, [1] the cap
CAP_LIMIT = 0xFFFFFFFF  # the cap is one u32 word

_NODE_TYPE_CONDITIONAL = 13  # CU_GRAPH_NODE_TYPE_CONDITIONAL
_COND_TYPE_WHILE = 1  # CU_GRAPH_COND_TYPE_WHILE
_COND_ASSIGN_DEFAULT = 1  # CU_GRAPH_COND_ASSIGN_DEFAULT: the default value applies at every launch
_CAPTURE_RELAXED = 2  # CU_STREAM_CAPTURE_MODE_RELAXED


class ConditionalParams(ctypes.Structure):
    """``CUDA_CONDITIONAL_NODE_PARAMS`` (32 bytes); the driver fills ``graphs`` with the body graphs."""

    _fields_ = [("handle", ctypes.c_uint64), ("type", ctypes.c_int), ("size", ctypes.c_uint),
                ("graphs", ctypes.POINTER(ctypes.c_void_p)), ("ctx", ctypes.c_void_p)]


class NodeParams(ctypes.Structure):
    """``CUgraphNodeParams`` (256 bytes) with the ``conditional`` member of its 232-byte union."""

    _fields_ = [("type", ctypes.c_int), ("reserved0", ctypes.c_int * 3), ("conditional", ConditionalParams),
                ("union_rest", ctypes.c_ubyte * (232 - ctypes.sizeof(ConditionalParams))),
                ("reserved2", ctypes.c_longlong)]


_P = ctypes.c_void_p
_SIGNATURES: dict[str, list[Any]] = {
    "cuCtxGetCurrent": [ctypes.POINTER(_P)],
    "cuGraphCreate": [ctypes.POINTER(_P), ctypes.c_uint],
    "cuGraphConditionalHandleCreate": [ctypes.POINTER(ctypes.c_uint64), _P, _P, ctypes.c_uint, ctypes.c_uint],
    "cuGraphAddNode_v2": [ctypes.POINTER(_P), _P, _P, _P, ctypes.c_size_t, ctypes.POINTER(NodeParams)],
    "cuStreamBeginCaptureToGraph": [_P, _P, _P, _P, ctypes.c_size_t, ctypes.c_int],
    "cuStreamEndCapture": [_P, ctypes.POINTER(_P)],
    "cuGraphInstantiateWithFlags": [ctypes.POINTER(_P), _P, ctypes.c_ulonglong],
    "cuGraphLaunch": [_P, _P],
    "cuGraphExecDestroy": [_P],
    "cuGraphDestroy": [_P],
    "cuGetErrorName": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
}


class DriverApi:
    """The libcuda entry points of conditional graphs, typed; ``missing`` names the absent ones."""

    def __init__(self, lib: Any) -> None:
        self.missing: tuple[str, ...] = ()
        for name, argtypes in _SIGNATURES.items():
            fn = getattr(lib, name, None)
            if fn is None:
                self.missing += (name,)
                continue
            fn.restype, fn.argtypes = ctypes.c_int, argtypes
            setattr(self, name, fn)

    def check(self, status: int, call: str) -> None:
        """Raise the vyre error for a failed driver call (sticky faults become ``DeviceLost``)."""
        if status:
            name = ctypes.c_char_p()
            if "cuGetErrorName" in self.missing or self.cuGetErrorName(status, ctypes.byref(name)) or not name.value:
                text = f"CUDA error {status}"
            else:
                text = f"{name.value.decode()} ({status})"
            raise translate(RuntimeError(f"{call} returned {text}"), "building or running a conditional CUDA graph")


@functools.lru_cache(maxsize=1)
def driver() -> DriverApi | None:
    """The driver API through ctypes on ``libcuda.so.1``, or None when there is no libcuda."""
    try:
        return DriverApi(ctypes.CDLL("libcuda.so.1"))
    except OSError:
        return None


def missing_entry_points() -> tuple[str, ...]:
    """Names of what conditional graphs need and libcuda lacks (``("libcuda.so.1",)`` without one)."""
    api = driver()
    return ("libcuda.so.1",) if api is None else api.missing


def unavailable_reason(enabled: bool, graphs: bool, driver_version: int, missing: tuple[str, ...]) -> str | None:
    """Why a fixed-point loop must read its flag back per batch instead (None: it may loop on the device).

    ``enabled``: ``VYRE_CUDA_CONDITIONAL`` is not off; ``graphs``: CUDA graphs are on;
    ``driver_version``: ``cuDriverGetVersion``; ``missing``: ``missing_entry_points()``.
    """
    if not enabled:
        return "VYRE_CUDA_CONDITIONAL=0 (the batched path was asked for)"
    if not graphs:
        return "CUDA graphs are off (VYRE_CUDA_GRAPHS=0 or VYRE_CUDA_SYNC_EACH=1)"
    if driver_version < MIN_DRIVER:
        major, minor = divmod(driver_version // 10, 100)
        return f"the CUDA driver is {major}.{minor}; conditional graph nodes set from the device need 12.4+"
    if missing:
        return f"libcuda lacks {', '.join(missing)}"
    return None


def condition_ptx(sm: str, ptx_version: str) -> str:
    """PTX of ``CONDITION_ENTRY(.u64 flag, .u64 control, .u64 handle)``, one thread: count the
    iteration in ``control[0]``, then keep looping while the flag word is non-zero and the count is
    below ``control[1]``, clearing the flag when it does. On sm_90+ it first waits for the kernel
    before it (``griddepcontrol.wait``), so it may be a programmatic launch."""
    wait = "    griddepcontrol.wait;\n" if int(sm.rstrip("a")) >= 90 else ""
    return f""".version {ptx_version}
.target sm_{sm}
.address_size 64

.extern .func cudaGraphSetConditional(.param .b64 cond_handle, .param .b32 cond_value);

.visible .entry {CONDITION_ENTRY}(.param .u64 flag_ptr, .param .u64 control_ptr, .param .u64 handle)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [flag_ptr];
    ld.param.u64 %rd2, [control_ptr];
    ld.param.u64 %rd3, [handle];
{wait}    ld.global.u32 %r1, [%rd2];
    add.u32 %r1, %r1, 1;
    st.global.u32 [%rd2], %r1;
    ld.global.u32 %r2, [%rd2+4];
    ld.global.u32 %r3, [%rd1];
    setp.ne.u32 %p1, %r3, 0;
    setp.lt.u32 %p2, %r1, %r2;
    and.pred %p3, %p1, %p2;
    selp.u32 %r4, 1, 0, %p3;
    mov.u32 %r5, 0;
    @%p3 st.global.u32 [%rd1], %r5;
    {{
    .param .b64 arg_handle;
    st.param.b64 [arg_handle], %rd3;
    .param .b32 arg_value;
    st.param.b32 [arg_value], %r4;
    call.uni cudaGraphSetConditional, (arg_handle, arg_value);
    }}
    ret;
}}
"""


class WhileGraph:
    """An instantiated graph of one WHILE node: ``launch(stream)`` runs the whole loop.

    ``record(stream_ptr, handle)`` enqueues one iteration (launches, memsets, device copies only)
    ending with the ``CONDITION_ENTRY`` kernel given the conditional ``handle``. Any failure frees
    what was made and raises (callers then take the batched path).
    """

    def __init__(self, stream_ptr: int, record: Callable[[int, int], None]) -> None:
        api = driver()
        if api is None or api.missing:
            raise RuntimeError(f"conditional graphs need libcuda entry points: {missing_entry_points()}")
        self.api = api
        self.graph, self.exec = _P(), _P()
        try:
            api.check(api.cuGraphCreate(ctypes.byref(self.graph), 0), "cuGraphCreate")
            ctx = self._context()
            handle = ctypes.c_uint64()
            api.check(api.cuGraphConditionalHandleCreate(ctypes.byref(handle), self.graph, ctx, 1,
                                                         _COND_ASSIGN_DEFAULT), "cuGraphConditionalHandleCreate")
            params = NodeParams(type=_NODE_TYPE_CONDITIONAL)
            params.conditional = ConditionalParams(handle.value, _COND_TYPE_WHILE, 1, None, ctx)
            node = _P()
            api.check(api.cuGraphAddNode_v2(ctypes.byref(node), self.graph, None, None, 0, ctypes.byref(params)),
                      "cuGraphAddNode_v2")
            body = params.conditional.graphs[0] if params.conditional.graphs else None
            if not body:
                raise RuntimeError("cuGraphAddNode_v2 returned no body graph for the WHILE node")
            self._capture(stream_ptr, body, lambda ptr: record(ptr, handle.value))
            api.check(api.cuGraphInstantiateWithFlags(ctypes.byref(self.exec), self.graph, 0),
                      "cuGraphInstantiateWithFlags")
        except BaseException:
            self.close()
            raise

    def _context(self) -> Any:
        """The current CUDA context (CuPy's runtime makes the primary context current)."""
        ctx = _P()
        self.api.check(self.api.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        if not ctx.value:
            from cupy.cuda import runtime

            runtime.free(0)  # forces the runtime to make the device's primary context current
            self.api.check(self.api.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        return ctx

    def _capture(self, stream_ptr: int, body: int, record: Callable[[int], None]) -> None:
        """Record one iteration into ``body``; the capture always ends."""
        api, out = self.api, _P()
        api.check(api.cuStreamBeginCaptureToGraph(stream_ptr, body, None, None, 0, _CAPTURE_RELAXED),
                  "cuStreamBeginCaptureToGraph")
        try:
            record(stream_ptr)
        except BaseException:
            api.cuStreamEndCapture(stream_ptr, ctypes.byref(out))  # the capture is void; the first error wins
            raise
        api.check(api.cuStreamEndCapture(stream_ptr, ctypes.byref(out)), "cuStreamEndCapture")

    def launch(self, stream: Any) -> None:
        """Run the loop on ``stream`` (a CuPy stream): one driver call."""
        self.api.check(self.api.cuGraphLaunch(self.exec, stream.ptr), "cuGraphLaunch")

    def close(self) -> None:
        """Free the executable and the graph (with its body); a launch in flight still completes."""
        if self.exec.value:
            self.api.cuGraphExecDestroy(self.exec)
            self.exec = _P()
        if self.graph.value:
            self.api.cuGraphDestroy(self.graph)
            self.graph = _P()
