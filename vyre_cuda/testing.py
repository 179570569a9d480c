"""The internals of ``vyre_cuda`` that this project's tests and benchmarks use, in one place.

For tests only: not a stable API. Every name here is re-exported from an internal module
(``_codegen``, ``_runtime``, ``_dispatch``, ``_collectives``) and may change or go with it; user code
uses the package root and its public modules (``docs/architecture.md``, "Public surface").
Importing this module imports neither CuPy nor ``cuda-bindings``.

Tests of one internal module import that module directly, since they reach into it (its private
state, monkeypatched globals or module-level constants):

- ``tests/codegen/test_mathlib64.py``, ``f64_model.py``: ``_codegen.mathlib64``, ``mathlib64_consts``;
- ``tests/codegen/test_versions.py``, ``test_size_bound.py``, ``test_own_index.py``, ``test_written.py``:
  ``_codegen.versions``, ``limits``, ``own_index``, ``written``; ``test_coarsen.py``: ``_codegen.coarsen``,
  ``_codegen.memory`` and ``_dispatch.coarsening`` (the policy); ``test_limits.py``: ``_codegen.module``;
- ``tests/host/test_disk_cache.py``, ``test_cache_isolation.py``, ``test_cache_paths.py``: ``_runtime.cache``,
  ``cache_fs``, ``settings`` and the loader's PTX dumps; ``test_program_index.py``: ``_runtime.program_index``;
  ``test_settings.py``, ``test_settings_table.py``: ``_runtime.settings`` (and the cache's size and path
  defaults); ``test_profiler.py``: ``_runtime.profiler``; ``test_driver.py``: ``_runtime.driver``;
  ``test_conditional.py``: ``_runtime.conditional``;
- ``tests/gpu/test_host_pins.py``: ``_runtime.host_pins``; ``tests/gpu/test_cuda_coarsen.py``:
  ``_dispatch.coarsening``; ``tests/scale/test_multi.py``'s collective tests: ``_collectives``;
- ``tests/host/test_cuda_cpu.py``, ``test_layers.py`` and ``test_settings_table.py`` name internal modules
  as strings (what a fresh process imports, the floors, which modules read the environment).
"""

from __future__ import annotations

from vyre_cuda._codegen import ops as ptx_ops
from vyre_cuda._codegen.abi import ENTRY_NAME_LIMIT, grid_x_word, param_name
from vyre_cuda._codegen.builder import Builder
from vyre_cuda._codegen.exprs import ExprLowering
from vyre_cuda._codegen.limits import MAX_INSTRUCTIONS
from vyre_cuda._codegen.lowerings import unregister_lowering
from vyre_cuda._codegen.memory import Buffers
from vyre_cuda._codegen.module import CODEGEN_VERSION
from vyre_cuda._codegen.snippets import CONDITION_ENTRY, FAULT_ENTRY, condition_ptx, fault_ptx
from vyre_cuda._codegen.versions import PTX_VERSIONS, max_ptx_version_for_driver
from vyre_cuda._collectives import nccl_module
from vyre_cuda._dispatch import sequence
from vyre_cuda._dispatch.coarsening import launch_grid
from vyre_cuda._dispatch.graphs import GraphCache
from vyre_cuda._dispatch.pipeline import ResidentBinding
from vyre_cuda._dispatch.prepared import PreparedProgram
from vyre_cuda._dispatch.sequence import compile_sequence
from vyre_cuda._runtime import driver, launch, profiler, settings
from vyre_cuda._runtime.cache import DiskCache, cache_version, default_disk_cache
from vyre_cuda._runtime.device import FIX_NO_DEVICE, FIX_NO_DRIVER, DeviceInfo, probe, resolve_index
from vyre_cuda._runtime.errors import FIX_DRIVER, FIX_LOST, canonical, cuda_errors, needs_reset, reset_device, translate
from vyre_cuda._runtime.host_pins import DIRECT_MIN, exclusive_pages
from vyre_cuda._runtime.launch import LaunchPlan
from vyre_cuda._runtime.loader import ModuleCache, compile_failure, module_key, ptxas_diagnostics
from vyre_cuda._runtime.pools import CHUNK, PIPELINE_MIN, RING, DeviceBuffer
from vyre_cuda._runtime.telemetry import COUNTERS

__all__ = [
    "CHUNK", "CODEGEN_VERSION", "CONDITION_ENTRY", "COUNTERS", "DIRECT_MIN", "ENTRY_NAME_LIMIT", "FAULT_ENTRY",
    "FIX_DRIVER", "FIX_LOST", "FIX_NO_DEVICE", "FIX_NO_DRIVER", "MAX_INSTRUCTIONS", "PIPELINE_MIN",
    "PTX_VERSIONS", "RING",
    "Buffers", "Builder", "DeviceBuffer", "DeviceInfo", "DiskCache", "ExprLowering", "GraphCache", "LaunchPlan",
    "ModuleCache", "PreparedProgram", "ResidentBinding",
    "cache_version", "canonical", "compile_failure", "compile_sequence", "condition_ptx", "cuda_errors",
    "default_disk_cache", "exclusive_pages",
    "driver", "fault_ptx", "grid_x_word", "launch", "launch_grid", "max_ptx_version_for_driver", "module_key",
    "nccl_module", "needs_reset", "param_name", "probe", "profiler", "ptx_ops", "ptxas_diagnostics", "reset_device",
    "resolve_index", "sequence", "settings", "translate", "unregister_lowering",
]
