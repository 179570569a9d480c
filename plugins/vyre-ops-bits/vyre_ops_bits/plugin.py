"""Entry point ``ops_bits`` (group ``vyre``): registers the pack's ops."""

from __future__ import annotations

import vyre
from vyre.ops import OpDef
from vyre_ops_bits.ops import OPS


@vyre.hookimpl
def vyre_register_ops() -> list[OpDef]:
    return list(OPS)
