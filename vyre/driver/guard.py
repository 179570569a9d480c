"""Calling third-party plugin code so that one bad plugin is reported, never fatal to the host.

``call_with_timeout`` runs a plugin's function in a daemon thread and stops waiting after
``plugin_timeout()`` seconds (``VYRE_PLUGIN_TIMEOUT_S``, default 30): a factory that sleeps cannot
hang ``acquire`` or ``vyre backends``. Every exception, ``BaseException`` included (``SystemExit``,
``KeyboardInterrupt``-like classes), comes back as a value to report. ``blame`` names the plugin
whose hook implementation raised, from the exception's traceback.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Callable
from typing import Any, NamedTuple

from vyre import settings

ENV_TIMEOUT = settings.PLUGIN_TIMEOUT
DEFAULT_TIMEOUT_S = 30.0


class PluginWarning(RuntimeWarning):
    """A plugin misbehaved (and was skipped or overruled); the message names it and ends with a Fix."""


class Outcome(NamedTuple):
    """What a guarded call gave: its value, or the exception it raised, or that it timed out."""

    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False

    def reason(self, timeout: float) -> str:
        """Why the call failed, in words (``""`` when it did not)."""
        if self.timed_out:
            return f"did not return within {timeout:g} s ({ENV_TIMEOUT})"
        return describe(self.error) if self.error is not None else ""


def plugin_timeout() -> float:
    """Seconds a plugin's factory or registration may take: ``VYRE_PLUGIN_TIMEOUT_S``, default 30."""
    return settings.plugin_timeout(DEFAULT_TIMEOUT_S)


def plugin_fix(name: str | None) -> str:
    """The Fix sentence for a misbehaving plugin registered under entry point ``name`` (None: unknown)."""
    if name is None:
        return "fix or uninstall the plugin named in the traceback (VYRE_DISABLE_PLUGINS=name skips it)"
    return f"fix or uninstall plugin {name!r}, or skip it with VYRE_DISABLE_PLUGINS={name}"


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception (``SystemExit: 3``), one line."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def call_with_timeout(fn: Callable[[], Any], timeout: float, name: str) -> Outcome:
    """``fn()`` in a daemon thread; gives up waiting after ``timeout`` s (the thread is abandoned)."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - a plugin's SystemExit must not end the host
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name=f"vyre plugin call: {name}", daemon=True).start()
    if not done.wait(timeout):
        return Outcome(timed_out=True)
    return Outcome(box.get("value"), box.get("error"))


def call_guarded(fn: Callable[[], Any]) -> Outcome:
    """``fn()`` in this thread, every exception (``BaseException`` included) returned, not raised."""
    try:
        return Outcome(fn())
    except BaseException as exc:  # noqa: BLE001 - reported by the caller
        return Outcome(error=exc)


def blame(exc: BaseException, hook: Any) -> str | None:
    """The name of the plugin whose implementation of ``hook`` raised ``exc`` (None if none did)."""
    codes = {}
    for impl in hook.get_hookimpls():
        code = getattr(impl.function, "__code__", None)
        if isinstance(code, types.CodeType):
            codes[code] = impl.plugin_name
    tb = exc.__traceback__
    found = None
    while tb is not None:  # the innermost implementation frame is the one that raised
        found = codes.get(tb.tb_frame.f_code, found)
        tb = tb.tb_next
    return found


__all__ = ["DEFAULT_TIMEOUT_S", "ENV_TIMEOUT", "Outcome", "PluginWarning", "blame", "call_guarded",
           "call_with_timeout", "describe", "plugin_fix", "plugin_timeout"]
