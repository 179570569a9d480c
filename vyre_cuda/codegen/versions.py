"""PTX ISA versions: what each target needs and what each CUDA driver loads."""

from __future__ import annotations

from vyre.driver.errors import UnsupportedFeature

#: lowest PTX ISA that ptxas accepts for ``.target sm_XX`` (cupy-api.md section 10, PTX ISA notes)
TARGET_MIN_PTX: dict[str, str] = {
    "70": "6.0", "72": "6.1", "75": "6.3", "80": "7.0", "86": "7.1", "87": "7.4", "89": "7.8",
    "90": "7.8", "90a": "8.0", "100": "8.6", "100a": "8.6", "120": "8.7", "120a": "8.7",
}
#: CUDA driver version (cuDriverGetVersion) -> highest PTX ISA it loads, newest first
DRIVER_MAX_PTX: tuple[tuple[int, str], ...] = (
    (13010, "9.1"), (13000, "9.0"), (12090, "8.8"), (12080, "8.7"), (12070, "8.6"),
    (12050, "8.5"), (12040, "8.4"), (12030, "8.3"), (12020, "8.2"), (12010, "8.1"),
    (12000, "8.0"), (11080, "7.8"), (11070, "7.7"), (11060, "7.6"), (11050, "7.5"),
    (11040, "7.4"), (11030, "7.3"), (11020, "7.2"), (11010, "7.1"), (11000, "7.0"),
)
#: features the emitter may use -> (lowest PTX ISA, lowest sm) they need
FEATURES: dict[str, tuple[str, int]] = {
    "bf16": ("7.0", 80),  # cvt.rn.bf16.f32
    "scoped_atomics": ("6.0", 70),  # atom.acq_rel.gpu, fence.sc
    "sync_warp_ops": ("6.0", 70),  # shfl.sync, vote.sync
}


def _key(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)


def normalize_sm(sm: str | int) -> str:
    """``"90"``, ``"sm_90"``, ``90`` -> ``"90"``; unknown targets raise ``UnsupportedFeature``."""
    s = str(sm).lower().removeprefix("sm_")
    if s not in TARGET_MIN_PTX:
        raise UnsupportedFeature(f"target sm_{s}", "cuda",
                                 f"use one of sm_{', sm_'.join(TARGET_MIN_PTX)}.")
    return s


def sm_number(sm: str) -> int:
    """The numeric compute capability of a normalised target (``"90a"`` -> 90)."""
    return int(sm.rstrip("a"))


def required_ptx_version(sm: str, features: tuple[str, ...] | frozenset[str] = ()) -> str:
    """The lowest PTX ISA version that supports target ``sm`` and every feature used."""
    sm = normalize_sm(sm)
    need = TARGET_MIN_PTX[sm]
    for f in sorted(features):
        version, min_sm = FEATURES[f]
        if sm_number(sm) < min_sm:
            raise UnsupportedFeature(f"{f} on sm_{sm}", "cuda", f"run on a device with compute capability >= {min_sm}.")
        need = max(need, version, key=_key)
    return need


def max_ptx_version_for_driver(driver_version: int) -> str:
    """The highest PTX ISA a CUDA driver (e.g. 12040 for 12.4) loads."""
    for min_driver, version in DRIVER_MAX_PTX:
        if driver_version >= min_driver:
            return version
    raise UnsupportedFeature(f"CUDA driver {driver_version}", "cuda", "install a CUDA 11.0 or newer driver.")


def ptx_version_for_driver(driver_version: int, sm: str) -> str:
    """The PTX ISA ``.version`` to emit for this driver: the highest it loads.

    Raises ``UnsupportedFeature`` when target ``sm`` needs a newer PTX ISA than the driver loads.
    """
    have = max_ptx_version_for_driver(driver_version)
    need = required_ptx_version(sm)
    if _key(have) < _key(need):
        major, minor = divmod(driver_version // 10, 100)
        raise UnsupportedFeature(
            f"sm_{normalize_sm(sm)} (needs PTX ISA {need}) on CUDA driver {major}.{minor} (loads up to PTX ISA {have})",
            "cuda", "update the NVIDIA driver to one that supports this GPU.")
    return have


def check_ptx_version(version: str, need: str) -> str:
    """``version`` if it is well formed and at least ``need``; else ``UnsupportedFeature``."""
    try:
        ok = _key(version) >= _key(need)
    except ValueError:
        ok = False
    if not ok:
        raise UnsupportedFeature(f"PTX ISA .version {version!r}", "cuda",
                                 f"pass ptx_version={need!r} or newer (or None to choose automatically).")
    return version
