"""Host and device inputs of a dispatch: checked once, copied in one way (``dispatch`` and pipelines).

``check_inputs`` turns the inputs of one dispatch into ``Source`` records (buffer, data, bytes,
whether the data is a device array) and the run-time element counts of every buffer.
``copy_in`` enqueues one source's copy into a device buffer: device arrays device-to-device,
small host data (below ``PIPELINE_MIN``) through the caller's pinned staging area in one copy,
large host data through the runtime's chunk ring (``PinnedStaging.upload``: the host copy of one
chunk overlaps the DMA of the one before). ``copy_out`` is its other half: one result's copy from
a device buffer into the pinned staging area. ``aligned`` is the staging layout's rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre.driver.inputs import as_bytes_view, buffer_counts, check_byte_length, check_input_count
from vyre.ir.program import BufferDecl, Program
from vyre_cuda._runtime.arrays import device_input
from vyre_cuda._runtime.pools import D2D, D2H, H2D, PIPELINE_MIN

ALIGN = 16  # bytes: every staged input and output starts on this boundary


def aligned(n: int) -> int:
    """``n`` rounded up to ``ALIGN``."""
    return -(-n // ALIGN) * ALIGN


@dataclass(eq=False)
class Source:
    """One checked input: its buffer, the data (a bytes view or a device array) and its byte length."""

    decl: BufferDecl
    data: Any
    nbytes: int
    on_device: bool

    @property
    def chunked(self) -> bool:
        """Host data large enough to go through the chunk ring instead of the staging area."""
        return not self.on_device and self.nbytes >= PIPELINE_MIN


def check_inputs(program: Program, inputs: Sequence[object], device_id: int) -> tuple[list[Source], dict[str, int]]:
    """The inputs as ``Source`` records (declaration order) and the element count of every buffer."""
    check_input_count(program, inputs)
    sources: list[Source] = []
    input_counts: dict[str, int] = {}
    for decl, data in zip(program.inputs, inputs):
        dev = device_input(decl, data, device_id)
        src = dev if dev is not None else as_bytes_view(decl, data)
        count = check_byte_length(decl, src.nbytes)
        input_counts[decl.name] = count
        sources.append(Source(decl, src, count * decl.dtype.size, dev is not None))
    return sources, buffer_counts(program, input_counts)


def host_bytes_of(sources: Sequence[Source]) -> int:
    """Staging-area bytes the small host sources take (each aligned; chunked ones take none)."""
    return sum(aligned(s.nbytes) for s in sources if not s.on_device and not s.chunked)


def copy_in(runtime: Any, src: Source, dst_ptr: int, stage: np.ndarray, stage_ptr: int, off: int) -> int:
    """Enqueue the copy of ``src`` to ``dst_ptr`` on the runtime's stream; host data goes through
    ``stage[off:]`` (pinned, at device address ``stage_ptr``) or, when large, the runtime's chunk
    ring. Returns the next staging offset."""
    if not src.nbytes:
        return off
    stream = runtime.stream_ptr
    if src.on_device:
        runtime.cuda.memcpyAsync(dst_ptr, src.data.data.ptr, src.nbytes, D2D, stream)
        runtime.telemetry.add("cuda_d2d_bytes", src.nbytes)
        return off
    if src.chunked:
        runtime.staging.upload(dst_ptr, np.frombuffer(src.data, np.uint8, src.nbytes))
        return off
    stage[off:off + src.nbytes] = np.frombuffer(src.data, np.uint8, src.nbytes)
    runtime.cuda.memcpyAsync(dst_ptr, stage_ptr + off, src.nbytes, H2D, stream)
    runtime.telemetry.add("cuda_h2d_bytes", src.nbytes)
    return off + aligned(src.nbytes)


def copy_out(runtime: Any, src_ptr: int, nbytes: int, stage_ptr: int, off: int) -> int:
    """Enqueue the copy of ``nbytes`` at device address ``src_ptr`` to the pinned staging area at
    ``stage_ptr + off`` on the runtime's stream (nothing for 0 bytes). Returns the next staging offset."""
    if nbytes:
        runtime.cuda.memcpyAsync(stage_ptr + off, src_ptr, nbytes, D2H, runtime.stream_ptr)
        runtime.telemetry.add("cuda_d2h_bytes", nbytes)
    return off + aligned(nbytes)
