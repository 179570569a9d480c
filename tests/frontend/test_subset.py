"""The rest of the kernel subset: every op under its own name, atomics, literal typing, helpers,
scopes, vyre.call, scalars and the Kernel object's dispatch paths (compile, resident handles)."""

from __future__ import annotations

import numpy as np
import pytest
from frontend_cases import rng_fixture  # noqa: F401 - the rng fixture

import vyre
from vyre.driver.errors import InvalidProgram
from vyre.frontend import kernel_from_source
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ir.expr import BINARY_OPS, UNARY_OPS
from vyre.ir.typing import BINARY_TYPES, COMPARE_OPS, SHIFT_OPS, UNARY_TYPES
from vyre.ops import OpDef, register_op
from vyre.reference import ReferenceBackend

U32, I32, F32, BOOL = DataType.U32, DataType.I32, DataType.F32, DataType.BOOL
N = 130


@pytest.fixture(scope="module")
def oracle():
    with ReferenceBackend() as backend:
        yield backend


def typed_values(rng, dtype: DataType, n: int = N) -> np.ndarray:
    if dtype.is_float:
        edges = np.array([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 1e-40, 5e-324], dtype.np_dtype)
        return np.concatenate([edges, (rng.standard_normal(n) * 50).astype(dtype.np_dtype)])[:n]
    if dtype is BOOL:
        return rng.integers(0, 2, n, dtype=np.uint32)
    if dtype.is_wide:
        edges = np.array([0, 1, 63, 64, 0xFFFFFFFF, 2**63 - 1, 2**63, 2**64 - 1], np.uint64)
        bits = np.concatenate([edges, rng.integers(0, 2**64, n, dtype=np.uint64, endpoint=False)])[:n]
    else:
        edges = np.array([0, 1, 31, 32, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF], np.uint32)
        bits = np.concatenate([edges, rng.integers(0, 2**32, n, dtype=np.uint32)])[:n]
    return bits.view(dtype.np_dtype)


def _elementwise(name: str, ins: list[tuple[str, DataType]], out: DataType, value: Expr) -> Program:
    decls = [BufferDecl.read(n, k, t) for k, (n, t) in enumerate(ins)]
    decls.append(BufferDecl.output("out", len(ins), out, N))
    return Program(decls, (64, 1, 1), [Node.let("i", Expr.invocation_id(0)), Node.store("out", Expr.var("i"), value)],
                   name=name)


def _type_name(t: DataType) -> str:
    return "boolean" if t is BOOL else t.value


def _op_kernel(op: str, t: DataType) -> tuple[str, Program]:
    """A kernel applying ``vyre.<op>`` to loads, as text, and the builder's program."""
    i = Expr.var("i")
    binary = op in BINARY_OPS
    second = U32 if op in SHIFT_OPS else t
    result = BOOL if op in COMPARE_OPS or op in ("is_nan", "is_inf", "is_finite") else t
    args = [Expr.load("a", i), Expr.load("b", i)] if binary else [Expr.load("a", i)]
    ins = [("a", t), ("b", second)] if binary else [("a", t)]
    params = ", ".join(f"{n}: vyre.In[vyre.{_type_name(dt)}]" for n, dt in ins)
    call = f"vyre.{op}(a[i], b[i])" if binary else f"vyre.{op}(a[i])"
    text = (f"@vyre.kernel(workgroup_size=64, name='{op}')\n"
            f"def k({params}, out: vyre.Out[vyre.{_type_name(result)}, {N}]):\n"
            f"    i = vyre.gid()\n    out[i] = {call}\n")
    return text, _elementwise(op, ins, result, getattr(Expr, op)(*args))


OP_CASES = [(op, t) for op in BINARY_OPS for t in BINARY_TYPES[op]] + \
           [(op, t) for op in UNARY_OPS for t in UNARY_TYPES[op]]


@pytest.mark.parametrize(("op", "dtype"), OP_CASES, ids=[f"{op}-{t.value}" for op, t in OP_CASES])
def test_every_op_under_its_own_name(op, dtype):
    text, builder = _op_kernel(op, dtype)
    assert kernel_from_source(text).program == builder


NUMPY_OPS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "bitand": np.bitwise_and, "bitxor": np.bitwise_xor,
    "min": np.minimum, "max": np.maximum, "lt": np.less, "ge": np.greater_equal, "neg": np.negative,
    "bitnot": np.invert, "sqrt": np.sqrt, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc,
}


@pytest.mark.parametrize(("op", "dtype"), [(op, t) for op, t in OP_CASES if op in NUMPY_OPS],
                         ids=lambda v: v if isinstance(v, str) else v.value)
def test_ops_match_numpy_on_the_oracle(op, dtype, oracle, rng):
    text, builder = _op_kernel(op, dtype)
    inputs = [typed_values(rng, b.dtype) for b in builder.inputs]
    with np.errstate(all="ignore"):
        expected = np.asarray(NUMPY_OPS[op](*inputs))
    if op in ("min", "max") and dtype.is_float:  # the other operand when one is NaN (numpy propagates NaN)
        a, b = inputs
        expected = np.where(np.isnan(a), b, np.where(np.isnan(b), a, expected))
    got = kernel_from_source(text)(*inputs, backend=oracle)[0]
    np.testing.assert_array_equal(got, expected.astype(got.dtype))


@pytest.mark.parametrize("op", list(AtomicOp))
def test_every_atomic(op, oracle, rng):
    cas = op.base is AtomicOp.COMPARE_EXCHANGE
    call = f"vyre.atomic_{op.value}(acc, i % 4, x[i]{', i' if cas else ''})"
    kernel = kernel_from_source(
        "@vyre.kernel(workgroup_size=32, name='atomics')\n"
        "def k(x: vyre.In[vyre.u32], acc: vyre.InOut[vyre.u32], old: vyre.Out[vyre.u32, 64]):\n"
        f"    i = vyre.gid()\n    old[i] = {call}\n    {call}\n")
    i = Expr.var("i")
    index = Expr.rem(i, Expr.u32(4))
    atomic = Expr.atomic(op, "acc", index, i, Expr.load("x", i)) if cas else \
        Expr.atomic(op, "acc", index, Expr.load("x", i))
    assert kernel.program == Program(
        [BufferDecl.read("x", 0, U32), BufferDecl.read_write("acc", 1, U32), BufferDecl.output("old", 2, U32, 64)],
        (32, 1, 1), [Node.let("i", Expr.invocation_id(0)), Node.store("old", i, atomic), Node.let("_atomic_0", atomic)],
        name="atomics")
    if op.base in (AtomicOp.ADD, AtomicOp.XOR, AtomicOp.OR):  # order-free results: compare with numpy
        x = typed_values(rng, U32, 64)
        acc = typed_values(rng, U32, 4)
        new_acc, _ = kernel(x, acc, backend=oracle)
        fold = {AtomicOp.ADD: np.add, AtomicOp.XOR: np.bitwise_xor, AtomicOp.OR: np.bitwise_or}[op.base]
        expected = acc.copy()
        for k in range(4):
            for v in x[k::4]:
                expected[k] = fold(fold(expected[k], v), v)
        np.testing.assert_array_equal(new_acc, expected)


LITERALS_TEXT = '''
@vyre.kernel(workgroup_size=1, name="literals")
def k(a: vyre.In[vyre.i32], f: vyre.In[vyre.f32], out: vyre.Out[vyre.i32, 8], fo: vyre.Out[vyre.f32, 8]):
    i = vyre.gid()
    out[0] = a[i] + 1
    out[1] = 1 if a[i] > -2 else 0
    out[2] = vyre.i32(vyre.u32(7) * 2)
    n = 3
    x: vyre.i32 = -5
    x = x * 2
    fo[0] = f[i] * 2 + 0.5
    fo[1] = vyre.f32(-0.0)
    fo[2] = vyre.f32(2 + 3)
    out[3] = -(a[i])
    out[4] = vyre.i32(n)
'''


def test_literal_typing_by_context():
    a, f = Expr.load("a", Expr.var("i")), Expr.load("f", Expr.var("i"))
    body = [
        Node.let("i", Expr.invocation_id(0)),
        Node.store("out", Expr.u32(0), Expr.add(a, Expr.i32(1))),
        Node.store("out", Expr.u32(1), Expr.select(Expr.gt(a, Expr.i32(-2)), Expr.i32(1), Expr.i32(0))),
        Node.store("out", Expr.u32(2), Expr.cast(I32, Expr.mul(Expr.u32(7), Expr.u32(2)))),
        Node.let("n", Expr.u32(3)),
        Node.let("x", Expr.i32(-5)),
        Node.assign("x", Expr.mul(Expr.var("x"), Expr.i32(2))),
        Node.store("fo", Expr.u32(0), Expr.add(Expr.mul(f, Expr.f32(2.0)), Expr.f32(0.5))),
        Node.store("fo", Expr.u32(1), Expr.f32_from_bits(0x80000000)),
        Node.store("fo", Expr.u32(2), Expr.add(Expr.f32(2.0), Expr.f32(3.0))),
        Node.store("out", Expr.u32(3), Expr.neg(a)),
        Node.store("out", Expr.u32(4), Expr.cast(I32, Expr.var("n"))),
    ]
    expected = Program([BufferDecl.read("a", 0, I32), BufferDecl.read("f", 1, F32), BufferDecl.output("out", 2, I32, 8),
                        BufferDecl.output("fo", 3, F32, 8)], (1, 1, 1), body, name="literals")
    assert kernel_from_source(LITERALS_TEXT).program == expected


def test_literal_typing_on_the_oracle(oracle, rng):
    a = rng.integers(-(2**31), 2**31, 1, dtype=np.int64).astype(np.int32)
    f = (rng.standard_normal(1) * 100).astype(np.float32)
    out, fo = kernel_from_source(LITERALS_TEXT)(a, f, backend=oracle, grid=(1, 1, 1))
    with np.errstate(all="ignore"):
        assert list(out[:5]) == [a[0] + 1, 1 if a[0] > -2 else 0, 14, -a[0], 3]
        np.testing.assert_array_equal(fo[:3], [f[0] * np.float32(2) + np.float32(0.5), -0.0, 5.0])
    assert np.signbit(fo[1])


COUNTER = 4


@vyre.func
def twice(v):
    return v + v


@vyre.func
def store_sum(dst, i, a: vyre.i32, b: vyre.i32):
    """Helpers may take buffers and write them."""
    total = a + b
    dst[i] = total


@vyre.kernel(workgroup_size=32, name="helpers")
def helpers(x: vyre.In[vyre.i32], hits: vyre.InOut[vyre.u32], out: vyre.Out[vyre.u32, 64],
            sums: vyre.Out[vyre.i32, 64]):
    i = vyre.gid()
    out[i] = twice(vyre.atomic_add(hits, 0, 1))
    store_sum(sums, i, x[i], 1)
    k = twice(COUNTER)
    out[i + 32] = k


def test_helpers_inline_with_arguments_bound_once(oracle, rng):
    i = Expr.var("i")
    assert helpers.program.body == (
        Node.let("i", Expr.invocation_id(0)),
        Node.let("v_0", Expr.atomic(AtomicOp.ADD, "hits", Expr.u32(0), Expr.u32(1))),
        Node.store("out", i, Expr.add(Expr.var("v_0"), Expr.var("v_0"))),
        Node.let("a_0", Expr.load("x", i)),  # the variable i is passed as it is: the helper never assigns it
        Node.let("b_0", Expr.i32(1)),
        Node.let("total_0", Expr.add(Expr.var("a_0"), Expr.var("b_0"))),
        Node.store("sums", i, Expr.var("total_0")),
        Node.let("k", Expr.add(Expr.u32(COUNTER), Expr.u32(COUNTER))),
        Node.store("out", Expr.add(i, Expr.u32(32)), Expr.var("k")),
    )
    x = typed_values(rng, I32, 32)
    hits, out, sums = helpers(x, np.zeros(1, np.uint32), backend=oracle, elements=32)
    assert hits[0] == 32  # the atomic argument ran once per invocation, not once per use
    assert sorted(out[:32] // 2) == list(range(32)) and (out[:32] % 2 == 0).all()
    assert (out[32:] == 2 * COUNTER).all()
    np.testing.assert_array_equal(sums[:32], x + np.int32(1))


@vyre.kernel(workgroup_size=32, name="scopes")
def scopes(out: vyre.Out[vyre.u32, 32]):
    i = vyre.gid()
    with vyre.block():
        t = i * 2
        out[i] = t
    with vyre.region("my.pass"):
        t = i + 1
        out[i] += t
    pass


def test_block_and_region_scopes(oracle):
    i = Expr.var("i")
    assert scopes.program.body == (
        Node.let("i", Expr.invocation_id(0)),
        Node.block([Node.let("t", Expr.mul(i, Expr.u32(2))), Node.store("out", i, Expr.var("t"))]),
        Node.region("my.pass", [Node.let("t", Expr.add(i, Expr.u32(1))),
                                Node.store("out", i, Expr.add(Expr.load("out", i), Expr.var("t")))]),
    )
    (out,) = scopes(backend=oracle)
    np.testing.assert_array_equal(out, np.arange(32, dtype=np.uint32) * 3 + 1)


register_op(OpDef("test.frontend.mad", (I32, I32), I32, expand=lambda a, b: Expr.add(Expr.mul(a, b), a)))
register_op(OpDef("test.frontend.sum4", (F32, F32, F32, U32), F32,
                  expand=lambda a, b, c, d: Expr.add(Expr.add(a, b), Expr.mul(c, Expr.cast(F32, d)))))


CALLS = [  # (op id, element type, literal arguments as written, as typed by the op, numpy of a)
    ("test.frontend.mad", I32, "3", (Expr.i32(3),), lambda a: a * np.int32(3) + a),
    ("test.frontend.sum4", F32, "1, 0.5, 3", (Expr.f32(1.0), Expr.f32(0.5), Expr.u32(3)),
     lambda a: a + np.float32(1) + np.float32(1.5)),
]


@pytest.mark.parametrize(("op_id", "dtype", "written", "typed", "expected"), CALLS, ids=[c[0] for c in CALLS])
def test_vyre_call_types_literals_from_the_op(op_id, dtype, written, typed, expected, oracle, rng):
    kernel = kernel_from_source(
        "@vyre.kernel(workgroup_size=64, name='calls')\n"
        f"def k(a: vyre.In[vyre.{dtype.value}], out: vyre.Out[vyre.{dtype.value}, {N}]):\n"
        f"    i = vyre.gid()\n    out[i] = vyre.call('{op_id}', a[i], {written})\n")
    call = Expr.call(op_id, Expr.load("a", Expr.var("i")), *typed)
    assert kernel.program == _elementwise("calls", [("a", dtype)], dtype, call)
    a = typed_values(rng, dtype)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(kernel(a, backend=oracle)[0], expected(a))


@vyre.kernel(workgroup_size=64)
def scalars(u: vyre.u32, s: vyre.i32, f: vyre.f32, b: vyre.boolean, out: vyre.Out[vyre.u32, 4],
            fo: vyre.Out[vyre.f32, 1]):
    out[0] = u
    out[1] = vyre.u32(s)
    out[2] = vyre.u32(b)
    fo[0] = f


def test_scalar_parameters_become_one_element_uniforms(oracle):
    assert [b.access.value for b in scalars.program.buffers[:4]] == ["uniform"] * 4
    assert all(b.count == 1 for b in scalars.program.buffers[:4])
    out, fo = scalars(0xFFFFFFFF, -7, 1e39, True, backend=oracle)
    assert list(out[:3]) == [0xFFFFFFFF, 0xFFFFFFF9, 1]
    assert np.isinf(fo[0])  # beyond F32: rounds to inf like any f32 conversion
    _, fo = scalars(0, 0, -(10**400), True, backend=oracle)
    assert fo[0] == -np.inf
    out, fo = scalars(np.uint32(3), np.int32(-1), np.float32(0.5), False, backend=oracle)
    assert list(out[:3]) == [3, 0xFFFFFFFF, 0] and fo[0] == 0.5
    out, _ = scalars(1, 2, 0.0, np.bool_(True), backend=oracle)
    assert out[2] == 1
    out, _ = scalars(1, 2, 0.0, 7, backend=oracle)  # a BOOL is a 0/1 word: any non-zero number is 1
    assert out[2] == 1


@pytest.mark.parametrize(("args", "name"), [((-1, 0, 0.0, True), "u"), ((0, 2**31, 0.0, True), "s"),
                                            ((2**32, 0, 0.0, True), "u")])
def test_scalars_out_of_range_are_errors(args, name, oracle):
    with pytest.raises(InvalidProgram, match=f"scalar parameter '{name}'.*Fix:"):
        scalars(*args, backend=oracle)


@vyre.kernel(workgroup_size=64)
def double(x: vyre.In[vyre.f32], y: vyre.Out[vyre.f32]):
    i = vyre.gid()
    y[i] = x[i] * 2


def test_out_sized_at_dispatch(oracle, rng):
    x = typed_values(rng, F32, 100)
    (y,) = double(x, backend=oracle, output_counts={"y": 100})
    assert y.shape == (100,)
    np.testing.assert_array_equal(y, x * np.float32(2))
    (y,) = double(x, backend=oracle, elements=70)
    assert y.shape == (70,)
    with pytest.raises(InvalidProgram, match="sized at dispatch.*Fix: pass output_counts"):
        double(x, backend=oracle)


def test_compile_and_resident_dispatch(oracle, rng):
    x = typed_values(rng, F32, 64)
    pipeline = double.compile(oracle, output_counts={"y": 64})
    np.testing.assert_array_equal(pipeline.dispatch([x])[0], x * np.float32(2))
    hx, hy = oracle.allocate_resident(x.nbytes), oracle.allocate_resident(x.nbytes)
    try:
        oracle.upload_resident(hx, x)
        double.dispatch_resident([hx, hy], backend=oracle, output_counts={"y": 64})
        y = oracle.download_resident(hy).view(np.float32)
        np.testing.assert_array_equal(y, x * np.float32(2))
    finally:
        oracle.free_resident(hx)
        oracle.free_resident(hy)


def test_default_backend_is_acquired_once():
    from vyre.frontend.kernel import default_backend

    first = default_backend()
    assert default_backend() is first
    x = np.arange(8, dtype=np.float32)
    (y,) = double(x, elements=8)
    np.testing.assert_array_equal(y, x * 2)


@vyre.kernel(workgroup_size=64)
def storage(x: vyre.In[vyre.u8], coeffs: vyre.Uniform[vyre.f32, 2], h: vyre.In[vyre.f16, 16],
            out: vyre.Out[vyre.i16, N], fo: vyre.Out[vyre.f32, N]):
    i = vyre.gid()
    out[i] = vyre.i32(x[i]) - 100
    fo[i] = h[i % 16] * coeffs[0] + coeffs[1]


def test_storage_types_uniforms_and_counted_inputs(oracle, rng):
    i = Expr.var("i")
    assert storage.program == Program(
        [BufferDecl.read("x", 0, DataType.U8), BufferDecl.uniform("coeffs", 1, F32, 2),
         BufferDecl.read("h", 2, DataType.F16, 16), BufferDecl.output("out", 3, DataType.I16, N),
         BufferDecl.output("fo", 4, F32, N)],
        (64, 1, 1),
        [Node.let("i", Expr.invocation_id(0)),
         Node.store("out", i, Expr.sub(Expr.cast(I32, Expr.load("x", i)), Expr.i32(100))),
         Node.store("fo", i, Expr.add(Expr.mul(Expr.load("h", Expr.rem(i, Expr.u32(16))),
                                               Expr.load("coeffs", Expr.u32(0))),
                                      Expr.load("coeffs", Expr.u32(1))))],
        name="storage")
    x = rng.integers(0, 256, N, dtype=np.uint8)
    coeffs = np.array([1.5, -2.0], np.float32)
    h = rng.standard_normal(16).astype(np.float16)
    out, fo = storage(x, coeffs, h, backend=oracle)
    np.testing.assert_array_equal(out, (x.astype(np.int32) - 100).astype(np.int16))
    expected = np.tile(h.astype(np.float32), N // 16 + 1)[:N] * np.float32(1.5) + np.float32(-2.0)
    np.testing.assert_array_equal(fo, expected)
