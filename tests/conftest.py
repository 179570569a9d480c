"""Suite-wide pytest settings: how many worker processes ``pytest -n auto`` starts.

The README's test command (and CI) runs ``pytest -n auto`` (pytest-xdist). Without a CUDA device
that is one worker per CPU core. With one, it is a single process: the GPU tests time kernels,
fill device memory on purpose and assume the card is theirs, and many host tests also pick the
``cuda`` backend when it starts. An explicit ``-n N`` is left as given.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile

import pytest


def _cuda_device_visible() -> bool:
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy

        return bool(cupy.cuda.is_available())
    except Exception:  # noqa: BLE001 - no working CuPy means no GPU tests
        return False


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: 0 (no workers: one process) when a CUDA device is visible, else xdist's default."""
    return 0 if _cuda_device_visible() else None


def pytest_configure(config: pytest.Config) -> None:
    """The specialisation cache of ``vyre.lib``'s kernels goes to a directory of this run (the
    subprocesses of tests inherit it), not to the user's cache, unless the caller names one."""
    if "VYRE_SPEC_CACHE_DIR" not in os.environ:
        os.environ["VYRE_SPEC_CACHE_DIR"] = _made_here[0] = tempfile.mkdtemp(prefix="vyre-spec-test-")


_made_here: list[str] = [""]


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the specialisation cache directory ``pytest_configure`` made."""
    if _made_here[0]:
        shutil.rmtree(_made_here[0], ignore_errors=True)


@pytest.fixture(scope="module")
def oracle():
    """The CPU oracle (``vyre.reference``), one per test module; a module that needs it set up
    otherwise (BFS's IR level loop instead of the host search) defines its own."""
    import vyre

    with vyre.acquire("reference") as backend:
        yield backend
