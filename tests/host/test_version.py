"""One version for the distribution: the cache keys read it as a constant, not through importlib.metadata."""

from importlib import metadata

import pytest

import vyre
import vyre_cuda
from vyre_cuda.testing import cache_version


def test_package_versions_agree_with_the_installed_distribution() -> None:
    try:
        installed = metadata.version("vyre-cuda")
    except metadata.PackageNotFoundError:
        pytest.skip("vyre-cuda is not installed (a bare source checkout)")
    assert vyre.__version__ == vyre_cuda.__version__ == installed
    assert cache_version() == installed
