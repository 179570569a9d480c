"""The cuda backend's host side on a machine without a GPU: probing, error mapping and the CLI verbs."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vyre.driver.errors import (
    BackendUnavailable,
    DeviceLost,
    DeviceOutOfMemory,
    DispatchFailed,
    KernelCompileFailed,
    VyreError,
)
from vyre_cuda import cli
from vyre_cuda.testing import DeviceInfo, canonical, cuda_errors, probe, resolve_index, translate

ROOT = Path(__file__).resolve().parents[2]
cupy = pytest.importorskip("cupy", reason="CuPy is not installed; the error-mapping tests need its exception classes")
runtime = pytest.importorskip("cupy_backends.cuda.api.runtime")
driver = pytest.importorskip("cupy_backends.cuda.api.driver")
HAS_GPU = cupy.cuda.is_available()
no_gpu_only = pytest.mark.skipif(HAS_GPU, reason="checks the behaviour on a machine without a CUDA device")


@pytest.fixture(autouse=True)
def private_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Every test gets its own cache dir and leaves CUDA_CACHE_PATH as it found it."""
    monkeypatch.setenv("VYRE_CUDA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDA_CACHE_PATH", raising=False)
    monkeypatch.delenv("VYRE_CUDA_DEVICE", raising=False)
    return tmp_path / "cache"


def python(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


# ---- imports and probing -------------------------------------------------------------------------
def test_importing_the_host_modules_never_imports_cupy() -> None:
    done = python("""
        import sys
        import vyre_cuda, vyre_cuda.plugin, vyre_cuda.profiling, vyre_cuda.testing
        import vyre_cuda._runtime.device, vyre_cuda._runtime.cache, vyre_cuda._runtime.loader
        import vyre_cuda._runtime.errors, vyre_cuda.cli
        assert not [m for m in sys.modules if m.split(".")[0] in ("cupy", "cupy_backends")], "cupy was imported"
    """)
    assert done.returncode == 0, done.stderr


@no_gpu_only
def test_probe_without_a_gpu_is_backend_unavailable_with_a_fix(private_cache: Path) -> None:
    with pytest.raises(BackendUnavailable) as caught:
        probe()
    assert "driver" in caught.value.message.lower() or "device" in caught.value.message.lower()
    assert "Fix:" in str(caught.value) and caught.value.fix
    assert os.environ["CUDA_CACHE_PATH"] == str(private_cache / "driver-jit")  # set before the driver starts


def test_probe_without_cupy_says_how_to_install_it() -> None:
    done = python("""
        import sys
        sys.modules["cupy"] = None  # what Python does for a package that is not installed
        from vyre.driver.errors import BackendUnavailable
        from vyre_cuda.testing import probe
        try:
            probe()
        except BackendUnavailable as exc:
            print(exc)
        """)
    assert done.returncode == 0, done.stderr
    assert "CuPy is not installed" in done.stdout and "Fix: pip install 'vyre-cuda[cuda12]'" in done.stdout


def test_device_index_from_argument_env_or_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_index() == 0
    assert resolve_index(2) == resolve_index("2") == resolve_index("cuda:2") == 2
    monkeypatch.setenv("VYRE_CUDA_DEVICE", "3")
    assert resolve_index() == 3 and resolve_index(1) == 1
    for bad in ("gpu", "cuda:-1", -1):
        with pytest.raises(BackendUnavailable, match="Fix:"):
            resolve_index(bad)


def test_device_info_profile() -> None:
    info = DeviceInfo(0, "NVIDIA H100 80GB HBM3", "90", 132, 32, 1024, (1024, 1024, 64), (2**31 - 1, 65535, 65535),
                      49152, 232448, True, 85 << 30, 50 << 20, 13000, 12090)
    profile = info.as_profile()
    assert info.arch == "sm_90"
    assert profile["memory_bytes"] == 85 << 30 and profile["compute_capability"] == "90"
    assert profile["limits"]["shared_mem_per_block_optin"] == 232448 and profile["sm_count"] == 132


# ---- error mapping, with CuPy's real exception classes ---------------------------------------------------
def driver_error(status: int, message: str) -> Exception:
    """A real ``CUDADriverError``: its constructor asks libcuda for the text, so set the fields it would set."""
    exc = driver.CUDADriverError.__new__(driver.CUDADriverError)
    RuntimeError.__init__(exc, message)
    exc.status = status
    return exc


FIX_WORDS = {DispatchFailed: "workgroup", KernelCompileFailed: "driver"}
RUNTIME_CASES = [
    (2, DeviceOutOfMemory), (700, DeviceLost), (719, DeviceLost), (214, DeviceLost), (716, DeviceLost),
    (9, DispatchFailed), (701, DispatchFailed), (222, KernelCompileFailed), (218, KernelCompileFailed),
    (209, KernelCompileFailed), (35, BackendUnavailable), (100, BackendUnavailable), (101, BackendUnavailable),
]
DRIVER_CASES = [
    (700, "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered", DeviceLost),
    (719, "CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure", DeviceLost),
    (214, "CUDA_ERROR_ECC_UNCORRECTABLE: uncorrectable ECC error encountered", DeviceLost),
    (714, "CUDA_ERROR_HARDWARE_STACK_ERROR: hardware stack error", DeviceLost),
    (2, "CUDA_ERROR_OUT_OF_MEMORY: out of memory", DeviceOutOfMemory),
    (701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: too many resources requested for launch", DispatchFailed),
    (222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the provided PTX was compiled with an unsupported toolchain.",
     KernelCompileFailed),
    (218, "CUDA_ERROR_INVALID_PTX: a PTX JIT compilation failed", KernelCompileFailed),
    (100, "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected", BackendUnavailable),
    (1, "CUDA_ERROR_INVALID_VALUE: invalid argument", DispatchFailed),
]


@pytest.mark.parametrize(("status", "expected"), RUNTIME_CASES, ids=[str(s) for s, _ in RUNTIME_CASES])
def test_runtime_errors_map_by_status(status: int, expected: type) -> None:
    exc = runtime.CUDARuntimeError(status)
    err = translate(exc, "launching program p")
    assert type(err) is expected, (str(exc), err)
    assert "Fix:" in str(err)
    if expected in FIX_WORDS and status in (9, 701, 222):
        assert FIX_WORDS[expected] in err.fix


@pytest.mark.parametrize(("status", "message", "expected"), DRIVER_CASES, ids=[m.split(":")[0] for _, m, _ in
                                                                               DRIVER_CASES])
def test_driver_errors_map_by_status_name(status: int, message: str, expected: type) -> None:
    err = translate(driver_error(status, message))
    assert type(err) is expected and "Fix:" in str(err)


def test_unknown_status_is_dispatch_failed_with_its_name() -> None:
    err = translate(runtime.CUDARuntimeError(1), "copying")
    assert isinstance(err, DispatchFailed) and err.code == "cudaErrorInvalidValue" and "copying" in err.message


def test_status_names_share_one_table() -> None:
    assert canonical("cudaErrorIllegalAddress") == canonical("CUDA_ERROR_ILLEGAL_ADDRESS") == "ILLEGAL_ADDRESS"
    assert canonical("cudaErrorECCUncorrectable") == "ECC_UNCORRECTABLE"


def test_cupy_out_of_memory_keeps_the_sizes() -> None:
    from cupy.cuda.memory import OutOfMemoryError

    err = translate(OutOfMemoryError(1024, 100, 2000))
    assert isinstance(err, DeviceOutOfMemory) and (err.requested, err.available) == (1024, 1900)
    err = translate(runtime.CUDARuntimeError(2), requested=4096)
    assert isinstance(err, DeviceOutOfMemory) and err.requested == 4096


def test_cuda_errors_wraps_cupy_and_passes_everything_else() -> None:
    original = runtime.CUDARuntimeError(700)
    with pytest.raises(DeviceLost) as caught, cuda_errors("syncing"):
        raise original
    assert caught.value.__cause__ is original and "syncing" in caught.value.message
    with pytest.raises(KeyError), cuda_errors("x"):
        raise KeyError("our own bug stays visible")
    mine = DispatchFailed("x", "already a vyre error")
    with pytest.raises(DispatchFailed) as caught, cuda_errors("x"):
        raise mine
    assert caught.value is mine


@no_gpu_only
def test_real_cupy_calls_without_a_gpu_become_vyre_errors() -> None:
    with pytest.raises(BackendUnavailable, match="Fix:"), cuda_errors("allocating"):
        cupy.zeros(4)
    if shutil.which("nvidia-smi") is None:
        with pytest.raises(BackendUnavailable, match="no CUDA driver"), cuda_errors("context"):
            cupy.cuda.driver.ctxGetCurrent()  # CuPy: "failed to load libcuda.so.1"


def test_value_errors_raised_inside_cupy_are_wrapped() -> None:
    with pytest.raises(VyreError) as caught, cuda_errors("launching"):
        cupy.RawModule(code="x", path="y")  # CuPy rejects this itself (TypeError from cupy/_core/raw.pyx)
    assert not isinstance(caught.value, (TypeError, ValueError))


# ---- CLI verbs ------------------------------------------------------------------------------------------
def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="vyre")
    cli.add_cli_commands(parser.add_subparsers())
    return parser.parse_args(argv)


def test_doctor_works_without_a_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse("doctor")
    assert args.func(args) == 0
    out = capsys.readouterr().out
    rows = [line.split()[:2] for line in out.splitlines() if line.split()[:1] in (["OK"], ["WARN"], ["MISSING"])]
    assert [name for _, name in rows] == ["vyre", "settings", "driver", "cupy", "bindings", "device", "ptxas",
                                         "cache"]
    if not HAS_GPU:
        assert "No usable CUDA device" in out and "Fix:" in out
    args = parse("doctor", "--json")
    assert args.func(args) == 0
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)}
    assert checks["vyre"]["status"] == "OK" and checks["cache"]["status"] == "OK"
    assert checks["device"]["status"] == ("OK" if HAS_GPU else "MISSING")
    assert checks["bindings"]["status"] in ("OK", "WARN")  # optional: the cuda12/cuda13 extras bring them


def test_cache_info_and_clear(private_cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from vyre_cuda.testing import default_disk_cache

    cache = default_disk_cache()
    assert cache.root == private_cache
    cache.put("ab" * 32, b"payload")
    for argv in (("cache",), ("cache", "info")):
        args = parse(*argv)
        assert args.func(args) == 0
        assert f"path            {private_cache}" in capsys.readouterr().out
    args = parse("cache", "info", "--json")
    assert args.func(args) == 0
    assert json.loads(capsys.readouterr().out)["entries"] == 1
    args = parse("cache", "clear")
    assert args.func(args) == 0
    assert "removed 1 file(s)" in capsys.readouterr().out
    assert cache.get("ab" * 32) is None


@pytest.fixture
def xor_file(tmp_path: Path) -> Path:
    from vyre.ir import BufferDecl, DataType, Expr, Node, Program

    gid = Expr.invocation_id(0)
    program = Program([BufferDecl.read("a", 0, DataType.U32), BufferDecl.read_write("out", 1, DataType.U32)],
                      (64, 1, 1), [Node.store("out", gid, Expr.bitxor(Expr.load("a", gid), Expr.u32(7)))],
                      name="xor7")
    path = tmp_path / "xor7.vyre"
    path.write_text(program.to_text())
    return path


def test_emit_ptx(xor_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import vyre_cuda

    if not hasattr(vyre_cuda, "emit_ptx"):
        pytest.skip("vyre_cuda.emit_ptx is not written yet")
    args = parse("emit-ptx", str(xor_file), "--sm", "sm_80")
    assert args.func(args) == 0
    ptx = capsys.readouterr().out
    assert ".target sm_80" in ptx and ".entry" in ptx
    out = tmp_path / "xor7.ptx"
    args = parse("emit-ptx", str(xor_file), "--sm", "90", "--ptx-version", "8.0", "-o", str(out))
    assert args.func(args) == 0
    text = out.read_text()
    assert ".version 8.0" in text and ".target sm_90" in text
    if shutil.which("ptxas"):
        done = subprocess.run(["ptxas", "--gpu-name", "sm_90", "-o", os.devnull, str(out)], capture_output=True,
                              text=True, check=False)
        assert done.returncode == 0, done.stderr


def test_emit_ptx_coarsened(xor_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from vyre.cli import load_program
    from vyre_cuda import emit_ptx

    args = parse("emit-ptx", str(xor_file), "--coarsen", "4")
    assert args.func(args) == 0
    ptx = capsys.readouterr().out
    assert ptx == emit_ptx(load_program(str(xor_file)), coarsen=4) != emit_ptx(load_program(str(xor_file)))
    assert "coarsened x4" in ptx
    for bad in ("3", "0", "128", "four"):
        with pytest.raises(SystemExit):
            parse("emit-ptx", str(xor_file), "--coarsen", bad)
        assert "Fix:" in capsys.readouterr().err


def test_emit_ptx_of_a_missing_file_is_a_vyre_error(tmp_path: Path) -> None:
    args = parse("emit-ptx", str(tmp_path / "missing.vyre"))
    with pytest.raises(VyreError, match="Fix:"):
        args.func(args)


# ---- ModuleCache pieces that need no device ------------------------------------------------------------
H100 = DeviceInfo(0, "NVIDIA H100 80GB HBM3", "90", 132, 32, 1024, (1024, 1024, 64), (2**31 - 1, 65535, 65535),
                  49152, 232448, True, 85 << 30, 50 << 20, 13000, 12090)
BAD_PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p)
{
    .reg .b32 %r<2>;
    xorr.b32 %r1, %r1, 1;
    ret;
}
"""


def test_module_key_covers_ptx_arch_and_driver() -> None:
    from dataclasses import replace

    from vyre_cuda.testing import module_key

    base = module_key(BAD_PTX, H100)
    assert base == module_key(BAD_PTX, H100) and len(base) == 64
    assert base != module_key(BAD_PTX + " ", H100)
    assert base != module_key(BAD_PTX, replace(H100, compute_capability="80"))
    assert base != module_key(BAD_PTX, replace(H100, driver_version=12090))
    assert base == module_key(BAD_PTX, replace(H100, index=3, name="another H100"))  # same binary


@no_gpu_only
def test_module_cache_without_a_gpu_is_backend_unavailable(tmp_path: Path) -> None:
    from vyre_cuda.testing import DiskCache, ModuleCache

    cache = ModuleCache(H100, DiskCache(tmp_path))
    with pytest.raises(BackendUnavailable, match="Fix:"):
        cache.load(BAD_PTX, "k")
    assert cache.counters()["cuda_module_cache_entries"] == 0


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not on PATH")
def test_compile_failure_names_ptxas_diagnostics_and_the_dump(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    from vyre_cuda.testing import compile_failure, ptxas_diagnostics

    path = tmp_path / "bad.ptx"
    path.write_text(BAD_PTX)
    assert "Not a name of any known instruction: 'xorr'" in ptxas_diagnostics(path, "90")
    monkeypatch.setenv("VYRE_PTX_DUMP_DIR", str(tmp_path / "dump"))
    exc = driver_error(218, "CUDA_ERROR_INVALID_PTX: a PTX JIT compilation failed")
    err = compile_failure(BAD_PTX, "f" * 64, path, "90", exc)
    assert isinstance(err, KernelCompileFailed) and "Fix:" in str(err)
    assert "CUDA_ERROR_INVALID_PTX" in err.message and "xorr" in err.message
    dump = tmp_path / "dump" / f"vyre-{'f' * 16}.ptx"
    assert dump.read_text() == BAD_PTX and "INVALID_PTX" in dump.with_suffix(".log").read_text()
    assert str(dump) in err.message


# ---- device faults: the lost-device record and the fault kernel ----------------------------------------------
def test_a_device_lost_error_marks_no_device_whose_context_is_healthy() -> None:
    """``translate`` asks the device before recording it as lost: a fake or stale error resets nothing."""
    from vyre_cuda.testing import needs_reset, reset_device

    err = translate(runtime.CUDARuntimeError(700), "syncing")
    assert isinstance(err, DeviceLost) and "Fix:" in str(err)
    assert not needs_reset(0)
    reset_device(0)  # nothing recorded: a no-op


@pytest.mark.parametrize("kind", ["illegal_address", "trap"])
def test_fault_kernels_are_valid_ptx(kind: str, tmp_path: Path) -> None:
    from vyre_cuda.testing import FAULT_ENTRY, fault_ptx

    ptx = fault_ptx(kind, "90", "8.0")
    assert f".entry {FAULT_ENTRY}(" in ptx and ".target sm_90" in ptx
    if shutil.which("ptxas"):
        path = tmp_path / f"{kind}.ptx"
        path.write_text(ptx)
        done = subprocess.run(["ptxas", "--gpu-name", "sm_90", "-o", os.devnull, str(path)], capture_output=True,
                              text=True, check=False)
        assert done.returncode == 0, done.stderr
    with pytest.raises(ValueError, match="Fix:"):
        fault_ptx("melt", "90", "8.0")


# ---- vyre bench ------------------------------------------------------------------------------------------
def test_bench_verb_is_registered() -> None:
    args = parse("bench", "--quick", "--json", "out.json")
    assert args.func is cli.cmd_bench and args.quick and args.json == "out.json"


@no_gpu_only
def test_bench_without_a_gpu_says_so_and_exits_1() -> None:
    done = subprocess.run([sys.executable, "-m", "vyre.cli", "bench"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, timeout=120, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "needs a CUDA device" in done.stderr and "no usable one is present" in done.stderr
    assert "\nFix: " in done.stderr and "Traceback" not in done.stderr
