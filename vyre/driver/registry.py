"""The plugin manager and backend registry of SPEC section 5.

One pluggy ``PluginManager("vyre")`` per process loads the entry point group ``vyre``; its
plugins register backends, ops and CLI verbs through the hooks in ``vyre.driver.hookspecs``.
``acquire`` picks a backend by id or by rank and hands it out wrapped in ``HookedBackend`` so
that wrapper plugins observe every dispatch.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any, NamedTuple

import pluggy

from vyre.driver import hookspecs
from vyre.driver.errors import BackendUnavailable, VyreError

ENTRY_POINT_GROUP = "vyre"
BUILTIN_PLUGINS = {"reference": "vyre.reference.plugin"}
REFERENCE_ID = "reference"


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
_backends_cache: tuple[frozenset[int], dict[str, tuple[BackendRegistration, str]]] | None = None
_ops_loaded = False
_reference_notice_shown = False


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
        try:
            pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP, name=ep.name)
        except Exception as exc:  # a broken plugin must not take the others down
            _load_errors.append(f"plugin {ep.name!r} ({ep.value}) failed to load: {type(exc).__name__}: {exc}")
    for name, module in BUILTIN_PLUGINS.items():  # a source checkout has no entry points
        if not pm.has_plugin(name) and not pm.is_blocked(name):
            __import__(module)
            pm.register(sys.modules[module], name=name)
    pm.hook.vyre_add_hookspecs.call_historic(kwargs={"plugin_manager": pm})
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        _load_errors.append(f"a plugin implements a hook nobody declared: {exc}")
    return pm


def _disabled_plugins() -> list[str]:
    """Entry point names listed in ``VYRE_DISABLE_PLUGINS`` (comma separated) are not loaded."""
    return [n.strip() for n in os.environ.get("VYRE_DISABLE_PLUGINS", "").split(",") if n.strip()]


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
def _backend_table() -> dict[str, tuple[BackendRegistration, str]]:
    """Registered backends by id with the providing distribution, recomputed when plugins change."""
    global _backends_cache
    pm = get_plugin_manager()
    key = frozenset(id(p) for p in pm.get_plugins())
    cache = _backends_cache
    if cache is not None and cache[0] == key:
        return cache[1]
    with _lock:
        dists = _distributions(pm)
        table: dict[str, tuple[BackendRegistration, str]] = {}
        for impl in _plain_impls(pm.hook.vyre_register_backends):
            dist = dists.get(id(impl.plugin), "built-in" if impl.plugin_name in BUILTIN_PLUGINS else "")
            for reg in impl.function() or ():
                _add_registration(table, reg, dist or impl.plugin_name)
        _backends_cache = (key, table)
        return table


def _add_registration(table: dict, reg: object, source: str) -> None:
    if not isinstance(reg, BackendRegistration):
        _load_errors.append(f"{source}: vyre_register_backends returned {reg!r}, not a BackendRegistration")
        return
    old = table.get(reg.id)
    if old is not None:
        _load_errors.append(f"backend id {reg.id!r} is registered by both {old[1]} and {source}; keeping {old[1]}")
        return
    table[reg.id] = (reg, source)


def _plain_impls(hook: pluggy.HookCaller) -> list:
    """Implementations of a collecting hook, called one by one to attribute results (wrappers skipped)."""
    return [i for i in hook.get_hookimpls() if not (i.hookwrapper or i.wrapper)]


def registered_backends() -> list[BackendInfo]:
    """Every registered backend as ``(id, rank, dispatches, version, distribution)``, by rank."""
    rows = [BackendInfo(r.id, r.rank, r.dispatches, r.version, dist) for r, dist in _backend_table().values()]
    return sorted(rows, key=lambda b: (b.rank, b.id))


def registration(backend_id: str) -> BackendRegistration | None:
    """The registration of ``backend_id``, or None."""
    entry = _backend_table().get(backend_id)
    return entry[0] if entry else None


def parse_backend_id(spec: str) -> tuple[str, int | None]:
    """``"cuda:1"`` -> ``("cuda", 1)``; ``"cuda"`` -> ``("cuda", None)``."""
    name, sep, device = spec.strip().partition(":")
    if not sep:
        return name, None
    if not device.isdigit():
        raise BackendUnavailable(f"backend {spec!r} names device {device!r}, not a device number",
                                 "write ID or ID:N with N the device index, e.g. cuda:1.")
    return name, int(device)


def start_backend(spec: str) -> Any:
    """Start exactly the backend ``spec`` (``ID`` or ``ID:N``) unwrapped, or raise why it cannot."""
    backend_id, device = parse_backend_id(spec)
    reg = registration(backend_id)
    if reg is None:
        known = ", ".join(b.id for b in registered_backends()) or "none"
        raise BackendUnavailable(f"no backend {backend_id!r} is registered (registered: {known})",
                                 "install the plugin that provides it, or run `vyre backends` to list the backends.")
    if not reg.dispatches:
        raise BackendUnavailable(f"backend {backend_id!r} is registered but does not dispatch",
                                 "pick a dispatching backend (see `vyre backends`).")
    try:
        backend = reg.factory() if device is None else reg.factory(device)
    except Exception as exc:
        reason = (exc.message if isinstance(exc, VyreError) else f"{type(exc).__name__}: {exc}").rstrip(".")
        error = BackendUnavailable(f"backend {spec!r} could not start: {reason}",
                                   exc.fix if isinstance(exc, VyreError) else None)
        error.reason = reason  # the factory's own words, for listings
        raise error from exc
    return backend


def failure_reason(exc: BackendUnavailable) -> str:
    """Why a backend could not start, without the ``backend 'x' could not start`` preamble."""
    return getattr(exc, "reason", exc.message)


def acquire(id: str | None = None, *, allow_reference: bool = False) -> Any:
    """A started backend, wrapped so that dispatch hooks see every dispatch.

    With ``id`` (or ``VYRE_BACKEND``): exactly that backend (``ID`` or ``ID:N`` for device N), or
    ``BackendUnavailable`` saying why. Without: the lowest-rank dispatching backend that starts,
    never the reference oracle unless ``allow_reference`` (which says so once on stderr).
    """
    from vyre.driver.hooked import HookedBackend

    spec = id or os.environ.get("VYRE_BACKEND") or None
    backend = start_backend(spec) if spec else _first_available(allow_reference)
    pm = get_plugin_manager()
    backend_id = getattr(backend, "id", spec or "?")
    pm.hook.vyre_backend_acquired(backend_id=backend_id, backend=backend)
    return HookedBackend(backend, pm.hook)


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
            for op in impl.function() or ():
                try:
                    if not isinstance(op, OpDef):
                        raise TypeError(f"{op!r} is not a vyre.ops.OpDef")
                    register_op(op)
                except (ValueError, TypeError) as exc:
                    message = f"plugin {impl.plugin_name!r}: op not registered: {exc}"
                    _load_errors.append(message)
                    warnings.warn(message, stacklevel=2)
