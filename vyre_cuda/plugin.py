"""The ``cuda`` plugin module (entry point ``vyre: cuda = vyre_cuda.plugin``).

Registers backend ``cuda`` (rank 5), the ``vyre`` CLI verbs of ``vyre_cuda.cli`` and the
``vyre_cuda_register_lowerings`` hookspec whose results feed the PTX emitter.
"""

from __future__ import annotations

import argparse
import threading
from typing import Any

import pluggy

hookimpl = pluggy.HookimplMarker("vyre")

CUDA_RANK = 5
_lowerings_lock = threading.Lock()
_lowerings_loaded = False


def load_lowerings(force: bool = False) -> list[str]:
    """Register every plugin's ``vyre_cuda_register_lowerings`` result with the emitter (once).

    Returns the op ids registered by this call. Safe to call from several threads.
    """
    global _lowerings_loaded
    with _lowerings_lock:
        if _lowerings_loaded and not force:
            return []
        from vyre.driver.registry import get_plugin_manager
        from vyre_cuda.codegen.lowerings import register_lowering

        pm = get_plugin_manager()
        hook = getattr(pm.hook, "vyre_cuda_register_lowerings", None)
        registered: list[str] = []
        for table in (hook() if hook is not None else []):
            for op_id, fn in (table or {}).items():
                register_lowering(op_id, fn)
                registered.append(op_id)
        _lowerings_loaded = True
        return registered


def create_backend(device: int | str | None = None) -> Any:
    """The registry's factory: check the settings, import CuPy, point the driver JIT cache, load lowerings,
    start ``CudaBackend``. Nothing is created on disk before CuPy imports (``vyre backends`` without it
    leaves no cache directory behind)."""
    from vyre_cuda.runtime import settings
    from vyre_cuda.runtime.cache import configure_driver_jit_cache
    from vyre_cuda.runtime.device import import_cupy

    settings.check()  # a bad VYRE_CUDA_* value is an error now, not a surprise mid-dispatch
    import_cupy()
    configure_driver_jit_cache()
    load_lowerings()
    from vyre_cuda.backend import CudaBackend

    return CudaBackend(device)


@hookimpl
def vyre_register_backends() -> list[Any]:
    """Backend ``cuda``; ``supported_ops`` lists the built-in ops and every primitive op with a PTX lowering."""
    from vyre import __version__
    from vyre.driver.registry import BackendRegistration
    from vyre.ir.expr import ALL_OPS
    from vyre_cuda.codegen.lowerings import lowered_ops

    try:
        load_lowerings()  # cheap: asks the plugins for their tables, touches no device
    except Exception:  # noqa: S110 - a broken lowering plugin is reported when the emitter loads lowerings
        pass
    return [BackendRegistration("cuda", CUDA_RANK, create_backend, dispatches=True, version=__version__,
                                supported_ops=frozenset(ALL_OPS) | lowered_ops(),
                                devices=list_devices, all_reduce=nccl_all_reduce)]


def list_devices() -> list[dict[str, Any]]:
    """Every visible CUDA device's properties (``vyre.devices()``); reading them creates no context."""
    from vyre_cuda.runtime.device import device_count, probe

    return [probe(index).as_profile() for index in range(device_count())]


def nccl_all_reduce(backends: Any, handles: Any, dtype: Any, op: str) -> str | None:
    """The registration's ``all_reduce``: NCCL, else peer copies (see ``vyre_cuda.collectives``)."""
    from vyre_cuda.collectives import all_reduce

    return all_reduce(backends, handles, dtype, op)


@hookimpl
def vyre_cli_commands(subparsers: argparse._SubParsersAction) -> None:
    from vyre_cuda.cli import add_cli_commands

    add_cli_commands(subparsers)


@hookimpl
def vyre_add_hookspecs(plugin_manager: pluggy.PluginManager) -> None:
    from vyre_cuda import hookspecs

    plugin_manager.add_hookspecs(hookspecs)
