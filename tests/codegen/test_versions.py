"""PTX ISA version tables: target minimums and what each driver loads."""

from __future__ import annotations

import pytest

from vyre.driver.errors import UnsupportedFeature
from vyre_cuda._codegen.versions import max_ptx_version_for_driver, ptx_version_for_driver, required_ptx_version


@pytest.mark.parametrize("driver, version", [
    (11080, "7.8"), (12000, "8.0"), (12010, "8.1"), (12040, "8.4"), (12050, "8.5"), (12060, "8.5"),
    (12070, "8.6"), (12080, "8.7"), (12090, "8.8"), (13000, "9.0"), (13010, "9.1"), (14000, "9.1"),
])
def test_driver_table(driver: int, version: str) -> None:
    assert max_ptx_version_for_driver(driver) == version


def test_target_minimums() -> None:
    assert required_ptx_version("90") == "7.8" and required_ptx_version("sm_80") == "7.0"
    assert required_ptx_version("80", frozenset({"bf16"})) == "7.0"
    with pytest.raises(UnsupportedFeature):
        required_ptx_version("75", frozenset({"bf16"}))


def test_version_for_driver() -> None:
    assert ptx_version_for_driver(12040, "90") == "8.4"
    assert ptx_version_for_driver(11080, "90") == "7.8"
    assert ptx_version_for_driver(11000, "80") == "7.0"
    with pytest.raises(UnsupportedFeature, match="sm_90"):
        ptx_version_for_driver(11070, "90")
    with pytest.raises(UnsupportedFeature):
        ptx_version_for_driver(10020, "80")
