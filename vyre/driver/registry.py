"""The plugin manager and backend registry (docs/plugins.md).

One pluggy ``PluginManager("vyre")`` per process loads the entry point group ``vyre``; its
plugins register backends, ops and CLI verbs through the hooks in ``vyre.driver.hookspecs``.
``acquire`` picks a backend by id or by rank and hands it out wrapped in ``HookedBackend`` so
that wrapper plugins observe every dispatch.

One bad plugin is reported (``plugin_errors``, ``vyre backends``) and skipped; everything else
works. Backend ids are owned: registrations are read in a fixed order - this project's own
(``vyre-cuda``, and the built-in oracle) first, then other distributions by name, then entry
point name - and the first to register an id keeps it; ``cuda`` and ``reference`` are reserved for
this project. Third-party registration hooks and factories run with ``guard.plugin_timeout()``.
"""

from __future__ import annotations

import re
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any, NamedTuple

import pluggy

from vyre import settings
from vyre.driver import hookspecs
from vyre.driver.errors import BackendUnavailable, VyreError
from vyre.driver.guard import (
    Outcome,
    PluginWarning,
    call_guarded,
    call_with_timeout,
    describe,
    plugin_fix,
    plugin_timeout,
)
from vyre.ops import set_plugin_loader as set_plugin_ops_loader

ENTRY_POINT_GROUP = "vyre"
BUILTIN_PLUGINS = {"reference": "vyre.reference.plugin"}
REFERENCE_ID = "reference"
#: the distribution whose registrations come first and which alone may register the reserved ids
PROJECT_DISTRIBUTION = "vyre-cuda"
RESERVED_IDS = frozenset({"reference", "cuda"})
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class BackendRegistration:
    """A backend a plugin offers: ``factory(device=None)`` starts it; lower ``rank`` wins.

    Optional multi-device parts (``vyre.devices()``, ``vyre.lib.multi``): ``devices()`` lists the
    backend's devices as mappings with at least ``index`` and ``name``, without starting a backend;
    ``all_reduce(backends, handles, dtype, op)`` combines equal resident buffers of several of its
    backends into (at least) the first one and returns the name of the path it took, or None when
    it cannot (the caller then combines on the host).
    """

    id: str
    rank: int
    factory: Callable[..., Any]
    dispatches: bool = True
    supported_ops: frozenset[str] | None = None
    version: str = ""
    devices: Callable[[], Any] | None = None
    all_reduce: Callable[..., str | None] | None = None


class _Entry(NamedTuple):
    """A registration in the table: who provided it, and whether that is this project (trusted, no timeout)."""

    reg: BackendRegistration
    distribution: str
    plugin: str  # the plugin's name (its entry point name)
    own: bool


class BackendInfo(NamedTuple):
    """One row of ``registered_backends()``."""

    id: str
    rank: int
    dispatches: bool
    version: str
    distribution: str


_lock = threading.RLock()
_pm: pluggy.PluginManager | None = None
_building: pluggy.PluginManager | None = None
_load_errors: list[str] = []
_backends_cache: tuple[frozenset[int], dict[str, _Entry]] | None = None
_ops_loaded = False
_reference_notice_shown = False
_warned: set[str] = set()


# ---- the plugin manager -------------------------------------------------------------------
def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, with every entry point of group ``vyre`` loaded."""
    global _pm, _building
    if _pm is None:
        with _lock:
            if _pm is None:
                if _building is not None:  # a plugin asked for it while being loaded
                    return _building
                _building = pluggy.PluginManager(hookspecs.PROJECT)
                try:
                    _pm = _load_plugins(_building)
                finally:
                    _building = None
    return _pm


def _load_plugins(pm: pluggy.PluginManager) -> pluggy.PluginManager:
    pm.add_hookspecs(hookspecs)
    for name in _disabled_plugins():
        pm.set_blocked(name)
    for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        loaded = call_guarded(lambda ep=ep: pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP, name=ep.name))
        if loaded.error is not None:  # SystemExit at import too: a broken plugin must not take the others down
            _load_errors.append(f"plugin {ep.name!r} ({ep.value}) failed to load: {describe(loaded.error)}. "
                                f"Fix: {plugin_fix(ep.name)}.")
    for name, module in BUILTIN_PLUGINS.items():  # a source checkout has no entry points
        if not pm.has_plugin(name) and not pm.is_blocked(name):
            __import__(module)
            pm.register(sys.modules[module], name=name)
    added = call_guarded(lambda: pm.hook.vyre_add_hookspecs.call_historic(kwargs={"plugin_manager": pm}))
    if added.error is not None:
        _load_errors.append(f"a plugin's vyre_add_hookspecs failed: {describe(added.error)}. Fix: uninstall or "
                            "disable (VYRE_DISABLE_PLUGINS) the plugin named in the traceback.")
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        _load_errors.append(f"a plugin implements a hook nobody declared: {exc}")
    return pm


def _disabled_plugins() -> list[str]:
    """Entry point names listed in ``VYRE_DISABLE_PLUGINS`` (comma separated) are not loaded."""
    return settings.disabled_plugins()


def plugin_errors() -> list[str]:
    """Problems met while loading plugins and their registrations (shown by ``vyre backends``)."""
    get_plugin_manager()
    _backend_table()
    return list(dict.fromkeys(_load_errors))


def _distributions(pm: pluggy.PluginManager) -> dict[int, str]:
    """Plugin object id -> name of the distribution whose entry point provided it."""
    out: dict[int, str] = {}
    for plugin, dist in pm.list_plugin_distinfo():
        out[id(plugin)] = dist.metadata["name"] or dist.project_name
    return out


# ---- backends ---------------------------------------------------------------------------------
def _backend_table() -> dict[str, _Entry]:
    """Registered backends by id, recomputed when plugins change (see the module docstring for the order)."""
    global _backends_cache
    pm = get_plugin_manager()
    key = frozenset(id(p) for p in pm.get_plugins())
    cache = _backends_cache
    if cache is not None and cache[0] == key:
        return cache[1]
    with _lock:
        dists = _distributions(pm)
        table: dict[str, _Entry] = {}
        sources = []
        for impl in _plain_impls(pm.hook.vyre_register_backends):
            dist = dists.get(id(impl.plugin), "built-in" if impl.plugin_name in BUILTIN_PLUGINS else "")
            own = dist in (PROJECT_DISTRIBUTION, "built-in")
            sources.append((not own, dist or "~", impl.plugin_name, impl, dist or impl.plugin_name, own))
        for *_order, impl, dist, own in sorted(sources, key=lambda t: t[:3]):
            for reg in _registrations(impl, dist, own):
                _add_registration(table, reg, _Entry(reg, dist, impl.plugin_name, own))
        _backends_cache = (key, table)
        return table


def _registrations(impl: Any, dist: str, own: bool) -> list[Any]:
    """What one plugin's ``vyre_register_backends`` returned, or [] (reported) if it failed or is malformed."""
    def call() -> list[Any]:
        return list(impl.function() or ())

    done = _call_plugin(call, own, f"{impl.plugin_name}: vyre_register_backends")
    if done.error is not None or done.timed_out:
        _load_errors.append(f"plugin {impl.plugin_name!r} ({dist}): vyre_register_backends failed "
                            f"({done.reason(plugin_timeout())}); its backends are skipped. "
                            f"Fix: {plugin_fix(impl.plugin_name)}.")
        return []
    return done.value


def _call_plugin(fn: Callable[[], Any], own: bool, name: str) -> Outcome:
    """``fn()`` with every exception returned; this project's code inline, a third party's with a timeout."""
    return call_guarded(fn) if own else call_with_timeout(fn, plugin_timeout(), name)


def _registration_problem(reg: object) -> str | None:
    """Why ``reg`` is not a usable registration, or None."""
    if not isinstance(reg, BackendRegistration):
        return f"returned {reg!r:.80}, not a BackendRegistration"
    if not isinstance(reg.id, str) or not _ID.fullmatch(reg.id):
        return f"registered id {reg.id!r:.80}: an id is 1-64 of A-Z a-z 0-9 _ . - (no ':')"
    if isinstance(reg.rank, bool) or not isinstance(reg.rank, int):
        return f"registered {reg.id!r} with rank {reg.rank!r:.80}, not an int"
    if not callable(reg.factory):
        return f"registered {reg.id!r} with factory {reg.factory!r:.80}, which is not callable"
    if not isinstance(reg.dispatches, bool) or not isinstance(reg.version, str):
        return f"registered {reg.id!r} with dispatches={reg.dispatches!r:.40} version={reg.version!r:.40}"
    return None


def _add_registration(table: dict[str, _Entry], reg: object, entry: _Entry) -> None:
    who = f"plugin {entry.plugin!r} ({entry.distribution})"
    problem = _registration_problem(reg)
    if problem is not None:
        _load_errors.append(f"{who}: vyre_register_backends {problem}; skipped. Fix: {plugin_fix(entry.plugin)}.")
        return
    assert isinstance(reg, BackendRegistration)
    if reg.id in RESERVED_IDS and not entry.own:
        _load_errors.append(f"{who} tried to register the reserved backend id {reg.id!r}; refused (only "
                            f"{PROJECT_DISTRIBUTION} registers it). Fix: {plugin_fix(entry.plugin)}.")
        return
    old = table.get(reg.id)
    if old is not None:
        _load_errors.append(f"backend id {reg.id!r} is registered by both {old.distribution} and {entry.distribution}; "
                            f"keeping {old.distribution}, which comes first. Fix: give {who}'s backend another id, "
                            "or uninstall one of them.")
        return
    table[reg.id] = entry


def _plain_impls(hook: pluggy.HookCaller) -> list:
    """Implementations of a collecting hook, called one by one to attribute results (wrappers skipped)."""
    return [i for i in hook.get_hookimpls() if not (i.hookwrapper or i.wrapper)]


def registered_backends() -> list[BackendInfo]:
    """Every registered backend as ``(id, rank, dispatches, version, distribution)``, by rank."""
    rows = [BackendInfo(e.reg.id, e.reg.rank, e.reg.dispatches, e.reg.version, e.distribution)
            for e in _backend_table().values()]
    return sorted(rows, key=lambda b: (b.rank, b.id))


def registration(backend_id: str) -> BackendRegistration | None:
    """The registration of ``backend_id``, or None."""
    entry = _backend_table().get(backend_id)
    return entry.reg if entry else None


def parse_backend_id(spec: str) -> tuple[str, int | None]:
    """``"cuda:1"`` -> ``("cuda", 1)``; ``"cuda"`` -> ``("cuda", None)``."""
    name, sep, device = spec.strip().partition(":")
    if not sep:
        return name, None
    if not (device.isascii() and device.isdigit()):
        raise BackendUnavailable(f"backend {spec!r} names device {device!r}, not a device number",
                                 "write ID or ID:N with N the device index, e.g. cuda:1.")
    return name, int(device)


def start_backend(spec: str) -> Any:
    """Start exactly the backend ``spec`` (``ID`` or ``ID:N``) unwrapped, or raise why it cannot.

    A third-party factory runs in a worker thread and is given up on after ``plugin_timeout()``
    seconds; whatever it raises (``SystemExit`` too), or a result that is not a backend, is
    ``BackendUnavailable`` with the reason.
    """
    backend_id, device = parse_backend_id(spec)
    entry = _backend_table().get(backend_id)
    if entry is None:
        known = ", ".join(b.id for b in registered_backends()) or "none"
        raise BackendUnavailable(f"no backend {backend_id!r} is registered (registered: {known})",
                                 "install the plugin that provides it, or run `vyre backends` to list the backends.")
    reg = entry.reg
    if not reg.dispatches:
        raise BackendUnavailable(f"backend {backend_id!r} is registered but does not dispatch",
                                 "pick a dispatching backend (see `vyre backends`).")
    def call() -> Any:
        return reg.factory() if device is None else reg.factory(device)

    done = _call_plugin(call, entry.own, f"{entry.distribution}: {spec}")
    exc = done.error
    if isinstance(exc, VyreError):
        _unavailable(spec, exc.message.rstrip("."), exc.fix, exc)
    if exc is not None or done.timed_out:
        _unavailable(spec, done.reason(plugin_timeout()), f"{plugin_fix(entry.plugin)}.", exc)
    if not _looks_like_a_backend(done.value):
        _unavailable(spec, f"its factory returned {done.value!r:.80}, not a backend",
                     f"{plugin_fix(entry.plugin)}.", None)
    return done.value


def _looks_like_a_backend(obj: object) -> bool:
    """The least a dispatching backend has: a str ``id`` and a callable ``dispatch``."""
    return isinstance(getattr(obj, "id", None), str) and callable(getattr(obj, "dispatch", None))


def _unavailable(spec: str, reason: str, fix: str | None, cause: BaseException | None) -> None:
    error = BackendUnavailable(f"backend {spec!r} could not start: {reason}", fix)
    error.reason = reason  # the factory's own words, for listings
    raise error from cause


def failure_reason(exc: VyreError) -> str:
    """Why a backend could not start, without the ``backend 'x' could not start`` preamble."""
    return getattr(exc, "reason", exc.message)


def acquire(id: str | None = None, *, allow_reference: bool = False) -> Any:
    """A started backend, wrapped so that dispatch hooks see every dispatch.

    With ``id`` (or ``VYRE_BACKEND``): exactly that backend (``ID`` or ``ID:N`` for device N), or
    ``BackendUnavailable`` saying why. Without: the lowest-rank dispatching backend that starts,
    never the reference oracle unless ``allow_reference`` (which says so once on stderr).
    """
    from vyre.driver.hooked import HookedBackend

    spec = id or settings.backend()
    backend = start_backend(spec) if spec else _first_available(allow_reference)
    pm = get_plugin_manager()
    backend_id = getattr(backend, "id", spec or "?")
    _backend_acquired(pm, backend_id, backend)
    _warn_plugin_problems()
    return HookedBackend(backend, pm.hook)


_shared: dict[str, Any] = {}
_shared_lock = threading.Lock()


def default_backend(id: str | None = None) -> Any:
    """The process's one backend for ``id`` (``"cuda:1"``, ``"reference"``; None: ``VYRE_BACKEND``,
    else the best that starts, the oracle allowed), acquired on first use.

    Kernels, ``vyre.lib``, the workloads, ``vyre.lib.multi`` and ``vyre.dask`` all use it when no
    backend is passed, so a result of one (a resident buffer, a ``ResidentArray``) can be handed to
    another. A backend that was shut down is replaced by a new one on the next call.
    """
    spec = id or settings.backend() or ""
    backend = _shared.get(spec)  # the common case, without the lock: a live backend already shared
    if backend is not None and not _is_closed(backend):
        return backend
    with _shared_lock:
        backend = _shared.get(spec)
        if backend is None or _is_closed(backend):
            backend = _shared[spec] = acquire(spec) if spec else acquire(allow_reference=True)
        return backend


def _is_closed(backend: Any) -> bool:
    """Whether a backend says it was shut down (its ``closed``; backends without one never are)."""
    return bool(getattr(getattr(backend, "backend", backend), "closed", False))


def _backend_acquired(pm: pluggy.PluginManager, backend_id: str, backend: Any) -> None:
    """Call every ``vyre_backend_acquired``; one that raises is reported (a warning naming it), not fatal."""
    kwargs = {"backend_id": backend_id, "backend": backend}
    for impl in _plain_impls(pm.hook.vyre_backend_acquired):
        done = call_guarded(lambda impl=impl: impl.function(*(kwargs[a] for a in impl.argnames)))
        if done.error is not None:
            message = (f"plugin {impl.plugin_name!r}: vyre_backend_acquired raised {describe(done.error)} "
                       f"(the backend was handed out anyway). Fix: {plugin_fix(impl.plugin_name)}.")
            _load_errors.append(message)
            _warn(message)


def _warn_plugin_problems() -> None:
    """Say once per process, as a ``PluginWarning``, what went wrong with plugins (collisions included)."""
    for problem in plugin_errors():
        _warn(problem)


def _warn(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, PluginWarning, stacklevel=3)


def _first_available(allow_reference: bool) -> Any:
    failures: list[str] = []
    for info in registered_backends():
        if not info.dispatches or info.id == REFERENCE_ID:
            continue
        try:
            return start_backend(info.id)
        except BackendUnavailable as exc:
            failures.append(f"{info.id}: {failure_reason(exc)}")
    if allow_reference and registration(REFERENCE_ID) is not None:
        _reference_notice(failures)
        return start_backend(REFERENCE_ID)
    failures += plugin_errors()
    detail = "; ".join(failures) if failures else "no backend other than the reference oracle is registered"
    raise BackendUnavailable(
        f"no backend could start ({detail})",
        "install a GPU backend with its CuPy extra (pip install 'vyre-cuda[cuda12]') on a machine with a GPU, "
        "or run on the CPU oracle with acquire('reference') / acquire(allow_reference=True) / --backend reference.",
    )


def _reference_notice(failures: list[str]) -> None:
    global _reference_notice_shown
    if _reference_notice_shown:
        return
    _reference_notice_shown = True
    why = "; ".join(failures + plugin_errors()) or "no GPU backend is registered"
    print(f"vyre: no GPU backend could start ({why}); running on the CPU reference oracle (slow).",
          file=sys.stderr)


# ---- ops ------------------------------------------------------------------------------------------
def load_plugin_ops() -> None:
    """Register every op that plugins return from ``vyre_register_ops`` (once per process)."""
    global _ops_loaded
    if _ops_loaded:
        return
    with _lock:
        if _ops_loaded:
            return
        _ops_loaded = True
        from vyre.ops import OpDef, register_op

        for impl in _plain_impls(get_plugin_manager().hook.vyre_register_ops):
            done = call_guarded(lambda impl=impl: list(impl.function() or ()))
            if done.error is not None:
                _load_errors.append(f"plugin {impl.plugin_name!r}: vyre_register_ops failed ({describe(done.error)}); "
                                    f"its ops are skipped. Fix: {plugin_fix(impl.plugin_name)}.")
                continue
            for op in done.value:
                try:
                    if not isinstance(op, OpDef):
                        raise TypeError(f"{op!r} is not a vyre.ops.OpDef")
                    register_op(op)
                except (ValueError, TypeError) as exc:
                    message = f"plugin {impl.plugin_name!r}: op not registered: {exc}"
                    _load_errors.append(message)
                    warnings.warn(message, stacklevel=2)


set_plugin_ops_loader(load_plugin_ops)
