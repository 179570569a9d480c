"""Module text: header, ``.version`` choice, the entry with its ABI, and ``emit_ptx``."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Mapping

from vyre.driver.config import DispatchConfig, effective_workgroup
from vyre.driver.errors import InvalidProgram
from vyre.ir.expand import expand_calls
from vyre.ir.expr import is_counter_add, name_of
from vyre.ir.layout import dynamic_workgroup_bytes, param_bytes
from vyre.ir.op import Op
from vyre.ir.program import Program
from vyre.ir.types import DataType
from vyre.ir.walk import iter_all_exprs
from vyre_cuda._codegen.abi import entry_name, param_name
from vyre_cuda._codegen.builder import Builder
from vyre_cuda._codegen.coarsen import MAX_FACTOR, Coarsening, check_factor
from vyre_cuda._codegen.exprs import ExprLowering
from vyre_cuda._codegen.limits import check_kernel_size
from vyre_cuda._codegen.lowerings import LoweringFn
from vyre_cuda._codegen.memory import SHARED_SYMBOL, Buffers, counts_by_subgroup
from vyre_cuda._codegen.names import sanitize
from vyre_cuda._codegen.stmts import StmtLowering
from vyre_cuda._codegen.versions import (
    SMALL_PARAM_BYTES,
    check_ptx_version,
    parse_ptx_version,
    parse_sm,
    required_ptx_version,
    sm_number,
)

CODEGEN_VERSION = "9"
#: from this sm on, f16/bf16 stores narrow through the packed conversion (``Buffers.narrow``)
PACKED_NARROWING_SM = 80
#: lowest target with programmatic dependent launch (``griddepcontrol``, PTX ISA 7.8)
GRID_DEPENDENCY_SM = 90


def grid_dependency(sm: str) -> list[str]:
    """The lines between the prologue and the body that let a CUDA graph overlap launches.

    On sm_90+ the kernel first lets the next kernel of its stream start (``launch_dependents``),
    then waits for the grids it depends on to finish and flush their memory (``wait``). The
    prologue above reads only kernel parameters and the parameter block, which no kernel writes,
    so a kernel launched with programmatic stream serialization overlaps its start-up and those
    reads with the previous kernel; every buffer access comes after the wait. Launched normally,
    both instructions do nothing.
    """
    if sm_number(sm) < GRID_DEPENDENCY_SM:
        return []
    return ["\tgriddepcontrol.launch_dependents;", "\tgriddepcontrol.wait;"]


def shared_declaration(shared_bytes: int, dynamic_bytes: int) -> list[str]:
    """Module-scope lines declaring workgroup memory as dynamic shared memory, or none.

    Static ``.shared`` arrays stop at 48 KiB (``PORTABLE_WORKGROUP_BYTES``); a program with more
    declares one unsized ``.extern .shared`` region, every workgroup buffer at its layout offset
    as before, and each launch passes ``dynamic_bytes`` (the loader opts the kernel in to them).
    At or below 48 KiB the static array stays inside the entry, so that PTX (and the cubins
    cached by its text) does not change.
    """
    if not dynamic_bytes:
        return []
    return [f"// {shared_bytes} bytes of workgroup memory: dynamic shared memory, passed by each launch",
            f".extern .shared .align 16 .b8 {SHARED_SYMBOL}[];", ""]


def _validate(program: Program) -> None:
    """Run the host validator when it is installed (``vyre.ir.validate``)."""
    if importlib.util.find_spec("vyre.ir.validate") is None:
        return
    from vyre.ir.validate import validate

    validate(program)


def features(program: Program) -> frozenset[str]:
    """PTX features the emitted code needs (see ``versions.FEATURES``)."""
    used: set[str] = set()
    if any(b.dtype is DataType.BF16 for b in program.buffers if b.access.writable):
        used.add("bf16")
    if any(e.op == Op.ATOMIC for e in iter_all_exprs(program.body)):
        used.add("scoped_atomics")
    if any(e.op.startswith("subgroup_") for e in iter_all_exprs(program.body)):
        used.add("sync_warp_ops")
    counters = {name_of(e) for e in iter_all_exprs(program.body) if is_counter_add(e)}
    if any(b.name in counters and counts_by_subgroup(b) for b in program.buffers):
        used.add("active_mask")
    if param_bytes(len(program.bound_buffers)) > SMALL_PARAM_BYTES:
        used.add("large_params")
    return frozenset(used)


def _check_arguments(sm: object, ptx_version: object, config: object, coarsen: object) -> tuple[str, str | None, int]:
    """``emit_ptx``'s arguments checked before any work: (target, PTX version or None, coarsening factor).

    Malformed arguments are ``InvalidProgram`` with a Fix; a well-formed target or version this
    emitter cannot serve is ``UnsupportedFeature``.
    """
    try:
        factor = check_factor(coarsen)
    except ValueError as exc:
        raise InvalidProgram(f"coarsen={coarsen!r} is not a power of two from 1 to {MAX_FACTOR}",
                             f"pass coarsen=1 (no coarsening), 2, 4, ... up to {MAX_FACTOR}.") from exc
    if config is not None and not isinstance(config, DispatchConfig):
        raise InvalidProgram(f"config is a {type(config).__name__}, not a vyre.DispatchConfig",
                             "pass config=vyre.DispatchConfig(...) or leave it out.")
    version = None if ptx_version is None else parse_ptx_version(ptx_version)
    return parse_sm(sm), version, factor


def emit_ptx(program: Program, sm: str = "90", ptx_version: str | None = None,
             config: DispatchConfig | None = None, coarsen: int = 1,
             lowerings: Mapping[str, LoweringFn] | None = None) -> str:
    """PTX text of ``program``'s kernel ``abi.entry_name(program)`` for ``.target sm_<sm>``.

    Validates first; pure and deterministic (same program and target give the same text).
    ``ptx_version`` defaults to the lowest ISA supporting the target and the features used.
    The kernel is for one workgroup size: ``config``'s ``workgroup_override``, else the
    program's, which bounds the local id, so workgroup-memory accesses whose index is proven below
    the buffer's count need no guard (``_codegen.ranges``). The runtime launches a kernel only with
    the size it was emitted for (``_dispatch.prepared.PreparedProgram`` holds both). The size is
    not stated in the PTX: ``.reqntid`` and ``.maxntid`` let ptxas raise the register count, and so
    lower occupancy (the sort's pass kernel 40 -> 64 registers; 8% slower on an H200); the header
    comment says it, and a caller launching the PTX itself must use it.
    ``coarsen`` (a power of two) > 1 makes each hardware workgroup run that many logical
    workgroups along x (``_codegen.coarsen``); the kernel then reads the logical grid x from the
    parameter block (``abi.param_block_layout``).
    A malformed argument (``sm``, ``ptx_version``, ``coarsen``, ``config``) is ``InvalidProgram``
    before any other work; a well-formed target or version that cannot serve the program (too
    old for the target, or for more than 543 buffers: PTX ISA 8.1 raised the kernel parameter
    space from 4,352 to 32,764 bytes) is ``UnsupportedFeature``. ``lowerings`` maps primitive op
    ids to their lowerings (a backend passes ``_codegen.lowerings.lowerings()``); None asks the registry.
    """
    sm, ptx_version, coarsen = _check_arguments(sm, ptx_version, config, coarsen)
    _validate(program)
    program = expand_calls(program)  # composed ops: call by value, as on the oracle
    need = required_ptx_version(sm, features(program))
    version = need if ptx_version is None else check_ptx_version(ptx_version, need)

    b = Builder()
    buffers = Buffers(program, b, packed_narrowing=sm_number(sm) >= PACKED_NARROWING_SM)
    loop = Coarsening(b, buffers, coarsen) if coarsen > 1 else None
    block = effective_workgroup(program, config)
    exprs = ExprLowering(b, buffers, loop.logical_x if loop else None, lowerings, block)
    StmtLowering(b, exprs, program.body, loop.next_label if loop else None).body(program.body, {})
    zero_init = buffers.zero_workgroup_memory(exprs.linear_local_id(), math.prod(block),
                                              wait_first=loop is not None) if buffers.shared_bytes else []
    code = [*b.loaded, *(loop.wrap(zero_init) if loop else [*zero_init, *b.body])]
    check_kernel_size([*b.prologue, *code], program.name)  # the prologue too: it holds every literal

    nparams = len(program.bound_buffers) + 1
    params = ",\n".join(f"\t.param .u64 {param_name(i)}" for i in range(nparams))
    lines = [
        "//",
        f"// vyre-cuda codegen {CODEGEN_VERSION}: program {sanitize(program.name)}",
        f"// workgroup {block[0]}x{block[1]}x{block[2]}, {nparams - 1} buffer pointer(s) then the parameter block",
        "// launch with exactly this workgroup size: workgroup-memory accesses proven in bounds for it are unguarded",
        *([f"// coarsened x{coarsen}: each workgroup runs {coarsen} logical workgroups along x"] if loop else []),
        "//",
        f".version {version}",
        f".target sm_{sm}",
        ".address_size 64",
        "",
        *shared_declaration(buffers.shared_bytes, dynamic_workgroup_bytes(program)),
        f".visible .entry {entry_name(program)}(",
        params,
        ")",
        "{",
        *(f"\t{d}" for d in b.regs.declarations()),
    ]
    if buffers.shared_bytes and not dynamic_workgroup_bytes(program):
        lines.append(f"\t.shared .align 16 .b8 {SHARED_SYMBOL}[{buffers.shared_bytes}];")
    lines += [*b.prologue, *grid_dependency(sm), *code, "\tret;", "}", ""]
    return "\n".join(lines)
