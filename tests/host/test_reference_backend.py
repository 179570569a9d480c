"""The reference oracle as a backend: dispatch, capabilities and host-emulated resident buffers."""

from __future__ import annotations

import numpy as np
import pytest

import vyre
import vyre.reference
from vyre import DispatchConfig
from vyre.driver.backend import Resident
from vyre.driver.errors import InvalidHandle, InvalidProgram, ValidationError
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.reference import ReferenceBackend

I = Expr.invocation_id(0)
XOR = Program([BufferDecl.read_write("a", 0, DataType.U32), BufferDecl.read("b", 1, DataType.U32)], (64, 1, 1),
              [Node.store("a", I, Expr.bitxor(Expr.load("a", I), Expr.load("b", I)))], name="xor")
# sets flag[0] while any a[i] > 0 and decrements it: converges after max(a) + 1 rounds
COUNTDOWN = Program(
    [BufferDecl.read_write("a", 0, DataType.U32), BufferDecl.read_write("flag", 1, DataType.U32, 1)], (64, 1, 1),
    [Node.if_(Expr.gt(Expr.load("a", I), Expr.u32(0)), [
        Node.store("a", I, Expr.sub(Expr.load("a", I), Expr.u32(1))),
        Node.let("old", Expr.atomic(AtomicOp.OR, "flag", Expr.u32(0), Expr.u32(1))),
    ])], name="countdown")
RNG = np.random.default_rng(11)


@pytest.fixture
def backend():
    with ReferenceBackend() as b:
        yield b


def test_run_and_dispatch_agree_with_numpy(backend):
    a, b = RNG.integers(0, 2**32, 300, dtype=np.uint32), RNG.integers(0, 2**32, 300, dtype=np.uint32)
    (out,) = vyre.reference.run(XOR, [a, b])
    assert np.array_equal(out, a ^ b)
    assert np.array_equal(backend.dispatch(XOR, [a.tobytes(), b])[0], a ^ b)
    timed = backend.dispatch_timed(XOR, [a, b])
    assert np.array_equal(timed.outputs[0], a ^ b) and timed.wall_ns > 0
    assert np.array_equal(backend.dispatch_async(XOR, [a, b]).result()[0], a ^ b)
    assert np.array_equal(backend.compile(XOR).dispatch_batch([[a, b]])[0][0], a ^ b)
    assert backend.metrics()["reference_dispatches"] == 4


def test_dispatch_validates_first(backend):
    bad = Program([BufferDecl.read("a", 0, DataType.U32)], (64, 1, 1), [Node.store("a", I, Expr.u32(1))])
    with pytest.raises(ValidationError):
        backend.dispatch(bad, [b"\0" * 4])


def test_capabilities_and_profile(backend):
    assert backend.id == "reference" and backend.version == vyre.__version__
    assert backend.supports_subgroup_ops() and backend.supports_f16() and backend.supports_bf16()
    assert "reference oracle" in backend.device_profile()["name"]


def test_resident_round_trip_with_offsets(backend):
    h = backend.allocate_resident(16)
    backend.upload_resident(h, b"\1\2\3\4", offset=4)
    assert backend.download_resident(h).tolist() == [0] * 4 + [1, 2, 3, 4] + [0] * 8
    assert backend.download_resident(h, 5, 2).tolist() == [2, 3]
    with pytest.raises(InvalidHandle, match="outside .*the handle's 16 bytes"):
        backend.upload_resident(h, b"\0" * 8, offset=12)
    with pytest.raises(InvalidHandle, match="outside"):
        backend.download_resident(h, 10, 8)


def test_freed_foreign_and_forged_handles_are_invalid(backend):
    h = backend.allocate_resident(8)
    forged = Resident(h.id, h.nbytes, h.owner)
    with pytest.raises(InvalidHandle):
        backend.download_resident(forged)
    with ReferenceBackend() as other:
        with pytest.raises(InvalidHandle):
            other.upload_resident(h, b"\0")
    backend.free_resident(h)
    for call in (lambda: backend.download_resident(h), lambda: backend.free_resident(h),
                 lambda: backend.dispatch_resident(XOR, [h, h]), lambda: backend.upload_resident(h, b"x")):
        with pytest.raises(InvalidHandle, match="Fix:"):
            call()


def test_dispatch_resident_and_sequences_keep_results_on_the_handles(backend):
    a, b = RNG.integers(0, 2**32, 100, dtype=np.uint32), RNG.integers(0, 2**32, 100, dtype=np.uint32)
    ha, hb = backend.allocate_resident(a.nbytes), backend.allocate_resident(b.nbytes)
    backend.upload_resident(ha, a)
    backend.upload_resident(hb, b)
    backend.dispatch_resident(XOR, [ha, hb])
    assert np.array_equal(backend.download_resident(ha).view(np.uint32), a ^ b)
    (read,) = backend.dispatch_sequence([(XOR, [ha, hb], None), (XOR, [ha, hb])], reads=[(ha, 0, 40)])
    assert np.array_equal(read.view(np.uint32), (a ^ b)[:10])
    (read,) = backend.dispatch_repeated([(XOR, [ha, hb])], [(XOR, [ha, hb])], 2, reads=[(ha, 0, a.nbytes)])
    assert np.array_equal(read.view(np.uint32), a)  # three more xors with b
    with pytest.raises(InvalidProgram, match="needs 2 handles"):
        backend.dispatch_resident(XOR, [ha])


def test_a_written_buffer_cannot_share_its_handle(backend):
    a = RNG.integers(0, 2**32, 100, dtype=np.uint32)
    ha = backend.allocate_resident(a.nbytes)
    backend.upload_resident(ha, a)
    with pytest.raises(InvalidHandle, match="also to buffer .*Fix: pass a separate handle"):
        backend.dispatch_resident(XOR, [ha, ha])
    assert np.array_equal(backend.download_resident(ha).view(np.uint32), a)  # nothing was written
    backend.free_resident(ha)


def test_dispatch_until_resets_the_flag_and_counts_iterations(backend):
    a = np.array([3, 0, 5, 1], dtype=np.uint32)
    ha, flag = backend.allocate_resident(a.nbytes), backend.allocate_resident(4)
    backend.upload_resident(ha, a)
    assert backend.dispatch_until([(COUNTDOWN, [ha, flag], DispatchConfig(elements=4))], flag, 100) == 6
    assert not backend.download_resident(ha).any()
    backend.upload_resident(ha, a)
    assert backend.dispatch_until([(COUNTDOWN, [ha, flag])], flag, 2) == 2


def test_output_buffers_are_zeroed_on_resident_dispatch(backend):
    p = Program([BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("o", 1, DataType.U32, 4)], (4, 1, 1),
                [Node.store("o", Expr.u32(0), Expr.u32(9))])
    ha, ho = backend.allocate_resident(16), backend.allocate_resident(16)
    backend.upload_resident(ho, np.full(4, 7, np.uint32))
    backend.dispatch_resident(p, [ha, ho])
    assert backend.download_resident(ho).view(np.uint32).tolist() == [9, 0, 0, 0]


def test_shutdown_frees_every_handle():
    b = ReferenceBackend()
    h = b.allocate_resident(4)
    b.shutdown()
    with pytest.raises(InvalidHandle):
        b.download_resident(h)
