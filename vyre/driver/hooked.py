"""``HookedBackend``: the thin proxy through which the host drives every backend dispatch.

Each dispatch entry point calls ``vyre_before_dispatch``, the real backend method, then
``vyre_after_dispatch`` (also on error). When no plugin implements either hook the proxy calls
the backend directly, so an unobserved dispatch costs two attribute reads and a branch (pluggy
keeps each hook's implementations in one list that registering mutates in place; we hold that
list). Every other attribute is forwarded to the wrapped backend unchanged.

A hook that raises fails that dispatch: a ``VyreError`` (a validating wrapper refusing the
program) reaches the caller unchanged; anything else becomes ``DispatchFailed("plugin", ...)``
naming the plugin, with a Fix. When the backend itself failed, its error is kept and a failing
``vyre_after_dispatch`` is only noted on it. ``KeyboardInterrupt`` always propagates as is.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from vyre.driver.backend import Backend, CompiledPipeline
from vyre.driver.config import DispatchConfig, resolve_grid
from vyre.driver.errors import DispatchFailed, VyreError
from vyre.driver.guard import blame, describe, plugin_fix
from vyre.driver.inputs import buffer_counts
from vyre.ir.program import Program


class _DispatchHooks:
    """Calls a backend method between the two dispatch hooks of one plugin manager."""

    __slots__ = ("backend_id", "_before", "_after", "before_impls", "after_impls")

    def __init__(self, backend_id: str, hook: Any) -> None:
        self.backend_id = backend_id
        self._before = hook.vyre_before_dispatch
        self._after = hook.vyre_after_dispatch
        # truthy exactly when some plugin implements the hook; read on every dispatch
        self.before_impls = _live_impls(self._before)
        self.after_impls = _live_impls(self._after)

    def run(self, kind: str, program: Program | None, programs: tuple[Program, ...],
            config: DispatchConfig | None, call: Callable[[], Any], grid: tuple[int, int, int] | None = None) -> Any:
        """``call()`` observed by both hooks (callers first check ``before_impls or after_impls``)."""
        ctx = dict(backend_id=self.backend_id, kind=kind, program=program, programs=programs, config=config,
                   grid=grid)
        _call_hook(self._before, ctx, "the dispatch did not run")
        start = time.perf_counter_ns()
        try:
            result = call()
        except BaseException as exc:
            try:
                _call_hook(self._after, {**ctx, "duration_ns": time.perf_counter_ns() - start, "error": exc,
                                         "result": None}, "")
            except VyreError as hook_error:  # keep the backend's own error; mention the plugin's
                if sys.version_info >= (3, 11):
                    exc.add_note(str(hook_error))
            raise
        _call_hook(self._after, {**ctx, "duration_ns": time.perf_counter_ns() - start, "error": None,
                                 "result": result}, "the dispatch ran, but its result is dropped")
        return result


def _call_hook(hook: Any, kwargs: dict[str, Any], consequence: str) -> None:
    """Call a dispatch hook; a plugin's non-vyre exception becomes ``DispatchFailed`` naming the plugin."""
    try:
        hook(**kwargs)
    except (KeyboardInterrupt, VyreError):
        raise
    except BaseException as exc:  # noqa: BLE001 - a plugin's SystemExit must not end the host either
        plugin = blame(exc, hook)
        who = f"plugin {plugin!r}" if plugin else "a plugin"
        raise DispatchFailed("plugin", f"{who} raised {describe(exc)} in {hook.name}"
                                       + (f"; {consequence}" if consequence else ""),
                             f"{plugin_fix(plugin)}.") from exc


class _ImplsOf:
    """Fallback for a pluggy that keeps no live list: truthiness asks ``get_hookimpls()``."""

    __slots__ = ("caller",)

    def __init__(self, caller: Any) -> None:
        self.caller = caller

    def __bool__(self) -> bool:
        return bool(self.caller.get_hookimpls())


def _live_impls(caller: Any) -> list | _ImplsOf:
    """pluggy's own implementation list of ``caller``, which registering mutates in place."""
    impls = getattr(caller, "_hookimpls", None)
    return impls if isinstance(impls, list) else _ImplsOf(caller)


class HookedBackend:
    """A backend as handed out by ``vyre.acquire``; ``.backend`` is the raw backend."""

    __slots__ = ("backend", "_hooks")

    def __init__(self, backend: Any, hook: Any) -> None:
        self.backend = backend
        self._hooks = _DispatchHooks(getattr(backend, "id", type(backend).__name__), hook)

    def unwrap(self) -> Any:
        """The backend object itself, with no dispatch hooks."""
        return self.backend

    @property
    def id(self) -> str:
        return self.backend.id

    @property
    def version(self) -> str:
        return self.backend.version

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def __repr__(self) -> str:
        return f"HookedBackend({self.backend!r})"

    def __enter__(self) -> HookedBackend:
        self.backend.__enter__()
        return self

    def __exit__(self, *exc: object) -> Any:
        return self.backend.__exit__(*exc)

    # ---- pipelines -------------------------------------------------------------------------------
    def compile(self, program: Program, config: DispatchConfig | None = None) -> HookedPipeline:
        return HookedPipeline(self.backend.compile(program, config), program, config, self._hooks)


@dataclass(frozen=True)
class _Observed:
    """How a dispatch method of the proxy names what it runs, for the hooks."""

    params: tuple[str, ...]  # its positional parameters, in order
    steps: tuple[str, ...] = ()  # the parameters holding step lists (multi-step dispatches)
    grid: Callable[[Program, Any, DispatchConfig | None], tuple[int, int, int] | None] | None = None
    optional: str | None = None  # a parameter passed on only when not None (``stream``: host backends take none)
    doc: str | None = None


def _observed(name: str, spec: _Observed) -> Callable[..., Any]:
    """The proxy's ``name``: the backend's method, between the dispatch hooks when a plugin listens."""
    optional = spec.optional or ""
    optional_at = spec.params.index(optional) if optional else -1

    def method(self: HookedBackend, *args: Any, **kwargs: Any) -> Any:
        if optional_at >= 0:
            if len(args) > optional_at:
                args, kwargs = args[:optional_at], {**kwargs, optional: args[optional_at]}
            if optional in kwargs and kwargs[optional] is None:
                del kwargs[optional]
        hooks = self._hooks
        call = getattr(self.backend, name)
        if not (hooks.before_impls or hooks.after_impls):
            return call(*args, **kwargs)
        named: dict[str, Any] = dict(zip(spec.params, args)) | kwargs
        program: Any = named.get("program")
        config = named.get("config")
        if spec.steps:
            programs = tuple(step[0] for arg in spec.steps for step in named.get(arg, ()))
        else:
            programs = (program,)
        grid = spec.grid(program, named.get(spec.params[1]), config) if spec.grid else None
        return hooks.run(name, program, programs, config, lambda: call(*args, **kwargs), grid)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = spec.doc or getattr(Backend, name).__doc__
    return method


def _forwarder(name: str) -> Callable[..., Any]:
    def forward(self: HookedBackend, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.backend, name)(*args, **kwargs)

    forward.__name__ = name
    forward.__doc__ = getattr(Backend, name).__doc__ or f"Forwards to the backend's ``{name}``."
    return forward


def _set_methods() -> None:
    """The observed dispatches from ``OBSERVED``; then, since protocol checks (``isinstance(b,
    BackendProtocol)``) look attributes up statically, without ``__getattr__``, a plain forwarder for
    every other public method of ``Backend``."""
    for name, spec in OBSERVED.items():
        setattr(HookedBackend, name, _observed(name, spec))
    for name, value in vars(Backend).items():
        if not name.startswith("_") and callable(value) and name not in vars(HookedBackend):
            setattr(HookedBackend, name, _forwarder(name))


class HookedPipeline:
    """A compiled pipeline whose dispatches go through the dispatch hooks; ``.pipeline`` is the raw one."""

    __slots__ = ("pipeline", "program", "config", "_hooks")

    def __init__(self, pipeline: Any, program: Program, config: DispatchConfig | None, hooks: _DispatchHooks) -> None:
        self.pipeline, self.program, self.config, self._hooks = pipeline, program, config, hooks

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pipeline, name)

    def __repr__(self) -> str:
        return f"HookedPipeline({self.pipeline!r})"

    def _observe(self, kind: str, call: Callable[[], Any], grid: Callable[[], Any] | None = None) -> Any:
        hooks = self._hooks
        if not (hooks.before_impls or hooks.after_impls):
            return call()
        return self._hooks.run(kind, self.program, (self.program,), self.config, call, grid() if grid else None)

    def dispatch(self, inputs: Sequence[object], stream: object | None = None) -> Any:
        def call() -> Any:
            return self.pipeline.dispatch(inputs) if stream is None else self.pipeline.dispatch(inputs, stream=stream)
        return self._observe("pipeline.dispatch", call, lambda: host_grid(self.program, inputs, self.config))

    def dispatch_resident(self, handles: Sequence[object]) -> Any:
        return self._observe("pipeline.dispatch_resident", lambda: self.pipeline.dispatch_resident(handles),
                             lambda: resident_grid(self.program, handles, self.config))

    def dispatch_batch(self, batch: Sequence[Sequence[object]]) -> Any:
        return self._observe("pipeline.dispatch_batch", lambda: self.pipeline.dispatch_batch(batch))


def _grid_from_bytes(program: Program, config: DispatchConfig | None,
                     nbytes: dict[str, int]) -> tuple[int, int, int] | None:
    """The grid a dispatch runs, given its buffers' byte sizes; None if they do not describe one."""
    try:
        counts = {b.name: b.count or nbytes[b.name] // b.dtype.size for b in program.buffers if b.name in nbytes}
        return resolve_grid(program, config, buffer_counts(program, counts) | counts)
    except Exception:  # noqa: BLE001 - bad inputs are the dispatch's to report, not the observer's
        return None


def host_grid(program: Program, inputs: Sequence[Any], config: DispatchConfig | None
              ) -> tuple[int, int, int] | None:
    """The grid of a dispatch of host or device arrays (for the hooks' ``grid``)."""
    try:
        nbytes = {d.name: int(x.nbytes) if hasattr(x, "nbytes") else len(memoryview(x).cast("B"))
                  for d, x in zip(program.inputs, inputs)}
    except Exception:  # noqa: BLE001 - as above
        return None
    return _grid_from_bytes(program, config, nbytes)


def resident_grid(program: Program, handles: Sequence[object], config: DispatchConfig | None
                  ) -> tuple[int, int, int] | None:
    """The grid of a resident dispatch, from the handles' sizes (for the hooks' ``grid``)."""
    decls = [b for b in program.buffers if not b.is_workgroup]
    return _grid_from_bytes(program, config, {d.name: getattr(h, "nbytes", 0) for d, h in zip(decls, handles)})


#: every dispatch entry point the proxy observes: one row each (the kind the hooks see is the name)
OBSERVED: dict[str, _Observed] = {
    "dispatch": _Observed(("program", "inputs", "config", "stream"), grid=host_grid, optional="stream"),
    "dispatch_async": _Observed(("program", "inputs", "config"), grid=host_grid),
    "dispatch_timed": _Observed(("program", "inputs", "config"), grid=host_grid),
    "dispatch_resident": _Observed(("program", "handles", "config"), grid=resident_grid),
    "dispatch_sequence": _Observed(("steps", "reads"), steps=("steps",)),
    "enqueue_sequence": _Observed(("steps",), steps=("steps",), doc="The backend's ``enqueue_sequence`` (steps on "
                                  "a caller's stream, no wait), observed as a dispatch."),
    "dispatch_repeated": _Observed(("prefix", "repeated", "count", "reads"), steps=("prefix", "repeated")),
    "dispatch_until": _Observed(("steps", "flag_handle", "max_iterations"), steps=("steps",)),
    "enqueue_until": _Observed(("steps", "flag_handle", "max_iterations"), steps=("steps",),
                               doc="The backend's ``enqueue_until`` (``dispatch_until`` without reading the "
                               "iteration count: no wait), observed as a dispatch."),
}
_set_methods()

# ``help(backend.dispatch)`` on what ``vyre.acquire`` returns shows the protocol's documentation.
for _proxy, _base in ((HookedBackend, Backend), (HookedPipeline, CompiledPipeline)):
    for _name, _value in vars(_proxy).items():
        if callable(_value) and not _name.startswith("_") and _value.__doc__ is None and hasattr(_base, _name):
            _value.__doc__ = getattr(_base, _name).__doc__
