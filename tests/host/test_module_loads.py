"""The one module-load path: the device's PTX target, and hand-written kernels loaded through ``ModuleCache``."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest

from vyre.driver.errors import BackendUnavailable
from vyre_cuda import ptx_version_for_driver
from vyre_cuda.testing import DeviceInfo, DiskCache, ModuleCache, condition_ptx

H100 = DeviceInfo(0, "NVIDIA H100 80GB HBM3", "90", 132, 32, 1024, (1024, 1024, 64), (2**31 - 1, 65535, 65535),
                  49152, 232448, True, 85 << 30, 50 << 20, 13000, 12090)


def test_the_target_is_the_devices_sm_and_the_version_its_driver_loads() -> None:
    """One place decides a device's PTX target and ``.version``: the emitter and the hand-written kernels share it."""
    assert ModuleCache(H100, None).target() == ("90", ptx_version_for_driver(13000, "90"))  # driver 13.0
    old = replace(H100, compute_capability="80", driver_version=12040)
    assert ModuleCache(old, None).target() == ("80", ptx_version_for_driver(12040, "80"))


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="checks the path taken without CuPy")
def test_a_snippet_is_written_for_the_target_then_takes_the_load_path(tmp_path: Path) -> None:
    """``load_snippet`` writes the snippet for the device's target and hands it to ``load`` (here: no CuPy)."""
    written: list[tuple[str, str]] = []

    def snippet(sm: str, version: str) -> str:
        written.append((sm, version))
        return condition_ptx(sm, version)

    cache = ModuleCache(H100, DiskCache(tmp_path))
    with pytest.raises(BackendUnavailable, match="Fix:"):
        cache.load_snippet(snippet, "vyre_while_condition")
    assert written == [cache.target()]
    assert cache.counters()["cuda_module_cache_misses"] == 1
