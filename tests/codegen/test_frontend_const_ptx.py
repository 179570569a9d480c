"""Kernels with ``vyre.Const`` parameters emit PTX that ptxas assembles for sm_90 (on the CPU)."""

from __future__ import annotations

import sys
from pathlib import Path

from codegen_support import assemble, needs_ptxas

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "frontend"))

from const_kernels import alternating, moving_sum, power, power_rolled, scale_or_shift, zero_fill  # noqa: E402

SPECIALISED = {
    "power_4": power.bind(4), "scale_true": scale_or_shift.bind(True, -3), "shift": scale_or_shift.bind(False, 9),
    "alternating_5": alternating.bind(5), "moving_sum_3": moving_sum.bind(3),
}


@needs_ptxas
def test_const_kernels_assemble_for_sm_90() -> None:
    from vyre_cuda import emit_ptx

    ptx = {name: emit_ptx(k.specialise(None, 64), sm="90") for name, k in SPECIALISED.items()}
    assert assemble(ptx, "90") == []


def test_unrolled_power_has_no_loop_in_its_ptx() -> None:
    from vyre_cuda import emit_ptx

    unrolled = emit_ptx(power.bind(4).specialise(None, 64), sm="90")
    rolled = emit_ptx(power_rolled.specialise(None, 64), sm="90")
    labels = [[line for line in text.splitlines() if line.startswith("$")] for text in (unrolled, rolled)]
    assert unrolled.count("mul.rn.f32") == 4 and labels[0] == ["$L1:"]  # the bounds guard's exit only
    assert rolled.count("mul.rn.f32") == 1 and len(labels[1]) > 1


def test_library_zero_fill_as_a_const_kernel_is_the_builders_program() -> None:
    """``vyre.lib``'s zero fill, written as a ``@vyre.kernel`` with the params word a ``vyre.Const``
    (``const_kernels.zero_fill``), is the builder's program, so its PTX is byte-identical."""
    from vyre.lib import blocks as K
    from vyre_cuda import emit_ptx

    for word in (0, 5, 31):
        written, built = zero_fill.bind(word).program, K.zero_fill(word)
        assert written == built
        assert all(emit_ptx(written, sm=sm) == emit_ptx(built, sm=sm) for sm in ("80", "90"))
