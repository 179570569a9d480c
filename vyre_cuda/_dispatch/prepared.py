"""Programs ready to launch: ``PreparedProgram`` and ``ProgramCache``, the cache that makes them.

``ProgramCache.prepared(program, config, coarsen)`` validates, emits PTX, loads the module through
the runtime's ``ModuleCache`` and builds a default launch plan, once per program, workgroup size
and coarsening factor (keyed by fingerprint, with an identity-keyed front cache). On a warm start
the program index (``_runtime.program_index``) names the cubin an earlier process made from the
same program, so only validation runs and the PTX is emitted only if asked for
(``PreparedProgram.ptx``). ``for_grid``
picks the kernel variant that runs a logical grid (``_dispatch.coarsening``). ``plan_for`` /
``update_plan`` / ``close_plan`` make, configure and give back launch plans with their own
parameter blocks. Which ``output`` buffers need a zero fill comes from ``_codegen.written``
(``PreparedProgram.zero_fills``).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from vyre.driver.config import DispatchConfig, default_elements, effective_workgroup
from vyre.driver.errors import InvalidProgram, UnsupportedFeature
from vyre.ir.layout import dynamic_workgroup_bytes
from vyre.ir.program import BufferDecl, Program
from vyre.ir.types import DataType
from vyre.ir.validate import validate
from vyre_cuda._codegen import emit_ptx, entry_name
from vyre_cuda._codegen.lowerings import lowerings
from vyre_cuda._codegen.written import outputs_to_zero
from vyre_cuda._dispatch.coarsening import factor as coarsen_factor
from vyre_cuda._dispatch.coarsening import launch_grid
from vyre_cuda._runtime.context import DeviceRuntime
from vyre_cuda._runtime.errors import cuda_errors
from vyre_cuda._runtime.launch import LaunchPlan, check_cooperative, check_geometry, check_workgroup_memory
from vyre_cuda._runtime.profiler import nvtx_range
from vyre_cuda._runtime.program_index import index_key

MEMO_CAP = 512  # entries of an identity-keyed memo before it is cleared


@dataclass(eq=False)
class PreparedProgram:
    """A program ready to launch on this backend: module, kernel and its default launch plan."""

    program: Program
    name: str
    block: tuple[int, int, int]
    kernel: Any  # vyre_cuda._runtime.loader.LoadedKernel
    bound: tuple[BufferDecl, ...]  # kernel ABI order (binding order)
    shared_bytes: int  # workgroup memory per workgroup: static, or dynamic (then ``dynamic_bytes`` too)
    plan: LaunchPlan  # the default plan that the host dispatcher rebinds each call
    emit: Callable[[], str]  # emits the kernel's PTX (again)
    emitted: str | None = None  # the PTX, when it was emitted to prepare the program
    emit_ns: int = 0  # validation and code generation (validation alone on a program index hit)
    load_ns: int = 0
    coarsen: int = 1  # logical workgroups along x per hardware workgroup (codegen.coarsen)
    dynamic_bytes: int = 0  # dynamic shared memory every launch passes (``layout.dynamic_workgroup_bytes``)

    @property
    def ptx(self) -> str:
        """The kernel's PTX text; a program prepared from the program index emits it on first use."""
        if self.emitted is None:
            self.emitted = self.emit()
        return self.emitted

    def elements(self, config: DispatchConfig | None, counts: Mapping[str, int]) -> int:
        """Word 0 of the parameter block: ``config.elements``, else the default-grid element count."""
        if config is not None and config.elements is not None:
            return config.elements
        return default_elements(self.program, counts)

    @property
    def nwords(self) -> int:
        """u32 words of the kernel's parameter block (``_codegen.abi.param_block_layout``)."""
        return len(self.bound) + (2 if self.coarsen > 1 else 1)

    def words(self, counts: Mapping[str, int], elements: int,
              grid: Sequence[int] | None = None) -> tuple[int, ...]:
        """The parameter block: elements, each bound buffer's element count, then (coarsened
        kernels only) the logical grid x."""
        words = (elements, *(counts[b.name] for b in self.bound))
        if self.coarsen == 1:
            return words
        if grid is None:
            raise ValueError(f"program {self.name}: a coarsened kernel's parameter words need the grid. "
                             "Fix: pass the logical grid to words().")
        return (*words, int(grid[0]))

    def launch_grid(self, grid: Sequence[int]) -> tuple[int, int, int]:
        """The hardware grid that runs the logical ``grid``."""
        # grid is a checked (x, y, z) grid (check_geometry)
        return launch_grid(grid, self.coarsen) if self.coarsen > 1 else cast("tuple[int, int, int]", tuple(grid))

    def zero_fills(self, grid: Sequence[int], counts: Mapping[str, int]) -> tuple[BufferDecl, ...]:
        """The ``output`` buffers to zero before a launch of the logical ``grid`` (``_codegen.written``):
        those the kernel may leave partly unwritten or read before writing."""
        names = outputs_to_zero(self.program, self.block, grid, counts)
        return tuple(b for b in self.program.buffers if b.name in names)


class ProgramCache:
    """Prepared programs of one runtime, and the launch plans made from them."""

    def __init__(self, runtime: DeviceRuntime) -> None:
        self.runtime = runtime
        self.by_key: dict[tuple[bytes, tuple[int, int, int], int], PreparedProgram] = {}
        self.by_id: dict[tuple[int, tuple[int, int, int], int], PreparedProgram] = {}

    def prepared(self, program: Program, config: DispatchConfig | None = None, coarsen: int = 1) -> PreparedProgram:
        """The cached ``PreparedProgram`` for ``program`` at its effective workgroup size, its
        kernel coarsened ``coarsen`` times along x (1: as written)."""
        block = effective_workgroup(program, config)
        fast = self.by_id.get((id(program), block, coarsen))
        if fast is not None and fast.program is program:
            return fast
        with self.runtime.lock:
            self.runtime.check_open()
            key = (program.fingerprint(), block, coarsen)
            prep = self.by_key.get(key)
            if prep is None:
                prep = self._prepare(program, block, coarsen, key[0])
                self.by_key[key] = prep
            if len(self.by_id) > MEMO_CAP:
                self.by_id.clear()
            self.by_id[(id(program), block, coarsen)] = prep
            return prep

    def for_grid(self, prepared: PreparedProgram, grid: Sequence[int],
                 config: DispatchConfig | None = None) -> PreparedProgram:
        """The variant of ``prepared`` (same program and block) that runs the logical ``grid``:
        coarsened along x when ``_dispatch.coarsening.factor`` says so, else the plain kernel."""
        k = coarsen_factor(grid, prepared.block, self.runtime.limits.sm_count,
                           bool(config is not None and config.cooperative), prepared.shared_bytes)
        if k == prepared.coarsen:
            return prepared
        return self.prepared(prepared.program, config, coarsen=k)

    def _prepare(self, program: Program, block: tuple[int, int, int], coarsen: int, fingerprint: bytes
                 ) -> PreparedProgram:
        rt, name, entry = self.runtime, program.name or "<unnamed>", entry_name(program)
        config = DispatchConfig(workgroup_override=block) if block != program.workgroup_size else None
        index = index_key(program, fingerprint, block, coarsen, rt.info)
        t0 = time.perf_counter_ns()
        kernel = rt.modules.load_indexed(index, entry) if index is not None else None
        if kernel is not None:  # a warm start: the cubin an earlier process made from this very program
            validate(program)
            ptx = None
        else:
            with nvtx_range("vyre.cuda.codegen", entry):  # emit_ptx validates the program first
                ptx = self._emit(program, config, coarsen)
        t1 = time.perf_counter_ns()
        self._check_capabilities(program)
        check_workgroup_memory(program, rt.limits)
        dynamic = dynamic_workgroup_bytes(program)
        check_geometry(name, (1, 1, 1), block, dynamic, rt.limits)
        if kernel is None:
            assert ptx is not None  # emitted above: only a warm start (a kernel found) has no PTX
            with nvtx_range("vyre.cuda.compile", entry), cuda_errors(f"loading the kernel of program {name}"):
                kernel = rt.modules.load(ptx, entry)
            if index is not None:
                rt.modules.remember(index, kernel)
        if dynamic:
            kernel = rt.modules.allow_dynamic(kernel, dynamic)
        t2 = time.perf_counter_ns()
        shared = kernel.shared_bytes + dynamic
        check_geometry(name, (1, 1, 1), block, shared, rt.limits, kernel.max_threads)
        bound = program.bound_buffers
        plan = LaunchPlan(kernel.ptr, (0, 0, 0), block, dynamic, len(bound) + 1, name)
        prep = PreparedProgram(program, name, block, kernel, bound, shared, plan,
                               functools.partial(self._emit, program, config, coarsen), ptx, t1 - t0, t2 - t1,
                               coarsen, dynamic)
        plan.params = rt.param_block(prep.nwords)
        return prep

    def _emit(self, program: Program, config: DispatchConfig | None, coarsen: int) -> str:
        sm, ptx_version = self.runtime.modules.target()
        return emit_ptx(program, sm=sm, ptx_version=ptx_version, config=config, coarsen=coarsen, lowerings=lowerings())

    def _check_capabilities(self, program: Program) -> None:
        dtypes = {b.dtype for b in program.buffers}
        cc = int(self.runtime.info.compute_capability.rstrip("a"))
        if DataType.BF16 in dtypes and cc < 80:
            raise UnsupportedFeature("BF16 buffers", "cuda", f"use F32 or F16 buffers (device cc {cc} < 80).")
        if DataType.F16 in dtypes and cc < 53:
            raise UnsupportedFeature("F16 buffers", "cuda", "use F32 buffers on this device.")

    # ---- launch plans ----------------------------------------------------------------------------------
    def plan_for(self, prepared: PreparedProgram, buffers: Sequence[Any], counts: Mapping[str, int],
                 grid: Sequence[int], elements: int | None = None,
                 config: DispatchConfig | None = None, stream: Any = None) -> LaunchPlan:
        """A new plan for ``prepared`` over ``buffers`` (binding order), with its own parameter block
        written on ``stream`` (default: the backend's), the stream the plan will launch on."""
        with self.runtime.lock:
            self.runtime.check_open()
            if len(buffers) != len(prepared.bound):
                raise InvalidProgram(f"program {prepared.name} binds {len(prepared.bound)} buffers, got {len(buffers)}",
                                     "pass one buffer per bound buffer, in binding order.")
            plan = LaunchPlan(prepared.kernel.ptr, prepared.launch_grid(grid), prepared.block, prepared.dynamic_bytes,
                              len(prepared.bound) + 1, prepared.name)
            plan.params = self.runtime.param_block(prepared.nwords)
            self.update_plan(plan, prepared, counts, grid, elements, config, stream)
            plan.bind([b.ptr for b in buffers], plan.params.ptr)
            return plan

    def update_plan(self, plan: LaunchPlan, prepared: PreparedProgram, counts: Mapping[str, int],
                    grid: Sequence[int], elements: int | None = None,
                    config: DispatchConfig | None = None, stream: Any = None) -> None:
        """Set ``plan``'s grid (checked; ``grid`` is logical, the plan launches ``prepared.launch_grid``)
        and enqueue its parameter words on ``stream`` (default: the backend's) if they changed."""
        self.check_launch(prepared, grid, config)
        plan.cooperative = bool(config is not None and config.cooperative)
        plan.set_grid(prepared.launch_grid(grid))
        if elements is None:
            elements = prepared.elements(config, counts)
        plan.params.write(prepared.words(counts, elements, grid), self.runtime.stream if stream is None else stream)

    def check_launch(self, prepared: PreparedProgram, grid: Sequence[int], config: DispatchConfig | None) -> None:
        """Geometry (and, for cooperative configs, co-residency) of a launch of the logical ``grid``."""
        rt = self.runtime
        check_geometry(prepared.name, grid, prepared.block, prepared.shared_bytes, rt.limits)
        if config is not None and config.cooperative:
            check_cooperative(prepared.name, prepared.kernel.ptr, grid, prepared.block, prepared.dynamic_bytes,
                              rt.limits, rt.info.cooperative_launch)

    def close_plan(self, plan: LaunchPlan) -> None:
        """Give a plan's parameter block back (the plan may not be launched afterwards)."""
        with self.runtime.lock:
            params, plan.params = plan.params, None
            if params is not None:
                self.runtime.release_params(params)

    def forget(self) -> None:
        """Drop every prepared program (their kernels stay valid while referenced)."""
        self.by_key.clear()
        self.by_id.clear()
