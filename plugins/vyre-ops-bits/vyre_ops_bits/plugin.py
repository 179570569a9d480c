"""Entry point ``ops_bits`` (group ``vyre``): registers the pack's ops and their cuda lowerings."""

from __future__ import annotations

from collections.abc import Callable

import vyre
from vyre.ops import OpDef
from vyre_ops_bits.ops import OPS
from vyre_ops_bits.ptx import LOWERINGS


@vyre.hookimpl
def vyre_register_ops() -> list[OpDef]:
    return list(OPS)


@vyre.hookimpl(optionalhook=True)  # declared by the cuda backend; absent when it is not installed
def vyre_cuda_register_lowerings() -> dict[str, Callable[..., str]]:
    return dict(LOWERINGS)
