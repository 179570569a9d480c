"""The single-pass (decoupled look-back) scan of integer types on the oracle: numpy's scans at
every size and width, over the oracle's lockstep chunks, walking back or wide, the plan it takes,
what a tile takes from the published totals, and a wait that runs out (the tile folds the input
itself)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.lib import expected as E
from vyre import lib
from vyre.driver.config import DispatchConfig
from vyre.ir import DataType
from vyre.lib._scan import lookback as K
from vyre.lib.blocks import PARAM_WORDS, WG
from vyre.lib.monoid import Monoid
from vyre.reference import ReferenceBackend

TILE = WG * K.SCAN_LOOKBACK_ITEMS
OPS = ["add", "min", "max", "and", "or", "xor"]


def _check(be, x: np.ndarray, op: str, init: object = None) -> None:
    E.assert_same(lib.inclusive_scan(x, op, backend=be), E.inclusive_scan(x, op))
    E.assert_same(lib.exclusive_scan(x, op, init, backend=be), E.exclusive_scan(x, op, init))


@pytest.mark.parametrize("dtype", [np.uint32, np.int32])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [4097, 2 * TILE, 2 * TILE + 1, 7 * TILE - 3])
def test_matches_numpy(backend, rng, dtype, op, n):
    x = E.data(rng, dtype, n)
    _check(backend, x, op, None if op != "max" else x[3])


@pytest.mark.parametrize("per_chunk", [1, 3])
@pytest.mark.parametrize("op", OPS)
def test_wide_look_back_across_oracle_chunks(rng, monkeypatch, per_chunk, op):
    """Every tile of a small grid made to take the wide look-back: each invocation reads one lower
    tile, meeting inclusive prefixes of earlier chunks and aggregates of its own; the nearest
    prefix and the totals above it give numpy's scans."""
    from vyre.reference import grid

    monkeypatch.setattr(grid, "CHUNK_LANES", per_chunk * WG)
    monkeypatch.setattr(K, "WIDE_FROM", 2)
    x = E.data(rng, np.int32, 11 * TILE + 5)
    _check(ReferenceBackend(), x, op, None if op in ("min", "max") else 7)


@pytest.mark.parametrize("dtype", [np.uint32, np.int32])
def test_wide_look_back_with_an_init_array_and_a_transform(rng, monkeypatch, dtype):
    """The wide look-back's variants: ``init`` read from a bound 1-element array (a
    ``ResidentArray``), and a transform applied where the scan loads ``x`` (also in the fold a
    wait that runs out does): numpy's scans of the carry and the data."""
    from tests.lib.test_transform import mix_bits
    from vyre.lib import ResidentArray

    monkeypatch.setattr(K, "WIDE_FROM", 2)
    be = ReferenceBackend()
    x = E.data(rng, dtype, 3 * TILE + 1)
    init = E.data(rng, dtype, 1)
    handle = be.allocate_resident(init.nbytes)
    be.upload_resident(handle, init)
    joined = E.inclusive_scan(np.concatenate([init, x]), "xor")
    got = lib.inclusive_scan(x, "xor", init=ResidentArray(handle, init.dtype, 1, be), backend=be)
    E.assert_same(be.download_resident(got.handle, 0, x.nbytes).view(dtype), joined[1:])
    mixed = x ^ (x >> 3)
    unwrapped = K.scan_lookback.__wrapped__
    for spin in (K.SCAN_SPIN, (1, 0)):
        monkeypatch.setattr(K, "scan_lookback", functools.partial(unwrapped, spin=spin))
        E.assert_same(lib.transform_exclusive_scan(x, mix_bits, "add", backend=be), E.exclusive_scan(mixed, "add"))


@pytest.mark.parametrize(("n", "items", "wide"), [
    (8192, 32, False), (4 * 8192, 32, False), (1 << 16, 8, True), (9 * 8192, 8, True), (1 << 18, 8, True),
    (1 << 18 | 1, 32, True), (256 * 8192, 32, True), (257 * 8192, 32, False), (2048 * 8192, 32, False)])
def test_the_grids_that_take_the_wide_look_back(monkeypatch, n, items, wide):
    """Capacity classes of 2^16 to 2^18 elements take tiles of 8 elements per invocation, others
    32; grids (the class's tiles: 9 tiles of data run 16) of ``WIDE_FROM`` (16) to ``WG`` (256)
    tiles take the wide look-back; smaller grids (a trip or two) and larger ones (more tiles than
    invocations) walk back."""
    from vyre.lib import plan as P
    from vyre.lib._scan import topology

    seen = []
    real = K.scan_lookback
    monkeypatch.setattr(K, "scan_lookback", lambda *a, **kw: seen.append((a[1], kw["wide"])) or real(*a, **kw))
    p = P.Plan(ReferenceBackend(), P.ScratchCache(ReferenceBackend()))
    topology.scan(p, Monoid("add", DataType.U32), None, None, n, P.capacity(n), True)
    assert seen == [(items, wide)]


@pytest.mark.parametrize("per_chunk", [1, 3])
@pytest.mark.parametrize("width", [1, 2, 4, 5])
def test_any_width_across_oracle_chunks(rng, monkeypatch, per_chunk, width):
    """The oracle runs chunks of ``per_chunk`` workgroups in lockstep: a tile meets inclusive
    prefixes of earlier chunks and the aggregates of its own chunk, nearer or farther than one
    trip of ``width`` tiles reads."""
    from vyre.reference import grid

    monkeypatch.setattr(grid, "CHUNK_LANES", per_chunk * WG)
    monkeypatch.setattr(K, "scan_lookback", functools.partial(K.scan_lookback.__wrapped__, width=width))
    x = E.data(rng, np.uint32, 11 * TILE + 5)
    _check(ReferenceBackend(), x, "add", 7)


@pytest.mark.parametrize("wide", [False, True])
def test_a_wait_that_runs_out_folds_the_input(rng, monkeypatch, wide):
    """With no trips at all (``spin=(1, 0)``) every tile but the first folds the input below it
    (invocation 0 alone, or wide: the whole workgroup): the result is still numpy's."""
    monkeypatch.setattr(K, "WIDE_FROM", 2 if wide else K.WIDE_FROM)
    monkeypatch.setattr(K, "scan_lookback", functools.partial(K.scan_lookback.__wrapped__, spin=(1, 0)))
    x = E.data(rng, np.int32, 5 * TILE + 77)
    _check(ReferenceBackend(), x, "xor", 3)
    _check(ReferenceBackend(), x.view(np.uint32), "add")


def test_integer_scans_take_one_pass_and_float_scans_three(rng):
    """Integer classes above 4096: the look-back kernel alone (its state kept zero for the next
    call by the kernel itself); F32: up, spine, down."""
    names = []

    class Recording(ReferenceBackend):
        def dispatch_sequence(self, steps, reads=()):
            names.append([(step[0].name, step[2].grid[0]) for step in steps])
            return super().dispatch_sequence(steps, reads)

    be = Recording()
    n = 3 * TILE + 1
    lib.inclusive_scan(E.data(rng, np.uint32, n), backend=be)
    assert names[-1] == [("lib_scan_lookback_inclusive_add_u32", 4)]
    lib.exclusive_scan(E.data(rng, np.float32, n, finite=True), backend=be)
    assert [name for name, _ in names[-1]] == ["lib_reduce_segments_add_f32", "lib_scan_exclusive_add_f32",
                                               "lib_scan_exclusive_add_f32"]


def _run_tile_one(state: np.ndarray, x: np.ndarray, spin: tuple[int, int],
                  wide: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Run the inclusive add scan as one workgroup that takes tile 1 of a grid of two (ticket 1,
    ``state[0] = 1``: the first call, the first set of tile words) over ``x`` of two tiles;
    returns ``out`` (tile 0's half left at the sentinel) and the state after (its ten words:
    the head, then tiles 0 and 1 of the first set and of the second)."""
    be = ReferenceBackend()
    params = np.zeros(PARAM_WORDS, np.uint32)
    params[0] = x.size
    params[1] = 2  # the grid: tiles_word
    sentinel = np.full(x.size, 0xDEADBEEF, np.uint32)
    handles = []
    for array in (x, sentinel, state, params):
        handles.append(be.allocate_resident(array.nbytes))
        be.upload_resident(handles[-1], array)
    program = K.scan_lookback.__wrapped__(Monoid("add", DataType.U32), K.SCAN_LOOKBACK_ITEMS, True, 0, None,
                                          tiles_word=1, spin=spin, wide=wide)
    be.dispatch_sequence([(program, handles, DispatchConfig(grid=(1, 1, 1)))])
    out = be.download_resident(handles[1], 0, x.nbytes).view(np.uint32)
    return out, be.download_resident(handles[2], 0, state.nbytes).view(np.uint32)


def _words(flag_lo: int, flag_hi: int, value: int) -> list[int]:
    return [(flag_lo << 16) | (value & 0xFFFF), (flag_hi << 16) | (value >> 16)]


@pytest.mark.parametrize("wide", [False, True])
def test_a_tile_takes_the_published_prefix_both_halves(rng, wide):
    """Tile 0's published inclusive prefix (a planted value, not the input's sum) is what tile 1
    starts from: both 16-bit halves are read back; tile 1 then publishes its own prefix."""
    x = rng.integers(0, 2**32, 2 * TILE, dtype=np.uint64).astype(np.uint32)
    planted = 0x89ABCDEF
    state = np.array([1, 0, *_words(K.SCAN_PREFIX, K.SCAN_PREFIX, planted), 0, 0, 5, 6, 7, 8], np.uint32)
    out, after = _run_tile_one(state, x, spin=(1, 2), wide=wide)
    want = np.cumsum(np.concatenate([[planted], x[TILE:]]).astype(np.uint32), dtype=np.uint32)[1:]
    E.assert_same(out[TILE:], want)
    assert (out[:TILE] == 0xDEADBEEF).all()
    E.assert_same(after[4:6], np.array(_words(K.SCAN_PREFIX, K.SCAN_PREFIX, int(want[-1])), np.uint32))
    assert after[0] == 2 and after[1] == 0
    E.assert_same(after[6:], np.array([5, 6, 0, 0], np.uint32))  # its slot of the next call's set zeroed, only it


@pytest.mark.parametrize("flags", [(0, 0), (K.SCAN_PREFIX, K.SCAN_AGGREGATE), (K.SCAN_AGGREGATE, K.SCAN_PREFIX),
                                   (K.SCAN_PREFIX, 0)])
@pytest.mark.parametrize("wide", [False, True])
def test_an_unpublished_or_torn_total_is_not_taken(rng, flags, wide):
    """A total not published, or whose halves carry different flags (torn by a later publish),
    is read again until the wait runs out; then the tile folds the input below it and counts
    that in ``state[1]``: the planted value is never used."""
    x = rng.integers(0, 2**32, 2 * TILE, dtype=np.uint64).astype(np.uint32)
    state = np.array([1, 0, *_words(*flags, 0x89ABCDEF), 0, 0, 0, 0, 0, 0], np.uint32)
    out, after = _run_tile_one(state, x, spin=(2, 3), wide=wide)
    E.assert_same(out[TILE:], np.cumsum(x, dtype=np.uint32)[TILE:])
    assert after[1] == 1


@pytest.mark.parametrize("dtype", [np.uint32, np.int32])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [1, 4097, 2 * TILE + 1])
def test_inclusive_scan_with_a_carry_in(backend, rng, dtype, op, n):
    """``init=`` folds a carry into every element in the same pass: ``init op x[0] op ... op x[i]``."""
    x = E.data(rng, dtype, n)
    init = x[n // 2]
    want = E.inclusive_scan(np.concatenate([np.array([init], dtype), x]), op)[1:]
    E.assert_same(lib.inclusive_scan(x, op, init=init, backend=backend), want)
