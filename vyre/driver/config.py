"""``DispatchConfig`` and the default grid rule (docs/semantics.md, "Dispatch inputs and the grid")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vyre.driver.errors import InvalidProgram
from vyre.ir.program import Access, Program


@dataclass(frozen=True)
class DispatchConfig:
    """How to run one dispatch; every field is optional."""

    grid: tuple[int, int, int] | None = None
    elements: int | None = None
    workgroup_override: tuple[int, int, int] | None = None
    label: str | None = None
    timeout_s: float | None = None
    cooperative: bool = False
    profile: bool = False
    #: "auto": device-array inputs give device arrays of the caller's kind (bound in place on cuda), host
    #: inputs numpy; "host": always numpy; "device": always device arrays (CuPy for host inputs)
    outputs: str = "auto"


MAX_GRID = (2**31 - 1, 65535, 65535)
#: buffers whose element counts set the default grid
GRID_ACCESS = (Access.READ, Access.READ_WRITE, Access.OUTPUT)


#: the grid advice in the words of both ways to dispatch (the command line rewrites it as --grid)
FIX_GRID = "pass grid=(gx, gy, gz) to the kernel call, or DispatchConfig(grid=(gx, gy, gz)) to backend.dispatch."


def resolve_grid(program: Program, config: DispatchConfig | None, counts: dict[str, int]) -> tuple[int, int, int]:
    """Workgroup counts for a dispatch: ``config.grid``, else ``elements`` / workgroup x-size.

    ``elements`` is ``config.elements``, else ``default_elements``: by default every element of
    every read, read_write and output buffer has an invocation (programs guard with ``buf_len``).

    ``counts`` maps every non-workgroup buffer name to its element count at run time. An
    elements-derived grid of 0 workgroups (empty buffers) is returned as is: nothing runs.
    """
    config = config or DispatchConfig()
    wg = effective_workgroup(program, config)
    if config.grid is not None:
        grid = tuple(config.grid)
        if len(grid) != 3 or any(isinstance(g, bool) or not isinstance(g, int) or g < 0 for g in grid):
            raise InvalidProgram(f"grid {config.grid!r} is not three non-negative ints",
                                 FIX_GRID)
        _check_grid(grid)
        return grid  # type: ignore[return-value]
    if wg[1] != 1 or wg[2] != 1:
        raise InvalidProgram(f"workgroup size {wg} has y or z > 1 and no grid was given",
                             FIX_GRID)
    elements = config.elements if config.elements is not None else default_elements(program, counts)
    if isinstance(elements, bool) or not isinstance(elements, int) or elements < 0:
        raise InvalidProgram(f"elements {elements!r} is not a non-negative int", "pass DispatchConfig(elements=N).")
    grid = (-(-elements // wg[0]), 1, 1)
    _check_grid(grid)
    return grid


def default_elements(program: Program, counts: Mapping[str, int]) -> int:
    """The largest run-time element count among the ``read``, ``read_write`` and ``output`` buffers.

    Uniform and workgroup buffers do not count: a small parameter block or a scratch tile must not
    decide how many invocations run. 0 when the program has none of these buffers.
    """
    return max((counts[b.name] for b in program.buffers if b.access in GRID_ACCESS), default=0)


def effective_workgroup(program: Program, config: DispatchConfig | None) -> tuple[int, int, int]:
    """The workgroup size a dispatch uses (``workgroup_override`` wins)."""
    if config is not None and config.workgroup_override is not None:
        return check_workgroup_size(config.workgroup_override)
    return program.workgroup_size


def check_workgroup_size(size: object) -> tuple[int, int, int]:
    """``size`` as a 3-tuple within the workgroup limits (x, y <= 1024, z <= 64, product <= 1024)."""
    fix = "pass DispatchConfig(workgroup_override=(x, y, z)) with x, y <= 1024, z <= 64 and x*y*z <= 1024."
    try:
        wg = tuple(size)  # type: ignore[arg-type]
    except TypeError:
        raise InvalidProgram(f"workgroup size {size!r} is not a tuple of three ints", fix) from None
    if len(wg) != 3 or any(isinstance(v, bool) or not isinstance(v, int) for v in wg):
        raise InvalidProgram(f"workgroup size {size!r} is not three ints", fix)
    x, y, z = wg
    if min(wg) < 1 or x > 1024 or y > 1024 or z > 64 or x * y * z > 1024:
        raise InvalidProgram(f"workgroup size {wg} is outside the limits", fix)
    return wg  # type: ignore[return-value]


def _check_grid(grid: Sequence[int]) -> None:
    for axis, (g, limit) in enumerate(zip(grid, MAX_GRID)):
        if g > limit:
            raise InvalidProgram(f"grid axis {axis} has {g} workgroups, over the limit {limit}",
                                 "use fewer, larger workgroups or a 2-D/3-D grid.")
