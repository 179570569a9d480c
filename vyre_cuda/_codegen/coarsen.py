"""Thread coarsening along x: one hardware workgroup runs ``K`` logical workgroups in turn.

For ``j`` in ``0..K-1`` the block runs logical workgroup ``ctaid.x * K + j`` with the same
``local_id``; ``invocation_id(0) = workgroup_id(0) * ntid.x + tid.x``, y and z unchanged, so
consecutive threads still touch consecutive addresses. Iterations whose logical workgroup is not
below the logical grid x (parameter word ``abi.grid_x_word``) are skipped; that test is the same
for the whole block, so barriers and subgroup operations stay valid. ``return_`` branches to the
end of the iteration (``next_label``) instead of ending the thread; workgroup memory is zeroed
again at the start of each iteration (``Buffers.zero_workgroup_memory(wait_first=True)``).

Kernel shape::

    prologue                      values fixed for the thread (pointers, counts, %tid, ...)
    head:  wg = ctaid.x * K; end = min(wg + K, grid_x)
    top:   if wg >= end goto done
           [bar.sync; zero workgroup memory; bar.sync]
           per-iteration prologue (global id along x), body
    next:  wg += 1; goto top
    done:  ret
"""

from __future__ import annotations

from vyre_cuda._codegen.abi import grid_x_word
from vyre_cuda._codegen.builder import Builder
from vyre_cuda._codegen.memory import Buffers

#: largest coarsening factor the emitter accepts
MAX_FACTOR = 64


def check_factor(coarsen: object) -> int:
    """``coarsen`` as an int: a power of two from 1 to ``MAX_FACTOR``, else ``ValueError``."""
    if isinstance(coarsen, bool) or not isinstance(coarsen, int) or not 1 <= coarsen <= MAX_FACTOR \
            or coarsen & (coarsen - 1):
        raise ValueError(f"coarsen={coarsen!r} is not a power of two from 1 to {MAX_FACTOR}. "
                         "Fix: pass coarsen=1 (no coarsening), 2, 4, ...")
    return coarsen


class Coarsening:
    """The loop over logical workgroups of a kernel coarsened by ``factor`` (> 1)."""

    def __init__(self, b: Builder, buffers: Buffers, factor: int) -> None:
        self.b = b
        self.factor = factor
        self.head: list[str] = []
        with b.into(self.head):
            grid_x = buffers.param_word("grid_x", grid_x_word(buffers.program))
            ctaid = b.cached("%ctaid.x", lambda: b.op("mov.u32", "r", "%ctaid.x"))
            #: the logical workgroup id along x (advanced at the end of each iteration)
            self.logical_x = b.op("mul.lo.u32", "r", ctaid, str(factor))
            self._end = b.op("min.u32", "r", b.op("add.u32", "r", self.logical_x, str(factor)), grid_x)
        self._top, self.next_label, self._done = b.new_label(), b.new_label(), b.new_label()

    def wrap(self, zero_init: list[str]) -> list[str]:
        """The kernel text after the prologue: head, then the iteration loop around the body."""
        b = self.b
        test: list[str] = []
        with b.into(test):
            b.ins(f"bra {self._done}", b.op("setp.ge.u32", "p", self.logical_x, self._end))
        return [*self.head, f"{self._top}:", *test, *zero_init, *b.iteration, *b.body,
                f"{self.next_label}:", f"\tadd.u32 {self.logical_x}, {self.logical_x}, 1;",
                f"\tbra {self._top};", f"{self._done}:"]
