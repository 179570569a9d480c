"""The single-pass (Onesweep-style) radix sort on the oracle: numpy's stable sort at every size,
the plan it takes, and a look-back that gives up cleanly."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.lib import expected as E
from vyre import lib
from vyre.driver.config import DispatchConfig
from vyre.driver.errors import DispatchFailed
from vyre.ir import DataType
from vyre.lib._sort import onesweep as K
from vyre.lib._sort import topology as topo
from vyre.lib.blocks import PARAM_WORDS, WG
from vyre.lib.plan import Plan, capacity
from vyre.lib.scratch import scratch_for
from vyre.reference import ReferenceBackend

KEYS_TILE, PAIRS_TILE = WG * K.ONESWEEP_ITEMS, WG * K.ONESWEEP_VALUE_ITEMS
SIZES = [0, 1, 255, 256, 257, PAIRS_TILE - 1, PAIRS_TILE + 1, KEYS_TILE - 1, KEYS_TILE, KEYS_TILE + 1,
         3 * KEYS_TILE + 5, 2**16 + 1]
KEY_TYPES = [np.uint32, np.int32, np.float32]


def _keys(rng: np.random.Generator, dtype: type, n: int) -> np.ndarray:
    """Random keys with edge values and plenty of ties (so stability shows)."""
    keys = E.data(rng, dtype, n)
    keys[: n // 4] = keys[n // 4: 2 * (n // 4)]
    return keys


@pytest.mark.parametrize("dtype", KEY_TYPES)
@pytest.mark.parametrize("n", SIZES)
def test_onesweep_matches_numpy(backend, rng, dtype, n):
    keys = _keys(rng, dtype, n)
    E.check_sort_family(backend, keys, E.data(rng, np.int32, n))


@pytest.mark.parametrize("dtype", KEY_TYPES)
def test_onesweep_unique(backend, rng, dtype):
    x = E.runs(rng, dtype, 3 * KEYS_TILE + 5)
    values, counts = lib.unique(x, backend=backend)
    want_values, want_counts = E.unique(x)
    E.assert_same_bits(values, want_values.astype(dtype))
    E.assert_same(counts, want_counts)


@pytest.mark.parametrize("per_chunk", [1, 3])
def test_lookback_across_oracle_chunks(rng, monkeypatch, per_chunk):
    """The oracle runs chunks of ``per_chunk`` workgroups one after another (lockstep within one):
    a tile reads the prefixes of earlier chunks' tiles and walks its own chunk's aggregates."""
    from vyre.reference import grid

    monkeypatch.setattr(grid, "CHUNK_LANES", per_chunk * WG)
    be = ReferenceBackend()
    keys = _keys(rng, np.int32, 7 * PAIRS_TILE + 11)
    order = E.sort_order(keys)
    E.assert_same(lib.sort(keys, backend=be), keys[order])
    E.assert_same(lib.argsort(keys, backend=be), order.astype(np.uint32))


class RecordingBackend(ReferenceBackend):
    """The oracle, keeping the program names of every sequence it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[list[str]] = []

    def dispatch_sequence(self, steps, reads=()):
        self.names.append([step[0].name for step in steps])
        return super().dispatch_sequence(steps, reads)


def test_plan_below_and_at_the_limit(rng, monkeypatch):
    """Below ``ONESWEEP_LIMIT`` keys: zero fill, digit histograms, digit starts, status zero, then one
    kernel per pass; at the limit (lowered here), the segmented sort; both give numpy's order."""
    be = RecordingBackend()
    keys = _keys(rng, np.float32, 2 * KEYS_TILE + 3)
    order = E.sort_order(keys)
    E.assert_same_bits(lib.sort(keys, backend=be), keys[order])
    assert be.names[-1] == ["lib_zero_fill", "lib_radix_histograms_f32", "lib_radix_digit_starts", "lib_zero_fill",
                            *(f"lib_radix_onesweep_{shift}" for shift in (0, 8, 16, 24))]
    monkeypatch.setattr(topo, "ONESWEEP_LIMIT", keys.size)
    E.assert_same_bits(lib.sort(keys, backend=be), keys[order])
    assert not any("onesweep" in name for name in be.names[-1])
    assert sum(name.startswith("lib_radix_scatter") for name in be.names[-1]) == 4


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.float32, np.int64, np.float64])
def test_passes_that_count_the_next_digit(rng, monkeypatch, dtype):
    """From ``COUNT_IN_PASSES_FROM`` (lowered here) the histogram counts the first digit alone and
    each pass but the last counts the next one's, scanned by one workgroup before that pass: the
    plan shows it, and sort, argsort and the key-value sort keep numpy's stable order over several
    tiles, a part tile and edge keys (the part tile's missing keys count as digit 255)."""
    monkeypatch.setattr(K, "COUNT_IN_PASSES_FROM", 0)
    be = RecordingBackend()
    keys = _keys(rng, dtype, 3 * KEYS_TILE + 5)
    E.check_sort_family(be, keys, E.data(rng, np.int32, keys.size))
    wide = np.dtype(dtype).itemsize == 8
    if not wide:  # 64-bit keys with values take the sort of indices: their plan is checked on the keys alone
        passes, name = 4, np.dtype(dtype).name.replace("uint", "u").replace("int", "i").replace("float", "f")
        lib.sort(keys, backend=be)
        steps = []
        for p in range(passes - 1):
            steps += [f"lib_radix_onesweep_next_{8 * p}", f"lib_radix_digit_starts_pass{p + 1}"]
        assert be.names[-1] == ["lib_zero_fill", f"lib_radix_histograms_{name}_first1", "lib_radix_digit_starts_pass0",
                                "lib_zero_fill", *steps, f"lib_radix_onesweep_{8 * (passes - 1)}"]
    big = np.full(5, np.iinfo(np.uint32).max, np.uint32)  # all-ones keys in a part tile: digit 255 every pass
    E.assert_same(lib.sort(np.concatenate([keys.view(np.uint32)[:KEYS_TILE + 3], big]), backend=be),
                  np.sort(np.concatenate([keys.view(np.uint32)[:KEYS_TILE + 3], big]), kind="stable"))


def test_two_sorts_in_one_plan(rng):
    """Two sorts in one plan (as datalog's pair sort does) share the look-back scratch and status."""
    be = ReferenceBackend()
    n = KEYS_TILE + 9
    a, b = (rng.integers(0, 50, n).astype(np.uint32) for _ in range(2))
    handles = [be.allocate_resident(4 * n) for _ in range(6)]
    be.upload_resident(handles[0], a)
    be.upload_resident(handles[1], b)
    plan = Plan(be, scratch_for(be))
    by_b = (handles[2], handles[3])
    topo.radix_sort(plan, DataType.U32, handles[1], handles[0], "load", n, capacity(n), final=by_b)
    topo.radix_sort(plan, DataType.U32, by_b[1], by_b[0], "load", n, capacity(n), final=(handles[4], handles[5]))
    assert len(plan.checks) == 1
    plan.run()
    order = np.lexsort((b, a))
    E.assert_same(be.download_resident(handles[4], 0, 4 * n).view(np.uint32), a[order])
    E.assert_same(be.download_resident(handles[5], 0, 4 * n).view(np.uint32), b[order])


def tile_words(pairs: np.ndarray, tile: int) -> np.ndarray:
    """Tile ``tile``'s 256 published words in a region of u64 pair words (``pairs``, from the
    region's first word): the low half of pair ``tile // 2`` for an even tile, the high half for an
    odd one."""
    return (pairs[(tile >> 1) * 256: (tile >> 1) * 256 + 256] >> np.uint64(32 * (tile & 1))).astype(np.uint32)


SENTINEL = 0xDEADBEEF  # what the output holds where ``_one_tile``'s pass wrote nothing


def _one_tile(keys: np.ndarray, lookback: np.ndarray, pairs: np.ndarray, region: int
              ) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """One workgroup of pass 0 (u32 keys, a wait of at most 9 trips) on the oracle over ``keys``,
    from the given ``lookback`` head and ``pairs`` words (``region`` pair words per region), into
    an output of ``SENTINEL``: the status word, the output, the pair words and the head after it."""
    be = ReferenceBackend()
    params = np.zeros(PARAM_WORDS, np.uint32)
    params[:2] = keys.size, region
    data = [keys, lookback, pairs, np.full(keys.size, SENTINEL, np.uint32), params, np.zeros(1, np.uint32)]
    handles = []
    for array in data:
        handles.append(be.allocate_resident(array.nbytes))
        be.upload_resident(handles[-1], array)
    program = K.radix_onesweep(0, DataType.U32, None, "none", K.ONESWEEP_ITEMS, 0, 1, spin=(2, 3))
    be.dispatch_sequence([(program, handles, DispatchConfig(grid=(1, 1, 1)))])
    status = int(be.download_resident(handles[5], 0, 4).view(np.uint32)[0])
    out = be.download_resident(handles[3], 0, 4 * keys.size).view(np.uint32)
    after = be.download_resident(handles[2], 0, pairs.nbytes).view(np.uint64)
    return status, out, after, be.download_resident(handles[1], 0, lookback.nbytes).view(np.uint32)


def test_lookback_gives_up_when_a_tile_never_publishes():
    """Tiles 0 and 1 never run (the pass counter starts at 2, so the one workgroup takes tile 2):
    every digit's wait runs out, is counted in ``status``, publishes no prefix and writes no key;
    the tile still publishes its aggregate and zeroes its pair words of the next pass's region."""
    tile = KEYS_TILE
    n, region = 3 * tile, 2 * 256  # pair words per region: tiles 0-1 and 2-3
    keys = np.random.default_rng(7).integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    lookback = np.zeros(K.LOOKBACK_HEAD, np.uint32)
    lookback[0] = 2  # pass 0 has handed out tiles 0 and 1 already
    counts = np.bincount(keys & 255, minlength=256).astype(np.uint32)
    lookback[K.LOOKBACK_STARTS: K.LOOKBACK_STARTS + 256] = np.cumsum(counts) - counts
    pairs = np.zeros(2 * region, np.uint64)
    pairs[region + 256: region + 512] = 7  # the next pass's pair words of tiles 2 and 3
    status, out, after, head = _one_tile(keys, lookback, pairs, region)
    assert status == 256
    assert (out == SENTINEL).all()
    own = np.bincount(keys[2 * tile:] & 255, minlength=256).astype(np.uint32) | np.uint32(K.FLAG_A)
    E.assert_same(tile_words(after, 2), own)
    assert not after[:256].any() and not tile_words(after, 3).any()  # tiles 0, 1 and 3 published nothing
    assert head[0] == 3 and not after[region + 256: region + 512].any()


def test_lookback_walks_over_aggregates_to_a_prefix():
    """Tiles 0-4 have published (tile 0 its inclusive prefix, tiles 1-4 aggregates only) and the
    one workgroup takes tile 5: its walk starts at its own pair (tiles 4 and 5), takes the pair of
    tiles 2 and 3 (the common trip: two aggregates) and stops at tile 0's prefix. Its keys land
    where a stable sort by the digit of all the keys puts them, and it publishes its inclusive prefix."""
    tile = KEYS_TILE
    n, region = 6 * tile, 3 * 256  # pair words per region: tiles 0-1, 2-3 and 4-5
    keys = np.random.default_rng(11).integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    counts = [np.bincount(keys[t * tile:(t + 1) * tile] & 255, minlength=256).astype(np.uint64) for t in range(6)]
    lookback = np.zeros(K.LOOKBACK_HEAD, np.uint32)
    lookback[0] = 5  # pass 0 has handed out tiles 0-4 already
    total = np.bincount(keys & 255, minlength=256).astype(np.uint32)
    lookback[K.LOOKBACK_STARTS: K.LOOKBACK_STARTS + 256] = np.cumsum(total) - total
    pairs = np.zeros(2 * region, np.uint64)
    for t in range(5):
        word = counts[t] | np.uint64(K.FLAG_P if t == 0 else K.FLAG_A)
        pairs[(t >> 1) * 256: (t >> 1) * 256 + 256] |= word << np.uint64(32 * (t & 1))
    status, out, after, _ = _one_tile(keys, lookback, pairs, region)
    assert status == 0  # no wait ran out
    order = np.argsort(keys & 255, kind="stable")
    mine = order >= 5 * tile
    E.assert_same(out[np.flatnonzero(mine)], keys[order[mine]])
    assert (out[np.flatnonzero(~mine)] == SENTINEL).all()
    inclusive = sum(counts).astype(np.uint32) | np.uint32(K.FLAG_P)
    E.assert_same(tile_words(after, 5), inclusive)


def test_sort_raises_when_lookback_gives_up(rng, monkeypatch):
    """With a wait too short for the oracle (which runs a chunk of workgroups in lockstep, so tile
    ``k`` reads ``k`` aggregates), the plan reads the status and raises instead of returning
    wrong keys; the next sort starts from a zero status."""
    be = ReferenceBackend()
    keys = rng.integers(0, 2**32, 8 * KEYS_TILE, dtype=np.uint64).astype(np.uint32)
    monkeypatch.setattr(K, "radix_onesweep",
                        functools.partial(K.radix_onesweep.__wrapped__, spin=(2, 2), width=1))
    with pytest.raises(DispatchFailed, match="look-backs gave up.*Fix: "):
        lib.sort(keys, backend=be)
    monkeypatch.undo()
    E.assert_same(lib.sort(keys, backend=be), np.sort(keys))


@pytest.mark.parametrize("width", [1, 2, 3, 5])
def test_look_back_of_any_width_sorts(rng, monkeypatch, width):
    """A look-back trip reads ``width`` tiles' words together and takes them nearest first, up to
    an unpublished word or an inclusive prefix: the result is the same for every width, over more
    tiles than one trip reads (the oracle runs workgroups in lockstep chunks, so tiles meet
    aggregates, inclusive prefixes and unpublished words)."""
    monkeypatch.setattr(K, "radix_onesweep", functools.partial(K.radix_onesweep.__wrapped__, width=width))
    keys = rng.integers(0, 2**32, 11 * KEYS_TILE + 5, dtype=np.uint64).astype(np.uint32)
    E.assert_same(lib.sort(keys, backend=ReferenceBackend()), np.sort(keys))
    E.assert_same(lib.argsort(keys, backend=ReferenceBackend()), np.argsort(keys, kind="stable").astype(np.uint32))
