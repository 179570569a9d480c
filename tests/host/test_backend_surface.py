"""``CudaBackend``'s surface is visible: every method is a ``def`` of the class (no CuPy, no GPU needed).

A method attached in ``__init__`` is invisible to readers, IDEs and type checkers, which land on
``Backend``'s stub that raises ``UnsupportedFeature``.
"""

from __future__ import annotations

import ast
import inspect

import pytest

import vyre
from vyre.driver.backend import Backend
from vyre.driver.hooked import OBSERVED, HookedBackend
from vyre.ir.expr import Expr
from vyre.ir.node import Node
from vyre.ir.program import BufferDecl, Program
from vyre.ir.types import DataType
from vyre_cuda.backend import CudaBackend

INHERITED = {"supported_ops"}  # the base's answer (every op) is the cuda backend's
STATE = {"version", "info", "device_id", "lock", "bandwidth_gbps", "runtime", "programs", "host", "residents",
         "inplace", "sequences", "pipelines"}  # what __init__ may set: the parts and their state, no methods


def _public_methods(cls: type) -> list[str]:
    return sorted(n for n, v in vars(cls).items() if not n.startswith("_") and callable(v))


def test_every_backend_method_is_defined_in_the_class_body():
    missing = [n for n in _public_methods(Backend) if n not in vars(CudaBackend) and n not in INHERITED]
    assert not missing, f"CudaBackend inherits the base stubs of {missing}"


@pytest.mark.parametrize("name", [n for n in _public_methods(Backend) if n not in INHERITED])
def test_each_method_takes_the_protocols_arguments(name: str):
    base = list(inspect.signature(getattr(Backend, name)).parameters)
    ours = list(inspect.signature(getattr(CudaBackend, name)).parameters)
    assert ours[:len(base)] == base, f"CudaBackend.{name}{ours} does not start with Backend.{name}{base}"


def test_init_sets_state_only():
    tree = ast.parse(inspect.getsource(CudaBackend))
    init = next(f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    names = set()
    for node in ast.walk(init):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        for target in targets:
            for t in ast.walk(target):
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    names.add(t.attr)
    assert names <= STATE, f"__init__ attaches {sorted(names - STATE)}: define them as methods of the class"
    assert not names & set(dir(CudaBackend)) - {"version"}, "__init__ shadows a method or property of the class"


def _program() -> Program:
    i = Expr.var("i")
    return Program([BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("o", 1, DataType.U32, 4)], (4, 1, 1),
                   [Node.let("i", Expr.invocation_id(0)),
                    Node.if_(Expr.lt(i, Expr.buf_len("o")), Node.store("o", i, Expr.load("a", i)))], name="copy")


class _Listener:
    def __init__(self) -> None:
        self.seen: list[tuple] = []

    @vyre.hookimpl
    def vyre_before_dispatch(self, kind, program, programs, config, grid):
        self.seen.append((kind, program, programs, config, grid))


def test_observed_dispatches_tell_the_hooks_what_they_run():
    """The table-made proxy methods give the hooks the kind, program(s), config and grid of each call."""
    from vyre.driver import registry

    pm = registry.get_plugin_manager()
    listener = _Listener()
    pm.register(listener)
    try:
        raw = vyre.acquire("reference").unwrap()
        hooked = HookedBackend(raw, pm.hook)
        program, config = _program(), vyre.DispatchConfig(grid=(1, 1, 1))
        data = (4 * b"\1\0\0\0",)
        hooked.dispatch(program, data, config=config, stream=None)  # stream None: not passed to the oracle
        a, o = hooked.allocate_resident(16), hooked.allocate_resident(16)
        hooked.upload_resident(a, data[0])
        step = (program, [a, o], config)
        hooked.dispatch_repeated([step], [step], 2)
        hooked.dispatch_until([step], o, 1)
    finally:
        pm.unregister(listener)
    assert [s[0] for s in listener.seen] == ["dispatch", "dispatch_repeated", "dispatch_until"]
    assert listener.seen[0][1:] == (program, (program,), config, (1, 1, 1))
    assert listener.seen[1][1:] == (None, (program, program), None, None)
    assert raw.download_resident(o).view("<u4").tolist() == [1, 1, 1, 1]
    assert set(OBSERVED) <= set(vars(HookedBackend))
