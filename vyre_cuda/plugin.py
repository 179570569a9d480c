"""The ``cuda`` plugin module (entry point ``vyre: cuda = vyre_cuda.plugin``).

Registers backend ``cuda`` (rank 5), the ``vyre`` CLI verbs of ``vyre_cuda.cli`` and the
``vyre_cuda_register_lowerings`` hookspec whose results feed the PTX emitter.
"""

from __future__ import annotations

import argparse
from typing import Any

import pluggy

from vyre_cuda._factory import create_backend, load_lowerings

__all__ = ["CUDA_RANK", "create_backend", "hookimpl", "load_lowerings"]

hookimpl = pluggy.HookimplMarker("vyre")

CUDA_RANK = 5


@hookimpl
def vyre_register_backends() -> list[Any]:
    """Backend ``cuda``; ``supported_ops`` lists the built-in ops and every primitive op with a PTX lowering."""
    from vyre.driver.registry import BackendRegistration
    from vyre.ir.expr import ALL_OPS
    from vyre.version import __version__
    from vyre_cuda._codegen.lowerings import lowered_ops

    try:
        load_lowerings()  # cheap: asks the plugins for their tables, touches no device
    except Exception:  # noqa: S110 - a broken lowering plugin is reported when the emitter loads lowerings
        pass
    return [BackendRegistration("cuda", CUDA_RANK, create_backend, dispatches=True, version=__version__,
                                supported_ops=frozenset(ALL_OPS) | lowered_ops(),
                                devices=list_devices, all_reduce=nccl_all_reduce)]


def list_devices() -> list[dict[str, Any]]:
    """Every visible CUDA device's properties (``vyre.devices()``); reading them creates no context."""
    from vyre_cuda._runtime.device import device_count, probe

    return [probe(index).as_profile() for index in range(device_count())]


def nccl_all_reduce(backends: Any, handles: Any, dtype: Any, op: str) -> str | None:
    """The registration's ``all_reduce``: NCCL, else peer copies (see ``vyre_cuda._collectives``)."""
    from vyre_cuda._collectives import all_reduce

    return all_reduce(backends, handles, dtype, op)


@hookimpl
def vyre_cli_commands(subparsers: argparse._SubParsersAction) -> None:
    from vyre_cuda.cli import add_cli_commands

    add_cli_commands(subparsers)


@hookimpl
def vyre_add_hookspecs(plugin_manager: pluggy.PluginManager) -> None:
    from vyre_cuda import hookspecs

    plugin_manager.add_hookspecs(hookspecs)
