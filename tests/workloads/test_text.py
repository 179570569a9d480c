"""vyre.lib.text.find_all on the oracle against a Python scan (overlapping matches, ascending)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from vyre.driver.errors import InvalidProgram
from vyre.lib import text


def python_find_all(haystack: bytes, needle: bytes) -> list[int]:
    return [m.start() for m in re.finditer(b"(?=" + re.escape(needle) + b")", haystack)]


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


# ---- many needles at once ------------------------------------------------------------------------
def python_find_all_many(haystack: bytes, needles: list[bytes]) -> list[tuple[int, int]]:
    """Every (offset, pattern id) by brute force, sorted by offset then id."""
    return sorted((p, i) for i, needle in enumerate(needles) for p in python_find_all(haystack, needle))


def many(haystack, needles, backend) -> list[tuple[int, int]]:
    offsets, ids = text.find_all_many(haystack, needles, backend=backend)
    assert offsets.dtype == np.uint32 and ids.dtype == np.uint32 and offsets.size == ids.size
    return list(zip(offsets.tolist(), ids.tolist()))


MANY_CASES = [
    (b"", [b"a"]),                                     # empty haystack
    (b"ab", [b"abc", b"abcd"]),                        # every needle longer than the haystack
    (b"aaaa", [b"a", b"aa", b"aaa", b"aaaaa"]),        # prefixes of each other, overlapping, one too long
    (b"she sells seashells", [b"he", b"she", b"hell", b"shells", b"s", b"e"]),
    (b"abababab", [b"aba", b"bab", b"aba"]),           # a duplicate needle: both ids are reported
    (b"x" * 15 + b"abcde" + b"x" * 20, [b"bcd", b"abcde", b"xa"]),   # across a 16-position tile
    (bytes(range(256)) * 2, [bytes([255, 0]), bytes([0]), bytes([254, 255, 0, 1, 2])]),
]


@pytest.mark.parametrize("haystack,needles", MANY_CASES)
def test_many_needles_edge_cases(oracle, haystack, needles):
    assert many(haystack, needles, oracle) == python_find_all_many(haystack, needles)


def test_many_random_needles(oracle):
    rng = np.random.default_rng(4)
    hay = rng.integers(0, 4, 3000, dtype=np.uint8)     # small alphabet: many matches and shared prefixes
    needles = [bytes(rng.integers(0, 4, int(rng.integers(1, 9)), dtype=np.uint8)) for _ in range(300)]
    needles += [bytes(hay[i:i + 12]) for i in rng.integers(0, 2980, 20)]   # long needles that do occur
    assert many(hay, needles, oracle) == python_find_all_many(hay.tobytes(), needles)
    wide = [n for n in needles if len(n) >= 4]        # a 4-byte key: the other branch of the search
    assert many(hay, wide, oracle) == python_find_all_many(hay.tobytes(), wide)


def test_many_takes_ten_thousand_needles(oracle):
    needles = [i.to_bytes(2, "big") for i in range(10_000)]
    hay = bytes([0, 5, 39, 15, 1, 0])
    assert many(hay, needles, oracle) == python_find_all_many(hay, needles)


@pytest.mark.parametrize("needles", [[np.array([0x161])], [np.array([97.9])], [b"a", np.array([-1])], [b"a", b""],
                                     [], b"abc", "abc", [b"a"] * 10_001, [b"x" * 70_000]],
                         ids=["0x161", "97.9", "negative", "empty-needle", "no-needles", "bytes", "str", "too-many",
                              "too-long"])
def test_many_refuses_needles_that_are_not_byte_strings(oracle, needles):
    with pytest.raises(InvalidProgram, match="Fix:"):
        text.find_all_many(b"banana", needles, backend=oracle)


def plain_pairs(haystack: bytes, needles: list[bytes]) -> list[tuple[int, int]]:
    """The definition itself: for each offset, for each needle, does it start there."""
    return [(i, k) for i in range(len(haystack)) for k, needle in enumerate(needles)
            if haystack[i:i + len(needle)] == needle]


def planted(rng: np.random.Generator, size: int, count: int, shortest: int = 4, longest: int = 32
            ) -> tuple[np.ndarray, list[bytes]]:
    """Random bytes with ``count`` random needles of ``shortest``..``longest`` bytes, half of them
    written into the haystack (some twice, some at the very end)."""
    hay = rng.integers(0, 256, size, dtype=np.uint8)
    needles = [bytes(rng.integers(0, 256, int(rng.integers(shortest, longest + 1)), dtype=np.uint8))
               for _ in range(count)]
    for k in range(0, count, 2):
        for at in rng.integers(0, size - len(needles[k]), 1 + k % 3):
            hay[at:at + len(needles[k])] = np.frombuffer(needles[k], np.uint8)
    hay[size - len(needles[0]):] = np.frombuffer(needles[0], np.uint8)
    return hay, needles


def test_many_matches_the_plain_definition(oracle):
    rng = np.random.default_rng(29)
    hay, needles = planted(rng, 600, 24, shortest=1, longest=6)
    hay[:8] = np.frombuffer(b"abcabcab", np.uint8)
    needles += [b"abc", b"abcab", b"ab", b"abc", b"cab"]           # prefixes, duplicates, overlaps
    want = plain_pairs(hay.tobytes(), needles)
    assert want == python_find_all_many(hay.tobytes(), needles)
    assert many(hay, needles, oracle) == want


@pytest.mark.parametrize("min_groups", [1, 5, 2048], ids=["16-tiles-a-group", "3-tiles-a-group", "1-tile-a-group"])
def test_many_over_several_workgroups(oracle, monkeypatch, min_groups):
    """16 tiles of 4,096 positions, scanned by counting workgroups of 16, 3 (the last one's extra
    tiles skipped) or 1 tile each (a haystack of 2**30 bytes has 2**18 tiles: 16 a workgroup)."""
    monkeypatch.setattr(text, "MIN_GROUPS", min_groups)
    rng = np.random.default_rng(30)
    size = 40_003
    assert text.tiles_per_group(16) == {1: 16, 5: 3, 2048: 1}[min_groups]
    hay, needles = planted(rng, size, 40)
    got = many(hay, needles, oracle)
    assert got == python_find_all_many(hay.tobytes(), needles)
    assert len(got) >= 30 and got[-1][0] == size - len(needles[0])


def test_many_keys_in_one_bucket_are_told_apart(oracle):
    """Needles whose keys share a hash bucket: only the one whose bytes are there is reported."""
    keys = np.arange(1 << 20, dtype=np.uint32) + 0x61626364
    buckets = text.key_hash(keys)
    first = int(np.flatnonzero(buckets[1:] == buckets[0])[0]) + 1
    a, b = int(keys[0]).to_bytes(4, "big"), int(keys[first]).to_bytes(4, "big")
    hay = b"..." + a + b"x" + b + a[:3]
    needles = [b + b"!", a, b, a + b"x"]
    assert many(hay, needles, oracle) == python_find_all_many(hay, needles) == [(3, 1), (3, 3), (8, 2)]


def test_many_refuses_a_haystack_that_is_not_bytes(oracle):
    for hay in ("banana", np.zeros(4, dtype=np.uint32), np.zeros(4, dtype=np.int8)):
        with pytest.raises(InvalidProgram, match="Fix:"):
            text.find_all_many(hay, [b"an"], backend=oracle)


def test_many_takes_bytes_and_byte_arrays_alike(oracle):
    """bytes needles take a joined fast path (and a table kept between calls); arrays are checked one by one."""
    rng = np.random.default_rng(31)
    hay, needles = planted(rng, 2000, 30, shortest=2, longest=9)
    want = python_find_all_many(hay.tobytes(), needles)
    as_arrays = [np.frombuffer(x, np.uint8).astype(np.int64) for x in needles]
    mixed = [list(x) if i % 2 else x for i, x in enumerate(needles)]
    for form in (needles, tuple(needles), as_arrays, mixed, needles):
        assert many(hay, form, oracle) == want
    assert text.needle_table(needles) is text.needle_table(list(needles))
