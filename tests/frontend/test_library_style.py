"""What the front end offers kernels written like ``vyre.lib``'s: integer arithmetic of Const values
folded, helpers that take variables and Python objects as they are and hand back their own
variable, compile-time ``a if c else b``, ``vyre.registers``, parameters left out with
``Annotated[T, None]``, names of a resolved branch that live on and helper parameters passed
``BY_EXPRESSION``.

Each kernel runs on the oracle (``vyre.reference``) against numpy; the IR is inspected to show
the shape that makes the library's PTX the builder's, byte for byte (tests/lib/test_kernels_front.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
import pytest

import vyre
from vyre.errors import ValidationError
from vyre.frontend import BY_EXPRESSION, kernel_from_source
from vyre.frontend.annotations import BufferSpec
from vyre.ir import DataType, Expr
from vyre.ir.node import Assign, Block, Let, Loop
from vyre.ir.op import Op
from vyre.ir.program import Access
from vyre.ir.walk import iter_nodes, iter_subexprs, node_exprs
from vyre.reference import ReferenceBackend

TILE = 64


@pytest.fixture(scope="module")
def oracle():
    with ReferenceBackend() as backend:
        yield backend


def _lets(program) -> list[str]:
    return [n.name for n in iter_nodes(program.body) if isinstance(n, Let)]


def _literals_in_ops(program, op: Op) -> list[Expr]:
    return [e for top in (x for n in iter_nodes(program.body) for x in node_exprs(n)) for e in iter_subexprs(top)
            if e.op == op]


# ---- integer arithmetic of Const values is folded, with the IR's arithmetic -------------------------
@vyre.kernel(workgroup_size=64)
def strided(x: vyre.In[vyre.u32], out: vyre.Out[vyre.u32], items: vyre.Const[int], back: vyre.Const[int]):
    for k in range(items):
        i = vyre.lid() + k * TILE                  # k * TILE: one literal per iteration
        out[i] = x[i] + (back - 1) + (TILE - 1)    # back - 1 wraps as U32 does; TILE - 1 stays an IR sub


def test_const_arithmetic_is_one_literal_and_wraps_like_the_ir(oracle):
    program = strided.bind(items=3, back=0).program
    assert not [e for e in _literals_in_ops(program, Op.MUL)]  # every k * TILE folded
    subs = _literals_in_ops(program, Op.SUB)
    assert subs and all(e.args == (Expr.u32(TILE), Expr.u32(1)) for e in subs)  # module constants alone: IR
    assert Expr.u32(0xFFFFFFFF) in {a for e in _literals_in_ops(program, Op.ADD) for a in e.args}  # 0 - 1 in U32
    x = np.arange(3 * TILE, dtype=np.uint32)
    (out,) = strided(x, 3, 0, backend=oracle, grid=(1, 1, 1), output_counts={"out": 3 * TILE})
    np.testing.assert_array_equal(out, x + np.uint32(TILE - 2))


@vyre.kernel(workgroup_size=1)
def divided(out: vyre.Out[vyre.i32, 3], d: vyre.Const[int]):
    out[0] = -7 // d                 # truncated toward zero, as the IR divides (Python's // gives -4)
    out[1] = (7 << d) >> 1
    out[2] = -7 % d                  # -1 (Python's % gives 1)


def test_const_division_folds_with_the_irs_rounding(oracle):
    (out,) = divided(2, backend=oracle, grid=(1, 1, 1))
    assert out.tolist() == [-3, 14, -1]
    program = divided.bind(2).program
    assert not _literals_in_ops(program, Op.DIV) and not _literals_in_ops(program, Op.REM)


# ---- helpers: variables and Python objects as they are, their own variable handed back ---------------
@vyre.func
def doubled(v: Any):
    return v + v


@vyre.func
def bumped(v: Any):
    v += 1  # assigns its parameter: it gets its own copy
    return v


@vyre.func
def total_of(v: Any, op: Any):
    t = op(v, 5)
    return t


@vyre.kernel(workgroup_size=8)
def helpers(x: vyre.In[vyre.u32], out: vyre.Out[vyre.u32, 24]):
    i = vyre.gid()
    a = x[i]
    out[i] = doubled(a)
    b = bumped(a)
    out[i + 8] = a + b        # a is unchanged by bumped
    c = total_of(a, vyre.max)
    out[i + 16] = c


def test_helpers_take_variables_and_objects_and_hand_back_their_variable(oracle):
    # doubled(a) reads a itself; bumped copies it (v_0), as it assigns it; c is total_of's own t_0
    assert _lets(helpers.program) == ["i", "a", "v_0", "t_0"]
    assert _literals_in_ops(helpers.program, Op.MAX) == [Expr.max(Expr.var("a"), Expr.u32(5))]
    x = np.array([1, 9, 3, 4, 5, 6, 7, 0], np.uint32)
    (out,) = helpers(x, backend=oracle)
    np.testing.assert_array_equal(out[:8], 2 * x)
    np.testing.assert_array_equal(out[8:16], 2 * x + 1)
    np.testing.assert_array_equal(out[16:], np.maximum(x, 5))


# ---- compile-time `a if c else b`, names of a resolved branch, registers ------------------------------
@dataclass(frozen=True)
class Scale:
    """A Python object a kernel reads attributes of (numbers become literals)."""

    factor: int


SCALE = Scale(3)


@vyre.func
def scaled(v: Any, s: Any):
    return v * s.factor


@vyre.kernel(workgroup_size=32)
def rounds(x: vyre.In[vyre.u32], out: vyre.Out[vyre.u32], items: vyre.Const[int], inclusive: vyre.Const[bool]):
    v = vyre.registers(vyre.u32, items)
    r = vyre.registers(vyre.u32, items)
    for k in range(items):
        v[k] = x[vyre.lid() * items + k]
    vyre.barrier()
    for k in range(items):  # a running sum over this invocation's items, carried in registers
        r[k] = (r[k - 1] if k != 0 else 0) + v[k]
    if inclusive:
        last = r[items - 1]
    else:
        last = r[items - 1] - v[items - 1]
    for k in range(items):
        out[vyre.lid() * items + k] = scaled(r[k] if inclusive else r[k] - v[k], SCALE) + last * 0


def test_registers_carry_values_across_unrolled_iterations(oracle):
    x = np.arange(32 * 4, dtype=np.uint32) % 7
    for inclusive in (True, False):
        (out,) = rounds(x, 4, inclusive, backend=oracle, grid=(1, 1, 1), output_counts={"out": 128})
        sums = np.cumsum(x.reshape(32, 4), axis=1, dtype=np.uint32)
        expected = sums if inclusive else sums - x.reshape(32, 4)
        np.testing.assert_array_equal(out, 3 * expected.ravel())
    program = rounds.bind(4, False).program
    assert not any(isinstance(n, Block) for n in iter_nodes(program.body))  # unrolled iterations are flat
    assert sum(isinstance(n, Assign) for n in iter_nodes(program.body)) == 0  # each register element: one let
    assert not _literals_in_ops(program, Op.SELECT)  # `a if inclusive else b` took one side


@pytest.mark.parametrize("body, message", [
    ("v = vyre.registers(vyre.u32, 4)\n    for j in range(vyre.u32(4)):\n        v[j] = 1", "not one of its 4"),
    ("v = vyre.registers(vyre.u32, 4)\n    out[0] = v[1]", "read before it is assigned"),
    ("v = vyre.registers(vyre.u32, 4)\n    v[4] = 1", "not one of its 4"),
    ("v = vyre.registers(vyre.u32, out[0])", "not an int constant"),
    ("v = vyre.registers(vyre.u32, 2)\n    v = 3", "vyre.registers() array"),
    ("v = vyre.registers(vyre.u32, 2)\n    if out[0] != 0:\n        v[0] = 1\n    out[1] = v[0]",
     "read before it is assigned"),
])
def test_registers_misuse_is_refused_with_a_fix(body, message):
    source = f"@vyre.kernel(workgroup_size=1)\ndef bad(out: vyre.InOut[vyre.u32]):\n    {body}\n"
    with pytest.raises(ValidationError, match=re.escape(message)) as info:
        vyre.frontend.kernel_from_source(source)
    assert "Fix:" in str(info.value)


# ---- parameters left out with Annotated[T, None] -----------------------------------------------------
def _offsetter(with_offset: bool):
    offsets = BufferSpec(Access.READ, DataType.U32) if with_offset else None

    @vyre.kernel(workgroup_size=8)
    def offset(x: vyre.In[vyre.u32], add: Annotated[vyre.In[vyre.u32], offsets], out: vyre.Out[vyre.u32],
               has: vyre.Const[bool]):
        i = vyre.gid()
        out[i] = x[i] + add[i] if has else x[i]

    return offset


def test_a_parameter_annotated_none_is_left_out(oracle):
    x = np.arange(8, dtype=np.uint32)
    without = _offsetter(False)
    program = without.bind(False).program
    assert [(b.name, b.binding) for b in program.buffers] == [("x", 0), ("out", 1)]
    (out,) = without(x, False, backend=oracle, output_counts={"out": 8})  # the Const keeps its position
    np.testing.assert_array_equal(out, x)
    (out,) = _offsetter(True)(x, x, True, backend=oracle, output_counts={"out": 8})
    np.testing.assert_array_equal(out, 2 * x)
    with pytest.raises(ValidationError, match="not a buffer"):
        without.bind(True)  # the left-out name is None: indexing it is refused


@vyre.func
def staged(x: Any, stage: Any, out: Any, staging: Annotated[bool, vyre.Const[bool]]):
    if staging:
        stage[vyre.lid()] = x[vyre.gid()]
        vyre.barrier()
        out[vyre.gid()] = stage[7 - vyre.lid()]
    else:
        out[vyre.gid()] = x[vyre.gid()]


@vyre.kernel(workgroup_size=8)
def maybe_staged(x: vyre.In[vyre.u32], out: vyre.Out[vyre.u32], staging: Annotated[bool, vyre.Const[bool]]):
    if staging:
        stage = vyre.shared(vyre.u32, 8)
    else:
        stage = None  # no buffer: the name is None, as a parameter left out
    staged(x, stage, out, staging)


def test_a_name_assigned_none_is_passed_on_as_a_left_out_parameter(oracle):
    x = np.arange(8, dtype=np.uint32)
    assert [b.name for b in maybe_staged.bind(False).program.buffers] == ["x", "out"]
    assert [b.name for b in maybe_staged.bind(True).program.buffers] == ["x", "out", "stage"]
    (plain,) = maybe_staged(x, False, backend=oracle, output_counts={"out": 8})
    (reversed_,) = maybe_staged(x, True, backend=oracle, output_counts={"out": 8})
    np.testing.assert_array_equal(plain, x)
    np.testing.assert_array_equal(reversed_, x[::-1])


# ---- a helper calling itself, ended by a compile-time if: loops nested as deep as a Const asks ------------
@vyre.func
def nested_count(count: Any, levels: Annotated[int, vyre.Const[int]], trips: Annotated[int, vyre.Const[int]]):
    """``levels`` loops of ``trips`` each, nested; the innermost body counts its runs in ``count[0]``."""
    for _ in range(vyre.u32(trips)):
        if levels == 1:
            count[0] = count[0] + 1
        else:
            nested_count(count, levels - 1, trips)


@vyre.kernel(workgroup_size=1)
def nest(out: vyre.InOut[vyre.u32], levels: vyre.Const[int], trips: vyre.Const[int]):
    count = vyre.registers(vyre.u32, 1)
    count[0] = 0
    nested_count(count, levels, trips)
    out[0] = count[0]


def _loop_depth(nodes) -> int:
    """How deep loops nest in ``nodes``, loop directly inside loop."""
    return max((1 + _loop_depth(n.body) for n in nodes if isinstance(n, Loop)), default=0)


@pytest.mark.parametrize("levels, trips", [(1, 5), (3, 2), (6, 3)])
def test_a_helper_may_call_itself_until_a_const_ends_it(oracle, levels, trips):
    program = nest.bind(levels, trips).program
    assert _loop_depth(program.body) == levels  # one rolled loop per level
    (out,) = nest(np.zeros(1, np.uint32), levels, trips, backend=oracle, grid=(1, 1, 1))
    assert out[0] == trips**levels


# ---- a helper parameter passed BY_EXPRESSION: the argument's expression at each use ------------------
@vyre.func
def twice_read(v: Annotated[Any, BY_EXPRESSION]):
    return v + v


@vyre.func
def twice_bound(v: Any):
    return v + v


@vyre.kernel(workgroup_size=8)
def by_expression(x: vyre.In[vyre.u32], out: vyre.Out[vyre.u32, 16]):
    i = vyre.gid()
    out[i] = twice_read(x[i] * 3)
    out[i + 8] = twice_bound(x[i] * 3)


def _loads(program, name: str) -> int:
    return sum(1 for e in _literals_in_ops(program, Op.LOAD) if e.name == name)


def test_a_parameter_passed_by_expression_repeats_its_expression(oracle):
    # twice_read writes x[i] * 3 at both uses (two loads, no let); twice_bound binds it once (v_0)
    assert _lets(by_expression.program) == ["i", "v_0"]
    assert _loads(by_expression.program, "x") == 3
    x = np.arange(8, dtype=np.uint32)
    (out,) = by_expression(x, backend=oracle)
    np.testing.assert_array_equal(out[:8], 6 * x)
    np.testing.assert_array_equal(out[8:], 6 * x)


def test_an_argument_with_an_effect_is_not_passed_by_expression():
    source = (
        "@vyre.kernel(workgroup_size=8)\n"
        "def k(c: vyre.InOut[vyre.u32], out: vyre.Out[vyre.u32, 8]):\n"
        "    out[vyre.gid()] = twice_read(vyre.atomic_add(c, 0, 1))\n")
    with pytest.raises(ValidationError, match=r"passed BY_EXPRESSION.*side effect(?s:.*)Fix: bind it to a name"):
        kernel_from_source(source, namespace={"twice_read": twice_read})
