"""Device faults and recovery of the ``cuda`` backend: the ``FaultHandling`` mixin of ``CudaBackend``.

A device-side fault (illegal address, trap, ECC) is a sticky CUDA error that poisons the device's
primary context for the whole process. It surfaces from the call that meets it (usually the next
synchronisation) as ``DeviceLost``; ``vyre_cuda.runtime.errors`` then confirms the context is poisoned,
records the device as needing a reset and marks every backend on it lost (``_mark_lost``): each
refuses further use with ``DeviceLost``. The next ``CudaBackend`` started on that device
(``vyre.acquire("cuda")``) first calls ``vyre_cuda.runtime.errors.reset_device``: the lost backends drop
their CUDA objects without freeing through the dead context (``_forget_device``), CuPy's pools and
memoised modules are dropped, the primary context is reset, and the new backend starts clean. CuPy
arrays, pipelines and graphs made before the fault are dead: drop them before acquiring again.
``_inject_fault(kind)`` is the test hook that makes the next launch run a real faulting kernel
(``vyre_cuda.runtime.loader.fault_ptx``).
"""

from __future__ import annotations

from vyre_cuda.runtime.errors import cuda_errors
from vyre_cuda.runtime.launch import LaunchPlan


class FaultHandling:
    """Lost-device bookkeeping and the fault-injection test hook: a mixin of ``CudaBackend``."""

    def _mark_lost(self) -> None:
        """Called by ``vyre_cuda.runtime.errors`` when this backend's device context is poisoned: refuse further use."""
        self._lost = self._closed = True
        self.resident.invalidate()  # cached resident dispatches take the checked path, which raises

    def _forget_device(self) -> None:
        """Drop every CUDA object of the lost context without freeing through it (the reset frees all)."""
        self._lost = self._closed = True
        self._fault = self._last_resident = None
        self._prepared.clear()
        self._by_id.clear()
        self._memo.clear()
        self._param_buffers.clear()
        self.modules.clear()
        self.heap.forget()
        self.staging = self.ring = self.stream = None
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.shutdown(wait=False)

    def _inject_fault(self, kind: str = "illegal_address") -> None:
        """Test hook, not public API: the next kernel launch of this backend first runs a real kernel that
        faults on the device (``kind`` in ``vyre_cuda.runtime.loader.FAULT_KINDS``), loaded like any other."""
        from vyre_cuda.codegen.versions import ptx_version_for_driver
        from vyre_cuda.runtime.loader import FAULT_ADDRESS, FAULT_ENTRY, fault_ptx

        with self.lock:
            self._check_open()
            cc = self.info.compute_capability
            ptx = fault_ptx(kind, cc, ptx_version_for_driver(self.info.driver_version, cc))
            with cuda_errors("loading the fault-injection kernel"):
                kernel = self.modules.load(ptx, FAULT_ENTRY)
            plan = LaunchPlan(kernel.ptr, (1, 1, 1), (1, 1, 1), 0, 1, f"fault_injection_{kind}")
            plan.bind_values((FAULT_ADDRESS,))
            self._fault = plan
            self.resident.invalidate()  # so that a cached dispatch_resident fires it too

    def _fire_fault(self) -> None:
        plan, self._fault = self._fault, None
        if plan is not None:
            plan.launch(self._stream_ptr)
