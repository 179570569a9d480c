"""The programs of runs: run lengths (the distance between consecutive run starts) and the values
of ``unique(key_range=...)`` (bin indices plus ``lo``), written as ``@vk.kernel`` functions whose
``Const`` parameters are their params words."""

from __future__ import annotations

from functools import cache
from typing import Annotated

from vyre.frontend import lang as vk
from vyre.ir import Program
from vyre.lib.blocks import PARAMS, WG


@vk.kernel(workgroup_size=WG, name="lib_run_lengths")
def _run_lengths(starts: vk.In[vk.u32], count: vk.In[vk.u32], lengths: vk.InOut[vk.u32],
                 params: Annotated[vk.Uniform[vk.u32], PARAMS], n_word: vk.Const[int]):
    if vk.gid() < count[0]:  # the last run ends at n
        lengths[vk.gid()] = vk.select(vk.gid() + 1 < count[0], starts[vk.gid() + 1], params[n_word]) - starts[vk.gid()]


@cache
def run_lengths(n_word: int) -> Program:
    """``lengths[j] = starts[j+1] - starts[j]`` (the last run ends at ``n``), for ``j < count[0]``."""
    return _run_lengths.bind(n_word).program


@vk.kernel(workgroup_size=WG, name="lib_unique_range_values")
def _offset_values(index: vk.In[vk.u32], out: vk.InOut[vk.u32], params: Annotated[vk.Uniform[vk.u32], PARAMS],
                   n_word: vk.Const[int], lo_word: vk.Const[int]):
    if vk.gid() < params[n_word]:
        out[vk.gid()] = index[vk.gid()] + params[lo_word]


@cache
def offset_values(n_word: int, lo_word: int) -> Program:
    """``out[i] = index[i] + lo`` (u32 arithmetic: the bits of i32 values too) for ``i < n``."""
    return _offset_values.bind(n_word, lo_word).program
