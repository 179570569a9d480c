"""The dispatch input/output contract and the grid rule, as every backend applies them."""

from __future__ import annotations

import numpy as np
import pytest

from vyre import DispatchConfig
from vyre.driver.errors import InvalidProgram
from vyre.driver.inputs import prepare_host_dispatch
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

I = Expr.invocation_id(0)


def program(*buffers: BufferDecl, wg: tuple[int, int, int] = (64, 1, 1)) -> Program:
    return Program(buffers, wg, [Node.store(buffers[-1].name, I, Expr.u32(0))], name="p")


XOR = program(
    BufferDecl.read("a", 0, DataType.U32),
    BufferDecl.uniform("k", 1, DataType.U32, 1),
    BufferDecl.read_write("b", 2, DataType.U32),
    BufferDecl.output("c", 3, DataType.U32, 10),
)
DATA = np.arange(100, dtype=np.uint32)


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview, lambda a: a, lambda a: a.view(np.uint8)],
                         ids=["bytes", "bytearray", "memoryview", "ndarray", "ndarray-u8"])
def test_every_buffer_kind_of_input_gives_the_same_typed_array(wrap):
    hd = prepare_host_dispatch(XOR, [wrap(DATA), wrap(np.array([7], np.uint32)), wrap(DATA[:50])], None)
    assert hd.arrays["a"].dtype == np.uint32 and np.array_equal(hd.arrays["a"], DATA)
    assert hd.counts == {"a": 100, "k": 1, "b": 50, "c": 10}


def test_inputs_are_copied_so_the_callers_data_is_never_written():
    source = DATA.copy()
    hd = prepare_host_dispatch(XOR, [source, np.ones(1, np.uint32), source], None)
    hd.arrays["b"][:] = 0
    assert np.array_equal(source, DATA)


def test_outputs_are_read_write_and_output_buffers_in_declaration_order():
    hd = prepare_host_dispatch(XOR, [DATA, np.ones(1, np.uint32), DATA[:5]], None)
    outs = hd.outputs(XOR)
    assert [o.size for o in outs] == [5, 10]
    assert all(o.dtype == np.uint32 and o.ndim == 1 for o in outs)
    assert not outs[1].any(), "output buffers start zeroed"


@pytest.mark.parametrize("inputs", [[], [DATA, DATA], [DATA, DATA, DATA, DATA], DATA], ids=["0", "2", "4", "bare"])
def test_wrong_input_count_lists_the_expected_buffers(inputs):
    with pytest.raises(InvalidProgram, match=r"takes 3 inputs \(a, k, b\).*Fix:"):
        prepare_host_dispatch(XOR, inputs, None)


def test_byte_length_must_be_a_multiple_of_the_element_size():
    with pytest.raises(InvalidProgram, match=r"buffer 'a' has 6 bytes, not a multiple of 4.*Fix:"):
        prepare_host_dispatch(XOR, [b"\0" * 6, DATA[:1], DATA], None)


def test_input_shorter_than_its_declared_count_names_the_buffer():
    p = program(BufferDecl.uniform("k", 0, DataType.U32, 4), BufferDecl.read_write("b", 1, DataType.U32))
    with pytest.raises(InvalidProgram, match=r"buffer 'k' has 2 elements, fewer than its declared 4"):
        prepare_host_dispatch(p, [DATA[:2], DATA], None)


def test_non_contiguous_and_non_buffer_inputs_are_rejected_by_name():
    with pytest.raises(InvalidProgram, match=r"buffer 'a' is not C-contiguous.*ascontiguousarray"):
        prepare_host_dispatch(XOR, [DATA[::2], DATA[:1], DATA], None)
    with pytest.raises(InvalidProgram, match=r"buffer 'a' is a Python list of 3 items, not an array.*numpy.asarray"):
        prepare_host_dispatch(XOR, [[1, 2, 3], DATA[:1], DATA], None)


@pytest.mark.parametrize("dtype", [DataType.U8, DataType.I16, DataType.F16, DataType.BF16, DataType.F32, DataType.BOOL])
def test_narrow_and_float_buffers_take_their_storage_dtype(dtype):
    p = program(BufferDecl.read_write("b", 0, dtype))
    raw = np.arange(12, dtype=np.uint8).tobytes() * dtype.size
    hd = prepare_host_dispatch(p, [raw], None)
    assert hd.arrays["b"].dtype == dtype.np_dtype and hd.arrays["b"].size == len(raw) // dtype.size


# ---- the grid rule ----------------------------------------------------------------------------
def grid(p: Program, inputs, config=None):
    return prepare_host_dispatch(p, inputs, config).grid


def test_grid_follows_the_largest_read_read_write_or_output_buffer_rounded_up():
    assert grid(XOR, [DATA[:50], DATA[:1], DATA[:65]]) == (2, 1, 1)  # a 50, b 65, c 10 -> 65 / 64
    assert grid(XOR, [np.zeros(200, np.uint32), DATA[:1], DATA[:65]]) == (4, 1, 1)  # the read input: 200 / 64


def test_grid_follows_the_largest_input_when_there_is_no_output():
    p = program(BufferDecl.read("a", 0, DataType.U32), BufferDecl.read("b", 1, DataType.U32))
    assert grid(p, [np.zeros(129, np.uint32), DATA[:10]]) == (3, 1, 1)


def test_elements_and_an_explicit_grid_override_the_buffers():
    assert grid(XOR, [DATA, DATA[:1], DATA], DispatchConfig(elements=1000)) == (16, 1, 1)
    assert grid(XOR, [DATA, DATA[:1], DATA], DispatchConfig(grid=(3, 2, 1), elements=1000)) == (3, 2, 1)


def test_workgroup_override_changes_the_divisor():
    assert grid(XOR, [DATA, DATA[:1], DATA], DispatchConfig(workgroup_override=(32, 1, 1))) == (4, 1, 1)


def test_empty_buffers_give_an_empty_grid():
    p = program(BufferDecl.read_write("b", 0, DataType.U32))
    assert grid(p, [b""]) == (0, 1, 1)


@pytest.mark.parametrize("wg", [(8, 8, 1), (8, 1, 2)])
def test_a_workgroup_with_y_or_z_above_one_needs_a_grid(wg):
    p = program(BufferDecl.read_write("b", 0, DataType.U32), wg=wg)
    with pytest.raises(InvalidProgram, match=r"y or z > 1 and no grid.*Fix: pass grid=.*DispatchConfig\(grid="):
        grid(p, [DATA])
    assert grid(p, [DATA], DispatchConfig(grid=(2, 2, 2))) == (2, 2, 2)


@pytest.mark.parametrize("bad", [(1, 1), (1, -1, 1), (1.0, 1, 1), (2**31, 1, 1), (1, 65536, 1)])
def test_malformed_or_oversized_grids_are_rejected(bad):
    with pytest.raises(InvalidProgram, match="Fix:"):
        grid(XOR, [DATA, DATA[:1], DATA], DispatchConfig(grid=bad))
