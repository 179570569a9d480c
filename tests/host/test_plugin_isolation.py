"""One bad plugin is reported and skipped; everything else works. Backend ids are owned.

Real distributions are built and pip-installed into a temporary venv (as in test_registry.py):
``vyre-hostile`` misbehaves in every way the registry must survive, ``vyre-aaa-first`` is a
well-behaved third party. Each check runs in a subprocess of that venv with a time limit, so a
hang fails the test instead of stalling the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
from test_registry import PROGRAM, skip_unless_plugins_can_be_installed, venv_with

import vyre
from vyre.driver import registry
from vyre.driver.backend import Backend
from vyre.driver.errors import DispatchFailed, ValidationError
from vyre.driver.hooked import HookedBackend

ROOT = Path(__file__).resolve().parents[2]

HOSTILE = {
    "hostile_common": '''
import os, time
import numpy as np
from vyre.driver.backend import Backend
from vyre.driver.registry import BackendRegistration


class Fake(Backend):
    def __init__(self, id):
        self.id, self.version = id, "0"

    def dispatch(self, program, inputs, config=None):
        return [np.zeros(1, np.uint32)]


def fake(id):
    return lambda device=None: Fake(id)
''',
    "hostile_takeover": '''
import vyre
from hostile_common import BackendRegistration, fake


@vyre.hookimpl
def vyre_register_backends():
    return [BackendRegistration("cuda", -1, fake("evil-cuda")), BackendRegistration("reference", -1, fake("evil-ref")),
            BackendRegistration("shared", 1, fake("evil-shared"))]
''',
    "hostile_sleepy": '''
import time
import vyre
from hostile_common import BackendRegistration


def sleeper(device=None):
    time.sleep(3600)


@vyre.hookimpl
def vyre_register_backends():
    return [BackendRegistration("sleepy", 2, sleeper)]
''',
    "hostile_results": '''
import vyre
from hostile_common import BackendRegistration


def exits(device=None):
    raise SystemExit(3)


@vyre.hookimpl
def vyre_register_backends():
    return [BackendRegistration("fortytwo", 3, lambda device=None: 42),
            BackendRegistration("nothing", 4, lambda device=None: None),
            BackendRegistration("exits", 5, exits)]
''',
    "hostile_badregs": '''
import vyre
from hostile_common import BackendRegistration, fake


@vyre.hookimpl
def vyre_register_backends():
    return [BackendRegistration("high", "high", fake("high")), BackendRegistration(None, 6, fake("none")),
            "not a registration", BackendRegistration("bad:id", 6, fake("colon")),
            BackendRegistration("uncallable", 6, 42), BackendRegistration("survivor", 60, fake("survivor"))]
''',
    "hostile_raising_register": '''
import vyre


@vyre.hookimpl
def vyre_register_backends():
    raise RuntimeError("registration exploded")
''',
    "hostile_malformed_register": '''
import vyre


@vyre.hookimpl
def vyre_register_backends():
    return 42
''',
    "hostile_sleepy_register": '''
import os, time
import vyre
from hostile_common import BackendRegistration, fake


@vyre.hookimpl
def vyre_register_backends():
    if os.environ.get("HOSTILE_SLEEP_REGISTER"):
        time.sleep(3600)
    return [BackendRegistration("late-register", 70, fake("late-register"))]
''',
    "hostile_exit_import": 'raise SystemExit("bye from import")\n',
    "hostile_base_import": 'class Boom(BaseException):\n    pass\n\n\nraise Boom("not an Exception")\n',
    "hostile_hooks": '''
import os
import vyre


@vyre.hookimpl
def vyre_before_dispatch(kind):
    if os.environ.get("HOSTILE_BEFORE"):
        raise RuntimeError("before hook exploded")


@vyre.hookimpl
def vyre_after_dispatch(kind):
    if os.environ.get("HOSTILE_AFTER"):
        raise RuntimeError("after hook exploded")


@vyre.hookimpl
def vyre_backend_acquired(backend_id):
    if os.environ.get("HOSTILE_ACQUIRED"):
        raise RuntimeError("acquired hook exploded")
''',
}
ENTRY_POINTS = {  # entry point name -> module (names sort the load order only; ownership goes by distribution)
    "takeover": "hostile_takeover", "sleepy": "hostile_sleepy", "results": "hostile_results",
    "badregs": "hostile_badregs", "raising": "hostile_raising_register", "malformed": "hostile_malformed_register",
    "sleepyreg": "hostile_sleepy_register", "exitimport": "hostile_exit_import", "baseimport": "hostile_base_import",
    "hooks": "hostile_hooks",
}
FIRST = '''
import vyre
from hostile_common import BackendRegistration, fake


@vyre.hookimpl
def vyre_register_backends():
    return [BackendRegistration("shared", 50, fake("first-shared"))]
'''


def _pyproject(name: str, entry_points: dict[str, str], modules: list[str]) -> str:
    eps = "\n".join(f'{k} = "{v}"' for k, v in entry_points.items())
    return (f'[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
            f'[project]\nname = "{name}"\nversion = "0.0.1"\n\n[project.entry-points.vyre]\n{eps}\n\n'
            f'[tool.setuptools]\npy-modules = {json.dumps(modules)}\n')


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    skip_unless_plugins_can_be_installed()
    tmp = tmp_path_factory.mktemp("hostile")
    hostile, first = tmp / "vyre-hostile", tmp / "vyre-aaa-first"
    hostile.mkdir()
    first.mkdir()
    for module, source in HOSTILE.items():
        (hostile / f"{module}.py").write_text(source)
    (hostile / "pyproject.toml").write_text(_pyproject("vyre-hostile", ENTRY_POINTS, sorted(HOSTILE)))
    (first / "vyre_aaa_first.py").write_text(FIRST)
    (first / "pyproject.toml").write_text(_pyproject("vyre-aaa-first", {"first": "vyre_aaa_first"},
                                                     ["vyre_aaa_first"]))
    return venv_with(tmp, [hostile, first])


def run_in(python: Path, code: str, timeout: float = 60, **env: str) -> dict:
    """Run ``code`` (this checkout first on the path) in the venv under a time limit; it prints JSON last."""
    full_env = {**os.environ, "VYRE_DISABLE_PLUGINS": "cuda", "VYRE_PLUGIN_TIMEOUT_S": "1",
                "PYTHONPATH": str(ROOT), **env}
    full_env.pop("VYRE_BACKEND", None)
    prelude = f"import vyre; assert vyre.__file__.startswith({str(ROOT)!r}), vyre.__file__\n"
    result = subprocess.run([str(python), "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                            env=full_env, cwd=ROOT.parent, timeout=timeout)
    assert result.returncode == 0, result.stdout + result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    out["stderr"] = result.stderr
    return out


LIST_AND_ERRORS = """
    import json, vyre
    from vyre.driver import registry
    rows = [list(b) for b in vyre.registered_backends()]
    print(json.dumps({"rows": rows, "errors": registry.plugin_errors()}))
"""


def test_bad_plugins_are_reported_and_skipped_and_the_rest_registers(venv) -> None:
    out = run_in(venv, LIST_AND_ERRORS)
    ids = {r[0]: r for r in out["rows"]}
    assert sorted(ids) == ["exits", "fortytwo", "late-register", "nothing", "reference", "shared", "sleepy",
                           "survivor"]
    errors = "\n".join(out["errors"])
    for why in ("'exitimport'", "SystemExit: bye from import", "'baseimport'", "Boom: not an Exception",
                "registration exploded", "rank 'high', not an int",
                "registered id None", "'not a registration'", "registered id 'bad:id'", "'uncallable'",
                "vyre_register_backends failed (TypeError"):
        assert why in errors, why
    assert all("Fix:" in e for e in out["errors"])


def test_ids_are_owned_the_project_first_then_distributions_by_name(venv) -> None:
    out = run_in(venv, LIST_AND_ERRORS, VYRE_DISABLE_PLUGINS="")
    ids = {r[0]: r for r in out["rows"]}
    assert ids["cuda"][4] == "vyre-cuda" and ids["reference"][4] == "vyre-cuda"
    assert ids["shared"][1:] == [50, True, "", "vyre-aaa-first"]  # vyre-aaa-first sorts before vyre-hostile
    errors = "\n".join(out["errors"])
    assert "reserved backend id 'cuda'" in errors and "reserved backend id 'reference'" in errors
    assert "'shared' is registered by both vyre-aaa-first and vyre-hostile; keeping vyre-aaa-first" in errors


def test_a_third_party_cannot_take_over_cuda_even_when_cuda_is_absent(venv) -> None:
    out = run_in(venv, """
        import json, vyre
        try:
            vyre.acquire("cuda")
            got = None
        except vyre.errors.BackendUnavailable as exc:
            got = str(exc)
        print(json.dumps({"cuda": got, "reference": type(vyre.acquire("reference").unwrap()).__name__}))
    """)
    assert "no backend 'cuda' is registered" in out["cuda"]
    assert out["reference"] == "ReferenceBackend"


def test_acquire_skips_sleeping_refused_and_exiting_factories_in_bounded_time(venv) -> None:
    start = time.monotonic()
    out = run_in(venv, """
        import json, time, vyre
        start = time.monotonic()
        b = vyre.acquire()
        first = time.monotonic() - start

        def why(spec):
            try:
                return f"started {vyre.acquire(spec).id}"
            except vyre.errors.BackendUnavailable as exc:
                return str(exc)

        errors = {spec: why(spec) for spec in ("sleepy", "fortytwo", "nothing", "exits")}
        print(json.dumps({"id": b.id, "seconds": first, "errors": errors}))
    """, timeout=60)
    assert out["id"] == "first-shared"  # the lowest rank that starts, after sleepy (1 s), 42, None and SystemExit
    assert out["seconds"] < 10 and time.monotonic() - start < 50
    errors = out["errors"]
    assert "did not return within 1 s" in errors["sleepy"]
    assert "returned 42, not a backend" in errors["fortytwo"] and "returned None" in errors["nothing"]
    assert "SystemExit: 3" in errors["exits"]
    assert all("Fix:" in e for e in errors.values())
    assert "PluginWarning" in out["stderr"] and "keeping vyre-aaa-first" in out["stderr"]  # reported on acquire


def test_vyre_backends_lists_every_bad_plugin_and_why_without_hanging(venv) -> None:
    python = str(venv)
    done = subprocess.run([python, "-m", "vyre", "backends"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "VYRE_DISABLE_PLUGINS": "cuda", "VYRE_PLUGIN_TIMEOUT_S": "1",
                               "PYTHONPATH": str(ROOT)}, cwd=ROOT.parent)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    for line in ("sleepy", "did not return within 1 s", "returned 42, not a backend", "SystemExit: 3",
                 "warning: plugin 'exitimport'", "reserved backend id 'cuda'", "rank 'high'", "registration exploded",
                 "available"):
        assert line in text, line


def test_a_sleeping_registration_hook_is_given_up_on(venv) -> None:
    out = run_in(venv, LIST_AND_ERRORS, timeout=60, HOSTILE_SLEEP_REGISTER="1")
    assert "late-register" not in [r[0] for r in out["rows"]] and "survivor" in [r[0] for r in out["rows"]]
    assert any("vyre_register_backends failed (did not return within 1 s" in e for e in out["errors"])


DISPATCH = """
    import json, vyre
    from vyre.ir import BufferDecl, DataType, Expr, Node, Program
    p = Program([BufferDecl.read_write("a", 0, DataType.U32)], (1, 1, 1), [Node.store("a", Expr.u32(0), Expr.u32(7))])
    b = vyre.acquire("reference")
    try:
        out = b.dispatch(p, [bytes(4)])
        result = {"ok": [int(x) for x in out[0]]}
    except vyre.errors.VyreError as exc:
        result = {"error": type(exc).__name__, "message": str(exc)}
    print(json.dumps(result))
"""


@pytest.mark.parametrize("hook", ["BEFORE", "AFTER"])
def test_a_raising_dispatch_hook_fails_that_dispatch_naming_the_plugin(venv, hook: str) -> None:
    out = run_in(venv, DISPATCH, **{f"HOSTILE_{hook}": "1"})
    assert out["error"] == "DispatchFailed"
    assert f"plugin 'hooks' raised RuntimeError: {hook.lower()} hook exploded" in out["message"]
    assert "Fix: fix or uninstall plugin 'hooks'" in out["message"]
    assert run_in(venv, DISPATCH)["ok"] == [7]  # the same plugin, quiet: dispatches work


def test_a_raising_acquired_hook_is_a_warning_and_the_backend_works(venv) -> None:
    out = run_in(venv, DISPATCH, HOSTILE_ACQUIRED="1")
    assert out["ok"] == [7]
    assert "PluginWarning: plugin 'hooks': vyre_backend_acquired raised RuntimeError" in out["stderr"]


# ---- in process: what a raising dispatch hook does to the caller ------------------------------------------
class _Raiser:
    def __init__(self, before: BaseException | None = None, after: BaseException | None = None) -> None:
        self.before, self.after = before, after

    @vyre.hookimpl
    def vyre_before_dispatch(self, kind):
        if self.before is not None:
            raise self.before

    @vyre.hookimpl
    def vyre_after_dispatch(self, kind):
        if self.after is not None:
            raise self.after


class _Failing(Backend):
    id = "failing"

    def dispatch(self, program, inputs, config=None):
        if inputs:
            raise ValueError("the backend's own error")
        return ["ok"]


def _dispatch_with(plugin: _Raiser, inputs: list) -> object:
    pm = registry.get_plugin_manager()
    pm.register(plugin, name="raiser")
    try:
        return HookedBackend(_Failing(), pm.hook).dispatch(PROGRAM, inputs)
    finally:
        pm.unregister(plugin)


def test_a_vyre_error_from_a_validating_hook_reaches_the_caller_unchanged() -> None:
    refusal = ValidationError("refused by policy")
    with pytest.raises(ValidationError) as caught:
        _dispatch_with(_Raiser(before=refusal), [])
    assert caught.value is refusal


def test_a_system_exit_from_a_hook_is_a_dispatch_failure_naming_it() -> None:
    with pytest.raises(DispatchFailed, match="plugin 'raiser' raised SystemExit: 4 in vyre_before_dispatch"):
        _dispatch_with(_Raiser(before=SystemExit(4)), [])
    with pytest.raises(DispatchFailed, match="result is dropped"):
        _dispatch_with(_Raiser(after=RuntimeError("after")), [])
    assert _dispatch_with(_Raiser(), []) == ["ok"]


def test_when_the_backend_fails_its_error_is_kept_and_the_hook_error_noted() -> None:
    with pytest.raises(ValueError, match="the backend's own error") as caught:
        _dispatch_with(_Raiser(after=RuntimeError("after hook broke")), [b"x"])
    assert any("plugin 'raiser' raised RuntimeError: after hook broke" in n for n in caught.value.__notes__)
