"""What a profiler sees of the ``cuda`` backend, for scripts and tests (``docs/profiling.md``).

- ``nvtx_range(name, detail=None)``: one of the backend's NVTX ranges in the ``vyre`` domain (a shared no-op object
  while ranges are off; ``VYRE_CUDA_NVTX`` says when they are on);
- ``recording()``: a block inside which ranges are on and whose pushed messages it lists;
- ``function_name(kernel_ptr)``: the driver's name of a loaded kernel (``cuFuncGetName``, CUDA 12.3+),
  None where the driver or ``cuda-bindings`` cannot say.

Importing this module imports neither CuPy nor ``cuda-bindings``.
"""

from __future__ import annotations

from vyre_cuda._runtime.driver import function_name
from vyre_cuda._runtime.profiler import nvtx_range, recording

__all__ = ["function_name", "nvtx_range", "recording"]
