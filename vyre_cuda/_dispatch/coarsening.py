"""When the cuda backend coarsens a kernel along x (``emit_ptx(..., coarsen=K)``).

A plain one-element-per-invocation program launched over a large grid spends a noticeable share
of the memory bandwidth on workgroup start-up and keeps few loads in flight per thread; running
``K`` logical workgroups per hardware workgroup (``vyre_cuda._codegen.coarsen``) recovers it.
Results are bit-identical: every logical invocation still runs with its own ids.

``factor(grid, block, sm_count, cooperative, shared_bytes)`` picks ``K``:

- ``VYRE_CUDA_COARSEN=0`` (or 1, off, false, no): always 1.
- ``VYRE_CUDA_COARSEN=<power of two from 2 to 64>``: that factor for every non-empty,
  non-cooperative grid, however small (a test hook: it exercises tails and ``gx < K``).
- otherwise (unset, ``auto``): ``AUTO_FACTOR`` when the logical grid x has at least
  ``MIN_HARDWARE_X * AUTO_FACTOR`` workgroups, the coarsened launch still has a full
  wave of threads (``THREADS_PER_SM`` per SM) and each workgroup takes at most
  ``AUTO_MAX_SHARED_BYTES`` of workgroup memory, else 1.

Coarsening pays for short workgroups: their start-up and the last wave's tail are a noticeable
share of the time, and ptxas can start the next logical workgroup's loads early. A workgroup
that needs tens of KiB of workgroup memory does long work behind barriers (each logical one
would also zero it again), so there is nothing to win. Measured on H100s (a graph of
``vyre.lib.sort`` at 2^28, whose single-pass kernels take 43 KiB): coarsened x4, 7.6-7.7 ms on
two hosts, and on one of them 6.95 ms uncoarsened; on a third host about 6.9-7.0 ms either way.

Cooperative launches are never coarsened (their grid must stay resident as written).
The variable is read each time a dispatch is bound, so a change applies to new bindings only.
"""

from __future__ import annotations

from collections.abc import Sequence

from vyre_cuda._runtime import settings

ENV = settings.COARSEN
AUTO_FACTOR = 4
#: the most workgroup memory (bytes) of a kernel that is coarsened automatically
AUTO_MAX_SHARED_BYTES = 16 * 1024
#: resident threads per SM assumed for "the coarsened grid still fills the GPU" (sm_80/sm_90: 2048)
THREADS_PER_SM = 2048
#: the auto factor needs at least this many hardware workgroups along x (bounds the skipped tail)
MIN_HARDWARE_X = 16
setting = settings.coarsen  # ``VYRE_CUDA_COARSEN`` as a forced factor (1 = off), or None for the automatic choice


def factor(grid: Sequence[int], block: Sequence[int], sm_count: int, cooperative: bool = False,
           shared_bytes: int = 0) -> int:
    """The coarsening factor for a launch of ``grid`` workgroups of ``block``, each taking
    ``shared_bytes`` of workgroup memory (see the module docstring)."""
    gx, gy, gz = grid
    if cooperative or gx * gy * gz == 0:
        return 1
    forced = setting()
    if forced is not None:
        return forced
    if gx < MIN_HARDWARE_X * AUTO_FACTOR or shared_bytes > AUTO_MAX_SHARED_BYTES:
        return 1
    threads = -(-gx // AUTO_FACTOR) * gy * gz * block[0] * block[1] * block[2]
    return AUTO_FACTOR if threads >= max(1, sm_count) * THREADS_PER_SM else 1


def launch_grid(grid: Sequence[int], k: int) -> tuple[int, int, int]:
    """The hardware grid of a launch coarsened by ``k``: x rounded up to whole hardware workgroups."""
    gx, gy, gz = grid
    return (-(-int(gx) // k), int(gy), int(gz))
