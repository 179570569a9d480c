"""One backend used from 8 threads at once: 500 dispatches each, of different programs, all correct.

Each thread has its own program and inputs and cycles through every entry point that shares the
backend's stream and caches: ``dispatch``, a compiled pipeline's ``dispatch`` and
``dispatch_resident``, ``dispatch_sequence`` and ``dispatch_until`` (with graphs on).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from conftest import random_array

from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.reference import run

pytestmark = pytest.mark.gpu

U32 = DataType.U32
THREADS, DISPATCHES = 8, 500
i = Expr.var("i")


def program_for(t: int) -> Program:
    """``x = x * (2t + 1) + (a ^ t)``: a different kernel per thread."""
    return Program(
        [BufferDecl.read("a", 0, U32), BufferDecl.read_write("x", 1, U32)],
        (64 * (1 + t % 4), 1, 1),
        [Node.let("i", Expr.invocation_id(0)),
         Node.store("x", i, Expr.add(Expr.mul(Expr.load("x", i), Expr.u32(2 * t + 1)),
                                     Expr.bitxor(Expr.load("a", i), Expr.u32(t))))],
        name=f"thread{t}")


def countdown() -> Program:
    """``c = c - 1`` while positive; sets the flag when anything changed (a fixed point at zero)."""
    c = Expr.load("c", i)
    return Program(
        [BufferDecl.read_write("c", 0, U32), BufferDecl.read_write("flag", 1, U32)],
        (64, 1, 1),
        [Node.let("i", Expr.invocation_id(0)),
         Node.if_(Expr.gt(c, Expr.u32(0)), [Node.store("c", i, Expr.sub(c, Expr.u32(1))),
                                            Node.store("flag", Expr.u32(0), Expr.u32(1))])],
        name="countdown")


COUNTDOWN = countdown()


def test_eight_threads_share_one_backend(backend, rng, monkeypatch) -> None:
    monkeypatch.setenv("VYRE_CUDA_GRAPHS", "1")
    cases = []
    for t in range(THREADS):
        n = 700 + 97 * t
        a, x = random_array(rng, U32, n), random_array(rng, U32, n)
        cases.append((program_for(t), a, x, run(program_for(t), [a, x])[0]))
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def worker(t: int) -> None:
        program, a, x, expected = cases[t]
        try:
            pipe = backend.compile(program)
            ha, hx = backend.allocate_resident(a.nbytes), backend.allocate_resident(x.nbytes)
            backend.upload_resident(ha, a)
            flag, c = backend.allocate_resident(4), backend.allocate_resident(4 * 64)
            start.wait(timeout=120)
            for k in range(DISPATCHES):
                kind = k % 5
                if kind == 0:
                    out = backend.dispatch(program, [a, x])[0]
                elif kind == 1:
                    out = pipe.dispatch([a, x])[0]
                elif kind == 2:
                    backend.upload_resident(hx, x)
                    pipe.dispatch_resident([ha, hx])
                    out = backend.download_resident(hx).view(np.uint32)
                elif kind == 3:
                    backend.upload_resident(hx, x)
                    raw = backend.dispatch_sequence([(program, [ha, hx])], [(hx, 0, hx.nbytes)])[0]
                    out = raw.view(np.uint32)
                else:
                    start_at = (k + t) % 9
                    backend.upload_resident(c, np.full(64, start_at, np.uint32))
                    steps = [(COUNTDOWN, [c, flag])]
                    assert backend.dispatch_until(steps, flag, 50) == start_at + 1
                    assert not backend.download_resident(c).any()
                    continue
                assert np.array_equal(out, expected), (t, k, kind)
            pipe.close()
            for h in (ha, hx, flag, c):
                backend.free_resident(h)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, repr(errors[0])
