"""PTX lowerings of the pack's primitive ops for the ``cuda`` backend (``vyre_cuda_register_lowerings``).

Each lowering is ``fn(ctx, *arg_regs) -> result_reg``: ``ctx.emit`` appends one instruction and
``ctx.reg()`` gives a fresh ``.b32`` register (``ctx`` is a ``vyre_cuda.LoweringContext``).
"""

from __future__ import annotations

# prmt.b32 d, a, b, sel: byte i of d is byte (sel >> 4*i) & 7 of the pair {b, a} (a holds bytes 0-3).
# Selector 0x0123 takes a's bytes 3, 2, 1, 0 into d's bytes 0, 1, 2, 3: the byte swap.
BSWAP32_SELECTOR = 0x0123


def bswap32(ctx, x: str) -> str:
    """``bits.bswap32``: one ``prmt.b32`` that reverses the four bytes of ``x``."""
    out = ctx.reg("r")
    ctx.emit(f"prmt.b32 {out}, {x}, 0, 0x{BSWAP32_SELECTOR:04x}")
    return out


LOWERINGS = {"bits.bswap32": bswap32}
