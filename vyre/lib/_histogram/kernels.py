"""The program of ``histogram`` and merging workgroup bins into global counts (``merge_bins``,
shared with the radix sort's digit histograms), as ``@vk.kernel``/``@vk.func`` functions."""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any

from vyre.frontend import lang as vk
from vyre.frontend.annotations import TYPE_NAMES, BufferSpec
from vyre.frontend.kernel import Kernel
from vyre.frontend.template import KernelTemplate
from vyre.ir import DataType, Program
from vyre.ir.program import Access
from vyre.lib.blocks import PARAMS, U32, WG

WG_LAST = WG - 1  # a module-level number is a literal in a kernel; `WG - 1` there would be IR arithmetic


@vk.func
def merge_bins(target: Any, local: Any, params: Any, offset: Annotated[int, vk.Const[int]],
               bins: Annotated[int, vk.Const[int]], bins_word: Annotated[int, vk.Const[int]], count: Any):
    """Add the workgroup's bins ``local[q*WG + t]`` into ``target[offset + bin]``: one global
    atomic per non-zero bin, its count cast to ``count`` (a type: U32 or U64). ``bins`` bins (a
    multiple of WG), or with ``bins == 0`` as many as the params word ``bins_word`` says."""
    for q in range(vk.u32(bins // WG) if bins != 0 else (params[bins_word] + WG_LAST) // WG):  # a loop, not unrolled
        b = q * WG + vk.lid()
        c = local[b]
        if c != 0:
            vk.atomic_add_relaxed(target, offset + b if offset != 0 else b, count(c))


@vk.func
def count_values(x: vk.In[vk.u32], target: vk.InOut[vk.u32], params: Annotated[vk.Uniform[vk.u32], PARAMS],
                 n_word: vk.Const[int], bins_word: vk.Const[int], blocks_word: vk.Const[int],
                 wide: Annotated[bool, vk.Const[bool]]):
    """Add 1 to ``target[v]`` for each value ``v`` of ``x`` in ``[0, bins)``: workgroup ``w`` of
    ``B`` (params ``blocks_word``) reads elements ``(r*B + w)*WG + t``. A ``wide`` (64-bit) value
    is tested against ``bins`` at 64 bits (as unsigned: negative ones are ignored)."""
    for r in range((params[n_word] + (params[blocks_word] * WG - 1)) // (params[blocks_word] * WG)):
        i = (r * params[blocks_word] + vk.wid()) * WG + vk.lid()
        if wide:
            w = vk.u64(x[i])
            v = vk.u32(w)
            if i < params[n_word] and w < vk.u64(params[bins_word]):
                vk.atomic_add_relaxed(target, v, 1)
        else:
            v = vk.u32(x[i])
            if i < params[n_word] and v < params[bins_word]:
                vk.atomic_add_relaxed(target, v, 1)


@cache
def _histogram(dtype: DataType, count_type: DataType, shared_bins: int) -> Kernel | KernelTemplate:
    """The kernel counting ``dtype`` values into ``count_type`` counts, through ``shared_bins``
    workgroup bins (none when 0); its Const parameters are the params words of n, bins and blocks."""
    values, counts_decl = BufferSpec(Access.READ, dtype), BufferSpec(Access.READ_WRITE, count_type)
    wide, count = dtype.size == 8, TYPE_NAMES[count_type]
    name = f"lib_histogram_{dtype.value}{'' if count_type is U32 else '_counts64'}"
    if not shared_bins:
        @vk.kernel(workgroup_size=WG, name=name)
        def direct(x: Annotated[vk.In[vk.u32], values], counts: Annotated[vk.InOut[vk.u32], counts_decl],
                   params: Annotated[vk.Uniform[vk.u32], PARAMS], n_word: vk.Const[int], bins_word: vk.Const[int],
                   blocks_word: vk.Const[int]):
            count_values(x, counts, params, n_word, bins_word, blocks_word, wide)

        return direct

    @vk.kernel(workgroup_size=WG, name=name)
    def shared(x: Annotated[vk.In[vk.u32], values], counts: Annotated[vk.InOut[vk.u32], counts_decl],
               params: Annotated[vk.Uniform[vk.u32], PARAMS], n_word: vk.Const[int], bins_word: vk.Const[int],
               blocks_word: vk.Const[int]):
        local = vk.shared(vk.u32, shared_bins)
        count_values(x, local, params, n_word, bins_word, blocks_word, wide)
        vk.barrier()
        merge_bins(counts, local, params, 0, 0, bins_word, count)

    return shared


@cache
def histogram_kernel(dtype: DataType, shared_bins: int, n_word: int, bins_word: int, blocks_word: int,
                     count_type: DataType = U32) -> Program:
    """Count values in ``[0, bins)`` into ``count_type`` (U32 or U64) counts: workgroup-private
    bins (when ``shared_bins``; U32, as a workgroup sees fewer than 2^32 elements), merged once;
    with ``shared_bins == 0`` every element goes straight to a global atomic."""
    return _histogram(dtype, count_type, shared_bins).bind(n_word, bins_word, blocks_word).program
