"""Fixtures of the ``vyre.lib`` tests: the reference oracle and a fresh random generator per test."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

import vyre


@pytest.fixture(scope="session")
def backend():
    """The reference oracle, acquired like a user would (through the dispatch-hook proxy)."""
    be = vyre.acquire("reference")
    yield be
    be.shutdown()


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """A freshly seeded generator; the seed is recorded with the test (``VYRE_TEST_SEED`` replays)."""
    seed = int(os.environ.get("VYRE_TEST_SEED") or struct.unpack("<Q", os.urandom(8))[0] >> 1)
    request.node.user_properties.append(("seed", seed))
    return np.random.default_rng(seed)
