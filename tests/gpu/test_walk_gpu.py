"""The walk of one program from a host dispatch on cuda (docs/architecture.md, "The walk of one
program"): a warm dispatch enters each file from above and never climbs back up one."""

from __future__ import annotations

import numpy as np
import pytest

import vyre
from tests.host.test_walk import xor_program
from tests.walk import walk

pytestmark = pytest.mark.gpu


def test_a_warm_dispatch_on_cuda_never_climbs() -> None:
    backend = vyre.acquire("cuda")
    program, a, b = xor_program(), np.arange(300, dtype=np.uint32), np.full(300, 7, np.uint32)
    backend.dispatch(program, [a, b])
    traced = walk(lambda: backend.dispatch(program, [a, b]))
    assert traced.climbs == [], traced.climbs
    assert traced.files[:3] == ["vyre/driver/hooked.py", "vyre_cuda/backend.py", "vyre_cuda/_dispatch/inplace.py"]
    assert "vyre_cuda/_dispatch/host.py" in traced.files and "vyre_cuda/_runtime/launch.py" in traced.files
