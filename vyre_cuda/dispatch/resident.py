"""Resident buffers of the ``cuda`` backend and dispatch over them (``dispatch_resident``).

``allocate_resident`` / ``upload_resident`` / ``download_resident`` / ``free_resident`` manage the
``Resident`` handles of ``backend.resident`` (a ``ResidentPool``). ``dispatch_resident`` is the hot
path: a repeated call with the same program, config and handles reuses its ``_ResidentMemo`` after
identity checks only, rewrites the program's default launch plan only when something else
configured it last, zeroes the outputs and launches. A new call, or one after a handle was freed
(the pool's ``generation`` moved), takes the checked path (``_resident_memo_checked``).
``resident_layout`` gives pipelines the checked layout of a resident dispatch.

``ResidentDispatch`` is a mixin of ``vyre_cuda.backend.CudaBackend``: it works on the backend's state
and primitives (``lock``, ``stream``, ``staging``, ``resident``, ``prepared``, ``for_grid``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import is_

import numpy as np

from vyre.driver.backend import Resident
from vyre.driver.config import DispatchConfig, resolve_grid
from vyre.driver.inputs import check_byte_length, host_bytes, resident_decls
from vyre.driver.resident_args import check_allocation, check_byte_range, download_size
from vyre.ir.program import Access, Program
from vyre_cuda.dispatch.prepared import PreparedProgram
from vyre_cuda.runtime.arrays import device_array, is_device_array, order_after_producers
from vyre_cuda.runtime.errors import cuda_errors
from vyre_cuda.runtime.launch import LaunchPlan, check_cooperative, check_geometry
from vyre_cuda.runtime.pools import D2D, DeviceBuffer

_MEMO_CAP = 512  # entries of an identity-keyed memo (also CudaBackend.prepared's) before it is cleared


@dataclass(eq=False)
class _ResidentMemo:
    """What a repeated ``dispatch_resident`` with the same program, config and handles reuses.

    Valid while ``generation`` equals the resident pool's (no handle was freed since, the backend
    is open); the launch plan is reconfigured only when someone else configured it last."""

    program: Program
    config: DispatchConfig | None
    handles: tuple[Resident, ...]
    prepared: PreparedProgram
    order: tuple[int, ...]  # handle index of each bound buffer
    zero_index: tuple[tuple[int, int], ...]  # (handle index, bytes) of output buffers
    grid: tuple[int, int, int]  # logical
    words: tuple[int, ...]
    cooperative: bool = False
    launch: tuple[int, int, int] = (0, 0, 0)  # the hardware grid (prepared.launch_grid(grid))
    generation: int = -1  # ResidentPool.generation when the pointers below were resolved
    values: tuple[int, ...] = ()  # launch slots: bound buffer pointers, then the parameter block
    zero_ptrs: tuple[tuple[int, int], ...] = ()  # (pointer, bytes) to zero before each launch


class ResidentDispatch:
    """Resident buffers and ``dispatch_resident``: a mixin of ``CudaBackend``."""

    def allocate_resident(self, nbytes: int) -> Resident:
        with self.lock:
            self._check_open()
            self._use_device()
            return self.resident.allocate(check_allocation(nbytes))

    def upload_resident(self, handle: Resident, data: object, offset: int = 0) -> None:
        with self.lock:
            self._check_open()
            self._use_device()
            buf = self.resident.resolve(handle)
            if is_device_array(data):
                arr = device_array(data, f"upload to {handle!r}", self.device_id)
                nbytes = int(arr.nbytes)
                check_byte_range(handle, offset, nbytes)
                with cuda_errors(f"copying into {handle!r}"):
                    order_after_producers(self.stream)
                    self._rt.memcpyAsync(buf.ptr + offset, arr.data.ptr, nbytes, D2D, self.stream.ptr)
                    self.stream.record().synchronize()  # the source array may be freed after we return
                self.telemetry.add("cuda_d2d_bytes", nbytes)
                return
            view = host_bytes(data, f"upload to {handle!r}")
            check_byte_range(handle, offset, view.nbytes)
            self.staging.upload(buf.ptr + offset, view)

    def download_resident(self, handle: Resident, offset: int = 0, nbytes: int | None = None) -> np.ndarray:
        with self.lock:
            self._check_open()
            self._use_device()
            buf = self.resident.resolve(handle)
            nbytes = download_size(handle, offset, nbytes)
            return self.staging.download(buf.ptr + offset, nbytes)

    def free_resident(self, handle: Resident) -> None:
        with self.lock:
            self._check_open()
            self.resident.free(handle)

    def resident_layout(self, prepared: PreparedProgram, handles: Sequence[Resident],
                        config: DispatchConfig | None) -> tuple[list[DeviceBuffer], dict[str, int], tuple]:
        """Checked buffers (binding order), element counts and grid of a resident dispatch."""
        memo = self._resident_memo(prepared.program, tuple(handles), config)
        bufs = [self.resident.resolve(h) for h in handles]
        counts = dict(zip((b.name for b in prepared.bound), memo.words[1:1 + len(prepared.bound)]))
        return [bufs[i] for i in memo.order], counts, memo.grid

    def dispatch_resident(self, program: Program, handles: Sequence[Resident],
                          config: DispatchConfig | None = None) -> None:
        with self.lock:
            memo = self._last_resident  # the same call as last time: identity checks only
            if (memo is None or memo.program is not program or memo.config is not config
                    or len(handles) != len(memo.handles) or not all(map(is_, handles, memo.handles))):
                memo = self._memo.get((id(program), id(config), *map(id, handles)))  # the memo keeps them alive
            if memo is None or memo.generation != self.resident.generation:
                memo = self._resident_memo_checked(program, handles, config, memo)
            self._last_resident = memo
            plan = memo.prepared.plan
            if plan.configured is not memo or plan.params._last is not memo.words:
                self._configure(plan, memo)
            if memo.zero_ptrs:
                self._zero_outputs(memo)
            if not plan.empty:
                plan.launch(self._stream_ptr)
                self._launches += 1
                if self.sync_each:
                    self._sync_each(memo.prepared.name)

    def _resident_memo_checked(self, program: Program, handles: Sequence[Resident], config: DispatchConfig | None,
                               memo: _ResidentMemo | None) -> _ResidentMemo:
        """The slow path of ``dispatch_resident``: open check, handle checks, an armed fault."""
        self._check_open()
        self._use_device()
        if memo is None:
            memo = self._resident_memo(program, tuple(handles), config)
        else:
            self._refresh_memo(memo)
            memo.prepared.plan.configured = None  # rebind the refreshed pointers
        if self._fault is not None:
            self._fire_fault()
        return memo

    def _configure(self, plan: LaunchPlan, memo: _ResidentMemo) -> None:
        """Point the program's default plan at the memo's grid, parameter words and buffers."""
        if plan.grid != memo.launch:
            plan.set_grid(memo.launch)
        plan.cooperative = memo.cooperative
        plan.params.write(memo.words, self.stream)
        plan.bind_values(memo.values)
        plan.configured = memo

    def _zero_outputs(self, memo: _ResidentMemo) -> None:
        with cuda_errors(f"zeroing the outputs of program {memo.prepared.name}"):
            for ptr, nbytes in memo.zero_ptrs:
                self._rt.memsetAsync(ptr, 0, nbytes, self._stream_ptr)

    def _resident_memo(self, program: Program, handles: tuple[Resident, ...],
                       config: DispatchConfig | None) -> _ResidentMemo:
        self._check_open()
        prep = self.prepared(program, config)
        decls = resident_decls(program, handles)
        counts: dict[str, int] = {}
        for decl, handle in zip(decls, handles):
            self.resident.resolve(handle)
            counts[decl.name] = check_byte_length(decl, handle.nbytes)
        grid = resolve_grid(program, config, counts)
        check_geometry(prep.name, grid, prep.block, prep.shared_bytes, self.limits)
        cooperative = bool(config is not None and config.cooperative)
        if cooperative:
            check_cooperative(prep.name, prep.kernel.ptr, grid, prep.block, 0, self.limits,
                              self.supports_cooperative())
        prep = self.for_grid(prep, grid, config)
        index = {b.name: i for i, b in enumerate(decls)}
        zero = tuple((index[b.name], counts[b.name] * b.dtype.size) for b in decls
                     if b.access is Access.OUTPUT and counts[b.name])
        memo = _ResidentMemo(program, config, handles, prep, tuple(index[b.name] for b in prep.bound), zero,
                             grid, prep.words(counts, prep.elements(config, counts), grid), cooperative,
                             prep.launch_grid(grid))
        self._refresh_memo(memo)
        if len(self._memo) >= _MEMO_CAP:
            self._memo.clear()
        self._memo[(id(program), id(config), *map(id, handles))] = memo
        return memo

    def _refresh_memo(self, memo: _ResidentMemo) -> None:
        """Resolve the memo's handles again (one was freed since): InvalidHandle if any is gone."""
        self._check_open()
        bufs = [self.resident.resolve(h) for h in memo.handles]
        memo.values = (*(bufs[i].ptr for i in memo.order), memo.prepared.plan.params.ptr)
        memo.zero_ptrs = tuple((bufs[i].ptr, nbytes) for i, nbytes in memo.zero_index)
        memo.generation = self.resident.generation

