"""Hand-written PTX kernels with no IR behind them: text only (the runtime loads them like any kernel).

- ``condition_ptx``: the one-thread kernel that ends each iteration of a fixed-point loop in a
  conditional CUDA graph (``_runtime.conditional``);
- ``fault_ptx``: a kernel that faults on the device on purpose (the test hook
  ``DeviceRuntime.inject_fault``).

Each takes the target ``sm`` and the ``.version`` as its last two arguments, so the module loader
(``ModuleCache.load_snippet``) fills them in for the device.
"""

from __future__ import annotations

CONDITION_ENTRY = "vyre_while_condition"

FAULT_ENTRY = "vyre_fault"
FAULT_ADDRESS = 0x8  # never mapped: a store there is an illegal-address fault
_FAULT_BODIES = {
    "illegal_address": "    ld.param.u64 %rd1, [target];\n    mov.u32 %r1, 1;\n    st.global.u32 [%rd1], %r1;\n",
    "trap": "    trap;\n",
}
FAULT_KINDS = tuple(_FAULT_BODIES)


def condition_ptx(sm: str, ptx_version: str) -> str:
    """PTX of ``CONDITION_ENTRY(.u64 flag, .u64 control, .u64 handle)``, one thread: count the
    iteration in ``control[0]``, then keep looping while the flag word is non-zero and the count is
    below ``control[1]``, clearing the flag when it does. On sm_90+ it first waits for the kernel
    before it (``griddepcontrol.wait``), so it may be a programmatic launch."""
    wait = "    griddepcontrol.wait;\n" if int(sm.rstrip("a")) >= 90 else ""
    return f""".version {ptx_version}
.target sm_{sm}
.address_size 64

.extern .func cudaGraphSetConditional(.param .b64 cond_handle, .param .b32 cond_value);

.visible .entry {CONDITION_ENTRY}(.param .u64 flag_ptr, .param .u64 control_ptr, .param .u64 handle)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [flag_ptr];
    ld.param.u64 %rd2, [control_ptr];
    ld.param.u64 %rd3, [handle];
{wait}    ld.global.u32 %r1, [%rd2];
    add.u32 %r1, %r1, 1;
    st.global.u32 [%rd2], %r1;
    ld.global.u32 %r2, [%rd2+4];
    ld.global.u32 %r3, [%rd1];
    setp.ne.u32 %p1, %r3, 0;
    setp.lt.u32 %p2, %r1, %r2;
    and.pred %p3, %p1, %p2;
    selp.u32 %r4, 1, 0, %p3;
    mov.u32 %r5, 0;
    @%p3 st.global.u32 [%rd1], %r5;
    {{
    .param .b64 arg_handle;
    st.param.b64 [arg_handle], %rd3;
    .param .b32 arg_value;
    st.param.b32 [arg_value], %r4;
    call.uni cudaGraphSetConditional, (arg_handle, arg_value);
    }}
    ret;
}}
"""


def fault_ptx(kind: str, sm: str, ptx_version: str) -> str:
    """PTX of kernel ``FAULT_ENTRY(.u64 target)`` that faults on the device: ``illegal_address`` stores
    to ``target`` (launch it with ``FAULT_ADDRESS``), ``trap`` executes ``trap``."""
    if kind not in _FAULT_BODIES:
        raise ValueError(f"unknown fault kind {kind!r}. Fix: use one of {', '.join(FAULT_KINDS)}.")
    return (f".version {ptx_version}\n.target sm_{sm}\n.address_size 64\n\n"
            f".visible .entry {FAULT_ENTRY}(.param .u64 target)\n{{\n    .reg .b64 %rd<2>;\n    .reg .b32 %r<2>;\n"
            f"{_FAULT_BODIES[kind]}    ret;\n}}\n")


__all__ = ["CONDITION_ENTRY", "FAULT_ADDRESS", "FAULT_ENTRY", "FAULT_KINDS", "condition_ptx", "fault_ptx"]
