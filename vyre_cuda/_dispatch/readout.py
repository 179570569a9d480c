"""The words a compiled call reads back, written by one last step of its own into pinned host memory.

A compiled library call that reads words back (a count, a reduction's value) used to enqueue one
``cudaMemcpyAsync`` per word after its graph: about 3 us of host time each, and the copy
engine's latency on the device. Pinned host memory is mapped into the device's address space,
so a kernel can store into it directly: ``Readout`` adds a one-invocation step that copies the
words there, so the graph does the copy and reading back is the wait alone (measured on an H200
after a one-kernel graph: 4B read by ``memcpyAsync`` 19.6 us a call, by a graph's kernel 14.8 us,
no read 13.6 us).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

from vyre.driver.backend import Resident
from vyre.driver.config import DispatchConfig
from vyre.driver.resident_args import check_byte_range, unpack_read
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre_cuda._runtime.errors import cuda_errors
from vyre_cuda._runtime.host_pins import PINS

U32 = DataType.U32
ONE = DispatchConfig(grid=(1, 1, 1))


@cache
def readout_program(spans: tuple[tuple[int, int, int], ...], sources: int) -> Program:
    """``out[k] = src_b[w]`` for each ``(b, first word w, words)`` of ``spans`` in order, by one
    invocation: buffers ``src0 .. src{sources-1}`` (read) and ``out`` (binding ``sources``)."""
    body: list[Node] = []
    k = 0
    for b, first, words in spans:
        for w in range(words):
            body.append(Node.store("out", Expr.u32(k), Expr.load(f"src{b}", Expr.u32(first + w))))
            k += 1
    buffers = [BufferDecl.read(f"src{b}", b, U32) for b in range(sources)]
    buffers.append(BufferDecl.read_write("out", sources, U32))
    return Program(buffers, (1, 1, 1), [Node.if_(Expr.eq(Expr.invocation_id(0), Expr.u32(0)), body)],
                   name="vyre_readout")


class Readout:
    """Reads ``(handle, offset, nbytes)`` (whole 4-byte words) of one compiled sequence: the step
    that copies them into this object's pinned words, and ``collect`` after the sequence ran.
    ``runtime``'s lock is held by the callers."""

    def __init__(self, runtime: Any, reads: Sequence[tuple]) -> None:
        import cupy

        self.runtime = runtime
        handles: list[Resident] = []
        spans = []
        self.sizes: list[int] = []
        for read in reads:
            handle, offset, nbytes = unpack_read(read)
            check_byte_range(handle, offset, nbytes, "read range")
            if handle not in handles:
                handles.append(handle)
            spans.append((handles.index(handle), offset // 4, nbytes // 4))
            self.sizes.append(nbytes)
        total = max(sum(self.sizes), 4)
        with cuda_errors(f"allocating {total} bytes of pinned host memory"), PINS.lock:
            self.mem = cupy.cuda.alloc_pinned_memory(total)
        self.words = np.frombuffer(self.mem, np.uint8, total)
        self.handle = runtime.resident.borrow(self.mem.ptr, total)  # the device stores to the host address
        self.step = (readout_program(tuple(spans), len(handles)), [*handles, self.handle], ONE)
        self.event = cupy.cuda.Event(disable_timing=True)

    @staticmethod
    def takes(reads: Sequence[tuple]) -> bool:
        """Whether ``reads`` are whole aligned words a ``Readout`` copies (else the copy engine reads them)."""
        try:
            return bool(reads) and all(unpack_read(r)[1] % 4 == 0 and unpack_read(r)[2] % 4 == 0 for r in reads)
        except Exception:  # noqa: BLE001 - malformed reads are refused where they are checked
            return False

    def collect(self, stream: Any, what: str) -> list[np.ndarray]:
        """The words, once everything enqueued on ``stream`` so far (the sequence with this step) is done."""
        rt = self.runtime
        with cuda_errors(f"reading back the results of {what}"):
            self.event.record(stream)
        rt.wait(self.event, None, what)
        out, off = [], 0
        for nbytes in self.sizes:
            out.append(self.words[off:off + nbytes].copy())
            off += nbytes
        return out

    def close(self) -> None:
        """Forget the pinned words' handle (the memory goes with this object)."""
        try:
            self.runtime.resident.free(self.handle)
        except Exception:  # noqa: BLE001 - a closed runtime dropped it already
            pass
