"""``ReferenceBackend``: the CPU reference oracle behind the backend protocol (id ``reference``).

Every dispatch validates, prepares the host arrays, runs the interpreter over the whole grid (in
chunks of workgroups, checking ``DispatchConfig.timeout_s`` as it goes) and returns the outputs;
``dispatch_async`` runs it on a worker thread. Resident buffers are emulated on the host so programs
written against the resident API run here too; a host allocation that fails is ``DeviceOutOfMemory``.
It is the judge of every other backend, not a fast path, with one documented exception:
``bfs_levels`` (``host_bfs``), a numpy search that ``vyre.lib.graph`` uses instead of its IR level loop.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from vyre.driver import resident_args as args
from vyre.driver.backend import Backend, PendingDispatch, Resident
from vyre.driver.config import DispatchConfig, effective_workgroup
from vyre.driver.errors import InvalidProgram
from vyre.driver.inputs import prepare_host_dispatch
from vyre.ir.program import Program
from vyre.reference.limits import Deadline, check_allocation, host_memory, physical_memory
from vyre.reference.resident import HostResidentStore
from vyre.reference.steps import MAX_BOUND_STEPS, BoundStep, StepCache


def _execute(program: Program, arrays: dict[str, np.ndarray], grid: tuple[int, int, int],
             config: DispatchConfig | None) -> None:
    from vyre.reference.interpreter import execute

    deadline = Deadline(config.timeout_s if config else None, program.name or "(unnamed)")
    with host_memory():
        execute(program, arrays, grid, effective_workgroup(program, config), deadline)


class ReferenceBackend(Backend):
    """The oracle: exact semantics of docs/semantics.md, on the host, one dispatch at a time."""

    id = "reference"
    #: ``vyre.lib.graph`` BFS runs as a host search (``bfs_levels``) instead of interpreting its IR level
    #: loop (about 0.4 ms a level); set False on an instance to interpret the IR programs (as tests do)
    host_bfs = True

    def __init__(self, device: int | None = None) -> None:
        if device not in (None, 0):
            raise InvalidProgram(f"the reference oracle has one device (0), not {device}",
                                 "use `reference` or `reference:0`.")
        from vyre.version import __version__

        self.version = __version__
        self._store = HostResidentStore(self.id)
        self._bound = StepCache(self._store)
        self._validated: set[Program] = set()
        self._validated_objects: dict[int, Program] = {}  # by identity: hashing a program hashes its buffers
        self._lock = threading.Lock()
        self._dispatches = 0
        self._worker: ThreadPoolExecutor | None = None

    # ---- identity and capabilities -----------------------------------------------------------
    def device_profile(self) -> dict[str, Any]:
        return {"name": "vyre reference oracle (CPU, numpy)", "compute_capability": None, "memory_bytes": None,
                "sm_count": None, "warp_size": 32, "limits": {"max_workgroup_size": self.max_workgroup_size()}}

    def supports_subgroup_ops(self) -> bool:
        return True

    def supports_f16(self) -> bool:
        return True

    def supports_bf16(self) -> bool:
        return True

    def supports_cooperative(self) -> bool:
        return True  # every workgroup of a host dispatch is "co-resident"

    def max_buffer_bytes(self) -> int:
        return physical_memory() or (1 << 34)

    # ---- dispatch ----------------------------------------------------------------------------------
    def _validate(self, program: Program) -> None:
        """Validate ``program`` unless this backend already did (the same object, or an equal program)."""
        if self._validated_objects.get(id(program)) is program:
            return
        if program not in self._validated:
            from vyre.ir.validate import validate

            validate(program)
            self._validated.add(program)
        if len(self._validated_objects) >= MAX_BOUND_STEPS:
            self._validated_objects.clear()
        self._validated_objects[id(program)] = program  # held, so its id is not reused meanwhile

    def dispatch(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None,
                 stream: object | None = None) -> list[np.ndarray]:
        """Run on the host; ``stream`` is accepted for calls written for device backends and ignored."""
        return self._run_prepared(program, self._prepare(program, inputs, config), config)

    def dispatch_async(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None
                       ) -> PendingDispatch:
        """Validate and copy the inputs now, run on a worker thread; ``result(timeout)`` waits for it."""
        hd = self._prepare(program, inputs, config)
        with self._lock:
            if self._worker is None:
                self._worker = ThreadPoolExecutor(1, thread_name_prefix="vyre-reference")
            worker = self._worker
        return PendingDispatch(worker.submit(self._run_prepared, program, hd, config))

    def _prepare(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None):
        self._validate(program)
        with host_memory():
            return prepare_host_dispatch(program, inputs, config)

    def _run_prepared(self, program: Program, hd, config: DispatchConfig | None) -> list[np.ndarray]:
        with self._lock:
            _execute(program, hd.arrays, hd.grid, config)
            self._dispatches += 1
        return hd.outputs(program)

    # ---- resident buffers ---------------------------------------------------------------------------
    def allocate_resident(self, nbytes: int) -> Resident:
        if isinstance(nbytes, int) and not isinstance(nbytes, bool):
            check_allocation(nbytes)
        with host_memory(nbytes if isinstance(nbytes, int) else 0):
            return self._store.allocate(nbytes)

    def upload_resident(self, handle: Resident, data: object, offset: int = 0) -> None:
        self._store.upload(handle, data, offset)

    def download_resident(self, handle: Resident, offset: int = 0, nbytes: int | None = None) -> np.ndarray:
        with host_memory(nbytes or 0):
            return self._store.download(handle, offset, nbytes)

    def view(self, handle: Resident, dtype: Any = np.uint8) -> np.ndarray:
        """A numpy array over the resident bytes (no copy), valid until the handle is freed."""
        return self._store.view(handle, dtype)

    def free_resident(self, handle: Resident) -> None:
        self._store.free(handle)
        self._bound.forget(handle)

    def dispatch_resident(self, program: Program, handles: Sequence[Resident],
                          config: DispatchConfig | None = None) -> None:
        """Run on resident buffers: one handle per non-workgroup buffer, in declaration order.

        Inputs are read from the handles, ``output`` buffers are zeroed first, and every
        ``read_write``/``output`` buffer is written in place. A failed dispatch writes nothing
        (``vyre.reference.steps``: what it overwrote is put back).
        """
        self._validate(program)
        self._run_bound(self._bound.bind(program, handles, config))

    def _run_bound(self, step: BoundStep) -> None:
        with self._lock:
            step.run()
            self._dispatches += 1

    def _steps(self, steps: Sequence[tuple]) -> list[BoundStep]:
        """Every step unpacked, its program validated and its handles bound before any runs (as on ``cuda``)."""
        unpacked = [args.unpack_step(step) for step in steps]
        for program, _, _ in unpacked:
            self._validate(program)
        return [self._bound.bind(*step) for step in unpacked]

    def _run_steps(self, steps: list[BoundStep]) -> None:
        for step in steps:
            self._run_bound(step)

    def _reads(self, reads: Sequence[tuple]) -> list[tuple]:
        """The read-back requests, every range checked before any step runs."""
        checked = [args.unpack_read(r) for r in reads]
        for handle, offset, nbytes in checked:
            self._store.storage(handle)
            args.check_byte_range(handle, offset, nbytes, "read range")
        return checked

    def _read(self, reads: list[tuple]) -> list[np.ndarray]:
        return [self._store.download(h, off, n) for h, off, n in reads]

    def dispatch_sequence(self, steps: Sequence[tuple], reads: Sequence[tuple] = ()) -> list[np.ndarray]:
        bound, checked = self._steps(steps), self._reads(reads)
        self._run_steps(bound)
        return self._read(checked)

    def dispatch_repeated(self, prefix: Sequence[tuple], repeated: Sequence[tuple], count: int,
                          reads: Sequence[tuple] = ()) -> list[np.ndarray]:
        args.check_repeat_count(count)
        first, again = self._steps(prefix), self._steps(repeated) if count else []  # as on cuda
        checked = self._reads(reads)
        self._run_steps(first)
        for _ in range(count):
            self._run_steps(again)
        return self._read(checked)

    def dispatch_until(self, steps: Sequence[tuple], flag_handle: Resident, max_iterations: int) -> int:
        """Zero the flag's first u32 word, run ``steps``; repeat while a step set it non-zero.

        Returns the number of iterations run (at most ``max_iterations``).
        """
        args.check_max_iterations(max_iterations)
        bound = self._steps(steps)
        flag = self._store.storage(flag_handle)
        args.check_flag(flag_handle)
        zero = np.zeros(4, dtype=np.uint8)
        for iteration in range(1, max_iterations + 1):
            flag[:4] = zero
            self._run_steps(bound)
            if not flag[:4].any():
                return iteration
        return max_iterations

    def bfs_levels(self, indptr_handle: Resident, indices_handle: Resident, vertices: int, edges: int,
                   source: int) -> np.ndarray:
        """BFS levels from ``source`` over a resident CSR graph (``vertices + 1`` u32 offsets, ``edges`` u32
        neighbour ids; checked CSR), computed on the host (``vyre.reference.bfs``): the levels the IR
        level loop gives, without interpreting it once per level."""
        from vyre.reference.bfs import bfs_levels

        with self._lock, host_memory():
            indptr = self._store.view(indptr_handle, np.uint32)[:vertices + 1]
            indices = self._store.view(indices_handle, np.uint32)[:edges]
            return bfs_levels(indptr, indices, source)

    # ---- metrics and lifecycle -------------------------------------------------------------------------
    def metrics(self) -> dict[str, int]:
        return {"reference_dispatches": self._dispatches, "reference_resident_bytes": self._store.bytes_in_use}

    def shutdown(self) -> None:
        if self._worker is not None:
            self._worker.shutdown(wait=False, cancel_futures=True)
            self._worker = None
        self._bound.clear()
        self._store.free_all()
