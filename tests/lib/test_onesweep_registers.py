"""The single-pass radix pass with the tile's keys in registers (``ONESWEEP_KEYS_IN_REGISTERS``:
each key read once) and the pass that reads them three times, on the oracle against numpy's
stable sort: every key type, keys alone, with values, argsort, sizes across tiles, ties; the
published digit counts of a partial tile; the items each variant refuses; the kernels assemble."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from tests.codegen.codegen_support import assemble, needs_ptxas
from tests.lib import expected as E
from tests.lib.test_onesweep import tile_words
from vyre import lib
from vyre.driver.config import DispatchConfig
from vyre.ir import DataType
from vyre.lib._sort import onesweep as K
from vyre.lib._sort import topology as topo
from vyre.lib.blocks import PARAM_WORDS, WG
from vyre.lib.keys import raw_type
from vyre.lib.plan import Plan, capacity
from vyre.lib.scratch import scratch_for
from vyre.reference import ReferenceBackend

#: name: (keys in registers, keys ranked per loop iteration, ranks in registers)
VARIANTS = {"three_reads": (False, 4, False), "registers": (True, 4, False), "written_out": (True, 0, False),
            "register_ranks": (True, 4, True)}
NARROW, WIDE = [np.uint32, np.int32, np.float32], [np.uint64, np.int64, np.float64]


@pytest.fixture(params=sorted(VARIANTS))
def variant(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """One variant of the pass for the whole test (the cached programs are dropped before and after)."""
    registers, rounds, ranks = VARIANTS[request.param]
    monkeypatch.setattr(K, "ONESWEEP_KEYS_IN_REGISTERS", registers)
    monkeypatch.setattr(K, "ONESWEEP_REGISTER_ROUNDS", rounds)
    monkeypatch.setattr(K, "ONESWEEP_RANKS_IN_REGISTERS", ranks)
    K.radix_onesweep.cache_clear()
    yield request.param
    K.radix_onesweep.cache_clear()


def _keys(rng: np.random.Generator, dtype: type, n: int) -> np.ndarray:
    """Random keys with the edge values of ``dtype`` and plenty of ties (so stability shows)."""
    keys = E.data(rng, dtype, n)
    keys[: n // 4] = keys[n // 4: 2 * (n // 4)]
    return keys


def _check_sorts(keys: np.ndarray, values: np.ndarray) -> None:
    """``sort``, ``argsort`` and ``sort(keys, values)`` on a fresh oracle give numpy's stable order."""
    be = ReferenceBackend()
    order = E.sort_order(keys)
    E.assert_same_bits(lib.sort(keys, backend=be), keys[order])
    E.assert_same(lib.argsort(keys, backend=be), order.astype(np.uint32))
    got_k, got_v = lib.sort(keys, values, backend=be)
    E.assert_same_bits(got_k, keys[order])
    assert got_v.dtype == values.dtype and got_v.tobytes() == values[order].tobytes()


def _tiles(dtype: type) -> tuple[int, int]:
    """The keys-alone and with-values tiles of ``dtype``'s single-pass sort."""
    raw = raw_type(DataType.U64 if np.dtype(dtype).itemsize == 8 else DataType.U32)
    return WG * K.onesweep_items(raw, "none"), WG * K.onesweep_items(raw, "load")


@pytest.mark.parametrize("dtype", NARROW + WIDE)
def test_variants_match_numpy_across_tiles(variant, rng, dtype):
    keys_tile, pairs_tile = _tiles(dtype)
    for n in (1, 257, pairs_tile + 1, keys_tile, 3 * keys_tile + 5):
        _check_sorts(_keys(rng, dtype, n), E.data(rng, np.int32, n))


@pytest.mark.parametrize("dtype", [np.uint32, np.float32, np.int64, np.float64])
def test_variants_on_equal_sorted_and_reversed_keys(variant, rng, dtype):
    """All-equal keys (one digit per pass: every key in one warp counter), sorted and reversed."""
    n = _tiles(dtype)[0] + 3
    keys = _keys(rng, dtype, n)
    for case in (np.full(n, keys[7]), np.sort(keys), np.sort(keys)[::-1].copy()):
        _check_sorts(case, rng.permutation(n).astype(np.uint32))


def test_variants_on_float_edges(variant):
    """-0.0 before +0.0, every NaN last (in input order) and returned as the one NaN."""
    keys = np.array([np.nan, 0.0, -0.0, np.inf, -np.nan, -np.inf, 1e-45, -1e-45, 0.0, -0.0, 1.0], np.float32)
    want = np.array([0xFF800000, 0x80000001, 0x80000000, 0x80000000, 0, 0, 1, 0x3F800000, 0x7F800000,
                     0x7FFFFFFF, 0x7FFFFFFF], np.uint32)
    E.assert_same(lib.sort(keys, backend=ReferenceBackend()).view(np.uint32), want)
    wide = keys.astype(np.float64)
    got = lib.sort(wide, backend=ReferenceBackend()).view(np.uint64)
    assert got[-1] == got[-2] == 0x7FFFFFFFFFFFFFFF and np.signbit(got.view(np.float64)[2])


@pytest.mark.parametrize(("mode", "value_type"), [("iota", None), ("load", np.uint32), ("load", np.float64)])
def test_variants_move_values_with_64_bit_keys(variant, rng, mode, value_type):
    """The native 64-bit passes that move values or indices (``lib.sort`` takes the composite plan
    for those for now, so the plan is built here): numpy's stable order over several tiles."""
    be = ReferenceBackend()
    n = 3 * WG * K.ONESWEEP_WIDE_VALUE_ITEMS + 5
    keys = _keys(rng, np.float64, n)
    values = E.data(rng, value_type, n) if value_type is not None else np.arange(n, dtype=np.uint32)
    handles = [be.allocate_resident(array.nbytes) for array in (keys, values, keys, values)]
    be.upload_resident(handles[0], keys)
    be.upload_resident(handles[1], values)
    plan = Plan(be, scratch_for(be))
    vtype = DataType.F64 if value_type is np.float64 else DataType.U32
    topo.onesweep_sort(plan, DataType.F64, handles[0], handles[1] if mode == "load" else None, mode, n,
                       capacity(n), (handles[2], handles[3]), vtype if mode == "load" else None)
    plan.run()
    order = E.sort_order(keys)
    E.assert_same_bits(be.download_resident(handles[2], 0, keys.nbytes).view(np.float64), keys[order])
    got_v = be.download_resident(handles[3], 0, values.nbytes).view(values.dtype)
    E.assert_same(got_v, values[order])


@pytest.mark.parametrize("registers", [False, True])
def test_published_counts_leave_out_keys_past_n(registers):
    """One pass over two tiles and a third wholly past ``n``: each tile's digit words end as the
    inclusive count of the keys below ``n`` (the keys past ``n`` rank as digit 255 but are not
    counted), and the keys come out stably ordered by their digit."""
    be = ReferenceBackend()
    tile = WG * K.ONESWEEP_ITEMS
    n, tiles = tile + 100, 3
    region = 2 * 256  # pair words per region: tiles 0-1 and 2-3
    keys = np.random.default_rng(11).integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    keys[:50] |= 255  # digit 255 in both tiles
    keys[-50:] |= 255
    lookback = np.zeros(K.LOOKBACK_HEAD, np.uint32)
    counts = [np.bincount(part & 255, minlength=256).astype(np.uint32) for part in (keys[:tile], keys[tile:])]
    lookback[K.LOOKBACK_STARTS: K.LOOKBACK_STARTS + 256] = np.cumsum(counts[0] + counts[1]) - counts[0] - counts[1]
    params = np.zeros(PARAM_WORDS, np.uint32)
    params[:2] = n, region
    pairs = np.zeros(2 * region, np.uint64)
    data = [keys, lookback, pairs, np.zeros(tiles * tile, np.uint32), params, np.zeros(1, np.uint32)]
    handles = []
    for array in data:
        handles.append(be.allocate_resident(array.nbytes))
        be.upload_resident(handles[-1], array)
    program = K.radix_onesweep.__wrapped__(0, DataType.U32, None, "none", K.ONESWEEP_ITEMS, 0, 1,
                                           registers=registers)
    be.dispatch_sequence([(program, handles, DispatchConfig(grid=(tiles, 1, 1)))])
    after = be.download_resident(handles[2], 0, pairs.nbytes).view(np.uint64)
    words = [tile_words(after, t) for t in range(tiles)]
    flag = np.uint32(K.FLAG_P)
    E.assert_same(words[0], counts[0] | flag)
    E.assert_same(words[1], (counts[0] + counts[1]) | flag)
    E.assert_same(words[2], (counts[0] + counts[1]) | flag)
    assert not tile_words(after, 3).any()
    got = be.download_resident(handles[3], 0, 4 * n).view(np.uint32)
    E.assert_same(got, keys[np.argsort(keys & 255, kind="stable")])
    assert be.download_resident(handles[5], 0, 4).view(np.uint32)[0] == 0


def test_early_counts_refuse_items_their_batch_does_not_divide(monkeypatch):
    """A whole tile's early counts read ``EARLY_BATCH`` keys per loop trip without testing them
    against the tile's end, so items that the batch does not divide would count keys of the next
    tile: the three-read pass refuses them; the register pass has no batches."""
    monkeypatch.setattr(K, "EARLY_BATCH", 8)
    with pytest.raises(ValueError, match=r"items \(12\) must be a multiple of EARLY_BATCH \(8\)"):
        K.radix_onesweep.__wrapped__(0, DataType.U32, None, "none", 12, 0, 1, registers=False)
    K.radix_onesweep.__wrapped__(0, DataType.U32, None, "none", 12, 0, 1, registers=True)


def test_register_tile_refuses_rounds_that_do_not_divide_items(monkeypatch):
    from vyre.lib._sort import registers

    with pytest.raises(ValueError, match=r"rounds \(8\) must divide its items \(12\)"):
        registers.check_register_rounds(12, 8)
    monkeypatch.setattr(K, "ONESWEEP_REGISTER_ROUNDS", 2)  # gcd(2, 8) = 2: not a multiple of SORT_ROUNDS
    with pytest.raises(ValueError, match="multiple of SORT_ROUNDS"):
        K.radix_onesweep.__wrapped__(0, DataType.U32, None, "none", 8, 0, 1, registers=True)
    with pytest.raises(ValueError, match="multiple of SORT_ROUNDS"):
        K.radix_onesweep.__wrapped__(0, DataType.U32, None, "none", 6, 0, 1, registers=True)


def test_register_ranks_drop_the_ranks_buffer(monkeypatch):
    """With the ranks in registers the pass declares no ``ranks`` workgroup buffer (8 KiB less at
    4096 keys per tile); with them in workgroup memory it does."""
    def names(ranks: bool) -> set[str]:
        monkeypatch.setattr(K, "ONESWEEP_RANKS_IN_REGISTERS", ranks)
        program = K.radix_onesweep.__wrapped__(8, None, None, "none", 16, 0, 1, raw=DataType.U64, registers=True)
        return {buffer.name for buffer in program.buffers}

    assert "ranks" in names(False) and "ranks" not in names(True)


@needs_ptxas
def test_register_passes_assemble_for_sm90():
    """Every single-pass kernel the sorts build with keys in registers (each key width and values
    mode at its ``onesweep_items``; first, middle and last pass) stays under the PTX instruction
    bound and passes ptxas for sm_90."""
    from vyre_cuda import emit_ptx

    ptx = {}
    cases = [(DataType.F32, "none", DataType.U32), (DataType.I32, "iota", DataType.U32),
             (DataType.U32, "load", DataType.U32), (DataType.F64, "none", DataType.U32),
             (DataType.I64, "iota", DataType.U32), (DataType.F64, "load", DataType.U64)]
    for key_type, values, value_raw in cases:
        raw = raw_type(key_type)
        last = 8 * raw.size - 8
        for shift in (0, 8, last):
            program = K.radix_onesweep(shift, key_type if shift == 0 else None, key_type if shift == last else None,
                                       values, K.onesweep_items(raw, values), 0, 1, raw=raw, value_raw=value_raw,
                                       registers=True)
            ptx[f"{key_type.value}_{values}_{shift}"] = emit_ptx(program, sm="90")
    assert assemble(ptx, "90") == []
