"""Hostile input to the front end (issue 30): bounded time and memory, and a ValidationError at file:line
with a Fix instead of a raw Python exception, a hang or a blow-up.

Cases that a broken front end answers by running for minutes or allocating gigabytes run in a child
interpreter under an address-space rlimit and a timeout; the child imports a real module file, as a
user's program would.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import vyre
from vyre.driver.errors import ValidationError
from vyre.frontend import kernel_from_source

ROOT = Path(__file__).resolve().parents[2]
HEADER = "@vyre.kernel(workgroup_size=64)\ndef k(x: vyre.In[vyre.u32], y: vyre.InOut[vyre.u32]):\n"
MEMORY = 1 << 30  # bytes of address space a child may use (numpy and vyre need ~300 MiB)

_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
import vyre
from vyre.driver.errors import ValidationError
try:
    import hostile_module
    out = {"error": None}
except ValidationError as exc:
    out = {"error": "ValidationError", "message": str(exc), "fixes": [f.fix for f in exc.findings]}
except BaseException as exc:
    out = {"error": type(exc).__name__, "message": str(exc)[:2000]}
print(json.dumps(out))
"""


def import_limited(tmp_path: Path, module: str, seconds: float = 10, memory: int = MEMORY) -> dict:
    """Import ``module`` (the text of a .py file) in a child under ``memory`` bytes and ``seconds``; what it raised."""
    (tmp_path / "hostile_module.py").write_text(textwrap.dedent(module), encoding="utf-8")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path)], capture_output=True, text=True,
                              timeout=seconds, preexec_fn=limit, env=env, cwd=tmp_path, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"lowering did not finish within {seconds} s")
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def helper_module(levels: int, calls: int) -> str:
    """A kernel calling helper h{levels}, where each helper calls the one before it ``calls`` times."""
    lines = ["import vyre", "@vyre.func", "def h0(a: vyre.u32):", "    t = a + 1", "    return t"]
    for i in range(1, levels + 1):
        body = " + ".join([f"h{i - 1}(a)"] * calls)
        lines += ["@vyre.func", f"def h{i}(a: vyre.u32):", f"    t = {body}", "    return t"]
    lines += ["@vyre.kernel(workgroup_size=64)", "def k(y: vyre.InOut[vyre.u32]):", f"    y[0] = h{levels}(y[0])"]
    return "\n".join(lines) + "\n"


def assert_clean(out: dict, *needles: str) -> str:
    """``out`` is a ValidationError at the module's file:line with a Fix, mentioning every needle."""
    assert out["error"] == "ValidationError", out
    message = out["message"]
    assert "hostile_module.py:" in message and out["fixes"] and all(out["fixes"]), message
    for needle in needles:
        assert needle in message, message
    return message


def _error(body: str) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        kernel_from_source(HEADER + textwrap.indent(body, "    "), filename="user_kernel.py")
    (finding,) = caught.value.findings
    assert finding.message.startswith("user_kernel.py:") and finding.fix, finding
    return caught.value


# ---- 1. budgets ---------------------------------------------------------------------------------
def test_fresh_names_are_linear_so_doubling_helpers_lower_quickly(tmp_path):
    # 12 levels inline h0 4,096 times: ~5 s per 2 levels with quadratic fresh names, well under 1 s now
    assert import_limited(tmp_path, helper_module(12, 2), seconds=10) == {"error": None}


def test_inlining_has_a_budget_on_expanded_size(tmp_path):
    out = import_limited(tmp_path, helper_module(30, 2), seconds=10)
    message = assert_clean(out, "inlining", "65,536")
    assert "hostile_module.py:" in message


def test_a_long_helper_chain_is_a_clean_error(tmp_path):
    lines = ["import vyre", "@vyre.func", "def h0(a: vyre.u32):", "    return a + 1"]
    for i in range(1, 400):
        lines += ["@vyre.func", f"def h{i}(a: vyre.u32):", f"    return h{i - 1}(a)"]
    lines += ["@vyre.kernel(workgroup_size=64)", "def k(y: vyre.InOut[vyre.u32]):", "    y[0] = h399(y[0])"]
    assert_clean(import_limited(tmp_path, "\n".join(lines) + "\n"), "helpers nest deeper than")


def test_a_long_sum_is_a_clean_error_at_its_line():
    err = _error("y[0] = " + " + ".join(["x[0]"] * 700) + "\n")
    assert "user_kernel.py:3:" in str(err) and "nests deeper than" in str(err)
    assert "assign" in err.findings[0].fix


@pytest.mark.parametrize("count", [
    "1 << SHIFT",                        # would allocate 125 GB
    "BIG * BIG * BIG * BIG * BIG * BIG",  # multiplies of megabit integers
    "1 << 65",
    "N << -1",                           # ValueError: negative shift count
    "N // 0",                            # ZeroDivisionError
])
def test_annotation_constants_stay_within_64_bits(tmp_path, count):
    module = f"""\
        from __future__ import annotations  # else Python itself evaluates the annotation at def time
        import vyre
        SHIFT = 10 ** 12
        BIG = 1 << 3_000_000
        N = 4
        @vyre.kernel(workgroup_size=64)
        def k(y: vyre.InOut[vyre.u32, {count}]):
            pass
        """
    assert_clean(import_limited(tmp_path, module), "hostile_module.py:7:")


def test_a_hex_literal_of_5000_digits_is_a_clean_error():
    err = _error("y[0] = 0x" + "f" * 5000 + "\n")
    assert "20000-bit" in str(err) and "set_int_max_str_digits" not in str(err)


@pytest.mark.parametrize("body", ["f = 1.5\nf = f + " + "9" * 400 + "\n",
                                  "y[0] = vyre.u32(vyre.f32(" + "9" * 400 + "))\n"])
def test_a_400_digit_int_in_f32_context_is_a_clean_error(body):
    err = _error(body)
    assert "does not fit F32" in str(err)


def test_budgets_are_documented():
    text = (ROOT / "docs" / "kernels.md").read_text(encoding="utf-8")
    assert "65,536" in text and "64 bits" in text


# ---- 2. reloaded modules ------------------------------------------------------------------------
RELOADED = """\
import vyre

@vyre.func
def step(v: vyre.u32):
    return v + {step}

@vyre.kernel(workgroup_size=64)
def k(y: vyre.InOut[vyre.u32]):
    y[0] = step(y[0]){extra}
"""


def test_a_reloaded_module_compiles_its_new_source(tmp_path, monkeypatch):
    import importlib

    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "reloaded_kernels.py"
    path.write_text(RELOADED.format(step=1, extra=""), encoding="utf-8")
    module = importlib.import_module("reloaded_kernels")
    try:
        assert "u32:1" in module.k.to_text().replace(" ", "")
        path.write_text(RELOADED.format(step=2, extra=" * 3"), encoding="utf-8")  # another size, like an edit
        module = importlib.reload(module)
        text = module.k.to_text().replace(" ", "")
        assert "u32:2" in text and "u32:3" in text and "u32:1" not in text, text
    finally:
        sys.modules.pop("reloaded_kernels", None)


# ---- 3. side effects where Python would not evaluate them ----------------------------------------
STORING_HELPER = """\
import vyre

@vyre.func
def bump(buf: vyre.InOut[vyre.u32]):
    buf[1] = buf[1] + 1
    return buf[0]

@vyre.kernel(workgroup_size=64)
def k(x: vyre.In[vyre.u32], y: vyre.InOut[vyre.u32]):
    i = vyre.gid()
    v = bump(y) if x[i] > 3 else 0
"""


@pytest.mark.parametrize("body", [
    "i = vyre.gid()\nv = vyre.atomic_add(y, 0, 1) if x[i] > 3 else 0\n",
    "i = vyre.gid()\nv = 0 if x[i] > 3 else vyre.atomic_max(y, 0, x[i])\n",
    "i = vyre.gid()\nc = x[i] > 3 and vyre.atomic_add(y, 0, 1) != 0\n",
    "i = vyre.gid()\nc = x[i] > 3 or vyre.atomic_compare_exchange(y, 0, 0, 1) == 0\n",
    "i = vyre.gid()\ny[i] = vyre.u32(x[i] > 3 and vyre.atomic_exchange_relaxed(y, 0, 7) > 0)\n",
])
def test_side_effects_in_lazy_operands_are_refused(body):
    err = _error(body)
    assert "user_kernel.py:4:" in str(err) and "every invocation" in str(err)
    assert "`if` statement" in err.findings[0].fix


def test_a_helper_that_stores_is_refused_in_a_conditional_expression(tmp_path):
    out = import_limited(tmp_path, STORING_HELPER)
    assert_clean(out, "hostile_module.py:11:", "every invocation")


def test_pure_lazy_operands_and_an_atomic_first_operand_still_lower():
    kernel_from_source(HEADER + "    i = vyre.gid()\n    v = x[i] if x[i] > 3 else vyre.min(x[i], 2)\n"
                       "    c = vyre.atomic_add(y, 0, 1) == 0 and x[i] > 3\n", filename="user_kernel.py")


# ---- 4. messages in the words of the user's context ---------------------------------------------
BUILDER_WORDS = ("Expr.", "Node.", "DataType.", "BufferDecl", "DispatchConfig")


@pytest.mark.parametrize(("body", "said"), [
    ("y[0] = x[0] // 0\n", "`a if c else b`"),            # the validator's zero_divisor finding
    ("y[0] = vyre.u32(vyre.f32(x[0]) + 1)\nf = vyre.f32(x[0]) * 2\ny[1] = f\n", "vyre.u32("),  # a type mismatch
])
def test_kernel_fixes_name_kernel_constructs_not_the_builder(body, said):
    err = _error(body)
    fix = err.findings[0].fix
    assert said in fix and not any(word in fix for word in BUILDER_WORDS), fix


def test_a_2d_kernel_called_without_grid_is_told_about_the_calls_grid_argument():
    import numpy as np

    k = kernel_from_source("@vyre.kernel(workgroup_size=(8, 8, 1))\ndef k(y: vyre.InOut[vyre.u32]):\n"
                           "    y[vyre.gid()] = 1\n", filename="user_kernel.py", namespace={"vyre": vyre})
    with pytest.raises(vyre.errors.InvalidProgram) as caught:
        k(np.zeros(4, np.uint32), backend=vyre.acquire("reference"))
    assert "grid=(gx, gy, gz) to the kernel call" in str(caught.value)


@pytest.mark.parametrize(("annotation", "said"), [
    ("np.float64", "write vyre.f64"),
    ("np.int64", "write vyre.i64"),
    ("np.uint64", "write vyre.u64"),
    ("np.complex128", "complex and extended-precision types are not supported"),
    ("np.uint32", "write vyre.u32"),
    ("float", "write vyre.f32"),
])
def test_numpy_and_python_types_in_annotations_say_what_to_write(annotation, said):
    import numpy as np

    with pytest.raises(TypeError) as caught:
        vyre.InOut[eval(annotation, {"np": np})]  # noqa: S307 - a fixed test table
    message = str(caught.value)
    assert said in message and "vyre.u8, vyre.u16, vyre.u32" in message and "Fix:" in message, message


@pytest.mark.parametrize(("value", "said"), [([], "an empty Python list"), ([1.0, 2.0], "a Python list")])
def test_a_python_list_input_says_how_to_pass_a_typed_array(value, said):
    import numpy as np

    k = kernel_from_source(HEADER.replace("vyre.u32]", "vyre.f32]") + "    pass\n", namespace={"vyre": vyre})
    with pytest.raises(vyre.errors.InvalidProgram) as caught:
        k(value, np.zeros(2, np.float32), backend=vyre.acquire("reference"))
    message = str(caught.value)
    assert said in message and "float64" not in message and "numpy.zeros(0, dtype=numpy.float32)" in message, message


def test_a_numpy_type_in_an_unevaluated_annotation_is_one_clean_finding():
    err = _error_text("@vyre.kernel\ndef k(y: vyre.InOut[np.float64]):\n    pass\n")
    (finding,) = err.findings
    assert "write vyre.f64" in finding.message and "Fix" not in finding.message
    assert finding.fix.startswith("write vyre.InOut[vyre.f64]") and "vyre.boolean" in finding.fix


def _error_text(text: str) -> ValidationError:
    import numpy as np

    with pytest.raises(ValidationError) as caught:
        kernel_from_source(text, filename="user_kernel.py", namespace={"np": np})
    return caught.value
