"""vyre's ``cuda`` backend: PTX emitter (pure Python) and the CuPy-based runtime.

Importing this package never imports CuPy: ``CudaBackend`` is loaded on first access.
The public surface is this package's names and the modules ``backend``, ``plugin``, ``hookspecs``,
``cli``, ``bench`` and ``profiling``; packages and modules whose names start with ``_`` are internal
(``docs/architecture.md``, "Public surface"), and ``testing`` is for this project's tests only.
"""

from __future__ import annotations

from vyre import __version__
from vyre_cuda._codegen import (
    ENTRY_NAME,
    LoweringContext,
    emit_ptx,
    entry_name,
    param_block_layout,
    ptx_version_for_driver,
    register_lowering,
)
from vyre_cuda._codegen.lowerings import set_plugin_loader

__all__ = ["ENTRY_NAME", "CudaBackend", "LoweringContext", "__version__", "emit_ptx", "entry_name",
           "param_block_layout", "ptx_version_for_driver", "register_lowering"]


def _load_lowerings() -> None:
    from vyre_cuda._factory import load_lowerings

    load_lowerings()


set_plugin_loader(_load_lowerings)  # the emitter asks for plugin lowerings through the top, never importing up


def __getattr__(name: str) -> object:
    if name == "CudaBackend":
        from vyre_cuda.backend import CudaBackend

        return CudaBackend
    raise AttributeError(f"module 'vyre_cuda' has no attribute {name!r}")
