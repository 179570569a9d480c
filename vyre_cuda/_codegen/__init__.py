"""PTX emitter: ``Program`` -> PTX text. Pure Python; never imports CuPy."""

from vyre_cuda._codegen.abi import ENTRY_NAME, count_word, entry_name, grid_x_word, kernel_params, param_block_layout
from vyre_cuda._codegen.lowerings import LoweringContext, register_lowering, unregister_lowering
from vyre_cuda._codegen.module import emit_ptx
from vyre_cuda._codegen.versions import (
    max_ptx_version_for_driver,
    ptx_version_for_driver,
    required_ptx_version,
)

__all__ = [
    "ENTRY_NAME", "LoweringContext", "count_word", "emit_ptx", "entry_name", "grid_x_word", "kernel_params",
    "max_ptx_version_for_driver", "param_block_layout", "ptx_version_for_driver",
    "register_lowering", "required_ptx_version", "unregister_lowering",
]
