"""Hook specifications of vyre (pluggy project name ``vyre``): every hook a plugin may implement.

A plugin is a module or object registered under the entry point group ``vyre``; it implements
hooks by decorating functions with ``vyre.driver.hookspecs.hookimpl`` (also ``vyre.hookimpl``).
Hooks are called in this order (docs/plugins.md has the full story):

1. ``vyre_add_hookspecs`` once, right after every entry point is loaded;
2. ``vyre_register_backends`` when the registry is first needed (``acquire``, ``registered_backends``);
3. ``vyre_register_ops`` when an op is first looked up (``Expr.call``, the validator, the oracle);
4. ``vyre_cli_commands`` when the ``vyre`` command line is built;
5. ``vyre_backend_acquired`` each time ``vyre.acquire`` hands out a backend;
6. ``vyre_before_dispatch`` / ``vyre_after_dispatch`` around every dispatch of an acquired backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    import argparse

    from vyre.driver.config import DispatchConfig
    from vyre.driver.registry import BackendRegistration
    from vyre.ir.program import Program
    from vyre.ops import OpDef

PROJECT = "vyre"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec(historic=True)
def vyre_add_hookspecs(plugin_manager: pluggy.PluginManager) -> None:
    """Add backend-specific hookspecs, e.g. ``plugin_manager.add_hookspecs(my_hookspecs)``.

    Called once on every plugin right after all entry points are loaded, before any other hook
    (historic: a plugin registered later is called when it registers).
    Implementations registered by other plugins for the added hooks (an op pack's PTX lowering
    for the ``cuda`` backend, say) are verified against the new specs and callable afterwards
    as ``plugin_manager.hook.<name>(...)``.
    """


@hookspec
def vyre_register_backends() -> list[BackendRegistration]:
    """Return the backends this plugin provides as ``BackendRegistration`` records.

    Called once per process, the first time the registry is consulted. Registering must be cheap
    and must not touch a device: the work of starting a backend belongs in its ``factory``.
    Plugins are asked in a fixed order (this project's first, then distributions by name) and the
    first to register an id keeps it; ``cuda`` and ``reference`` are reserved. A third party's
    hook and factories run in a worker thread with a timeout (``VYRE_PLUGIN_TIMEOUT_S``); a hook
    that raises, sleeps or returns anything but registrations is reported and skipped.
    """
    ...


@hookspec
def vyre_register_ops() -> list[OpDef]:
    """Return ops (``vyre.ops.OpDef``) to add to the op registry for ``Expr.call``.

    Called once per process, the first time an op id is looked up. A composed op (``expand=``)
    runs on every backend; a primitive op (``reference=``) runs on the oracle and on each backend
    that provides a lowering for it through that backend's own hook.
    """
    ...


@hookspec
def vyre_cli_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add verbs to the ``vyre`` command line.

    ``subparsers`` is the ``argparse`` sub-parser action of the ``vyre`` parser: call
    ``subparsers.add_parser(name, help=...)`` and ``parser.set_defaults(func=handler)``; the
    handler gets the parsed ``argparse.Namespace`` and returns an exit code (or None for 0).
    """


@hookspec
def vyre_backend_acquired(backend_id: str, backend: Any) -> None:
    """Observe a backend that ``vyre.acquire`` just started (``backend`` is the raw backend).

    An exception raised here is reported as a ``PluginWarning`` naming the plugin; the backend is
    handed out anyway.
    """


@hookspec
def vyre_before_dispatch(
    backend_id: str,
    kind: str,
    program: Program | None,
    programs: tuple[Program, ...],
    config: DispatchConfig | None,
    grid: tuple[int, int, int] | None,
) -> None:
    """Called before every dispatch of an acquired backend, in the caller's thread.

    ``kind`` names the entry point: ``dispatch``, ``dispatch_async``, ``dispatch_timed``,
    ``dispatch_resident``, ``dispatch_sequence``, ``dispatch_repeated``, ``dispatch_until``,
    ``pipeline.dispatch``, ``pipeline.dispatch_resident`` or ``pipeline.dispatch_batch``.
    ``program`` is the one program of a single dispatch and None for multi-step kinds;
    ``programs`` always lists every program the call runs (steps in order). ``config`` is the
    dispatch's config (None for multi-step kinds, whose steps carry their own). ``grid`` is the
    workgroup grid a single-program dispatch runs, derived from ``config`` and the buffers' sizes
    as the backend derives it (None for multi-step kinds and for inputs the backend will refuse);
    it is computed only when some plugin implements a dispatch hook. An exception
    raised here aborts the dispatch before the backend sees it: a ``VyreError`` (a validating
    wrapper's ``ValidationError``) reaches the caller as is; any other exception becomes
    ``DispatchFailed("plugin", ...)`` naming the plugin.
    """


@hookspec
def vyre_after_dispatch(
    backend_id: str,
    kind: str,
    program: Program | None,
    programs: tuple[Program, ...],
    config: DispatchConfig | None,
    duration_ns: int,
    error: BaseException | None,
    result: Any,
    grid: tuple[int, int, int] | None,
) -> None:
    """Called after every dispatch whose ``vyre_before_dispatch`` ran, also when it failed.

    ``duration_ns`` is the host wall time of the call (for ``dispatch_async``: until the dispatch
    was enqueued). ``error`` is the exception the backend raised (it propagates to the caller
    after this hook) or None; ``result`` is the call's return value, or None on error. An
    exception raised here fails the call like one from ``vyre_before_dispatch`` (the result is
    dropped); when the backend already failed, its error is kept and this one added as a note.
    ``grid`` is as in ``vyre_before_dispatch``.
    """


__all__ = [
    "PROJECT", "hookimpl", "hookspec", "vyre_add_hookspecs", "vyre_after_dispatch", "vyre_backend_acquired",
    "vyre_before_dispatch", "vyre_cli_commands", "vyre_register_backends", "vyre_register_ops",
]
