"""The oracle's resident dispatches work on the handles' own bytes: what that must keep true.

Steps are bound once per (program, handles, config) and run in place with a journal, so these
check the promises that copies used to give for free: a failed dispatch writes nothing (read_write
and output buffers alike), uploads between dispatches are seen, a freed handle is still refused,
and a fixed point runs to the same buffers as a Python loop of single dispatches.
"""

from __future__ import annotations

import numpy as np
import pytest

import vyre
from vyre.driver.errors import DispatchFailed, InvalidHandle
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program

U32 = DataType.U32


@pytest.fixture
def oracle():
    with vyre.acquire("reference") as backend:
        yield backend


def _write_then_spin() -> Program:
    """Stores into ``rw`` and ``out`` and bumps ``rw[0]`` atomically, then loops until the deadline."""
    i = Expr.invocation_id(0)
    return Program(
        [BufferDecl.read_write("rw", 0, U32), BufferDecl.output("out", 1, U32, 8)],
        (8, 1, 1),
        [Node.store("rw", i, i + 100), Node.store("out", i, i + 1),
         Node.let("old", Expr.atomic(AtomicOp.ADD, "rw", Expr.u32(0), Expr.u32(1))),
         Node.loop("k", Expr.u32(0), Expr.u32(1 << 30), [Node.store("rw", Expr.u32(1), Expr.var("k"))])],
        name="write_then_spin",
    )


def _upload(oracle, values: np.ndarray):
    handle = oracle.allocate_resident(values.nbytes)
    oracle.upload_resident(handle, values)
    return handle


def test_a_failed_resident_dispatch_writes_nothing(oracle):
    rw = _upload(oracle, np.arange(8, dtype=np.uint32) * 7)
    out = _upload(oracle, np.full(8, 0xABCD, dtype=np.uint32))
    with pytest.raises(DispatchFailed):
        oracle.dispatch_resident(_write_then_spin(), [rw, out], vyre.DispatchConfig(grid=(1, 1, 1), timeout_s=0.2))
    assert np.array_equal(oracle.download_resident(rw).view(np.uint32), np.arange(8, dtype=np.uint32) * 7)
    assert np.array_equal(oracle.download_resident(out).view(np.uint32), np.full(8, 0xABCD, dtype=np.uint32))


def _add_one() -> Program:
    i = Expr.invocation_id(0)
    return Program([BufferDecl.read("src", 0, U32), BufferDecl.read_write("dst", 1, U32)], (4, 1, 1),
                   [Node.if_(Expr.lt(i, Expr.buf_len("dst")),
                             [Node.store("dst", i, Expr.load("src", i) + Expr.load("dst", i))])],
                   name="add_src")


def test_uploads_between_bound_dispatches_are_seen(oracle):
    src, dst = _upload(oracle, np.ones(6, np.uint32)), _upload(oracle, np.zeros(6, np.uint32))
    step = (_add_one(), [src, dst], vyre.DispatchConfig(elements=6))
    oracle.dispatch_sequence([step])
    oracle.upload_resident(src, np.full(6, 10, np.uint32))
    (data,) = oracle.dispatch_sequence([step, step], reads=[(dst, 0, 24)])
    assert data.view(np.uint32).tolist() == [21] * 6


def test_a_freed_handle_of_a_bound_step_is_refused(oracle):
    src, dst = _upload(oracle, np.ones(6, np.uint32)), _upload(oracle, np.zeros(6, np.uint32))
    step = (_add_one(), [src, dst], vyre.DispatchConfig(elements=6))
    oracle.dispatch_sequence([step])
    oracle.free_resident(src)
    with pytest.raises(InvalidHandle):
        oracle.dispatch_sequence([step])
    with pytest.raises(InvalidHandle):
        oracle.dispatch_resident(*step)
    assert oracle.download_resident(dst).view(np.uint32).tolist() == [1] * 6


def _halve() -> Program:
    """``x[i] = x[i] / 2``; sets the flag while any element is still non-zero afterwards."""
    i = Expr.invocation_id(0)
    return Program([BufferDecl.read_write("x", 0, U32), BufferDecl.read_write("flag", 1, U32, 1)], (32, 1, 1),
                   [Node.if_(Expr.lt(i, Expr.buf_len("x")), [
                       Node.let("h", Expr.load("x", i) >> 1), Node.store("x", i, Expr.var("h")),
                       Node.if_(Expr.ne(Expr.var("h"), Expr.u32(0)),
                                [Node.store("flag", Expr.u32(0), Expr.u32(1))])])],
                   name="halve")


def test_dispatch_until_matches_a_loop_of_dispatches(oracle):
    start = np.array([0, 1, 5, 1000, 2**31, 77], np.uint32)
    x, flag = _upload(oracle, start), oracle.allocate_resident(4)
    steps = [(_halve(), [x, flag], vyre.DispatchConfig(elements=start.size))]
    assert oracle.dispatch_until(steps, flag, 100) == 32  # 2**31 halves to 0 in the 32nd iteration
    assert not oracle.download_resident(x).view(np.uint32).any()
    assert oracle.dispatch_until(steps, flag, 100) == 1
    oracle.upload_resident(x, start)
    assert oracle.dispatch_until(steps, flag, 3) == 3
    assert np.array_equal(oracle.download_resident(x).view(np.uint32), start >> 3)
