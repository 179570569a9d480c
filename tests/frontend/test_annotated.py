"""``typing.Annotated[T, spec]`` annotations (type checkers read ``T``, the front end ``spec``),
kernels defined in a factory whose locals only annotations name, and ``vyre.frontend.lang``."""

from __future__ import annotations

from typing import Annotated

import numpy as np
import pytest

import vyre
from vyre.errors import ValidationError
from vyre.frontend import lang as vk
from vyre.frontend.annotations import BufferSpec
from vyre.ir import DataType
from vyre.ir.program import Access
from vyre.lib import blocks
from vyre.lib.blocks import PARAM_WORDS, PARAMS, WG
from vyre.reference import ReferenceBackend

WIDE = vyre.In[vyre.f64]


@vyre.kernel(workgroup_size=WG, name="lib_zero_fill")
def zero_fill(out: vyre.InOut[vyre.u32], params: Annotated[vyre.Uniform[vyre.u32], PARAMS], n_word: vyre.Const[int]):
    if vyre.gid() < params[n_word]:
        out[vyre.gid()] = 0


def test_a_count_through_annotated_is_the_builders_program() -> None:
    """``Annotated[vyre.Uniform[vyre.u32], PARAMS]``: the count a type checker cannot read reaches the program."""
    for word in (0, 7):
        assert zero_fill.bind(word).program == blocks.zero_fill(word)
    assert zero_fill.bind(0).program.buffers[1].count == PARAM_WORDS


@vyre.kernel(workgroup_size=64)
def widened(x: Annotated[vyre.In[vyre.f32], WIDE], y: vyre.Out[vyre.f64]):
    i = vyre.gid()
    if i < len(x):
        y[i] = x[i] * 2.0


def test_the_front_end_reads_the_last_metadata_item() -> None:
    program = widened.program
    assert program.buffers[0].dtype is DataType.F64
    x = np.array([0.1, 1e300, -3.0], np.float64)
    with ReferenceBackend() as oracle:
        (y,) = widened(x, elements=3, backend=oracle)
    assert np.array_equal(y, x * 2.0)


@vyre.func
def bump(buf: vyre.InOut[vyre.u32], i: vyre.u32, twice: Annotated[bool, vyre.Const[bool]]):
    if twice:
        buf[i] = buf[i] + 2
    else:
        buf[i] = buf[i] + 1


@vyre.kernel(workgroup_size=64)
def bumped(buf: vyre.InOut[vyre.u32], twice: vyre.Const[bool]):
    i = vyre.gid()
    if i < len(buf):
        bump(buf, i, twice)


def test_a_helper_const_through_annotated_is_resolved() -> None:
    """A helper's ``Annotated[bool, vyre.Const[bool]]`` parameter takes a plain bool for type checkers."""
    text = bumped.bind(True).program.to_text()
    assert "u32:2" in text and "u32:1)" not in text


def factory(dtype: DataType, scale: int) -> vyre.frontend.Kernel:
    """A kernel per element type: ``values`` is named only by annotations (no closure cell)."""
    values, results = BufferSpec(Access.READ, dtype), BufferSpec(Access.OUTPUT, dtype)

    @vk.kernel(workgroup_size=64, name=f"scaled_{dtype.value}")
    def scaled(x: Annotated[vk.In[vk.i32], values], y: Annotated[vk.Out[vk.i32], results]):
        i = vk.gid()
        if i < len(x):
            y[i] = x[i] * scale

    return scaled


@pytest.mark.parametrize("dtype", [DataType.I32, DataType.U64, DataType.F32])
def test_a_factory_local_named_only_by_annotations_resolves(dtype: DataType) -> None:
    k = factory(dtype, 3)
    assert k.program.name == f"scaled_{dtype.value}" and k.program.buffers[0].dtype is dtype
    x = np.arange(5).astype(dtype.np_dtype)
    with ReferenceBackend() as oracle:
        (y,) = k(x, elements=5, backend=oracle)
    assert np.array_equal(y, x * 3)


def test_annotated_metadata_that_is_not_a_vyre_annotation_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"parameter 'x' has annotation .*Fix: annotate buffers"):
        vyre.frontend.kernel_from_source(
            "@vyre.kernel\ndef k(x: Annotated[vyre.In[vyre.f32], 'a note']):\n    pass\n",
            namespace={"Annotated": Annotated})


def test_lang_exports_what_vyre_exports_for_kernels() -> None:
    """``vyre.frontend.lang`` (for code below the package) has every element type, buffer kind and intrinsic."""
    for name in [*vyre.frontend.INTRINSICS, "u32", "f64", "In", "InOut", "Out", "Uniform", "Const", "kernel", "func"]:
        assert getattr(vk, name) is getattr(vyre, name), name
