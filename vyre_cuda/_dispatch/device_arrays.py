"""CuPy work on the caller's device arrays that ``vyre``'s host half asks for (``vyre.lib.multi``'s
sharded parts): reached as ``backend.device_arrays``, so ``vyre`` itself never imports CuPy.

Every function takes the CUDA device ordinal it works on (or reads it from the array) and makes
that device current for the work.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from vyre_cuda._runtime.arrays import stream_pointer


def as_cupy(a: Any, index: int | None = None) -> Any:
    """A CuPy view of a device array (torch tensors and other ``__cuda_array_interface__`` arrays)."""
    import cupy

    if isinstance(a, cupy.ndarray):
        return a
    with cupy.cuda.Device(index or 0):
        return cupy.asarray(a)


def run_on(index: int, work: Callable[[], Any], wait: bool = False) -> Any:
    """``work()`` with device ``index`` current; with ``wait``, its current stream finished after."""
    import cupy

    with cupy.cuda.Device(index):
        out = work()
        if wait:
            cupy.cuda.get_current_stream().synchronize()
    return out


def to_host(a: Any, index: int | None = None) -> np.ndarray:
    """A numpy copy of a device array."""
    a = as_cupy(a, index)
    return run_on(a.device.id, a.get)


def zeros(index: int, dtype: np.dtype, n: int = 0) -> Any:
    """``n`` zeros of ``dtype`` on device ``index``."""
    import cupy

    return run_on(index, lambda: cupy.zeros(n, dtype))


def ufunc(name: str) -> Any:
    """CuPy's ufunc of numpy's ``name`` (``add``, ``minimum``, ...)."""
    import cupy

    return getattr(cupy, name)


def concat_on(device: int, pieces: Sequence[Any]) -> Any:
    """The pieces (CuPy arrays on any devices) one after another in one new array on ``device``:
    peer copies between GPUs, finished on return."""
    import cupy

    for p in pieces:
        enable_peer_access(device, p.device.id)
    with cupy.cuda.Device(device):
        out = cupy.empty(sum(int(p.size) for p in pieces), pieces[0].dtype)
        stream, off = cupy.cuda.get_current_stream(), 0
        for p in pieces:
            nbytes = int(p.nbytes)
            if nbytes:
                cupy.cuda.runtime.memcpyPeerAsync(out.data.ptr + off, device, p.data.ptr, p.device.id, nbytes,
                                                  stream.ptr)
            off += nbytes
        stream.synchronize()
    return out


def combine_on(pieces: Sequence[Any], devices: Sequence[int], ufunc_name: str, to: int | None = None,
               like: Any = None) -> Any:
    """Equal-length device arrays (CuPy, torch, ...), ``pieces[k]`` on device ``devices[k]``,
    combined elementwise in order with CuPy's ufunc ``ufunc_name`` (``add``, ``minimum``, ...)
    into a new CuPy array on device ``to`` (default ``devices[0]``), queued with no host wait on
    the stream a library call on ``like`` (an array of that device) runs on, else on that
    device's current CuPy stream.

    Each piece is read after the work queued before the call on its device's current stream
    (CuPy's, or torch's for a torch tensor: where a ``vyre.lib`` call on it ran) through an event
    the combining stream waits for; pieces of other devices reach ``to`` by peer copies
    (``enable_peer_access``) and are combined there. Every piece's stream then waits for the
    combine, so memory freed after the call is not reused before the copies read it."""
    import cupy

    target = devices[0] if to is None else to
    producers = [(d, run_on(d, lambda p=p: stream_pointer(None, [p]))) for p, d in zip(pieces, devices)]
    combining = (target, run_on(target, lambda: stream_pointer(None, [] if like is None else [like])))
    for d in devices:
        enable_peer_access(target, d)
    for producer in producers:
        _wait(combining, producer)
    with cupy.cuda.Device(target), _current(combining[1]):
        ufunc, out = getattr(cupy, ufunc_name), None
        for p, d in zip(pieces, devices):
            piece = as_cupy(p, d)
            if d == target:
                here = piece if out is not None else piece.copy()
            else:
                here = cupy.empty(piece.shape, piece.dtype)
                if piece.nbytes:
                    cupy.cuda.runtime.memcpyPeerAsync(here.data.ptr, target, piece.data.ptr, d, int(piece.nbytes),
                                                      combining[1])
            out = here if out is None else ufunc(out, here, out=out)
    for producer in producers:
        _wait(producer, combining)
    return out


def _current(handle: int) -> Any:
    """A context making stream ``handle`` CuPy's current stream (of the current device)."""
    import contextlib

    import cupy

    if handle == cupy.cuda.get_current_stream().ptr:
        return contextlib.nullcontext()
    return cupy.cuda.Stream.null if handle == 0 else cupy.cuda.ExternalStream(handle)


def _wait(waiter: tuple[int, int], producer: tuple[int, int]) -> None:
    """Stream ``waiter`` waits for the work queued so far on stream ``producer``, each given as
    ``(device, stream handle)`` (0: that device's legacy default stream); no host wait."""
    import cupy

    if waiter == producer:
        return
    with cupy.cuda.Device(producer[0]):
        event = cupy.cuda.Event(disable_timing=True)
        cupy.cuda.runtime.eventRecord(event.ptr, producer[1])
    with cupy.cuda.Device(waiter[0]):
        cupy.cuda.runtime.streamWaitEvent(waiter[1], event.ptr, 0)


_PEERS: set[tuple[int, int]] = set()  # (device, peer) pairs already asked for
_PEERS_LOCK = threading.Lock()


def enable_peer_access(device: int, peer: int) -> None:
    """Let ``device`` and ``peer`` reach each other's memory (once per pair, both ways), so peer
    copies between them go over NVLink/PCIe directly instead of through host memory. Pairs the
    hardware cannot connect are left as they are (their copies still work, staged)."""
    import cupy

    if device == peer:
        return
    with _PEERS_LOCK:
        for a, b in ((device, peer), (peer, device)):
            if (a, b) in _PEERS:
                continue
            _PEERS.add((a, b))
            runtime = cupy.cuda.runtime
            if not runtime.deviceCanAccessPeer(a, b):
                continue
            with cupy.cuda.Device(a):
                try:
                    runtime.deviceEnablePeerAccess(b)
                except runtime.CUDARuntimeError as exc:  # enabled already (by CuPy, NCCL or the caller)
                    if "PeerAccessAlreadyEnabled" not in str(exc):
                        raise
