"""``text.find_all_many`` on ``cuda``: equal to the oracle at small sizes and, over 64 MiB with 1,000
needles of 4 to 32 bytes, to a vectorised numpy reference, from numpy and from a CuPy array."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from vyre.lib import text

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def oracle():
    from vyre.reference.backend import ReferenceBackend

    return ReferenceBackend()


def numpy_find_all_many(hay: np.ndarray, needles: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Every (offset, needle id), sorted: positions whose first ``k`` bytes equal some needle's (one
    vectorised pass over the haystack's ``k``-byte windows), then each such needle compared there."""
    k = min(4, *(len(x) for x in needles))
    if hay.size < k:
        return np.zeros(0, np.uint32), np.zeros(0, np.uint32)
    wide = hay.astype(np.uint32)
    windows = np.zeros(hay.size - k + 1, np.uint32)
    for j in range(k):
        windows = (windows << 8) | wide[j:hay.size - k + 1 + j]
    by_key: dict[int, list[int]] = defaultdict(list)
    for i, needle in enumerate(needles):
        by_key[int.from_bytes(needle[:k], "big")].append(i)
    keys = np.array(sorted(by_key), np.uint32)
    at = np.minimum(np.searchsorted(keys, windows), keys.size - 1)
    raw = hay.tobytes()
    pairs = [(int(p), i) for p in np.flatnonzero(keys[at] == windows) for i in by_key[int(windows[p])]
             if raw[p:p + len(needles[i])] == needles[i]]
    got = np.array(sorted(pairs), np.uint32).reshape(-1, 2)
    return got[:, 0].copy(), got[:, 1].copy()


def planted_text(seed: int, size: int, count: int) -> tuple[np.ndarray, list[bytes]]:
    """Random bytes and ``count`` needles of 4 to 32 bytes: random ones, each written into the
    haystack 0 to 3 times (overlaps allowed, one at the very end), a duplicate, prefixes of others
    and slices of the haystack."""
    rng = np.random.default_rng(seed)
    hay = rng.integers(0, 256, size, dtype=np.uint8)
    needles = [bytes(rng.integers(0, 256, int(rng.integers(4, 33)), dtype=np.uint8)) for _ in range(count - 40)]
    for k, needle in enumerate(needles):
        for at in rng.integers(0, size - len(needle), k % 4):
            hay[at:at + len(needle)] = np.frombuffer(needle, np.uint8)
    hay[size - len(needles[0]):] = np.frombuffer(needles[0], np.uint8)
    needles += [needles[1], needles[2][:4], needles[3][:max(4, len(needles[3]) - 1)]]
    needles += [bytes(hay[at:at + int(rng.integers(4, 33))]) for at in rng.integers(0, size - 32, 37)]
    return hay, needles


def test_reference_is_the_definition():
    hay, needles = planted_text(1, 3000, 60)
    raw = hay.tobytes()
    want = [(p, i) for p in range(len(raw)) for i, x in enumerate(needles) if raw[p:p + len(x)] == x]
    offsets, ids = numpy_find_all_many(hay, needles)
    assert list(zip(offsets.tolist(), ids.tolist())) == want


def test_small_cases_equal_the_oracle(backend, oracle):
    rng = np.random.default_rng(5)
    hay = rng.integers(0, 4, 50_003, dtype=np.uint8)     # small alphabet: many matches, shared keys
    for needles in ([bytes(rng.integers(0, 4, int(rng.integers(1, 9)), dtype=np.uint8)) for _ in range(300)],
                    [b"\x00\x01\x02\x03", b"\x00\x01\x02\x03", b"\x00\x01\x02\x03\x00", b"\x03" * 9],
                    [i.to_bytes(2, "big") for i in range(10_000)]):
        got = text.find_all_many(hay, needles, backend=backend)
        want = text.find_all_many(hay, needles, backend=oracle)
        assert all(np.array_equal(g, w) for g, w in zip(got, want))
        assert all(np.array_equal(g, w) for g, w in zip(got, numpy_find_all_many(hay, needles)))
    for hay, needles in ((b"", [b"abcd"]), (b"ab", [b"abcd"]), (b"abcd", [b"abcd", b"abcde"])):
        got = text.find_all_many(hay, needles, backend=backend)
        assert [a.tolist() for a in got] == [a.tolist() for a in text.find_all_many(hay, needles, backend=oracle)]


def test_thousand_needles_over_64_mib_from_numpy_and_cupy(backend):
    import cupy

    hay, needles = planted_text(29, (64 << 20) + 13, 1000)
    want_offsets, want_ids = numpy_find_all_many(hay, needles)
    assert want_offsets.size > 1000
    offsets, ids = text.find_all_many(hay, needles, backend=backend)
    assert isinstance(offsets, np.ndarray) and isinstance(ids, np.ndarray)
    assert np.array_equal(offsets, want_offsets) and np.array_equal(ids, want_ids)
    offsets, ids = text.find_all_many(cupy.asarray(hay), needles, backend=backend)
    assert isinstance(offsets, cupy.ndarray) and isinstance(ids, cupy.ndarray)
    assert np.array_equal(cupy.asnumpy(offsets), want_offsets) and np.array_equal(cupy.asnumpy(ids), want_ids)
    empty = text.find_all_many(cupy.asarray(hay[:3]), needles, backend=backend)
    assert all(isinstance(a, cupy.ndarray) and a.size == 0 for a in empty)


def test_back_to_back_device_calls_and_torch(backend):
    """Calls with different needle sets queued on one CuPy array with no wait between them each get
    their own tables; a torch tensor gives torch results."""
    import cupy

    hay, needles = planted_text(7, (4 << 20) + 1, 300)
    device = cupy.asarray(hay)
    sets = [needles[i::3] for i in range(3)]
    results = [text.find_all_many(device, chosen, backend=backend) for chosen in sets]
    for chosen, (offsets, ids) in zip(sets, results):
        want_offsets, want_ids = numpy_find_all_many(hay, chosen)
        assert np.array_equal(cupy.asnumpy(offsets), want_offsets) and np.array_equal(cupy.asnumpy(ids), want_ids)
    torch = pytest.importorskip("torch")
    offsets, ids = text.find_all_many(torch.as_tensor(hay, device="cuda"), needles, backend=backend)
    assert isinstance(offsets, torch.Tensor) and offsets.is_cuda and offsets.dtype == torch.uint32
    want_offsets, want_ids = numpy_find_all_many(hay, needles)
    assert np.array_equal(offsets.cpu().numpy(), want_offsets) and np.array_equal(ids.cpu().numpy(), want_ids)


def test_back_to_back_find_all_calls_keep_their_own_needles():
    """Many one-needle calls on a device haystack enqueued with no wait between them: each result
    is its own needle's (the needle must not be overwritten before the call's last pass reads it)."""
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(53)
    hay = rng.integers(0, 16, 1 << 24, dtype=np.uint8)
    device = cupy.asarray(hay)
    needles = [bytes(hay[at:at + int(rng.integers(4, 9))]) for at in rng.integers(0, hay.size - 8, 200)]
    found = [text.find_all(device, needle) for needle in needles]  # no synchronisation in between
    for needle, got in zip(needles, found):
        nd = np.frombuffer(needle, np.uint8)
        m = cupy.ones(hay.size - nd.size + 1, cupy.bool_)
        for k in range(nd.size):
            m &= device[k:hay.size - nd.size + 1 + k] == int(nd[k])
        np.testing.assert_array_equal(cupy.asnumpy(got), cupy.asnumpy(cupy.flatnonzero(m)).astype(np.uint32))
