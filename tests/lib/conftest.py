"""Fixtures of the ``vyre.lib`` tests: the reference oracle and a fresh random generator per test."""

from __future__ import annotations

import os

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
    """A generator from fresh entropy (or ``VYRE_TEST_SEED``); the seed is recorded with the test."""
    seed = int(os.environ.get("VYRE_TEST_SEED") or np.random.SeedSequence().entropy % (1 << 63))
    request.node.user_properties.append(("seed", seed))
    return np.random.default_rng(seed)
