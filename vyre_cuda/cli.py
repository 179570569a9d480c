"""The cuda plugin's ``vyre`` verbs: ``emit-ptx``, ``doctor``, ``bench`` and ``cache info|clear``.

``add_cli_commands(subparsers)`` is called from the plugin's ``vyre_cli_commands`` hook. Each
handler is a plain function of an ``argparse.Namespace`` returning the exit code; a ``VyreError``
propagates to ``vyre.cli.main``, which prints it with its ``Fix:`` line.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from vyre.cli import UsageError, cli_fix
from vyre.driver.errors import BackendUnavailable

OK, WARN, MISSING, FAIL = "OK", "WARN", "MISSING", "FAIL"
CUPY_DISTRIBUTIONS = ("cupy-cuda13x", "cupy-cuda12x", "cupy")


def add_cli_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add ``emit-ptx``, ``doctor``, ``bench`` and ``cache`` to the ``vyre`` command line."""
    p = subparsers.add_parser("emit-ptx", help="print the PTX the cuda backend emits for a .vyre file")
    p.add_argument("file", help="a .vyre program (text form)")
    p.add_argument("--sm", default="90", help="target compute capability, e.g. 90 or sm_80 (default 90)")
    p.add_argument("--ptx-version", default=None, help="PTX ISA version, e.g. 8.0 (default: chosen for the target)")
    p.add_argument("--coarsen", type=_coarsen_factor, default=1, metavar="K",
                   help="the kernel that runs K logical workgroups per hardware workgroup along x "
                        "(a power of two up to 64; the backend picks 4 for large grids; default 1)")
    p.add_argument("-o", "--output", default=None, help="write the PTX to this file instead of stdout")
    p.set_defaults(func=cmd_emit_ptx)

    p = subparsers.add_parser("doctor", help="check driver, CuPy, device, ptxas and the kernel cache")
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.set_defaults(func=cmd_doctor)

    p = subparsers.add_parser("bench", help="benchmark the cuda backend on this machine's GPU")
    p.add_argument("--quick", action="store_true", help="smaller buffers and fewer repetitions")
    p.add_argument("--json", default=None, metavar="PATH", help="also write every number as JSON to PATH")
    p.set_defaults(func=cmd_bench)

    p = subparsers.add_parser("cache", help="show or clear the cuda backend's kernel cache")
    p.set_defaults(func=cmd_cache_info, json=False)
    verbs = p.add_subparsers(dest="cache_command")
    info = verbs.add_parser("info", help="cache directory, entries, bytes, cap and counters")
    info.add_argument("--json", action="store_true", help="print as JSON")
    info.set_defaults(func=cmd_cache_info)
    verbs.add_parser("clear", help="remove every cached kernel").set_defaults(func=cmd_cache_clear)


# ---- emit-ptx ------------------------------------------------------------------------------------
def _coarsen_factor(text: str) -> int:
    """``--coarsen``: an int accepted by ``_codegen.coarsen.check_factor`` (else an argparse error)."""
    from vyre_cuda._codegen.coarsen import check_factor

    try:
        return check_factor(int(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc) if text.lstrip("-").isdigit() else
                                         f"{text!r} is not an integer. Fix: pass 1, 2, 4, ... 64.") from exc


def cmd_emit_ptx(args: argparse.Namespace) -> int:
    """Emit PTX for ``args.file`` (``--sm``, ``--ptx-version``, ``--coarsen``, ``-o``)."""
    from vyre.cli import load_program
    from vyre_cuda._codegen import emit_ptx

    target = Path(args.output) if args.output else None
    if target is not None and not target.parent.is_dir():
        raise UsageError(f"-o {args.output}: directory {target.parent} does not exist",
                         "pass -o a path in an existing directory, or leave -o out to print the PTX.")
    sm = str(args.sm).lower().removeprefix("sm_")
    ptx = emit_ptx(load_program(args.file), sm=sm, ptx_version=args.ptx_version, coarsen=args.coarsen)
    if target is not None:
        try:
            target.write_text(ptx, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write -o {args.output}: {exc.strerror}",
                             "pass -o a writable file path, or leave -o out to print the PTX.") from None
        print(f"vyre: wrote {len(ptx)} bytes of PTX for sm_{sm} to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(ptx)
    return 0


# ---- doctor ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Check:
    """One line of ``vyre doctor``: OK, WARN (optional part), MISSING (GPU stack absent) or FAIL (broken)."""

    name: str
    status: str
    detail: str
    fix: str = ""


def run_checks() -> list[Check]:
    """Every doctor check, in the order printed."""
    cupy = check_cupy()
    driver = check_driver()
    usable = cupy.status == OK and driver.status == OK
    return [check_vyre(), check_settings(), driver, cupy, check_bindings(), check_device(usable), check_ptxas(),
            check_cache()]


def cmd_doctor(args: argparse.Namespace) -> int:
    """Print each check with its Fix; exit 1 only when something installed is broken (FAIL)."""
    checks = run_checks()
    if getattr(args, "json", False):
        print(json.dumps([asdict(c) for c in checks], indent=2))
    else:
        for c in checks:
            print(f"{c.status:<8}{c.name:<10}{c.detail}")  # names of 8 letters (settings) keep a gap
            if c.fix and c.status != OK:
                print(f"{'':<18}Fix: {cli_fix(c.fix)}")
        device = next(c for c in checks if c.name == "device")
        if device.status != OK:
            print("\nNo usable CUDA device: the cuda backend is unavailable. The host runtime and the reference "
                  "backend work: vyre run ... --backend reference.")
    return 1 if any(c.status == FAIL for c in checks) else 0


def check_vyre() -> Check:
    import vyre

    return Check("vyre", OK, f"vyre {vyre.__version__} (Python {sys.version.split()[0]})")


def check_settings() -> Check:
    """Every ``VYRE_CUDA_*`` (and ``VYRE_PTX_DUMP_DIR``) variable: FAIL listing each bad value, WARN for
    unknown ``VYRE_CUDA_*`` names (a misspelt setting does nothing)."""
    from vyre_cuda._runtime import settings

    bad, unknown = settings.problems(), settings.unknown()
    if bad:
        detail = "; ".join(exc.message for exc in bad)
        if unknown:
            detail += f"; unknown: {', '.join(unknown)}"
        return Check("settings", FAIL, detail, "; ".join(exc.fix for exc in bad))
    if unknown:
        return Check("settings", WARN, f"unknown variables (ignored): {', '.join(unknown)}",
                     f"unset them, or correct the names (the settings: {', '.join(settings.READERS)})")
    return Check("settings", OK, "every VYRE_CUDA_* variable is valid")


def driver_version() -> int:
    """The CUDA driver version from libcuda (``cuDriverGetVersion``), 0 when no driver is installed."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    version = ctypes.c_int(0)
    return version.value if lib.cuDriverGetVersion(ctypes.byref(version)) == 0 else 0


def check_driver() -> Check:
    from vyre_cuda._runtime.device import FIX_NO_DRIVER, format_version

    version = driver_version()
    if version == 0:
        return Check("driver", MISSING, "no CUDA driver (libcuda.so.1 not found)", FIX_NO_DRIVER)
    return Check("driver", OK, f"CUDA driver {format_version(version)} ({version})")


def check_cupy() -> Check:
    from vyre_cuda._runtime.device import FIX_INSTALL, format_version, import_cupy

    if importlib.util.find_spec("cupy") is None:
        return Check("cupy", MISSING, "CuPy is not installed", FIX_INSTALL)
    try:
        cupy = import_cupy()
    except BackendUnavailable as exc:
        return Check("cupy", FAIL, exc.message, exc.fix)
    dist = next((d for d in CUPY_DISTRIBUTIONS if _installed(d)), "cupy")
    runtime = format_version(int(cupy.cuda.runtime.runtimeGetVersion()))
    return Check("cupy", OK, f"{dist} {cupy.__version__} (CUDA runtime {runtime})")


def check_bindings() -> Check:
    """cuda-bindings (the cold driver paths, ``_runtime/driver.py``) and nvtx (the ``vyre`` NVTX domain), by
    their metadata only: nothing is imported or loaded."""
    found = {d: _version(d) for d in ("cuda-bindings", "nvtx")}
    missing = [d for d, v in found.items() if v is None]
    if not missing:
        return Check("bindings", OK, ", ".join(f"{d} {v}" for d, v in found.items()))
    lost = {"cuda-bindings": "fixed-point loops read their flag back per batch and graphs use plain launches",
            "nvtx": "NVTX ranges only with VYRE_CUDA_NVTX=1, in no domain"}
    return Check("bindings", WARN, "; ".join(f"{d} is not installed: {lost[d]}" for d in missing),
                 "install the extra of your CUDA version: pip install 'vyre-cuda[cuda12]' (or [cuda13])")


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.version(distribution)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def check_device(usable: bool) -> Check:
    """Probe the device (``VYRE_CUDA_DEVICE``, default 0) unless the driver or CuPy is already missing."""
    from vyre_cuda._runtime.device import FIX_NO_DEVICE, device_count, probe

    if not usable:
        return Check("device", MISSING, "no CUDA device can be used (see driver/cupy above)", FIX_NO_DEVICE)
    try:
        info = probe()
        count = device_count()
    except BackendUnavailable as exc:
        broken = "too old" in exc.message or "failed to initialise" in exc.message
        return Check("device", FAIL if broken else MISSING, exc.message, exc.fix)
    return Check("device", OK, f"{info.index}: {info.name}, sm_{info.compute_capability}, "
                               f"{_size(info.total_memory)}, {info.sm_count} SMs ({count} device(s))")


def check_ptxas() -> Check:
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        return Check("ptxas", WARN, "not found (optional: explains PTX the driver rejects)",
                     "install the CUDA toolkit's ptxas and put it on PATH")
    try:
        out = subprocess.run([ptxas, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("ptxas", WARN, f"{ptxas} does not run: {exc}", "reinstall the CUDA toolkit's ptxas")
    lines = out.strip().splitlines() or ["unknown version"]
    version = next((line for line in lines if "release" in line), lines[-1])
    return Check("ptxas", OK, f"{ptxas} ({version})")


def check_cache() -> Check:
    from vyre.driver.errors import InvalidSetting
    from vyre_cuda._runtime.cache import ENV_DIR, default_disk_cache, jit_cache_env

    try:
        info = default_disk_cache().info()
    except InvalidSetting as exc:
        return Check("cache", FAIL, exc.message, exc.fix)
    jit = os.environ.get("CUDA_CACHE_PATH") or jit_cache_env().get("CUDA_CACHE_PATH", "")
    detail = (f"{info['path']} ({info['entries']} entries, {info['files']} files, {_size(info['bytes'])} of "
              f"{_size(info['max_bytes'])}; driver JIT cache {jit})")
    problems = list(info["problems"])
    if problems:
        shown = "; ".join(problems[:3]) + (f" (+{len(problems) - 3} more)" if len(problems) > 3 else "")
        return Check("cache", FAIL, f"refused, anyone else who can write it could plant kernels: {shown}",
                     f"remove {info['path']} (vyre-cuda recreates it with mode 700), or make it yours and private: "
                     f"chown -R $USER {info['path']} && chmod -R go-w {info['path']}; or set {ENV_DIR} elsewhere")
    if not info["writable"]:
        return Check("cache", WARN, f"not writable: {detail}", f"set {ENV_DIR} to a writable directory")
    if not info["driver_jit_complete"]:
        return Check("cache", WARN, f"driver JIT cache too deep or large to walk (size is partial): {detail}",
                     f"remove {info['driver_jit_path']} by hand (rm -rf); the driver recreates it")
    return Check("cache", OK, detail)


# ---- bench -------------------------------------------------------------------------------------------
def cmd_bench(args: argparse.Namespace) -> int:
    """Run ``vyre_cuda.bench`` on device ``VYRE_CUDA_DEVICE`` (default 0) and print its table."""
    from vyre.cli import progress
    from vyre_cuda import bench
    from vyre_cuda._factory import create_backend

    try:
        be = create_backend()
    except BackendUnavailable as exc:
        raise BackendUnavailable(f"vyre bench needs a CUDA device, and no usable one is present ({exc.message})",
                                 "run vyre bench on a machine with an NVIDIA GPU and driver; `vyre doctor` shows "
                                 "what is missing here") from exc
    progress(f"benchmarking {be.info.name}")
    try:
        results = bench.run(be, args.quick, progress=progress)
    finally:
        be.shutdown()
    bench.print_table(results)
    target = bench.write_json(results, args.json)
    if target:
        progress(f"wrote {target}")
    return 0


# ---- cache info | clear -----------------------------------------------------------------------------
def cmd_cache_info(args: argparse.Namespace) -> int:
    """Print the cache directory, its size and cap (``--json`` for all fields)."""
    from vyre_cuda._runtime.cache import default_disk_cache

    info = default_disk_cache().info()
    if getattr(args, "json", False):
        print(json.dumps(info, indent=2))
        return 0
    print(f"path            {info['path']}")
    print(f"entries         {info['entries']} (+ {info['files']} module files)")
    print(f"size            {_size(info['bytes'])} of {_size(info['max_bytes'])}")
    print(f"driver JIT      {info['driver_jit_path']} ({_size(info['driver_jit_bytes'])})")
    print(f"writable        {'yes' if info['writable'] else 'no'}")
    for problem in info["problems"]:
        print(f"refused         {problem}")
    return 0


def cmd_cache_clear(args: argparse.Namespace) -> int:
    """Remove every cached kernel (entries, module files, driver JIT cache)."""
    from vyre_cuda._runtime.cache import default_disk_cache

    cache = default_disk_cache()
    removed = cache.clear()
    print(f"removed {removed} file(s) from {cache.root}")
    for problem in cache.problems():
        print(f"refused (nothing removed there): {problem}. Fix: run `vyre doctor`.")
    return 0


def _size(nbytes: int) -> str:
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{nbytes} B"


__all__ = ["Check", "add_cli_commands", "cmd_bench", "cmd_cache_clear", "cmd_cache_info", "cmd_doctor",
           "cmd_emit_ptx", "run_checks"]
