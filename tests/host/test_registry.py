"""Plugin discovery through entry points, backend selection by rank, and dispatch hooks.

The discovery tests install real distributions (a throwaway fake-GPU plugin, plugins/vyre-trace
and plugins/vyre-ops-bits) with pip into one temporary venv that sees the installed project
(``--system-site-packages``), then check behaviour in subprocesses run by that venv's python.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import textwrap
import timeit
from importlib import metadata
from pathlib import Path

import pytest

import vyre
from vyre.driver import registry
from vyre.driver.backend import Backend
from vyre.driver.errors import BackendUnavailable
from vyre.driver.hooked import HookedBackend
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

ROOT = Path(__file__).resolve().parents[2]

FAKE_PLUGIN = '''
import os
import numpy as np
import vyre
from vyre.driver.backend import Backend, CompiledPipeline
from vyre.driver.registry import BackendRegistration


class FakeBackend(Backend):
    """Answers every dispatch entry point trivially, so only the host's behaviour is tested."""

    def __init__(self, id, device=None):
        self.id, self.version, self.device = id, "9.9", device

    def dispatch(self, program, inputs, config=None):
        return [np.zeros(1, np.uint32)]

    def allocate_resident(self, nbytes):
        return object()

    def dispatch_resident(self, program, handles, config=None):
        return None

    def dispatch_sequence(self, steps, reads=()):
        return []

    def dispatch_repeated(self, prefix, repeated, count, reads=()):
        return []

    def dispatch_until(self, steps, flag_handle, max_iterations):
        return 1


def broken(device=None):
    raise RuntimeError("no fake device here")


def ok(device=None):
    if os.environ.get("FAKE_OK_FAIL"):
        raise RuntimeError("fake-ok disabled by FAKE_OK_FAIL")
    return FakeBackend("fake-ok", device)


def late(device=None):
    if os.environ.get("FAKE_OK_FAIL"):
        raise RuntimeError("fake-late disabled too")
    return FakeBackend("fake-late", device)


@vyre.hookimpl
def vyre_register_backends():
    return [
        BackendRegistration("fake-late", 3, late, version="3.0"),
        BackendRegistration("fake-broken", 1, broken, version="1.0"),
        BackendRegistration("fake-meta", 0, ok, dispatches=False),
        BackendRegistration("fake-ok", 2, ok, version="2.0"),
    ]
'''

FAKE_PYPROJECT = '''
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "vyre-fakegpu"
version = "0.0.1"

[project.entry-points.vyre]
fakegpu = "vyre_fakegpu"

[tool.setuptools]
py-modules = ["vyre_fakegpu"]
'''


def _project_installed() -> bool:
    try:
        eps = metadata.entry_points(group="vyre")
    except Exception:
        return False
    return any(ep.name == "reference" for ep in eps)


def _can_build_without_isolation() -> bool:
    """setuptools >= 70.1 builds wheels by itself; older ones need the ``wheel`` package."""
    try:
        import setuptools
    except ImportError:
        return False
    version = tuple(int(p) for p in setuptools.__version__.split(".")[:2] if p.isdigit())
    if version >= (70, 1):
        return True
    try:
        import wheel  # noqa: F401
    except ImportError:
        return False
    return True


def skip_unless_plugins_can_be_installed() -> None:
    """Skip the calling test (or fixture) when plugin distributions cannot be built and installed here."""
    if not _project_installed():
        pytest.skip("the project is not installed (run: python3 -m pip install -e '.[test]')")
    if not _can_build_without_isolation():
        pytest.skip("building the plugin distributions needs setuptools>=70.1 or wheel (in the 'test' extra)")


def venv_with(tmp: Path, sources: list[Path]) -> Path:
    """The python of a new venv in ``tmp`` that sees this environment and has ``sources`` pip-installed."""
    env_dir = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    _see_this_environment(python)
    # pip from this environment (visible through the .pth above) installs into the venv
    result = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                             "--disable-pip-version-check", *map(str, sources)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return python


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A venv that sees the installed project and has the three plugin distributions installed."""
    skip_unless_plugins_can_be_installed()
    tmp = tmp_path_factory.mktemp("plugins")
    fake = tmp / "vyre-fakegpu"
    fake.mkdir()
    (fake / "pyproject.toml").write_text(FAKE_PYPROJECT)
    (fake / "vyre_fakegpu.py").write_text(FAKE_PLUGIN)
    sources = [fake]
    for pack in ("vyre-trace", "vyre-ops-bits"):  # build from copies: pip builds in the source tree
        sources.append(Path(shutil.copytree(ROOT / "plugins" / pack, tmp / pack)))
    return venv_with(tmp, sources)


def _see_this_environment(python: Path) -> None:
    """Make the venv see this interpreter's site-packages, .pth files (editable installs) included.

    ``--system-site-packages`` alone is not enough when this interpreter is itself a venv: the new
    venv would see the base installation, not this environment.
    """
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    dirs = [d for d in site.getsitepackages() if Path(d).is_dir()]
    if site.ENABLE_USER_SITE and Path(site.getusersitepackages()).is_dir():
        dirs.append(site.getusersitepackages())
    Path(purelib, "_vyre_test_parent_env.pth").write_text(f"import site; list(map(site.addsitedir, {dirs!r}))\n")


def run_in(python: Path, code: str, **env: str) -> dict:
    """Run ``code`` in the venv; it prints one JSON object as its last line."""
    full_env = {**os.environ, "VYRE_DISABLE_PLUGINS": "cuda", "PYTHONPATH": str(ROOT), **env}  # this checkout
    if "VYRE_BACKEND" not in env:
        full_env.pop("VYRE_BACKEND", None)
    result = subprocess.run([str(python), "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            env=full_env, cwd=ROOT.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    out["stderr"] = result.stderr
    return out


def test_plugins_are_discovered_through_entry_points_and_listed_by_rank(venv):
    out = run_in(venv, """
        import json, vyre
        print(json.dumps({"rows": [list(b) for b in vyre.registered_backends()]}))
    """)
    rows = out["rows"]
    assert [r[0] for r in rows] == ["fake-meta", "fake-broken", "fake-ok", "fake-late", "reference"]
    assert rows[2] == ["fake-ok", 2, True, "2.0", "vyre-fakegpu"]
    assert rows[0][2] is False
    assert rows[-1][:3] == ["reference", 900, True] and rows[-1][4] == "vyre-cuda"


def test_lowest_rank_that_starts_wins_and_failing_factories_are_skipped(venv):
    out = run_in(venv, """
        import json, vyre
        b = vyre.acquire()
        print(json.dumps({"id": b.id, "device": b.device}))
    """)
    assert out == {"id": "fake-ok", "device": None, "stderr": ""}


def test_an_id_or_VYRE_BACKEND_selects_exactly_that_backend_and_device(venv):
    code = """
        import json, vyre
        b = vyre.acquire(%s)
        print(json.dumps({"id": b.id, "device": getattr(b, "device", None)}))
    """
    assert run_in(venv, code % "'fake-late:3'")["device"] == 3
    assert run_in(venv, code % "", VYRE_BACKEND="fake-late")["id"] == "fake-late"
    assert run_in(venv, code % "'reference'")["id"] == "reference"


def test_a_named_backend_that_cannot_start_says_why_without_substitute(venv):
    out = run_in(venv, """
        import json, vyre
        errors = {}
        for spec in ("fake-broken", "nosuch", "fake-meta", "fake-ok:x"):
            try:
                vyre.acquire(spec)
            except vyre.errors.BackendUnavailable as exc:
                errors[spec] = str(exc)
        print(json.dumps(errors))
    """)
    assert "could not start: RuntimeError: no fake device here" in out["fake-broken"]
    assert "no backend 'nosuch' is registered" in out["nosuch"]
    assert "does not dispatch" in out["fake-meta"]
    assert "not a device number" in out["fake-ok:x"]
    assert all("Fix:" in out[k] for k in ("fake-broken", "nosuch", "fake-meta", "fake-ok:x"))


def test_when_all_fail_the_error_lists_each_failure_and_skips_the_oracle(venv):
    out = run_in(venv, """
        import json, vyre
        try:
            vyre.acquire()
            print(json.dumps({"error": None}))
        except vyre.errors.BackendUnavailable as exc:
            print(json.dumps({"error": str(exc)}))
    """, FAKE_OK_FAIL="1")
    error = out["error"]
    for part in ("fake-broken: ", "no fake device here", "fake-ok: ", "FAKE_OK_FAIL", "fake-late: ", "Fix:"):
        assert part in error
    assert "reference:" not in error


def test_allow_reference_falls_back_to_the_oracle_and_says_so_once(venv):
    out = run_in(venv, """
        import json, vyre
        ids = [vyre.acquire(allow_reference=True).id for _ in range(3)]
        print(json.dumps({"ids": ids}))
    """, FAKE_OK_FAIL="1")
    assert out["ids"] == ["reference"] * 3
    assert out["stderr"].count("running on the CPU reference oracle") == 1


def test_disabled_plugins_are_not_loaded(venv):
    out = run_in(venv, """
        import json, vyre
        print(json.dumps({"ids": [b.id for b in vyre.registered_backends()]}))
    """, VYRE_DISABLE_PLUGINS="cuda,fakegpu")
    assert out["ids"] == ["reference"]


def test_the_trace_wrapper_observes_every_dispatch_entry_point(venv):
    out = run_in(venv, """
        import json, vyre, vyre_trace
        from vyre.ir import BufferDecl, DataType, Expr, Node, Program
        p = Program([BufferDecl.read_write("a", 0, DataType.U32)], (1, 1, 1),
                    [Node.store("a", Expr.u32(0), Expr.u32(1))], name="one")
        b = vyre.acquire("fake-ok")
        h = b.allocate_resident(4)
        b.dispatch(p, [b"1234"]); b.dispatch_async(p, [b"1234"]).result(); b.dispatch_timed(p, [b"1234"])
        b.dispatch_resident(p, [h]); b.dispatch_sequence([(p, [h], None)]); b.dispatch_repeated([], [(p, [h], None)], 2)
        b.dispatch_until([(p, [h], None)], h, 5)
        pipe = b.compile(p); pipe.dispatch([b"1234"]); pipe.dispatch_resident([h]); pipe.dispatch_batch([[b"1234"]])
        b.metrics(); b.supported_ops()  # not dispatches: not traced
        print(json.dumps({"kinds": [r.kind for r in vyre_trace.records()],
                          "programs": sorted({p for r in vyre_trace.records() for p in r.programs}),
                          "backends": sorted({r.backend for r in vyre_trace.records()})}))
    """, VYRE_TRACE="1")
    assert out["kinds"] == ["dispatch", "dispatch_async", "dispatch_timed", "dispatch_resident", "dispatch_sequence",
                            "dispatch_repeated", "dispatch_until", "pipeline.dispatch", "pipeline.dispatch_resident",
                            "pipeline.dispatch_batch"]
    assert out["programs"] == ["one"] and out["backends"] == ["fake-ok"]
    assert out["stderr"].count("vyre-trace: fake-ok") == 10


def test_the_trace_plugin_registers_no_hook_when_tracing_is_off(venv):
    out = run_in(venv, """
        import json, vyre
        from vyre.driver.registry import get_plugin_manager
        hook = get_plugin_manager().hook
        print(json.dumps({"impls": len(hook.vyre_after_dispatch.get_hookimpls()),
                          "loaded": get_plugin_manager().has_plugin("trace")}))
    """, VYRE_TRACE="0")
    assert out["impls"] == 0 and out["loaded"]


def test_op_pack_ops_are_discovered_and_run_on_the_oracle(venv):
    out = run_in(venv, """
        import json
        import numpy as np
        import vyre.reference
        from vyre.ir import BufferDecl, DataType, Expr, Node, Program
        from vyre.ops import get_op, registered_ops
        i = Expr.invocation_id(0)
        x = Expr.load("a", i)
        p = Program([BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("o", 1, DataType.U32, 3)], (3, 1, 1),
                    [Node.store("o", i, Expr.bitxor(Expr.call("bits.parity", x), Expr.call("bits.bswap32", x)))])
        (o,) = vyre.reference.run(p, [np.array([7, 0x01020304, 0], np.uint32)])
        print(json.dumps({"ops": sorted(k for k in registered_ops() if k.startswith("bits.")),
                          "composed": get_op("bits.parity").expand is not None,
                          "primitive": get_op("bits.bswap32").reference is not None, "out": o.tolist()}))
    """)
    assert out["ops"] == ["bits.bswap32", "bits.lowest_set", "bits.parity"]
    assert out["composed"] and out["primitive"]
    assert out["out"] == [0x07000000 ^ 1, 0x04030201 ^ 1, 0]


# ---- in-process: the hooked proxy -------------------------------------------------------------------
class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    @vyre.hookimpl
    def vyre_before_dispatch(self, backend_id, kind, program):
        self.calls.append(("before", backend_id, kind, program.name if program else None))

    @vyre.hookimpl
    def vyre_after_dispatch(self, kind, error, result, duration_ns):
        self.calls.append(("after", kind, type(error).__name__ if error else None, duration_ns >= 0))


class _Echo(Backend):
    id = "echo"

    def dispatch(self, program, inputs, config=None):
        if not inputs:
            raise ValueError("no inputs")
        return list(inputs)


PROGRAM = Program([BufferDecl.read_write("a", 0, DataType.U32)], (1, 1, 1),
                  [Node.store("a", Expr.u32(0), Expr.u32(1))], name="p")


@pytest.fixture
def recorder():
    pm = registry.get_plugin_manager()
    rec = _Recorder()
    pm.register(rec, name="test-recorder")
    yield rec
    pm.unregister(rec)


def test_hooks_wrap_a_dispatch_and_see_its_error(recorder):
    b = HookedBackend(_Echo(), registry.get_plugin_manager().hook)
    assert b.dispatch(PROGRAM, [b"x"]) == [b"x"]
    with pytest.raises(ValueError):
        b.dispatch(PROGRAM, [])
    assert recorder.calls == [("before", "echo", "dispatch", "p"), ("after", "dispatch", None, True),
                              ("before", "echo", "dispatch", "p"), ("after", "dispatch", "ValueError", True)]


def test_a_plugin_registered_after_acquire_still_sees_dispatches():
    b = HookedBackend(_Echo(), registry.get_plugin_manager().hook)
    rec = _Recorder()
    registry.get_plugin_manager().register(rec, name="late-recorder")
    try:
        b.compile(PROGRAM).dispatch([b"x"])
    finally:
        registry.get_plugin_manager().unregister(rec)
    b.dispatch(PROGRAM, [b"x"])
    assert [c[0] for c in rec.calls] == ["before", "after"]


def test_the_proxy_forwards_everything_else_and_works_as_a_context_manager():
    raw = _Echo()
    b = HookedBackend(raw, registry.get_plugin_manager().hook)
    assert b.id == "echo" and b.unwrap() is raw and b.metrics() == {}
    with b as entered:
        assert entered is b
    assert isinstance(b, vyre.driver.backend.BackendProtocol)


def test_an_unobserved_dispatch_costs_under_a_microsecond():
    pm = registry.get_plugin_manager()
    assert not pm.hook.vyre_before_dispatch.get_hookimpls(), "a plugin implements the dispatch hooks here"
    raw = _Echo()
    hooked = HookedBackend(raw, pm.hook)
    inputs = [b"x"]

    def best(fn) -> float:
        return min(timeit.repeat(fn, number=20000, repeat=5)) / 20000

    extra = best(lambda: hooked.dispatch(PROGRAM, inputs)) - best(lambda: raw.dispatch(PROGRAM, inputs))
    assert extra < 1e-6, f"the proxy adds {extra * 1e9:.0f} ns per dispatch"


def test_acquire_reference_by_id_in_process():
    b = vyre.acquire("reference")
    assert isinstance(b, HookedBackend) and b.id == "reference" and b.supports_subgroup_ops()
    with pytest.raises(BackendUnavailable, match="one device"):
        vyre.acquire("reference:1")
