"""``VYRE_CUDA_*`` settings (``vyre_cuda._runtime.settings``): a bad value is a clear error naming the
variable and what it accepts, never ignored, and ``vyre doctor`` lists every bad one (issue 30)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import vyre
from vyre.driver.errors import BackendUnavailable, InvalidSetting
from vyre_cuda._runtime import settings
from vyre_cuda._runtime.cache import DEFAULT_MAX_BYTES, default_cache_dir, max_bytes_from_env

ROOT = Path(__file__).resolve().parents[2]

BAD = [
    (settings.COARSEN, "abc", "2, 4, 8"),
    (settings.COARSEN, "\uff14", "2, 4, 8"),  # fullwidth 4
    (settings.COARSEN, "3", "2, 4, 8"),
    (settings.LAUNCH, "garbage", "cupy or pyctypes or ctypes"),
    (settings.LOADER, "gpu", "driver or cupy"),
    (settings.MEMORY_LIMIT, "lots", "byte count"),
    (settings.MEMORY_LIMIT, "-5", "byte count"),
    (settings.MEMORY_LIMIT, "\uff11\uff12", "ASCII digits"),  # fullwidth 12
    (settings.DEVICE, "\uff11", "ASCII digits"),
    (settings.DEVICE, "gpu0", "ASCII digits"),
    (settings.GRAPHS, "maybe", "1/true/on/yes or 0/false/off/no"),
    (settings.SYNC_EACH, "2", "1/true/on/yes"),
    (settings.NVTX, "enable", "1/true/on/yes"),
    (settings.CACHE_DIR, "~nosuchuser-vyre/x", "home directory"),
    (settings.CACHE_MAX_BYTES, "lots", "byte count"),
    (settings.PTX_DUMP_DIR, "~nosuchuser-vyre/d", "home directory"),
]


@pytest.mark.parametrize(("name", "value", "accepted"), BAD, ids=[f"{n}={v}" for n, v, _ in BAD])
def test_a_bad_value_is_an_error_naming_the_variable_and_what_it_accepts(monkeypatch, name, value, accepted) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(InvalidSetting) as info:
        settings.READERS[name]()
    assert f"{name}={value!r}" in info.value.message and name in info.value.fix and accepted in info.value.fix
    assert "Fix: set " in str(info.value)
    assert [p.name for p in settings.problems()] == [name]


GOOD = [
    (settings.COARSEN, None, None), (settings.COARSEN, "auto", None), (settings.COARSEN, "0", 1),
    (settings.COARSEN, "1", 1), (settings.COARSEN, "off", 1), (settings.COARSEN, "8", 8), (settings.COARSEN, "64", 64),
    (settings.LAUNCH, None, "cupy"), (settings.LAUNCH, "pyctypes", "pyctypes"), (settings.LAUNCH, "ctypes", "ctypes"),
    (settings.LOADER, None, "driver"), (settings.LOADER, "cupy", "cupy"), (settings.LOADER, "driver", "driver"),
    (settings.MEMORY_LIMIT, None, None), (settings.MEMORY_LIMIT, "1073741824", 1 << 30),
    (settings.MEMORY_LIMIT, "1G", 1 << 30), (settings.MEMORY_LIMIT, "512M", 512 << 20), (settings.MEMORY_LIMIT, "0", 0),
    (settings.DEVICE, None, None), (settings.DEVICE, "3", "3"), (settings.DEVICE, "cuda:1", "cuda:1"),
    (settings.GRAPHS, None, True), (settings.GRAPHS, "0", False), (settings.GRAPHS, " OFF ", False),
    (settings.GRAPHS, "1", True), (settings.GRAPHS, "", True),
    (settings.SYNC_EACH, None, False), (settings.SYNC_EACH, "1", True), (settings.SYNC_EACH, "0", False),
    (settings.NVTX, "1", True), (settings.NVTX, "off", False), (settings.NVTX, None, None),
    (settings.PDL, "no", False), (settings.CONDITIONAL, "false", False),
    (settings.CACHE_MAX_BYTES, "64M", 64 << 20), (settings.CACHE_MAX_BYTES, "2GiB", 2 << 30),
    (settings.PTX_DUMP_DIR, None, None), (settings.PTX_DUMP_DIR, "/tmp/dumps", Path("/tmp/dumps")),
]


@pytest.mark.parametrize(("name", "value", "expected"), GOOD, ids=[f"{n}={v}" for n, v, _ in GOOD])
def test_valid_values_keep_working(monkeypatch, name, value, expected) -> None:
    if value is None:
        monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv(name, value)
    assert settings.READERS[name]() == expected


def test_the_cache_reads_its_settings_here(monkeypatch) -> None:
    monkeypatch.setenv(settings.CACHE_DIR, "~/vyre-x")
    assert default_cache_dir() == Path.home() / "vyre-x"
    monkeypatch.delenv(settings.CACHE_MAX_BYTES, raising=False)
    assert max_bytes_from_env() == DEFAULT_MAX_BYTES
    monkeypatch.setenv(settings.CACHE_MAX_BYTES, "lots")
    with pytest.raises(InvalidSetting):
        max_bytes_from_env()
    monkeypatch.setenv(settings.CACHE_DIR, "~nosuchuser-vyre/x")
    with pytest.raises(InvalidSetting):
        default_cache_dir()


def test_acquiring_cuda_with_a_bad_setting_says_which(monkeypatch) -> None:
    monkeypatch.setenv(settings.COARSEN, "abc")
    with pytest.raises(BackendUnavailable) as info:
        vyre.acquire("cuda")
    assert "VYRE_CUDA_COARSEN='abc'" in info.value.message and "VYRE_CUDA_COARSEN" in info.value.fix


def test_every_setting_is_in_the_table_of_variables() -> None:
    for name in settings.READERS:
        assert f"``{name}" in settings.__doc__, name


def _vyre(*args: str, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("VYRE_")}
    full.update(env, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "vyre.cli", *args], capture_output=True, text=True, env=full,
                          cwd=ROOT, timeout=10, check=False)


def test_doctor_reports_every_bad_setting(tmp_path: Path) -> None:
    bad = {settings.COARSEN: "abc", settings.LAUNCH: "garbage", settings.MEMORY_LIMIT: "lots",
           settings.CACHE_DIR: "~nosuchuser-vyre/x", "VYRE_CUDA_GRAPH": "0"}
    done = _vyre("doctor", "--json", **bad)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    checks = {c["name"]: c for c in json.loads(done.stdout)}
    found = checks["settings"]
    assert found["status"] == "FAIL"
    for name in bad:
        assert name in found["detail"], (name, found)
    for name in (settings.COARSEN, settings.LAUNCH, settings.MEMORY_LIMIT, settings.CACHE_DIR):
        assert name in found["fix"]
    assert checks["cache"]["status"] == "FAIL" and settings.CACHE_DIR in checks["cache"]["fix"]
    text = _vyre("doctor", **bad)
    assert text.returncode == 1 and "Traceback" not in text.stderr and "VYRE_CUDA_COARSEN" in text.stdout


def test_doctor_with_good_settings_says_ok() -> None:
    done = _vyre("doctor", "--json", VYRE_CUDA_COARSEN="4", VYRE_CUDA_MEMORY_LIMIT="1G")
    assert {c["name"]: c["status"] for c in json.loads(done.stdout)}["settings"] == "OK"


def test_a_bad_cache_dir_is_a_usage_error_not_an_internal_error() -> None:
    done = _vyre("cache", "info", VYRE_CUDA_CACHE_DIR="~nosuchuser-vyre/x")
    assert done.returncode == 2 and "internal error" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("Fix: set VYRE_CUDA_CACHE_DIR")
