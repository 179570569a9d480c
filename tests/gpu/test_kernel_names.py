"""Kernels named after their programs, NVTX ranges, and the cold driver paths through cuda.bindings.

Each kernel's name is read back from the driver (``cuFuncGetName``, through ``_runtime.driver``),
so what Nsight, CUPTI and ``nvidia-smi`` show is checked, not only the PTX text.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import check, elementwise

from vyre import lib
from vyre.fuzz.catalogue import HOSTILE_NAMES, named_program
from vyre.ir import BufferDecl, DataType, Expr
from vyre_cuda import entry_name
from vyre_cuda.testing import driver, profiler

pytestmark = pytest.mark.gpu
U32 = DataType.U32
ROOT = Path(__file__).resolve().parents[2]
N = 5000


def _xor(name: str | None):
    a, b = BufferDecl.read("a", 0, U32), BufferDecl.read("b", 1, U32)
    i = Expr.var("i")
    return elementwise(name, [a, b], Expr.bitxor(Expr.load("a", i), Expr.load("b", i)),
                       BufferDecl.output("out", 2, U32, N))


def _inputs(rng) -> list[np.ndarray]:
    return [rng.integers(0, 2**32, N, dtype=np.uint32) for _ in range(2)]


def _kernel_name(backend, program) -> str | None:
    return driver.function_name(backend.prepared(program).kernel.ptr)


def test_cuda_bindings_reach_the_driver() -> None:
    assert driver.unavailable() is None, driver.unavailable()


def test_a_named_program_runs_as_a_kernel_of_its_name(backend, rng) -> None:
    program = _xor("scaled_xor")
    check(backend, program, _inputs(rng))
    assert entry_name(program) == "scaled_xor"
    assert ".visible .entry scaled_xor(" in backend.prepared(program).ptx
    assert _kernel_name(backend, program) in ("scaled_xor", None)  # None: a driver without cuFuncGetName


def test_programs_differing_only_in_name_get_their_own_kernels(backend, rng) -> None:
    programs = [_xor(n) for n in ("a-b", "a_b", "a b", None)]
    inputs = _inputs(rng)
    for p in programs:
        check(backend, p, inputs)
    kernels = [backend.prepared(p).kernel for p in programs]
    assert len({k.key for k in kernels}) == len(programs)  # the name is part of the cached module's key
    names = [driver.function_name(k.ptr) for k in kernels]
    if None not in names:
        assert names == [entry_name(p) for p in programs] and names[-1] == "vyre_main"


@pytest.mark.parametrize("name", HOSTILE_NAMES.values(), ids=HOSTILE_NAMES.keys())
def test_hostile_names_load_under_their_sanitised_kernel_names(backend, rng, name: str) -> None:
    """Each name of the adversarial catalogue: the kernel loads and runs under ``entry_name``."""
    program = named_program(name)
    check(backend, program, [rng.integers(0, 2**32, 64, dtype=np.uint32)])
    assert _kernel_name(backend, program) in (entry_name(program), None)


def test_a_library_sort_runs_kernels_named_after_its_programs(backend, rng) -> None:
    keys = rng.integers(0, 2**32, 1 << 18, dtype=np.uint32)
    np.testing.assert_array_equal(lib.sort(keys, backend=backend), np.sort(keys))
    names = {driver.function_name(p.kernel.ptr) for p in backend.programs.by_key.values()}
    if names == {None}:
        pytest.skip("the driver has no cuFuncGetName")
    assert any(n and n.startswith("lib_radix") for n in names), names
    assert "vyre_main" not in names or any(p.program.name is None for p in backend.programs.by_key.values())


def test_ranges_are_named_after_programs(backend, rng) -> None:
    name = f"ranged_xor_{rng.integers(1 << 40)}"  # a new program: no earlier process cached its kernel
    with profiler.recording() as seen:
        check(backend, _xor(name), _inputs(rng))
    assert f"vyre.cuda.codegen {name}" in seen and f"vyre.cuda.compile {name}" in seen
    assert "vyre.cuda.dispatch" in seen or any(s.startswith("vyre.cuda.dispatch") for s in seen)


def test_the_primary_context_reset_through_cuda_bindings_leaves_a_usable_device() -> None:
    """The fallback of ``errors.reset_device`` when CuPy has no ``deviceReset``; in its own process."""
    code = ("import cupy\n"
            "from vyre_cuda.testing import driver\n"
            "cupy.cuda.runtime.free(0)\n"
            "driver.reset_primary_context(cupy.cuda.runtime.getDevice())\n"
            "print(int(cupy.arange(100, dtype=cupy.uint32).sum()))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, check=False,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "4950"


def test_error_names_come_from_the_driver() -> None:
    assert driver.error_name(700) == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert driver.error_name(2) == "CUDA_ERROR_OUT_OF_MEMORY"


def test_a_programmatic_launch_through_cuda_bindings_runs_the_kernel(backend, rng) -> None:
    """``LaunchPlan.launch_programmatic`` (``cuLaunchKernelEx`` with programmatic stream
    serialization, built by ``_runtime.driver``) on a plain stream, outside any graph capture."""
    import cupy

    if int(backend.info.compute_capability.rstrip("a")) < 90:
        pytest.skip("programmatic launches need sm_90+")
    program = _xor("programmatic_xor")
    prep = backend.prepared(program)
    a, b = _inputs(rng)
    da, db, out = cupy.asarray(a), cupy.asarray(b), cupy.full(N, 0xDEADBEEF, cupy.uint32)
    cupy.cuda.Stream.null.synchronize()
    plan = backend.programs.plan_for(prep, [da.data, db.data, out.data], {"a": N, "b": N, "out": N},
                                     (-(-N // 128), 1, 1))
    try:
        plan.launch_programmatic(backend.stream.ptr)
        backend.stream.synchronize()
    finally:
        backend.programs.close_plan(plan)
    np.testing.assert_array_equal(cupy.asnumpy(out), a ^ b)
