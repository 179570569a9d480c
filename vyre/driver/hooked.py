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
from typing import Any

from vyre.driver.backend import Backend, CompiledPipeline
from vyre.driver.config import DispatchConfig, resolve_grid
from vyre.driver.errors import DispatchFailed, VyreError
from vyre.driver.guard import blame, describe, plugin_fix
from vyre.driver.inputs import buffer_counts
from vyre.ir.program import Program

Step = tuple  # (program, handles, config)


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


def _step_programs(steps: Sequence[Step]) -> tuple[Program, ...]:
    return tuple(step[0] for step in steps)


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

    # ---- single-program dispatches -------------------------------------------------------------
    def dispatch(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None,
                 stream: object | None = None) -> Any:
        """The backend's ``dispatch`` (``stream`` passed on only when given: host backends take none)."""
        extra = {} if stream is None else {"stream": stream}
        if not (self._hooks.before_impls or self._hooks.after_impls):
            return self.backend.dispatch(program, inputs, config, **extra)
        return self._hooks.run("dispatch", program, (program,), config,
                               lambda: self.backend.dispatch(program, inputs, config, **extra),
                               host_grid(program, inputs, config))

    def dispatch_async(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None) -> Any:
        if not (self._hooks.before_impls or self._hooks.after_impls):
            return self.backend.dispatch_async(program, inputs, config)
        return self._hooks.run("dispatch_async", program, (program,), config,
                               lambda: self.backend.dispatch_async(program, inputs, config),
                               host_grid(program, inputs, config))

    def dispatch_timed(self, program: Program, inputs: Sequence[object], config: DispatchConfig | None = None) -> Any:
        if not (self._hooks.before_impls or self._hooks.after_impls):
            return self.backend.dispatch_timed(program, inputs, config)
        return self._hooks.run("dispatch_timed", program, (program,), config,
                               lambda: self.backend.dispatch_timed(program, inputs, config),
                               host_grid(program, inputs, config))

    def dispatch_resident(self, program: Program, handles: Sequence[object],
                          config: DispatchConfig | None = None) -> Any:
        if not (self._hooks.before_impls or self._hooks.after_impls):
            return self.backend.dispatch_resident(program, handles, config)
        return self._hooks.run("dispatch_resident", program, (program,), config,
                               lambda: self.backend.dispatch_resident(program, handles, config),
                               resident_grid(program, handles, config))

    # ---- multi-step dispatches -------------------------------------------------------------------
    def dispatch_sequence(self, steps: Sequence[Step], reads: Sequence[tuple] = ()) -> Any:
        if not (self._hooks.before_impls or self._hooks.after_impls):
            return self.backend.dispatch_sequence(steps, reads)
        return self._hooks.run("dispatch_sequence", None, _step_programs(steps), None,
                               lambda: self.backend.dispatch_sequence(steps, reads))

    def enqueue_sequence(self, steps: Sequence[Step], **kwargs: Any) -> Any:
        """The backend's ``enqueue_sequence`` (steps on a caller's stream, no wait), observed as a dispatch."""
        if not (self._hooks.before_impls or self._hooks.after_impls):
            return self.backend.enqueue_sequence(steps, **kwargs)
        return self._hooks.run("enqueue_sequence", None, _step_programs(steps), None,
                               lambda: self.backend.enqueue_sequence(steps, **kwargs))

    def dispatch_repeated(self, prefix: Sequence[Step], repeated: Sequence[Step], count: int,
                          reads: Sequence[tuple] = ()) -> Any:
        if not (self._hooks.before_impls or self._hooks.after_impls):
            return self.backend.dispatch_repeated(prefix, repeated, count, reads)
        return self._hooks.run("dispatch_repeated", None, _step_programs(prefix) + _step_programs(repeated), None,
                               lambda: self.backend.dispatch_repeated(prefix, repeated, count, reads))

    def dispatch_until(self, steps: Sequence[Step], flag_handle: object, max_iterations: int) -> Any:
        if not (self._hooks.before_impls or self._hooks.after_impls):
            return self.backend.dispatch_until(steps, flag_handle, max_iterations)
        return self._hooks.run("dispatch_until", None, _step_programs(steps), None,
                               lambda: self.backend.dispatch_until(steps, flag_handle, max_iterations))

    # ---- pipelines -------------------------------------------------------------------------------
    def compile(self, program: Program, config: DispatchConfig | None = None) -> HookedPipeline:
        return HookedPipeline(self.backend.compile(program, config), program, config, self._hooks)


def _forwarder(name: str) -> Callable[..., Any]:
    def forward(self: HookedBackend, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.backend, name)(*args, **kwargs)

    forward.__name__ = name
    forward.__doc__ = getattr(Backend, name).__doc__ or f"Forwards to the backend's ``{name}``."
    return forward


# Protocol checks (``isinstance(b, BackendProtocol)``) look attributes up statically, without
# ``__getattr__``: give the proxy every public method of ``Backend`` as an explicit forwarder.
for _name, _value in vars(Backend).items():
    if not _name.startswith("_") and callable(_value) and _name not in vars(HookedBackend):
        setattr(HookedBackend, _name, _forwarder(_name))


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


# ``help(backend.dispatch)`` on what ``vyre.acquire`` returns shows the protocol's documentation.
for _proxy, _base in ((HookedBackend, Backend), (HookedPipeline, CompiledPipeline)):
    for _name, _value in vars(_proxy).items():
        if callable(_value) and not _name.startswith("_") and _value.__doc__ is None and hasattr(_base, _name):
            _value.__doc__ = getattr(_base, _name).__doc__
