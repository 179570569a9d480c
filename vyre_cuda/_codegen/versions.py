"""PTX ISA versions: what each target needs and what each CUDA driver loads."""

from __future__ import annotations

import re

from vyre.driver.errors import InvalidProgram, UnsupportedFeature

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
#: every PTX ISA version there is (ptxas rejects any other ``.version``), oldest first
PTX_VERSIONS: tuple[str, ...] = (
    "6.0", "6.1", "6.2", "6.3", "6.4", "6.5", *(f"7.{i}" for i in range(9)), *(f"8.{i}" for i in range(9)),
    "9.0", "9.1",
)
#: kernel parameter space before PTX ISA 8.1 (measured with ptxas 13.0 for sm_90: 0x1100); 32,764 bytes from 8.1
SMALL_PARAM_BYTES = 4352
#: features the emitter may use -> (lowest PTX ISA, lowest sm) they need
FEATURES: dict[str, tuple[str, int]] = {
    "large_params": ("8.1", 70),  # kernel parameters over SMALL_PARAM_BYTES (more than 543 buffers)
    "bf16": ("7.0", 80),  # cvt.rn.bf16.f32
    "scoped_atomics": ("6.0", 70),  # atom.acq_rel.gpu, fence.sc
    "sync_warp_ops": ("6.0", 70),  # shfl.sync, vote.sync
    "active_mask": ("6.2", 70),  # activemask (counter adds made once per subgroup: memory.counter_add)
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


_SM_TEXT = re.compile(r"(?:sm_)?[0-9]{2,3}a?", re.ASCII)
_VERSION_TEXT = re.compile(r"[0-9]\.[0-9]", re.ASCII)


def parse_sm(sm: object) -> str:
    """A target argument (``"90"``, ``"sm_90"``, ``90``) normalised; ``InvalidProgram`` if malformed.

    A well-formed target this emitter does not know (``sm_42``) is ``UnsupportedFeature``.
    """
    text = sm.lower() if isinstance(sm, str) else str(sm) if type(sm) is int else None
    if text is None or not _SM_TEXT.fullmatch(text):
        raise InvalidProgram(f"sm={sm!r} is not a compute capability",
                             "pass the target as a string of ASCII digits such as '90' or 'sm_80' (or an int).")
    return normalize_sm(text)


def parse_ptx_version(version: object) -> str:
    """A ``ptx_version`` argument that names a real PTX ISA (``"8.0"``); ``InvalidProgram`` otherwise."""
    if not isinstance(version, str):
        raise InvalidProgram(f"ptx_version={version!r} is a {type(version).__name__}, not a str",
                             "pass the PTX ISA version as a string such as '8.0' (or None to choose it).")
    if not _VERSION_TEXT.fullmatch(version) or version not in PTX_VERSIONS:
        raise InvalidProgram(f"ptx_version={version!r} is not a PTX ISA version",
                             f"pass one of {PTX_VERSIONS[0]} ... {PTX_VERSIONS[-1]} as a string, or None.")
    return version


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
