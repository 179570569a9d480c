"""Everything outside the subset, type errors and validator findings are ValidationErrors that name
the Python file and line and a Fix naming the construct to use instead."""

from __future__ import annotations

import re
import textwrap

import pytest

import vyre
from vyre.driver.errors import ValidationError
from vyre.frontend import kernel_from_source

HEADER = ("@vyre.kernel(workgroup_size=64)\n"
          "def k(x: vyre.In[vyre.u32], y: vyre.InOut[vyre.u32], f: vyre.In[vyre.f32]):\n")


def _error(body: str, header: str = HEADER) -> ValidationError:
    text = header + textwrap.indent(textwrap.dedent(body), "    ")
    with pytest.raises(ValidationError) as caught:
        kernel_from_source(text, filename="user_kernel.py")
    return caught.value


# (body, line of the offending code counted from the def line + 1, what the message says, what the fix says)
CASES = [
    ("i = vyre.gid()\nwhile i < 4:\n    i += 1\n", 4, "`while` is not supported", "for _ in range(bound)"),
    ("for k in range(4):\n    break\n", 4, "`break` is not supported", "`if` on a flag"),
    ("for k in range(4):\n    continue\n", 4, "`continue` is not supported", "with an `if`"),
    ("a, b = 1, 2\n", 3, "multiple assignment", "one name per statement"),
    ("y[0] = x[0] ** 2\n", 3, "`**` is not supported", "x * x"),
    ("y[0] = 1 if 0 < x[0] < 4 else 0\n", 3, "chained comparisons", "a < b and b < c"),
    ("y[0] = x[0] + 1.5\n", 3, "float literal 1.5 is used as U32", "cast"),
    ("y[0] = -1\n", 3, "does not fit U32", "vyre.i32"),
    ("y[0] = f[0]\n", 3, "is F32, expected U32", "vyre.u32("),
    ("x[0] = 1\n", 3, "store to read buffer 'x'", "vyre.InOut"),
    ("y[0] = z\n", 3, "name 'z' is not defined", "assign it first"),
    ("if x[0] > 1:\n    t = 1\ny[0] = t\n", 5, "'t' was assigned only inside a block", "before the if/for"),
    ("for k in range(4):\n    k = 2\n", 4, "loop variable 'k'", "new variable"),
    ("return 1\n", 3, "a kernel returns nothing", "store results"),
    ("v = x\n", 3, "buffer 'x' is used as a value", "index it"),
    ("if x[0]:\n    y[0] = 1\n", 3, "if condition is U32, expected BOOL", "x[0] != 0"),
    ("for v in x:\n    y[0] = v\n", 3, "`for` over `x` is not supported", "range(n)"),
    ("for k in range(0, 8, 2):\n    y[k] = 1\n", 3, "with a step", "start + k * step"),
    ("if x[0] > 1:\n    t = vyre.shared(vyre.u32, 4)\n", 4, "top level of a kernel", "outside if/for"),
    ("g = lambda v: v\n", 3, "lambdas are not supported", "@vyre.func"),
    ("y[0] = int(x[0])\n", 3, "int() is not supported", "vyre.i32(x)"),
    ("y[0] = vyre.nosuch(x[0])\n", 3, "has no attribute 'nosuch'", "docs/kernels.md"),
    ("y[0] = x[0:2]\n", 3, "slices", "one U32 value"),
    ("if x[0] > 1:\n    t = 1\nelse:\n    t = 1.5\n", 6, "is used as U32", "cast"),
    ("y[0] = x[0] // 0\n", 3, "div by a literal zero", "non-zero"),
    ("y[0] = not x[0]\n", 3, "operand of `not` is U32, expected BOOL", "cast it"),
    ("vyre.gid()\n", 3, "is not used", "assign it"),
    ("t = 'text'\n", 3, "not a number", "numbers and True/False"),
    ("y[0] = x[0] < 1 < 2\n", 3, "chained comparisons", "a < b and b < c"),
    ("i = vyre.gid()\nif x[i] > 3:\n    vyre.barrier()\n", 5, "barrier is under control flow", "move it out"),
    ("y[0] = vyre.gid(3)\n", 3, "axis 3", "vyre.gid(0)"),
    ("y[0] = vyre.atomic_add(x, 0, 1)\n", 3, "atomic on read buffer 'x'", "vyre.InOut"),
]


@pytest.mark.parametrize(("body", "line", "message", "fix"), CASES, ids=[c[2][:40] for c in CASES])
def test_errors_name_the_line_and_a_fix(body, line, message, fix):
    err = _error(body)
    text = str(err)
    assert f"user_kernel.py:{line}:" in text, text
    assert message in text, text
    _, _, fix_text = text.partition("Fix:")
    assert fix in fix_text, text


def test_parameter_errors():
    assert "user_kernel.py:2: parameter 'x' has no annotation" in str(
        _error("pass\n", "@vyre.kernel\ndef k(x):\n"))
    assert "scalar parameters are vyre.u32" in str(_error("pass\n", "@vyre.kernel\ndef k(x: vyre.u8):\n"))
    assert "defaults are not supported" in str(_error("pass\n", "@vyre.kernel\ndef k(x: vyre.u32 = 1):\n"))
    assert "count must be a positive int" in str(_error("pass\n", "@vyre.kernel\ndef k(x: vyre.Uniform[vyre.u32]):\n"))


def test_bad_decorator_arguments_and_syntax():
    assert "name=5 is not a str" in str(_error("pass\n", "@vyre.kernel(name=5)\ndef k(x: vyre.In[vyre.u32]):\n"))
    assert "bindings= must map" in str(_error("pass\n", "@vyre.kernel(bindings={'x': 'a'})\n"
                                                         "def k(x: vyre.In[vyre.u32]):\n"))
    assert "user_kernel.py:3: invalid syntax" in str(_error("y[0] = = 1\n"))
    assert "cannot assign to parameter 'x'" in str(_error("x += 1\n"))


def test_program_level_findings_point_at_the_def_line():
    err = _error("pass\n", "@vyre.kernel(workgroup_size=2048)\ndef k(x: vyre.In[vyre.u32]):\n")
    assert re.search(r"user_kernel.py:\d+: workgroup size axis 0 is 2048", str(err))
    err = _error("pass\n", "@vyre.kernel(workgroup_size=(1, 2))\ndef k(x: vyre.In[vyre.u32]):\n")
    assert "workgroup_size=(1, 2) is not an int or a 3-tuple" in str(err)


@vyre.func
def forever(v):
    return forever(v)


def test_helper_recursion_and_bad_returns():
    with pytest.raises(ValidationError, match="forever\\(\\) calls itself more than 32 deep.*Fix: end the recursion"):
        @vyre.kernel
        def k(y: vyre.InOut[vyre.u32]):
            y[0] = forever(1)


@vyre.func
def early(v):
    if v > 1:
        return v
    return 0


def test_helper_return_only_last():
    with pytest.raises(ValidationError, match="may return only as its last statement"):
        @vyre.kernel
        def k(y: vyre.InOut[vyre.u32]):
            y[0] = early(y[0])


def test_decorated_function_errors_name_this_file():
    with pytest.raises(ValidationError) as caught:
        @vyre.kernel(workgroup_size=64)
        def k(y: vyre.InOut[vyre.u32]):
            while True:
                pass
    assert f"{__file__}:" in str(caught.value) and "for _ in range(bound)" in str(caught.value)
    assert caught.value.__traceback__ is not None


def test_functions_without_source_say_what_to_do():
    namespace = {"vyre": vyre}
    exec("def k(y: vyre.InOut[vyre.u32]):\n    y[0] = 1\n", namespace)
    with pytest.raises(ValidationError, match="cannot be read.*Fix: define kernels in a .py file"):
        vyre.kernel(namespace["k"])


def test_an_unsized_out_parameter_says_to_call_specialise() -> None:
    """``kernel.program`` of a kernel with an ``Out[T]`` sized at dispatch does not validate; every
    consumer's error names the call that gives it a count (issue 30, point 10)."""
    import numpy as np

    k = kernel_from_source(
        "@vyre.kernel(workgroup_size=64)\n"
        "def fill(x: vyre.In[vyre.u32], out: vyre.Out[vyre.u32]):\n"
        "    i = vyre.gid()\n"
        "    if i < len(x):\n"
        "        out[i] = x[i]\n")
    x = np.arange(5, dtype=np.uint32)
    for consumer in (lambda: vyre.validate(k.program), lambda: vyre.reference.run(k.program, [x])):
        with pytest.raises(ValidationError) as info:
            consumer()
        assert "kernel.specialise(output_counts={'out': n})" in str(info.value)
    vyre.validate(k.specialise({"out": 5}))
    assert (vyre.reference.run(k.specialise({"out": 5}), [x])[0] == x).all()
