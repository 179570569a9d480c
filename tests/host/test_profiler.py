"""NVTX ranges (``_runtime.profiler``): the ``vyre`` domain, off unless forced or profiled, named ranges."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vyre_cuda._runtime import profiler, settings

ROOT = Path(__file__).resolve().parents[2]

nvtx = pytest.importorskip("nvtx", reason="the nvtx package is not installed (pip install nvtx)")


@pytest.fixture(autouse=True)
def _fresh_state(monkeypatch):
    monkeypatch.delenv(settings.NVTX, raising=False)
    profiler.refresh()
    yield
    monkeypatch.delenv(settings.NVTX, raising=False)
    profiler.refresh()


def test_ranges_go_to_the_vyre_domain_of_the_nvtx_package() -> None:
    assert profiler.backend() == "nvtx" and profiler.DOMAIN == "vyre"


def test_unset_without_a_profiler_pushes_nothing() -> None:
    assert not profiler.tool_attached()  # no NVTX tool is injected into the test process
    assert not profiler.refresh()
    assert profiler.nvtx_range("vyre.cuda.dispatch") is profiler.nvtx_range("vyre.cuda.sequence", "saxpy")


def test_forced_on_and_off(monkeypatch) -> None:
    monkeypatch.setenv(settings.NVTX, "1")
    assert profiler.refresh()
    with profiler.nvtx_range("vyre.cuda.dispatch", "saxpy"):  # a no-op domain without a tool: must not fail
        pass
    monkeypatch.setenv(settings.NVTX, "0")
    assert not profiler.refresh()


def test_recording_names_ranges_after_programs_in_order() -> None:
    with profiler.recording() as seen:
        with profiler.nvtx_range("vyre.lib.sort"):
            with profiler.nvtx_range("vyre.cuda.dispatch", "lib_radix_onesweep_0"):
                pass
            with profiler.nvtx_range("vyre.cuda.dispatch", "lib_radix_onesweep_0"):
                pass
    assert seen == ["vyre.lib.sort", "vyre.cuda.dispatch lib_radix_onesweep_0",
                    "vyre.cuda.dispatch lib_radix_onesweep_0"]
    assert not profiler.enabled()  # the earlier state is back
    assert profiler.nvtx_range("vyre.cuda.dispatch") is profiler.nvtx_range("vyre.cuda.codegen")


def test_a_range_is_left_when_its_block_raises() -> None:
    with profiler.recording() as seen, pytest.raises(ValueError):
        with profiler.nvtx_range("vyre.cuda.compile", "bad"):
            raise ValueError("boom")
    assert seen == ["vyre.cuda.compile bad"]


def test_without_the_package_ranges_need_the_variable() -> None:
    """The fallback (``cupy.cuda.nvtx``, no domain) never turns itself on."""
    code = ("import sys; sys.modules['nvtx'] = None\n"
            "from vyre_cuda._runtime import profiler\n"
            "print(profiler.backend(), profiler.tool_attached(), profiler.enabled())\n"
            "with profiler.recording() as seen, profiler.nvtx_range('vyre.cuda.dispatch', 'p'):\n"
            "    pass\n"
            "print(seen)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert done.stdout.splitlines() == ["cupy False False", "['vyre.cuda.dispatch p']"]


def test_an_unprofiled_process_never_imports_the_nvtx_package() -> None:
    code = ("import sys\n"
            "from vyre_cuda._runtime import profiler\n"
            "with profiler.nvtx_range('vyre.cuda.dispatch', 'p'):\n"
            "    pass\n"
            "print(profiler.enabled(), 'nvtx' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert done.stdout.split() == ["False", "False"]


def test_an_injected_tool_that_does_not_enable_the_domain_pushes_nothing(monkeypatch) -> None:
    """``NVTX_INJECTION64_PATH`` naming no usable tool: the package's domain stays a no-op, so ranges stay off."""
    code = ("from vyre_cuda._runtime import profiler\n"
            "print(profiler.tool_attached(), profiler.enabled(), profiler.backend())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT),
                               profiler.INJECTION_ENV: "/nonexistent/libToolsInjection64.so"})
    assert done.stdout.split() == ["False", "False", "nvtx"]
