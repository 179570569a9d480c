"""``vyre.Const`` compile-time parameters: one program per value, resolved branches, unrolled loops.

The oracle (``vyre.reference``) runs every specialisation; the IR is inspected to show that dead
branches and loops over constant bounds are gone; bad values and misuse raise with a Fix.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from const_kernels import (
    alternating,
    moving_sum,
    moving_sum_expected,
    power,
    power_expected,
    power_rolled,
    scale_or_shift,
)

import vyre
from vyre.errors import InvalidProgram, ValidationError
from vyre.frontend import KernelTemplate
from vyre.frontend.consts import MAX_UNROLL
from vyre.ir.node import If, Loop
from vyre.ir.op import Op
from vyre.ir.walk import iter_nodes, iter_subexprs, node_exprs
from vyre.reference import ReferenceBackend

N = 37


@pytest.fixture(scope="module")
def oracle():
    with ReferenceBackend() as backend:
        yield backend


def _ops(program) -> set[Op]:
    return {e.op for node in iter_nodes(program.body) for top in node_exprs(node) for e in iter_subexprs(top)}


def _nodes(program, kind) -> list:
    return [n for n in iter_nodes(program.body) if isinstance(n, kind)]


@pytest.mark.parametrize("n", [0, 1, 3, 5])
def test_unrolled_loop_equals_the_rolled_loop(oracle, n):
    x = np.linspace(-2, 2, N, dtype=np.float32)
    (unrolled,) = power(x, n, backend=oracle, elements=N)
    (rolled,) = power_rolled(x, n, backend=oracle, elements=N)
    assert unrolled.tobytes() == rolled.tobytes() == power_expected(x, n).tobytes()
    program = power.bind(n).program
    assert not _nodes(program, Loop) and _nodes(power_rolled.program, Loop)
    assert sum(e.op == Op.MUL for n_ in iter_nodes(program.body) for top in node_exprs(n_)
               for e in iter_subexprs(top)) == n


@pytest.mark.parametrize(("scale", "k"), [(True, 3), (True, -7), (False, 3), (False, -2147483648)])
def test_each_value_gives_its_own_result(oracle, scale, k):
    x = np.arange(N, dtype=np.int32) - np.int32(N // 2)
    (y,) = scale_or_shift(x, scale, k, backend=oracle, elements=N)
    with np.errstate(over="ignore"):
        assert y.tolist() == (x * np.int32(k) if scale else x + np.int32(k)).tolist()


def test_the_dead_branch_is_not_emitted():
    scaled, shifted = scale_or_shift.bind(True, 3).program, scale_or_shift.bind(scale=False, k=3).program
    assert len(_nodes(scaled, If)) == len(_nodes(shifted, If)) == 1  # the bounds guard only
    assert Op.MUL in _ops(scaled) and Op.ADD not in _ops(scaled)
    assert Op.ADD in _ops(shifted) and Op.MUL not in _ops(shifted)
    assert "i32:3" in scaled.to_text()  # the value is a typed literal, no buffer
    assert [b.name for b in scaled.buffers] == ["x", "y"] and [b.binding for b in scaled.buffers] == [0, 1]


@pytest.mark.parametrize("n", [0, 1, 4, 7])
def test_unrolled_loop_variable_is_a_compile_time_value(oracle, n):
    x = np.linspace(-1, 3, N, dtype=np.float32)
    (y,) = alternating(x, n, backend=oracle, elements=N)
    assert y.tolist() == (x if n % 2 else np.zeros_like(x)).tolist()
    assert len(_nodes(alternating.bind(n).program, If)) == 1  # `if j % 2 == 0` resolved per iteration


@pytest.mark.parametrize("width", [1, 3, 8])
def test_const_parameter_of_a_helper(oracle, width):
    x = np.arange(1, N + 1, dtype=np.uint32)
    (y,) = moving_sum(x, width, backend=oracle, elements=N)
    assert y.tolist() == moving_sum_expected(x, width).tolist()


def test_specialisations_are_cached_per_value(oracle):
    @vyre.kernel(workgroup_size=32)
    def offset(x: vyre.InOut[vyre.f32], c: vyre.Const[float]):
        i = vyre.gid()
        if i < len(x):
            x[i] = x[i] + c

    assert isinstance(offset, KernelTemplate)
    x = np.ones(8, np.float32)
    for c in (1.5, 1.5, np.float32(1.5), -0.0, 0.0, 1.5):
        offset(x, c, backend=oracle)
    kernels = offset.specialisations
    assert len(kernels) == 3  # 1.5, -0.0 and 0.0 (which differ in sign)
    assert offset.bind(1.5) is kernels[0] and offset.bind(c=-0.0) is kernels[1]
    assert offset(x, 2.0, backend=oracle)[0].tolist() == [3.0] * 8
    assert offset.bind(0.0) is offset.bind(0) and len(offset.specialisations) == 4  # an int for a float: 0.0


def _fix_of(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "Fix: " in text, text
    return text


@pytest.mark.parametrize(("args", "words"), [
    (([1, 2],), "unhashable list"),
    ((np.arange(3),), "unhashable ndarray"),
    ((2.5,), "is vyre.Const[int] and got float 2.5"),
    ((True,), "is vyre.Const[int] and got bool True"),
    (("3",), "got str"),
])
def test_bad_values_are_refused(args, words):
    x = np.ones(4, np.float32)
    with pytest.raises(InvalidProgram, match=re.escape(words)) as exc:
        power(x, *args, elements=4)
    _fix_of(exc)


def test_typed_const_out_of_range_and_bool_for_a_number():
    x = np.ones(4, np.int32)
    with pytest.raises(InvalidProgram, match="does not fit I32") as exc:
        scale_or_shift(x, True, 2**31, elements=4)
    _fix_of(exc)
    with pytest.raises(InvalidProgram, match="is vyre.Const\\[bool\\] and got int") as exc:
        scale_or_shift.bind(1, 2)
    _fix_of(exc)


def test_missing_const_input_and_template_program():
    with pytest.raises(InvalidProgram, match="compile-time parameter 'n' as input 1") as exc:
        power(np.ones(4, np.float32), elements=4)
    _fix_of(exc)
    with pytest.raises(InvalidProgram, match="one program per value") as exc:
        _ = power.program
    assert "kernel.bind(n=...).program" in _fix_of(exc)
    with pytest.raises(InvalidProgram, match="missing \\['k'\\]"):
        scale_or_shift.bind(True)


def test_unroll_past_the_cap_is_refused_and_a_cast_keeps_the_loop_rolled(oracle):
    with pytest.raises(ValidationError, match=f"unrolls to {MAX_UNROLL + 1} iterations") as exc:
        power.bind(MAX_UNROLL + 1)
    assert "range(vyre.u32(n))" in _fix_of(exc) and "test_const.py" not in str(exc.value)  # names const_kernels.py

    @vyre.kernel(workgroup_size=32)
    def count(y: vyre.InOut[vyre.u32], n: vyre.Const[int]):
        i = vyre.gid()
        if i < len(y):
            for _ in range(vyre.u32(n)):
                y[i] += 1

    assert _nodes(count.bind(1000).program, Loop)
    assert count(np.zeros(4, np.uint32), 1000, backend=oracle)[0].tolist() == [1000] * 4


def test_const_used_as_an_array_or_assigned_is_refused():
    @vyre.kernel
    def indexed(y: vyre.Out[vyre.u32], n: vyre.Const[int]):
        y[0] = n[0]

    @vyre.kernel
    def measured(y: vyre.Out[vyre.u32], n: vyre.Const[int]):
        y[0] = len(n)

    @vyre.kernel
    def assigned(y: vyre.Out[vyre.u32], n: vyre.Const[int]):
        n = n + 1
        y[0] = n

    for template, words in ((indexed, "used as an array"), (measured, "used as an array"),
                            (assigned, "cannot assign to 'n', a compile-time value")):
        with pytest.raises(ValidationError, match=words) as exc:
            template.bind(3)
        _fix_of(exc)


def test_const_condition_must_be_a_bool_and_annotation_must_be_a_scalar_kind():
    @vyre.kernel
    def truthy(y: vyre.Out[vyre.u32], n: vyre.Const[int]):
        if n:
            y[0] = 1

    @vyre.kernel
    def logical(y: vyre.Out[vyre.u32], n: vyre.Const[int]):
        if not n:
            y[0] = 1

    with pytest.raises(ValidationError, match="is 3, not a bool") as exc:
        truthy.bind(3)
    assert "n != 0" in _fix_of(exc)
    with pytest.raises(ValidationError, match="operands of `not n` are not all bools") as exc:
        logical.bind(3)
    _fix_of(exc)
    with pytest.raises(ValidationError, match="vyre.Const\\[...\\] takes int, float, bool") as exc:
        @vyre.kernel
        def text(y: vyre.Out[vyre.u32], s: vyre.Const[str]):
            y[0] = 1
    _fix_of(exc)


def test_helper_const_argument_must_be_a_compile_time_value():
    @vyre.func
    def times(v: vyre.u32, k: vyre.Const[int]):
        return v * k

    with pytest.raises(ValidationError, match=re.escape("is vyre.Const[int], and `x[0]` is not a compile-time")) as exc:
        @vyre.kernel
        def dynamic(x: vyre.In[vyre.u32], y: vyre.Out[vyre.u32, 4]):
            i = vyre.gid()
            y[i] = times(x[i], x[0])
    _fix_of(exc)


def test_without_const_the_decorator_still_returns_a_kernel():
    assert isinstance(power_rolled, vyre.frontend.Kernel) and power_rolled.bind() is power_rolled
    assert power_rolled.specialisations == (power_rolled,)
    with pytest.raises(InvalidProgram, match="no compile-time parameters") as exc:
        power_rolled.bind(3)
    _fix_of(exc)


DEBUG = False


def test_conditions_without_a_const_stay_ir_ifs_and_text_kernels_take_consts(oracle):
    @vyre.kernel
    def flagged(y: vyre.Out[vyre.u32, 1]):
        if DEBUG:  # a module-level flag alone: an IR `if`, as before vyre.Const existed
            y[0] = 1

    assert len(_nodes(flagged.program, If)) == 1
    template = vyre.frontend.kernel_from_source(
        "@vyre.kernel\ndef f(y: vyre.Out[vyre.u32, 4], n: vyre.Const[int]):\n"
        "    for k in range(n):\n        y[k] = k * 10\n")
    assert isinstance(template, KernelTemplate) and not _nodes(template.bind(3).program, Loop)
    assert template(3, backend=oracle)[0].tolist() == [0, 10, 20, 0]
