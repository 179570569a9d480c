"""Fixtures of the front-end tests: a freshly seeded generator per test (the seed is reported)."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    seed = int(os.environ.get("VYRE_TEST_SEED") or struct.unpack("<Q", os.urandom(8))[0] >> 1)
    request.node.user_properties.append(("seed", seed))
    return np.random.default_rng(seed)
