"""Find CuPy and describe a CUDA device; every failure is ``BackendUnavailable`` with a Fix.

CuPy is imported lazily (``import_cupy``) so that importing ``vyre_cuda`` works with no GPU stack.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

from vyre.driver.errors import BackendUnavailable
from vyre_cuda._runtime import settings

ENV_DEVICE = settings.DEVICE

FIX_INSTALL = "pip install 'vyre-cuda[cuda12]' (or [cuda13] for a CUDA 13 driver)"
FIX_NO_DRIVER = ("install the NVIDIA driver (check with nvidia-smi); on a machine without a GPU use "
                 "vyre.acquire(allow_reference=True)")
FIX_OLD_DRIVER = ("upgrade the NVIDIA driver, or install the CuPy build for your driver "
                  "(pip install 'vyre-cuda[cuda12]' for CUDA 12.x drivers)")
FIX_NO_DEVICE = ("check nvidia-smi and CUDA_VISIBLE_DEVICES; on a machine without a GPU use "
                 "vyre.acquire(allow_reference=True)")


@dataclass(frozen=True)
class DeviceInfo:
    """What vyre needs to know about one CUDA device (read once, at probe time)."""

    index: int
    name: str
    compute_capability: str
    sm_count: int
    warp_size: int
    max_threads_per_block: int
    max_block_dims: tuple[int, int, int]
    max_grid_dims: tuple[int, int, int]
    shared_mem_per_block: int
    shared_mem_per_block_optin: int
    cooperative_launch: bool
    total_memory: int
    l2_cache_bytes: int
    driver_version: int
    runtime_version: int
    pci_bus_id: str = ""
    uuid: str = ""

    @property
    def arch(self) -> str:
        """The ptxas/PTX target name, e.g. ``sm_90``."""
        return f"sm_{self.compute_capability}"

    def as_profile(self) -> dict[str, Any]:
        """The dict behind ``CudaBackend.device_profile()`` (the backend protocol)."""
        profile = asdict(self)
        profile["memory_bytes"] = self.total_memory
        profile["limits"] = {
            "max_threads_per_block": self.max_threads_per_block,
            "max_block_dims": self.max_block_dims,
            "max_grid_dims": self.max_grid_dims,
            "shared_mem_per_block": self.shared_mem_per_block,
            "shared_mem_per_block_optin": self.shared_mem_per_block_optin,
        }
        return profile


def import_cupy() -> ModuleType:
    """Import CuPy, or raise ``BackendUnavailable`` saying how to install it."""
    try:
        import cupy
    except ImportError as exc:
        raise BackendUnavailable(f"CuPy is not installed ({exc})", FIX_INSTALL) from exc
    except Exception as exc:  # noqa: BLE001 - a broken install raises anything at import
        raise BackendUnavailable(f"CuPy failed to import: {type(exc).__name__}: {exc}",
                                 f"reinstall CuPy: {FIX_INSTALL}") from exc
    return cupy


def resolve_index(device: int | str | None = None) -> int:
    """Device ordinal from the argument (``3``, ``"3"``, ``"cuda:3"``), else ``VYRE_CUDA_DEVICE``, else 0."""
    raw: int | str | None = device if device is not None else settings.device()
    if raw is None:
        return 0
    text = str(raw).strip()
    text = text[len("cuda:"):] if text.startswith("cuda:") else text
    try:
        index = int(text)
    except ValueError:
        index = -1
    if index < 0:
        raise BackendUnavailable(f"invalid CUDA device {raw!r}",
                                 f"give a device ordinal such as 0 (cuda:0, or {ENV_DEVICE}=0)")
    return index


def _unavailable(exc: BaseException, runtime: Any) -> BackendUnavailable:
    """Explain why the CUDA runtime could not start: no driver, old driver, no device."""
    from vyre_cuda._runtime.errors import canonical, status_name

    text = str(exc)
    name = canonical(status_name(exc) or "")
    if "failed to load libcuda" in text:
        return BackendUnavailable(f"no CUDA driver: libcuda could not be loaded ({text})", FIX_NO_DRIVER)
    if name == "INSUFFICIENT_DRIVER":
        driver, needed = _safe_int(runtime.driverGetVersion), _safe_int(runtime.runtimeGetVersion)
        if driver == 0:
            return BackendUnavailable("no CUDA driver: libcuda is not installed or not loadable", FIX_NO_DRIVER)
        return BackendUnavailable(f"CUDA driver too old: it supports CUDA {format_version(driver)}, CuPy's "
                                  f"runtime needs CUDA {format_version(needed)}", FIX_OLD_DRIVER)
    if name == "NO_DEVICE":
        return BackendUnavailable("no CUDA device is present", FIX_NO_DEVICE)
    return BackendUnavailable(f"CUDA failed to initialise: {text}", FIX_NO_DRIVER)


def _safe_int(call: Any) -> int:
    try:
        return int(call())
    except Exception:  # noqa: BLE001 - only used to word an error
        return 0


def format_version(version: int) -> str:
    """``12090`` -> ``"12.9"`` (CUDA's integer version encoding)."""
    return f"{version // 1000}.{version % 1000 // 10}"


def device_count() -> int:
    """Number of visible CUDA devices; ``BackendUnavailable`` when CUDA cannot start."""
    runtime = import_cupy().cuda.runtime
    try:
        return int(runtime.getDeviceCount())
    except Exception as exc:  # noqa: BLE001 - CuPy raises RuntimeError subclasses
        raise _unavailable(exc, runtime) from exc


def probe(device: int | str | None = None) -> DeviceInfo:
    """Describe the device (argument, else ``VYRE_CUDA_DEVICE``, else 0); points the JIT cache first
    (once CuPy imports: without it nothing is created on disk)."""
    from vyre_cuda._runtime.cache import configure_driver_jit_cache

    index = resolve_index(device)
    import_cupy()
    configure_driver_jit_cache()  # must precede the driver's initialisation
    count = device_count()
    if count == 0:
        raise BackendUnavailable("no CUDA device is present", FIX_NO_DEVICE)
    if index >= count:
        raise BackendUnavailable(f"CUDA device {index} does not exist ({count} device(s))",
                                 f"pick a device in 0..{count - 1} (cuda:N or {ENV_DEVICE}=N)")
    runtime = import_cupy().cuda.runtime
    try:
        props = runtime.getDeviceProperties(index)
        driver, rt = int(runtime.driverGetVersion()), int(runtime.runtimeGetVersion())
    except Exception as exc:  # noqa: BLE001
        raise _unavailable(exc, runtime) from exc
    return _from_properties(index, props, driver, rt)


def _text(value: Any) -> str:
    return value.decode(errors="replace").rstrip("\0") if isinstance(value, bytes) else str(value)


def _triple(value: Any) -> tuple[int, int, int]:
    items = [int(v) for v in (value or ())][:3] + [1, 1, 1]  # missing dimensions are 1
    return items[0], items[1], items[2]


def _from_properties(index: int, props: dict[str, Any], driver: int, runtime: int) -> DeviceInfo:
    uuid = props.get("uuid", b"")
    pci = (f"{props.get('pciDomainID', 0):04x}:{props.get('pciBusID', 0):02x}:{props.get('pciDeviceID', 0):02x}.0"
           if "pciBusID" in props else "")
    shared = int(props.get("sharedMemPerBlock", 0))
    return DeviceInfo(
        index=index,
        name=_text(props.get("name", "")),
        compute_capability=f"{props['major']}{props['minor']}",
        sm_count=int(props.get("multiProcessorCount", 0)),
        warp_size=int(props.get("warpSize", 32)),
        max_threads_per_block=int(props.get("maxThreadsPerBlock", 1024)),
        max_block_dims=_triple(props.get("maxThreadsDim")),
        max_grid_dims=_triple(props.get("maxGridSize")),
        shared_mem_per_block=shared,
        shared_mem_per_block_optin=int(props.get("sharedMemPerBlockOptin", shared)),
        cooperative_launch=bool(props.get("cooperativeLaunch", 0)),
        total_memory=int(props.get("totalGlobalMem", 0)),
        l2_cache_bytes=int(props.get("l2CacheSize", 0)),
        driver_version=driver,
        runtime_version=runtime,
        pci_bus_id=pci,
        uuid=uuid.hex() if isinstance(uuid, bytes) else _text(uuid),
    )


__all__ = ["DeviceInfo", "ENV_DEVICE", "device_count", "format_version", "import_cupy", "probe", "resolve_index"]
