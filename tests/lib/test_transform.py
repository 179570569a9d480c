"""``transform_reduce`` and the ``transform_*_scan`` calls on the oracle against numpy.

Each case is a ``@vyre.func`` with its numpy twin. Integer results and float min/max are
compared exactly with numpy; float64 sums bit for bit with the documented tree order; float32
sums within the ulp bound of ``assert_close_sum`` and bit for bit with the plain call on the
numpy-transformed array (same kernels, same order).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import vyre
from tests.codegen.codegen_support import assemble, needs_ptxas
from tests.lib import expected as E
from tests.lib.test_plan import RecordingBackend
from vyre import lib
from vyre.driver.errors import InvalidProgram
from vyre.frontend.kernel import Func
from vyre.ir import DataType
from vyre.ir.op import Op
from vyre.ir.walk import iter_all_exprs
from vyre.lib._scan import kernels as K
from vyre.lib._scan import lookback
from vyre.lib.monoid import Monoid
from vyre.lib.transform import element_transform, fused

SIZES = [0, 1, 33, 4097, 2**14 + 3, 70_001]  # empty, one, odd, two tiles, many tiles, many look-back tiles


@vyre.func
def square_plus_one(v):
    return v * v + 1.0


@vyre.func
def capped_square(v):
    w = v * v
    if w > 100.0:
        w = vyre.f32(100.0)
    return w


@vyre.func
def mix_bits(v):
    return v ^ (v >> 3)


@vyre.func
def widen_times_three(v):
    return vyre.u64(v) * 3


@vyre.func
def half_as_f64(v):
    return vyre.f64(v) * 0.5


@vyre.func
def signed_byte(v):
    return vyre.i32(v) * 2 - 1


@vyre.func
def odd(v):
    return vyre.u32(v) & 1


@vyre.func
def triple_thrice(v):
    w = v
    for k in range(3):
        w = w * 3 + vyre.i64(k)
    return w


def _triple_thrice(x: np.ndarray) -> np.ndarray:
    w = x.copy()
    for k in range(3):
        w = w * np.int64(3) + np.int64(k)
    return w


with np.errstate(over="ignore", invalid="ignore"):
    CASES: list[tuple[Func, type, Callable[[np.ndarray], np.ndarray], list[str]]] = [
        (square_plus_one, np.float32, lambda x: x * x + np.float32(1.0), ["add", "min", "max"]),
        (capped_square, np.float32, lambda x: np.where(x * x > 100, np.float32(100), x * x), ["add", "max"]),
        (mix_bits, np.uint32, lambda x: x ^ (x >> 3), ["add", "min", "xor"]),
        (mix_bits, np.int32, lambda x: x ^ (x >> 3), ["add", "max", "and"]),
        (widen_times_three, np.uint32, lambda x: x.astype(np.uint64) * np.uint64(3), ["add", "max"]),
        (half_as_f64, np.float32, lambda x: x.astype(np.float64) * 0.5, ["add", "min"]),
        (signed_byte, np.int8, lambda x: x.astype(np.int32) * 2 - 1, ["add", "min", "or"]),
        (odd, np.uint16, lambda x: x.astype(np.uint32) & 1, ["add"]),
        (triple_thrice, np.int64, _triple_thrice, ["add", "xor"]),
    ]
IDS = [f"{fn.name}-{np.dtype(dt).name}" for fn, dt, _, _ in CASES]


def _data(rng: np.random.Generator, dtype: type, n: int) -> np.ndarray:
    if np.dtype(dtype).itemsize < 4:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, n, endpoint=True).astype(dtype)
        if n:
            x[rng.choice(n, min(n, 4), replace=False)] = [info.min, info.max, 0, 1][:min(n, 4)]
        return x
    return E.data(rng, dtype, n, finite=True)


def _model(fx: np.ndarray, op: str, kind: str, init: object = None) -> np.ndarray:
    if kind == "reduce":
        return np.asarray([E.reduce(fx, op)], fx.dtype)
    return E.inclusive_scan(fx, op) if kind == "inclusive" else E.exclusive_scan(fx, op, init)


def _plain(fx: np.ndarray, op: str, kind: str, backend: object) -> np.ndarray:
    if kind == "reduce":
        return np.asarray([lib.reduce(fx, op, backend=backend)])
    scan = lib.inclusive_scan if kind == "inclusive" else lib.exclusive_scan
    return scan(fx, op, backend=backend)


def _fused(x: np.ndarray, fn: object, op: str, kind: str, backend: object) -> np.ndarray:
    if kind == "reduce":
        return np.asarray([lib.transform_reduce(x, fn, op, backend=backend)])
    scan = lib.transform_inclusive_scan if kind == "inclusive" else lib.transform_exclusive_scan
    return scan(x, fn, op, backend=backend)


@pytest.mark.parametrize("fn, dtype, twin, ops", CASES, ids=IDS)
@pytest.mark.parametrize("n", SIZES)
def test_against_numpy(backend, rng, fn, dtype, twin, ops, n):
    x = _data(rng, dtype, n)
    with np.errstate(over="ignore", invalid="ignore"):
        fx = twin(x)
    for op in ops:
        for kind in ("reduce", "inclusive", "exclusive"):
            got = _fused(x, fn, op, kind, backend)
            assert got.dtype == fx.dtype, (op, kind)
            if op == "add" and fx.dtype == np.float32:
                E.assert_close_sum(got if kind != "reduce" else got[0], fx, _model(fx, op, kind)
                                   if kind != "reduce" else _model(fx, op, kind)[0])
                E.assert_same_bits(got, _plain(fx, op, kind, backend))  # the plain call's order, bit for bit
            else:
                E.assert_same_bits(got, _model(fx, op, kind))


@pytest.mark.parametrize("n", [1, 4097, 70_001])
def test_init_has_the_result_type(backend, rng, n):
    x = E.data(rng, np.uint32, n)
    fx = x.astype(np.uint64) * np.uint64(3)
    got = lib.transform_exclusive_scan(x, widen_times_three, "add", 2**40 + 1, backend=backend)
    E.assert_same(got, E.exclusive_scan(fx, "add", 2**40 + 1))
    got = lib.transform_inclusive_scan(x, widen_times_three, "max", init=2**63, backend=backend)
    E.assert_same(got, np.maximum.accumulate(np.maximum(fx, np.uint64(2**63))))


def test_float_edges_through_the_function(backend, rng):
    """NaN, infinities, signed zeros and subnormals pass through ``fn`` as numpy computes them."""
    x = rng.choice(E.F32_EDGES, 5001)
    with np.errstate(over="ignore", invalid="ignore"):
        fx = x * x + np.float32(1.0)
    for op in ("min", "max"):
        E.assert_same_bits(np.asarray([lib.transform_reduce(x, square_plus_one, op, backend=backend)]),
                           np.asarray([E.reduce(fx, op)]))
    E.assert_same_bits(lib.transform_inclusive_scan(x, square_plus_one, backend=backend),
                       lib.inclusive_scan(fx, backend=backend))


@pytest.mark.parametrize("n", [4097, 70_001])
@pytest.mark.parametrize("call", ["reduce", "inclusive", "exclusive"])
def test_one_pass_same_steps_as_the_plain_call(rng, n, call):
    """The fused call runs exactly the steps (grids, buffers) of the plain call on ``f(x)``; only
    the kernels that read ``x`` differ, and they load each element once."""
    be = RecordingBackend()
    x = rng.integers(0, 2**16, n).astype(np.uint16)
    _fused(x, odd, "add", call, be)
    _plain((x & 1).astype(np.uint32), "add", call, be)
    fused_steps, plain_steps = be.sequences
    assert [c.grid for _, _, c in fused_steps] == [c.grid for _, _, c in plain_steps]
    changed = [(f, p) for (f, _, _), (p, _, _) in zip(fused_steps, plain_steps) if f is not p]
    assert changed
    for f, p in changed:
        loads = [e for e in iter_all_exprs(f.body) if e.op is Op.LOAD and e.name == "x"]
        plain_loads = [e for e in iter_all_exprs(p.body) if e.op is Op.LOAD and e.name == "x"]
        assert len(loads) == len(plain_loads)
        assert next(b for b in f.buffers if b.name == "x").dtype is DataType.U16


def test_plain_kernels_are_untouched():
    m = Monoid("add", DataType.U32)
    program = K.reduce_tiles(m, K.REDUCE_ITEMS, 0)
    assert fused(program, None) is program
    t = element_transform(odd, DataType.U16)
    assert fused(program, t) is fused(program, t)
    assert fused(program, t).name == "lib_reduce_add_u32_of_u16_odd"


@vyre.func
def two_arguments(a, b):
    return a + b


@vyre.func
def comparison(v):
    return v > 0.0


@vyre.func
def with_barrier(v):
    vyre.barrier()
    return v


@vyre.func
def with_lane(v):
    return v + vyre.lid()


@vyre.func
def mixed_types(v):
    return v + 1.5


def plain_function(v):
    return v


@pytest.mark.parametrize("fn, dtype, says", [
    (plain_function, np.float32, "not a @vyre.func"),
    (lambda v: v, np.float32, "not a @vyre.func"),
    (two_arguments, np.float32, "takes 2 parameters"),
    (comparison, np.float32, "returns bool"),
    (with_barrier, np.float32, "pure function"),
    (with_lane, np.uint32, "pure function"),
    (mixed_types, np.uint32, "does not lower"),
])
def test_bad_functions_are_refused(backend, fn, dtype, says):
    x = np.ones(10, dtype)
    for call in (lambda: lib.transform_reduce(x, fn, backend=backend),
                 lambda: lib.transform_inclusive_scan(x, fn, backend=backend),
                 lambda: lib.transform_exclusive_scan(x, fn, backend=backend)):
        with pytest.raises(InvalidProgram, match=says) as info:
            call()
        assert "Fix: " in str(info.value)


def test_bad_arguments_are_refused(backend):
    with pytest.raises(InvalidProgram, match="bitwise"):
        lib.transform_reduce(np.ones(4, np.float32), square_plus_one, "xor", backend=backend)
    with pytest.raises(InvalidProgram, match="init"):
        lib.transform_exclusive_scan(np.ones(4, np.uint32), mix_bits, "add", -1, backend=backend)
    with pytest.raises(InvalidProgram):
        lib.transform_reduce(np.ones(4, np.float16), square_plus_one, backend=backend)
    with pytest.raises(InvalidProgram, match="unknown op"):
        lib.transform_reduce(np.ones(4, np.uint32), mix_bits, "mul", backend=backend)


@needs_ptxas
def test_fused_kernels_assemble_for_sm90(rng):
    from vyre_cuda import emit_ptx

    be = RecordingBackend()
    for fn, dtype, _, ops in CASES:
        for n in (33, 70_001):
            x = _data(rng, dtype, n)
            for op in ops:
                for kind in ("reduce", "inclusive", "exclusive"):
                    _fused(x, fn, op, kind, be)
    programs = {p.name: p for steps in be.sequences for p, _, _ in steps if "_of_" in (p.name or "")}
    assert len(programs) > 20
    failures = assemble({name: emit_ptx(p, sm="90") for name, p in programs.items()}, "90")
    assert not failures, "\n".join(failures[:20])


def test_resident_input(backend, rng):
    """A ``ResidentArray`` is read in place; scans give a new ``ResidentArray``."""
    x = E.data(rng, np.uint32, 5003)
    handle = backend.allocate_resident(x.nbytes)
    backend.upload_resident(handle, x)
    try:
        r = lib.ResidentArray(handle, x.dtype.str, x.size)
        assert lib.transform_reduce(r, widen_times_three, backend=backend) == \
            (x.astype(np.uint64) * np.uint64(3)).sum(dtype=np.uint64)
        out = lib.transform_inclusive_scan(r, mix_bits, backend=backend)
        assert isinstance(out, lib.ResidentArray)
        got = backend.download_resident(out.handle, 0, x.nbytes).view(np.uint32)
        E.assert_same(got, np.cumsum(x ^ (x >> 3), dtype=np.uint32))
        backend.free_resident(out.handle)
    finally:
        backend.free_resident(handle)


def test_a_look_back_that_runs_out_folds_transformed_input(rng, monkeypatch):
    """With no look-back trips (``spin=(1, 0)``) every tile but the first folds the input below it
    itself: the fold loads ``x`` too, so it applies the function as well."""
    import functools

    from vyre.reference import ReferenceBackend

    monkeypatch.setattr(lookback, "scan_lookback", functools.partial(lookback.scan_lookback.__wrapped__, spin=(1, 0)))
    x = rng.integers(0, 2**16, 5 * 8192 + 77).astype(np.uint16)
    be = ReferenceBackend()
    E.assert_same(lib.transform_inclusive_scan(x, odd, backend=be), np.cumsum(x & 1, dtype=np.uint32))
    E.assert_same(lib.transform_exclusive_scan(x, odd, "add", 3, backend=be),
                  E.exclusive_scan((x & 1).astype(np.uint32), "add", 3))
