"""The Triton column of ``bench_lib.py``: ``reduce``, the scans, ``histogram`` and ``transform_reduce``
of u32 data as a Triton user writes them, on torch int32 views of the same data (every value is
below 2^31, and adds wrap alike, so the result bits are the u32 ones).

- ``reduce`` and ``transform_reduce``: one kernel, a ``tl.sum`` per block of ``BLOCK`` elements
  added into a zeroed word with ``tl.atomic_add`` (the zeroing is part of the call).
- the scans: three kernels (Triton's ``tl.cumsum`` scans one block): the block totals, their
  exclusive scan in one program, then each block's ``tl.cumsum`` from its carry.
- ``histogram``: a ``tl.histogram`` per block added into the bins with one ``tl.atomic_add``.

``peers`` checks each against CuPy on the same data once (an ``AssertionError`` if any differs)
and returns ``{row: call}``; it returns ``{}`` where Triton or torch is not installed. A size the
simple forms cannot take leaves their rows out, not the column: the histogram needs whole blocks
(``tl.histogram`` has no mask), the scan at most ``SCAN_BLOCK * 2**15`` elements (its carries
scan in one program).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

try:
    import triton
    import triton.language as tl
except ImportError:  # the CPU machine: no Triton column
    triton = None

BLOCK = 4096  # elements per program of the reductions and the histogram
SCAN_BLOCK = 8192  # elements per program of the scan (at most 2^15 blocks: the carries scan in one program)
BINS = 256

if triton is not None:

    @triton.jit
    def _sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr, LOW_SQUARE: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + offs, mask=offs < n, other=0)
        if LOW_SQUARE:  # transform_reduce's (v & 0xFFFF)**2, applied on load
            v = (v & 65535) * (v & 65535)
        tl.atomic_add(out_ptr, tl.sum(v, axis=0))

    @triton.jit
    def _block_totals(x_ptr, totals_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(totals_ptr + tl.program_id(0), tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0), axis=0))

    @triton.jit
    def _carries(totals_ptr, blocks, BLOCKS: tl.constexpr):
        offs = tl.arange(0, BLOCKS)
        t = tl.load(totals_ptr + offs, mask=offs < blocks, other=0)
        tl.store(totals_ptr + offs, tl.cumsum(t, axis=0) - t, mask=offs < blocks)

    @triton.jit
    def _block_scan(x_ptr, out_ptr, carries_ptr, n, BLOCK: tl.constexpr, INCLUSIVE: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + offs, mask=offs < n, other=0)
        s = tl.cumsum(v, axis=0) + tl.load(carries_ptr + tl.program_id(0))
        if not INCLUSIVE:
            s = s - v
        tl.store(out_ptr + offs, s, mask=offs < n)

    @triton.jit
    def _histogram(x_ptr, bins_ptr, BLOCK: tl.constexpr, BINS: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        h = tl.histogram(tl.load(x_ptr + offs), BINS)
        tl.atomic_add(bins_ptr + tl.arange(0, BINS), h)


def peers(tx: Any, tsmall: Any, x: Any, small: Any) -> dict[str, Callable[[], object]]:
    """The Triton calls on torch int32 tensors ``tx`` and ``tsmall`` (values below 256), checked
    against CuPy on ``x`` and ``small`` (the same data as u32); ``{}`` without Triton or torch."""
    if triton is None:
        return {}
    import cupy
    import torch

    n = tx.numel()
    blocks, scan_blocks = triton.cdiv(n, BLOCK), triton.cdiv(n, SCAN_BLOCK)

    def total(low_square: bool) -> Any:
        out = torch.zeros(1, dtype=torch.int32, device=tx.device)
        _sum[(blocks,)](tx, out, n, BLOCK=BLOCK, LOW_SQUARE=low_square, num_warps=8)
        return out

    def scan(inclusive: bool) -> Any:
        totals = torch.empty(scan_blocks, dtype=torch.int32, device=tx.device)
        out = torch.empty_like(tx)
        _block_totals[(scan_blocks,)](tx, totals, n, BLOCK=SCAN_BLOCK, num_warps=8)
        _carries[(1,)](totals, scan_blocks, BLOCKS=triton.next_power_of_2(scan_blocks), num_warps=16)
        _block_scan[(scan_blocks,)](tx, out, totals, n, BLOCK=SCAN_BLOCK, INCLUSIVE=inclusive, num_warps=8)
        return out

    def histogram() -> Any:
        bins = torch.zeros(BINS, dtype=torch.int32, device=tx.device)
        _histogram[(blocks,)](tsmall, bins, BLOCK=BLOCK, BINS=BINS, num_warps=8)
        return bins

    calls: dict[str, Callable[[], object]] = {"reduce": lambda: total(False), "transform_reduce": lambda: total(True)}
    if scan_blocks <= 2**15:
        calls |= {"inclusive_scan": lambda: scan(True), "exclusive_scan": lambda: scan(False)}
    if n % BLOCK == 0:
        calls["histogram"] = histogram
    low = (x & 65535).astype(cupy.uint32)
    inclusive = cupy.cumsum(x, dtype=cupy.uint32)
    want = {"reduce": x.sum(dtype=cupy.uint32), "transform_reduce": (low * low).sum(dtype=cupy.uint32),
            "inclusive_scan": inclusive, "exclusive_scan": inclusive - x,
            "histogram": cupy.bincount(small, minlength=BINS).astype(cupy.uint32)}
    for row, call in calls.items():  # only the rows built
        got = cupy.asarray(call()).view(cupy.uint32).reshape(cupy.asarray(want[row]).shape)
        if not bool((got == want[row]).all()):
            raise AssertionError(f"Triton's {row} of {n} elements differs from CuPy's")
    return calls
