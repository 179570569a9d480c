"""Every ``VYRE_*`` environment variable of the host half, read in one place (the cuda backend's
are in ``vyre_cuda._runtime.settings``; docs/troubleshooting.md has the table of both).

| variable | meaning |
|---|---|
| ``VYRE_BACKEND`` | the backend ``vyre.acquire()`` / ``default_backend()`` start when none is named |
| ``VYRE_DISABLE_PLUGINS`` | entry point names (comma separated) that are not loaded |
| ``VYRE_PLUGIN_TIMEOUT_S`` | seconds a plugin's factory or registration may take (default 30, also for a bad value) |
| ``VYRE_DEBUG`` | the ``vyre`` command prints the traceback of an internal error (any value but ``0``) |
| ``VYRE_ONESWEEP_LIMIT`` | sorts of fewer keys run in one pass (default ``2**30``; ``0``: always over segments) |
| ``VYRE_SPEC_CACHE`` | ``0``: the specialisation cache (``vyre.frontend.spec_cache``) neither reads nor writes |
| ``VYRE_SPEC_CACHE_DIR`` | its directory (default ``$XDG_CACHE_HOME/vyre/<version>/specialisations``) |

``set_variable`` / ``variable`` set and read any one of them (the fuzzer switches the cuda backend's
``VYRE_CUDA_COARSEN`` between cases with them).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from vyre.driver.errors import InvalidSetting

BACKEND = "VYRE_BACKEND"
DISABLE_PLUGINS = "VYRE_DISABLE_PLUGINS"
PLUGIN_TIMEOUT = "VYRE_PLUGIN_TIMEOUT_S"
DEBUG = "VYRE_DEBUG"
ONESWEEP_LIMIT = "VYRE_ONESWEEP_LIMIT"
SPEC_CACHE = "VYRE_SPEC_CACHE"
SPEC_CACHE_DIR = "VYRE_SPEC_CACHE_DIR"


def variable(name: str) -> str | None:
    """The variable's value as set (None when unset)."""
    return os.environ.get(name)


def set_variable(name: str, value: str | None) -> None:
    """Set ``name`` to ``value`` for what follows in this process (None: unset it)."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def backend() -> str | None:
    """``VYRE_BACKEND`` (None when unset or empty)."""
    return os.environ.get(BACKEND) or None


def disabled_plugins() -> list[str]:
    """The entry point names listed in ``VYRE_DISABLE_PLUGINS``."""
    return [n.strip() for n in os.environ.get(DISABLE_PLUGINS, "").split(",") if n.strip()]


def plugin_timeout(default: float) -> float:
    """``VYRE_PLUGIN_TIMEOUT_S`` in seconds; ``default`` when unset, not a number or not positive."""
    try:
        value = float(os.environ.get(PLUGIN_TIMEOUT, ""))
    except ValueError:
        return default
    return value if value > 0 else default


def debug() -> bool:
    """``VYRE_DEBUG`` set to anything but ``0``."""
    return os.environ.get(DEBUG, "0") not in ("", "0")


def onesweep_limit(default: int) -> int:
    """``VYRE_ONESWEEP_LIMIT`` (ASCII digits), else ``default``; ``InvalidSetting`` for any other value."""
    value = os.environ.get(ONESWEEP_LIMIT, "").strip()
    if not value:
        return default
    if not (value.isascii() and value.isdigit()):
        raise InvalidSetting(ONESWEEP_LIMIT, value, "a key count in ASCII digits (0: always sort over segments)")
    return int(value)


def spec_cache_enabled() -> bool:
    """``VYRE_SPEC_CACHE`` is not ``0`` (unset: on)."""
    return os.environ.get(SPEC_CACHE, "1").strip() != "0"


def spec_cache_dir(version: str) -> Path:
    """``VYRE_SPEC_CACHE_DIR``, else ``$XDG_CACHE_HOME/vyre/<version>/specialisations`` (XDG default
    ``~/.cache``; without a home directory, a per-user directory in the temporary directory)."""
    explicit = os.environ.get(SPEC_CACHE_DIR, "")
    if explicit:
        return Path(explicit).expanduser()
    return user_cache_base("vyre") / "vyre" / version.replace(os.sep, "_") / "specialisations"


def user_cache_base(name: str) -> Path:
    """``$XDG_CACHE_HOME`` when absolute, else ``~/.cache``; without a home directory (some
    containers), a per-user directory ``<name>-<uid>`` in the temporary directory."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return Path(xdg)
    try:
        return Path.home() / ".cache"
    except RuntimeError:
        return Path(tempfile.gettempdir()) / f"{name}-{os.getuid()}"
