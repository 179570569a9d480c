"""Workgroup-memory indices that are bit fields ``(x >> s) & m`` (scaled inside the field by the
``cuda`` backend, ``Buffers._shared_address``) give the oracle's results: loads, stores and
atomics at the field of a loaded value, of an assigned variable before and after it changes, and
of loop counters, on 2-, 4- and 8-byte elements, for shifts 0-31 and masks in and past the
buffer (511 of 256 elements: the guard stays). ``tests/codegen/test_fields.py`` checks when the
PTX takes the scaled form."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import check, poisoned

from tests.codegen.field_programs import CASES, ELEMENTS, WG, field_program
from vyre.driver.config import DispatchConfig
from vyre.ir import DataType

pytestmark = pytest.mark.gpu
GROUPS = 7


@pytest.mark.parametrize("element", ELEMENTS, ids=[e.name for e in ELEMENTS])
@pytest.mark.parametrize("s, m", CASES)
def test_field_indices_match_the_oracle(backend, rng, element: DataType, s: int, m: int) -> None:
    a = rng.integers(0, 2**32, GROUPS * WG, dtype=np.uint64).astype(np.uint32)
    a[:8] = (0, 1, 2**31, 2**32 - 1, 255, 256, 0x80808080, 0x7FFFFFFF)  # edge values
    check(backend, field_program(element, s, m), [a, poisoned(GROUPS * 6 * WG, DataType.U32)],
          DispatchConfig(grid=(GROUPS, 1, 1)))
