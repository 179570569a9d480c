"""The dispatch paths a long-process fuzz run takes, and the dirtying between its programs.

A wrong result that depends on what ran before (a skipped zero fill, workgroup memory left over
from an earlier kernel, a cache hit that should have missed) shows only in a process that has
run many programs. ``fuzz(..., long_process=True)`` therefore runs each case through one of
``PATHS`` in turn, changes the coarsening setting as it goes (``COARSEN_SETTINGS``) and, between
programs, leaves the backend's memory dirty (``dirty``):

- ``host``: ``backend.dispatch`` (numpy in and out);
- ``device``: ``dispatch`` with ``DispatchConfig(outputs="device")`` (device arrays out);
- ``resident``: inputs uploaded into resident buffers, ``output`` buffers poisoned with junk
  first, ``dispatch_resident``, downloads;
- ``pipeline``: ``backend.compile(program, config).dispatch(inputs)``;
- ``sequence``: the resident buffers run as a one-step ``dispatch_sequence`` with reads;
- ``inplace``: inputs given as CuPy arrays, bound in place (``read_write`` ones updated in place),
  results as CuPy arrays (``python -m vyre.fuzz --path inplace`` takes only this path).

``dirty`` uses only the public backend API: it runs a program that fills 48 KiB of workgroup
memory on every multiprocessor and writes junk into output buffers of several size classes
(which the backend's pools then hand out again), and uploads junk into resident buffers that it
frees at once. The oracle has no device memory to dirty, so ``dirty`` does nothing there.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from vyre import settings
from vyre.driver.config import DispatchConfig
from vyre.ir.expr import Expr
from vyre.ir.node import Node
from vyre.ir.program import BufferDecl, Program
from vyre.ir.types import DataType

PATHS = ("host", "device", "resident", "pipeline", "sequence", "inplace")
#: ``VYRE_CUDA_COARSEN`` values taken in turn (None: unset, the automatic choice)
COARSEN_SETTINGS = (None, "0", "4", "2")
COARSEN_ENV = "VYRE_CUDA_COARSEN"
JUNK = 0xA5  # the byte that dirty memory and poisoned outputs hold
_DIRTY_WORDS = (60, 300, 1500, 9000, 70000)  # output sizes: one per size class of the pools
_WORKGROUP_WORDS = 12288  # 48 KiB, the most workgroup memory every device runs (static shared memory)
_DIRTY_THREADS = 256
DIRTY_GRID = DispatchConfig(grid=(1024, 1, 1))  # reaches every multiprocessor several times over


def as_host(array: Any) -> np.ndarray:
    """A numpy copy of a numpy or device (CuPy: ``.get()``) array."""
    get = getattr(array, "get", None)
    return np.asarray(get() if callable(get) else array)


def run_path(backend: Any, path: str, program: Program, inputs: Sequence[np.ndarray],
             config: DispatchConfig) -> list[np.ndarray]:
    """``program``'s outputs (``program.outputs`` order) run on ``backend`` through ``path``."""
    if path == "host":
        return list(backend.dispatch(program, list(inputs), config))
    if path == "device":
        outs = backend.dispatch(program, list(inputs), dataclasses.replace(config, outputs="device"))
        return [as_host(o) for o in outs]
    if path == "pipeline":
        return list(backend.compile(program, config).dispatch(list(inputs)))
    if path == "inplace":
        to_device = getattr(backend, "to_device", None)
        if to_device is None:  # the oracle has no device arrays
            return run_path(backend, "host", program, inputs, config)
        stream = backend.stream_for(None)
        outs = backend.dispatch(program, [to_device(np.ascontiguousarray(x), stream) for x in inputs], config)
        return [as_host(o) for o in outs]
    if path in ("resident", "sequence"):
        return _run_resident(backend, path, program, inputs, config)
    raise ValueError(f"unknown path {path!r}. Fix: use one of {PATHS}.")


def _run_resident(backend: Any, path: str, program: Program, inputs: Sequence[np.ndarray],
                  config: DispatchConfig) -> list[np.ndarray]:
    """Through resident buffers: inputs uploaded, outputs poisoned, one dispatch, downloads."""
    data = dict(zip((b.name for b in program.inputs), inputs))
    decls = [b for b in program.buffers if not b.is_workgroup]
    sizes = {b.name: (np.asarray(data[b.name]).nbytes if b.access.is_input else b.count * b.dtype.size)
             for b in decls}
    if not all(sizes.values()):  # an empty buffer has no resident form: take the host path
        return run_path(backend, "host", program, inputs, config)
    handles: dict[str, Any] = {}
    try:
        for b in decls:
            handles[b.name] = h = backend.allocate_resident(sizes[b.name])
            if b.access.is_input:
                backend.upload_resident(h, np.ascontiguousarray(data[b.name]))
            else:
                backend.upload_resident(h, np.full(sizes[b.name], JUNK, np.uint8))
        bound = [handles[b.name] for b in decls]
        if path == "resident":
            backend.dispatch_resident(program, bound, config)
            raw = [backend.download_resident(handles[b.name]) for b in program.outputs]
        else:
            reads = [(handles[b.name], 0, sizes[b.name]) for b in program.outputs]
            raw = backend.dispatch_sequence([(program, bound, config)], reads)
        return [np.asarray(r).view(b.dtype.np_dtype) for r, b in zip(raw, program.outputs)]
    finally:
        for h in handles.values():
            backend.free_resident(h)


def set_coarsening(value: str | None) -> None:
    """Set (or, with None, unset) ``VYRE_CUDA_COARSEN`` for the dispatches that follow."""
    settings.set_variable(COARSEN_ENV, value)


def dirty(backend: Any, rng: np.random.Generator) -> None:
    """Leave junk in the backend's workgroup memory and pooled buffers (nothing on the oracle)."""
    if backend.id == "reference":
        return
    backend.dispatch(dirtier_program(), [np.array([JUNK * 0x01010101], np.uint32)], DIRTY_GRID)
    for _ in range(3):
        h = backend.allocate_resident(int(rng.integers(4, 1 << 18)))
        try:
            backend.upload_resident(h, np.full(h.nbytes, JUNK, np.uint8))
        finally:
            backend.free_resident(h)


@functools.cache
def dirtier_program() -> Program:
    """Fills its 48 KiB of workgroup memory and every element of its outputs with ``junk[0]``."""
    gid, lid = Expr.invocation_id(0), Expr.local_id(0)
    value = Expr.load("junk", Expr.u32(0))
    per_thread = _WORKGROUP_WORDS // _DIRTY_THREADS
    outs = [BufferDecl.output(f"out{i}", i + 1, DataType.U32, n) for i, n in enumerate(_DIRTY_WORDS)]
    body: list[Node] = [
        Node.loop("j", Expr.u32(0), Expr.u32(per_thread), [
            Node.store("wg", Expr.add(Expr.mul(lid, Expr.u32(per_thread)), Expr.var("j")), value)]),
        Node.barrier(),
        *(Node.if_(Expr.lt(gid, Expr.buf_len(d.name)), [Node.store(d.name, gid, Expr.load("wg", lid))])
          for d in outs),
    ]
    return Program([BufferDecl.read("junk", 0, DataType.U32), *outs,
                    BufferDecl.workgroup("wg", _WORKGROUP_WORDS, DataType.U32)],
                   (_DIRTY_THREADS, 1, 1), body, name="fuzz_dirtier")


__all__ = ["COARSEN_SETTINGS", "JUNK", "PATHS", "as_host", "dirty", "dirtier_program",
           "run_path", "set_coarsening"]
