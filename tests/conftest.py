"""Suite-wide pytest settings: how many worker processes ``pytest -n auto`` starts.

The README's test command (and CI) runs ``pytest -n auto`` (pytest-xdist). Without a CUDA device
that is one worker per CPU core. With one, it is a single process: the GPU tests time kernels,
fill device memory on purpose and assume the card is theirs, and many host tests also pick the
``cuda`` backend when it starts. An explicit ``-n N`` is left as given.
"""

from __future__ import annotations

import importlib.util

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
