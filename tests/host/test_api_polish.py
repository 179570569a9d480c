"""API polish: py.typed, docstrings on every public constructor and backend method, readable reprs."""

from __future__ import annotations

import inspect
import pydoc
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import pytest

import vyre
from vyre.driver.backend import Backend, BackendProtocol, CompiledPipeline, PendingDispatch
from vyre.driver.errors import InvalidProgram
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ir.generate import generate_program
from vyre.ir.walk import iter_nodes, node_exprs
from vyre.reference.backend import ReferenceBackend

ROOT = Path(__file__).resolve().parents[2]
NAMES = {"Expr": Expr, "Node": Node, "AtomicOp": AtomicOp, "DataType": DataType, "BufferDecl": BufferDecl}


def test_both_packages_ship_py_typed():
    pyproject = (ROOT / "pyproject.toml").read_text()
    data = pyproject[pyproject.index("[tool.setuptools.package-data]"):].split("\n\n")[0]
    for package in ("vyre", "vyre_cuda"):
        assert (ROOT / package / "py.typed").is_file()
        assert f'{package} = ["py.typed"' in data
    assert 'vyre = ["py.typed", "*.pyi"]' in data and (ROOT / "vyre" / "__init__.pyi").is_file()  # the typed view


def _constructors(cls: type) -> list[str]:
    return [n for n, v in vars(cls).items() if isinstance(v, staticmethod) and not n.startswith("_")]


@pytest.mark.parametrize("cls", [Expr, Node, BufferDecl], ids=lambda c: c.__name__)
def test_every_public_constructor_has_a_docstring(cls):
    names = _constructors(cls)
    assert len(names) >= 5
    for name in names:
        doc = inspect.getdoc(getattr(cls, name))
        assert doc and len(doc) > 15, f"{cls.__name__}.{name} has no real docstring"


def test_every_backend_method_has_a_docstring_and_help_shows_it():
    methods = [n for n, v in vars(Backend).items() if callable(v) and not n.startswith("_")]
    protocol = [n for n, v in vars(BackendProtocol).items() if callable(v) and not n.startswith("_")]
    for name in methods + protocol + ["done", "result"]:
        owner = Backend if name in methods else BackendProtocol if name in protocol else PendingDispatch
        assert inspect.getdoc(getattr(owner, name)), f"{owner.__name__}.{name}"
    for name in ("dispatch", "dispatch_resident", "dispatch_batch"):
        assert inspect.getdoc(getattr(CompiledPipeline, name)), name
    backend = vyre.acquire("reference")  # the hooked proxy users get
    for target in (backend.dispatch, backend.dispatch_sequence, backend.upload_resident, backend.unwrap().dispatch,
                   backend.compile(Program([], (1, 1, 1), [])).dispatch):
        text = pydoc.render_doc(target, renderer=pydoc.plaintext)
        assert "# ----" not in text and inspect.getdoc(target).splitlines()[0] in text, text


def test_literal_reprs_name_the_constructors():
    assert repr(Expr.u32(1)) == "Expr.u32(1)"
    assert repr(Expr.i32(-7)) == "Expr.i32(-7)"
    assert repr(Expr.f32(0.1)) == "Expr.f32(0.1)" and repr(Expr.f32(-0.0)) == "Expr.f32(-0.0)"
    assert repr(Expr.f32(float("inf"))) == "Expr.f32_from_bits(0x7F800000)"
    assert repr(Expr.bool(True)) == "Expr.bool(True)"
    assert repr(Expr.add(Expr.var("x"), Expr.u32(2))) == "Expr.add(Expr.var('x'), Expr.u32(2))"
    assert repr(Node.let("x", Expr.u32(1))) == "Node.let('x', Expr.u32(1))"
    assert repr(BufferDecl.workgroup("t", 64, DataType.F32)) == "BufferDecl.workgroup('t', 64, DataType.F32)"


@pytest.mark.parametrize("seed", range(25))
def test_reprs_evaluate_back_to_equal_values(seed):
    program = generate_program(seed)
    for decl in program.buffers:
        assert eval(repr(decl), NAMES) == decl
    for node in iter_nodes(program.body):
        assert eval(repr(node), NAMES) == node
        for e in node_exprs(node):
            assert eval(repr(e), NAMES) == e
    bits = np.random.default_rng(seed).integers(0, 2**32, 200, dtype=np.uint32)
    for b in bits.tolist():
        assert eval(repr(Expr.f32_from_bits(b)), NAMES) == Expr.f32_from_bits(b)


def test_backend_and_pending_dispatch_reprs():
    program = Program([BufferDecl.output("o", 0, DataType.U32, 4)], (4, 1, 1), [], name="p")
    with ReferenceBackend() as backend:
        assert repr(backend) == f"ReferenceBackend(id='reference', version={vyre.__version__!r})"
        pending = backend.dispatch_async(program, [])  # runs on a worker thread: running or done at first
        assert repr(pending) in ("PendingDispatch(running)", "PendingDispatch(done)")
        pending.result(timeout=30)
        assert repr(pending) == "PendingDispatch(done)"
        failed: Future = Future()
        failed.set_exception(InvalidProgram("bad input", "pass a good one."))
        assert repr(PendingDispatch(failed)) == "PendingDispatch(failed: InvalidProgram)"
        assert repr(backend.compile(program)) == f"CompiledPipeline(program='p', backend={backend!r})"
    assert repr(vyre.acquire("reference")).startswith("HookedBackend(ReferenceBackend(id='reference'")


def test_workgroup_takes_keywords_and_refuses_the_other_order_with_a_fix():
    assert BufferDecl.workgroup("t", dtype=DataType.U32, count=8) == BufferDecl.workgroup("t", 8, DataType.U32)
    assert BufferDecl.workgroup(name="t", count=8, dtype=DataType.U32) == BufferDecl.workgroup("t", 8, DataType.U32)
    with pytest.raises(TypeError, match=r"takes \(name, count, dtype\).*Fix: write BufferDecl.workgroup\('t', "
                                        r"count=8, dtype=DataType.U32\)"):
        BufferDecl.workgroup("t", DataType.U32, 8)
    assert BufferDecl.read(name="a", binding=0, dtype=DataType.U32, count=4).count == 4


def test_pending_dispatch_errors_surface_at_the_call_or_in_result():
    loop = Program([BufferDecl.read_write("a", 0, DataType.U32)], (1, 1, 1),
                   [Node.loop("k", Expr.u32(0), Expr.u32(0xFFFFFFFF), [
                       Node.store("a", Expr.u32(0), Expr.add(Expr.load("a", Expr.u32(0)), Expr.var("k")))])])
    with ReferenceBackend() as backend:
        with pytest.raises(InvalidProgram):  # bad inputs: checked in the caller's thread, as on cuda
            backend.dispatch_async(Program([BufferDecl.read("a", 0, DataType.U32)], (1, 1, 1), []), [])
        pending = backend.dispatch_async(loop, [np.zeros(1, np.uint32)], vyre.DispatchConfig(timeout_s=0.2))
        with pytest.raises(vyre.errors.DispatchFailed):  # a failure while running: raised by result()
            pending.result(timeout=30)
