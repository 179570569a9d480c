"""vyre.lib.text.find_all on the oracle against a Python scan (overlapping matches, ascending)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import vyre
from vyre.driver.errors import InvalidProgram
from vyre.lib import text


def python_find_all(haystack: bytes, needle: bytes) -> list[int]:
    return [m.start() for m in re.finditer(b"(?=" + re.escape(needle) + b")", haystack)]


@pytest.fixture(scope="module")
def oracle():
    with vyre.acquire("reference") as backend:
        yield backend


CASES = [
    (b"", b"a"), (b"a", b"a"), (b"a", b"ab"), (b"aaaa", b"aa"), (b"abababab", b"aba"),
    (b"x" * 15 + b"ab" + b"x" * 20, b"ab"),           # a match across an invocation's 16-position tile
    (bytes(range(256)) * 3, bytes([254, 255, 0, 1])),  # needle straddling the repeat, byte values 0..255
    (b"\x00" * 40, b"\x00\x00\x00"), (b"needle", b"needle"), (b"needl", b"needle"),
]


@pytest.mark.parametrize("haystack,needle", CASES)
def test_edge_cases(oracle, haystack, needle):
    got = text.find_all(haystack, needle, backend=oracle)
    assert got.dtype == np.uint32
    assert got.tolist() == python_find_all(haystack, needle)


@pytest.mark.parametrize("size", [1, 255, 256 * 16 + 3, 70_001])
def test_random_text(oracle, size):
    rng = np.random.default_rng(size)
    hay = rng.integers(0, 3, size, dtype=np.uint8)   # small alphabet: many overlapping matches
    for needle in (b"\x01", b"\x00\x01", bytes(hay[size // 2:size // 2 + 5])):
        got = text.find_all(hay, needle, backend=oracle)
        assert got.tolist() == python_find_all(hay.tobytes(), needle)


def test_bad_arguments(oracle):
    for hay, needle in [("text", b"t"), (b"text", b""), (b"text", b"x" * 70_000),
                        (np.zeros(4, dtype=np.uint32), b"x")]:
        with pytest.raises(InvalidProgram, match="Fix:"):
            text.find_all(hay, needle, backend=oracle)
