"""Starting the ``cuda`` backend: the registry's factory and the loading of plugin lowerings.

Both sit above ``vyre_cuda.backend`` and below the entry points that use them (``vyre_cuda.plugin``,
``vyre_cuda.cli``, the package root, which hands ``load_lowerings`` to the code generator).
"""

from __future__ import annotations

import threading
from typing import Any

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
        from vyre_cuda._codegen.lowerings import register_lowering

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
    from vyre_cuda._runtime import settings
    from vyre_cuda._runtime.cache import configure_driver_jit_cache
    from vyre_cuda._runtime.device import import_cupy

    settings.check()  # a bad VYRE_CUDA_* value is an error now, not a surprise mid-dispatch
    import_cupy()
    configure_driver_jit_cache()
    load_lowerings()
    from vyre_cuda.backend import CudaBackend

    return CudaBackend(device)
