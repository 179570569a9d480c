"""Programmatic dependent launch in the PTX (``module.grid_dependency``) without a GPU.

On sm_90 every kernel, plain or coarsened, runs ``griddepcontrol.launch_dependents`` then
``griddepcontrol.wait`` before its first access to buffer memory: everything above the wait may
read only kernel parameters and the parameter block (no kernel writes those), so overlapping a
kernel's start with the previous one in a CUDA graph can never read a buffer too early. sm_80
has no ``griddepcontrol``. The GPU check is tests/gpu/test_graphs.py (dependent chains).
"""

from __future__ import annotations

import re

import pytest
from catalogue import all_programs
from codegen_support import assemble, needs_ptxas

from vyre_cuda import emit_ptx

generate = pytest.importorskip("vyre.ir.generate", reason="vyre.ir.generate is not available yet")

#: instructions that touch buffer or workgroup memory, or synchronise the workgroup
_MEMORY = re.compile(r"^(@%p\d+ )?(st\.|atom\.|red\.|bar\.|ld\.shared|ld\.global|ld\.volatile|fence\.)")


def _code(ptx: str) -> list[str]:
    return [ln.strip() for ln in ptx.splitlines() if ln.strip() and not ln.lstrip().startswith("//")]


def _param_block_register(lines: list[str]) -> str | None:
    """The register holding the generic->global parameter block pointer (last kernel parameter)."""
    params = [ln for ln in lines if ln.startswith(".param .u64")]
    last = params[-1].split()[-1].rstrip(",")
    loaded = next((ln.split()[1].rstrip(",") for ln in lines if ln.startswith("ld.param.u64") and f"[{last}]" in ln),
                  None)
    return next((ln.split()[1].rstrip(",") for ln in lines
                 if loaded and ln.startswith("cvta.to.global.u64") and ln.rstrip(";").endswith(loaded)), None)


def check_before_wait(ptx: str) -> None:
    """Above ``griddepcontrol.wait`` only parameter-block loads touch memory; the wait comes once."""
    lines = _code(ptx)
    assert lines.count("griddepcontrol.wait;") == 1
    assert lines.count("griddepcontrol.launch_dependents;") == 1
    wait = lines.index("griddepcontrol.wait;")
    assert lines.index("griddepcontrol.launch_dependents;") < wait
    block = _param_block_register(lines)
    for ln in lines[:wait]:
        if _MEMORY.match(ln):
            assert block and ln.startswith("ld.global.nc.u32") and f"[{block}+" in ln, ln


def _samples() -> list:
    made = [(f"generated{seed}", generate.generate_program(seed)) for seed in range(9000, 9040)]
    return list(all_programs().items()) + made


@pytest.mark.parametrize("coarsen", [1, 4])
def test_every_sm90_kernel_waits_before_touching_buffers(coarsen: int) -> None:
    for name, program in _samples():
        try:
            check_before_wait(emit_ptx(program, sm="90", coarsen=coarsen))
        except AssertionError as exc:
            raise AssertionError(f"{name} (coarsen={coarsen}): {exc}") from exc


def test_sm80_kernels_have_no_grid_dependency() -> None:
    for name, program in list(all_programs().items())[::3]:
        assert "griddepcontrol" not in emit_ptx(program, sm="80"), name


def test_a_store_above_the_wait_is_caught() -> None:
    """The check above can fail: a buffer store moved above the wait is reported."""
    ptx = emit_ptx(next(iter(all_programs().values())), sm="90")
    lines = ptx.splitlines()
    store = next(i for i, ln in enumerate(lines) if "st.global" in ln)
    wait = next(i for i, ln in enumerate(lines) if "griddepcontrol.wait" in ln)
    moved = [*lines[:wait], lines[store], *lines[wait:store], *lines[store + 1:]]
    with pytest.raises(AssertionError):
        check_before_wait("\n".join(moved))


@needs_ptxas
def test_grid_dependency_assembles_for_sm90() -> None:
    kernels = {f"{name}.x{coarsen}": emit_ptx(program, sm="90", coarsen=coarsen)
               for name, program in list(all_programs().items())[::7] for coarsen in (1, 4)}
    assert assemble(kernels, "90") == []
