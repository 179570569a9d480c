"""Hooks the ``cuda`` backend adds to vyre's plugin manager (through ``vyre_add_hookspecs``).

A plugin pack that gives an op (``vyre_register_ops``) a PTX lowering implements::

    from vyre.driver.hookspecs import hookimpl

    @hookimpl
    def vyre_cuda_register_lowerings():
        return {"mypack.popcount64": my_lowering}

Each lowering is registered with ``vyre_cuda.register_lowering(op_id, fn)``:
``fn(ctx, *arg_regs) -> result_reg``, where ``ctx`` is a ``vyre_cuda.LoweringContext``.
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy

hookspec = pluggy.HookspecMarker("vyre")


@hookspec
def vyre_cuda_register_lowerings() -> dict[str, Callable[..., str]]:
    """Return ``{op_id: lowering_fn}``: PTX lowerings of ops for the ``cuda`` backend.

    Called once per process, before the first ``cuda`` backend starts (or ``vyre emit-ptx`` runs).
    An op without a lowering is ``UnsupportedFeature`` on ``cuda``, never a silent host fallback.
    """
    ...
