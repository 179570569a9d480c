"""The size bound on emitted kernels, so that every kernel ``emit_ptx`` returns compiles in seconds.

ptxas (and the driver's JIT, which runs the same compiler) takes time that grows faster than
linearly with the kernel: measured with ``ptxas --gpu-name sm_90`` (CUDA 13.0) on a 2-core CPU
host, 2,000 guarded stores took 4 s and 8,000 took 75 s, while the costliest kernel this bound
admits takes 1.5 s (docs/semantics.md, "Limits", has the table). The bound is on PTX
instructions, which is what the compiler's time follows, whatever IR produced them (a ``sin``
lowers to about 100 instructions, a ``let`` of a variable to none).
"""

from __future__ import annotations

from vyre.driver.errors import UnsupportedFeature

#: most PTX instructions in one kernel (labels, declarations and comments do not count)
MAX_INSTRUCTIONS = 4096


def instruction_count(code: list[str]) -> int:
    """Instructions among emitted body lines (each instruction line ends with ``;``)."""
    return sum(1 for line in code if line.endswith(";") and not line.lstrip().startswith("//"))


def check_kernel_size(code: list[str], name: str | None) -> None:
    """Raise ``UnsupportedFeature`` when the kernel body ``code`` has more than ``MAX_INSTRUCTIONS``."""
    count = instruction_count(code)
    if count > MAX_INSTRUCTIONS:
        raise UnsupportedFeature(
            f"kernels of more than {MAX_INSTRUCTIONS} PTX instructions (program {name or '(unnamed)'} lowers to "
            f"{count}; compile time grows faster than linearly with size)", "cuda",
            "split the program into several smaller programs (run them with dispatch_sequence), or move "
            "repeated statements into a Node.loop instead of writing them out.")
