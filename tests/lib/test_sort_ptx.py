"""The programs of the sorts (``vyre.lib._sort``: the segmented passes, the single-pass (Onesweep)
passes with their digit histograms and starts, the gathers of sorts through indices) emit the
same PTX, byte for byte, as the builder-written programs they replaced: ``sort_ptx.json`` holds
the hashes of the builder versions' PTX, recorded before the rewrite, for sm_80 and sm_90, over
every key type, values mode, shift, items value the plans use and a sample of params words; a
recorded run checks that the library runs nothing else. The hashes were recorded again, once, when
the emitter began making counter adds (each pass's tile counter) once per subgroup; any other
change to a sort program's PTX fails here. The argsort's last pass that writes no keys and the passes
of small classes' tiles (``onesweep.SMALL_ITEMS`` keys per invocation, every pass) were added later,
their hashes recorded from their first versions.
All hashes were taken again for each emitter change listed in ``ptx_hashes`` (codegen 7, 8 and 9).
The single-pass passes' hashes were recorded again when their look-back words moved to u64 pair
words (two tiles' words of a digit in one word, read with one load): a change of the library's
programs, not of the emitter; every other case kept its hash. They were recorded again when the
look-back's common trip (two aggregates) took its own branch and the passes that hold keys in
registers moved the look-back after the place step."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.lib.ptx_hashes import SMS, changed, recorded
from tests.lib.test_plan import RecordingBackend
from vyre import lib
from vyre.ir import DataType, Program
from vyre.lib._sort import kernels as K
from vyre.lib._sort import onesweep as O

pytest.importorskip("vyre_cuda")

U32, U64 = DataType.U32, DataType.U64
NARROW = (DataType.U32, DataType.I32, DataType.F32)
WIDE = (DataType.U64, DataType.I64, DataType.F64)
MODES = ("none", "load", "iota")
SEGMENT_WORDS = ((1, 0, 2), (2, 1, 3), (0, 1, 2))  # (n, span, groups): sort, argsort/unique, another order
ONESWEEP_WORDS = ((0, 1), (1, 2), (3, 5))  # (n, region)


def _t(dtype: DataType | None) -> str:
    return "-" if dtype is None else dtype.value


def _passes(raw: DataType, mode: str) -> list[tuple[int, DataType | None, DataType | None, str, DataType]]:
    """The passes of one sort (shift, key_in, key_out, values, key type) for each key type of ``raw``:
    raw keys in on the first pass, out on the last; indices on the first pass, loaded after."""
    out = []
    shifts = range(0, 8 * raw.size, 8)
    for dtype in NARROW if raw is U32 else WIDE:
        for shift in shifts:
            key_in = dtype if shift == 0 else None
            key_out = dtype if shift == shifts[-1] else None
            values = mode if shift == 0 or mode == "none" else "load"
            out.append((shift, key_in, key_out, values, dtype))
    return out


def _segmented() -> dict[str, Program]:
    out: dict[str, Program] = {}
    for mode, words in itertools.product(MODES, SEGMENT_WORDS):
        if mode != "none" and words == SEGMENT_WORDS[-1]:
            continue  # the other order: keys alone
        w = "_".join(map(str, words))
        for shift, key_in, key_out, values, _ in _passes(U32, mode):
            out[f"counts_{shift}_{_t(key_in)}_i{K.COUNT_ITEMS}_w{w}"] = K.radix_counts.__wrapped__(
                shift, key_in, K.COUNT_ITEMS, *words)
            for items in (K.SORT_ITEMS, K.SORT_VALUE_ITEMS):
                out[f"scatter_{shift}_{_t(key_in)}_{_t(key_out)}_{values}_i{items}_w{w}"] = K.radix_scatter.__wrapped__(
                    shift, key_in, key_out, values, items, *words)
    return out


def _indices() -> dict[str, Program]:
    out: dict[str, Program] = {}
    for n_word in range(4):
        out |= {f"split_{d.value}_n{n_word}": K.split_keys.__wrapped__(d, n_word) for d in WIDE}
        out |= {f"gather_{e.value}_{_t(k)}_n{n_word}": K.gather.__wrapped__(e, k, n_word)
                for e, k in [(U32, None), (U64, None), *((U64, d) for d in WIDE)]}
    return out


def _onesweep() -> dict[str, Program]:
    out: dict[str, Program] = {}
    for d, items, (n_word, blocks_word) in itertools.product((*NARROW, *WIDE), (4, 8), ((0, 3), (1, 4), (2, 0))):
        out[f"histograms_{d.value}_i{items}_n{n_word}_b{blocks_word}"] = O.radix_histograms.__wrapped__(
            d, items, n_word, blocks_word)
    out |= {f"digit_starts_{p}": O.radix_digit_starts.__wrapped__(p) for p in (4, 8)}
    grid = itertools.product((U32, U64), MODES, (U32, U64), ONESWEEP_WORDS, (True, False))
    for raw, mode, value_raw, words, registers in grid:
        default = words == ONESWEEP_WORDS[0]
        if (value_raw is U64 and mode != "load") or (not default and (value_raw is U64 or not registers)):
            continue  # 8-byte values and keys read three times: one params layout
        items_of = {O.onesweep_items(raw, mode), *((8, 16, 24) if default and registers and mode != "iota" else ())}
        for (shift, key_in, key_out, values, _), items in itertools.product(_passes(raw, mode), sorted(items_of)):
            if items != O.onesweep_items(raw, mode) and shift not in (0, 8):
                continue  # other items: the first pass and a middle one
            name = (f"onesweep{8 * raw.size}_{shift}_{_t(key_in)}_{_t(key_out)}_{values}_v{value_raw.value}"
                    f"_i{items}_n{words[0]}_r{words[1]}_reg{int(registers)}")
            out[name] = O.radix_onesweep.__wrapped__(shift, key_in, key_out, values, items, *words,
                                                    raw=raw, value_raw=value_raw, registers=registers)
    for mode, words in itertools.product(MODES, ONESWEEP_WORDS):  # small classes' tiles: every pass (recorded
        for shift, key_in, key_out, values, _ in _passes(U32, mode):  # when they were added)
            name = (f"onesweep32_{shift}_{_t(key_in)}_{_t(key_out)}_{values}_vu32_i{O.SMALL_ITEMS}"
                    f"_n{words[0]}_r{words[1]}_reg1")
            out[name] = O.radix_onesweep.__wrapped__(shift, key_in, key_out, values, O.SMALL_ITEMS, *words,
                                                    raw=U32, value_raw=U32, registers=True)
    for d, items in itertools.product(NARROW, sorted({O.onesweep_items(U32, "iota"), O.SMALL_ITEMS})):
        # an argsort's last pass: the indices written, the keys not (recorded when it was added)
        out[f"onesweep32_24_-_{d.value}_load_vu32_i{items}_n0_r1_reg1_indices"] = O.radix_onesweep.__wrapped__(
            24, None, d, "load", items, 0, 1, raw=U32, value_raw=U32, registers=True, drop_keys=True)
    for d in (*NARROW, *WIDE):  # large classes: the first digit counted alone (recorded when it was added)
        out[f"histograms_{d.value}_i{O.HISTOGRAM_ITEMS}_n0_b3_first1"] = O.radix_histograms.__wrapped__(
            d, O.HISTOGRAM_ITEMS, 0, 3, 1)
    out |= {f"digit_starts_{p}_pass{first}": O.radix_digit_starts.__wrapped__(p, first)
            for p in (4, 8) for first in range(p)}
    for raw, mode in itertools.product((U32, U64), MODES):  # ... and passes counting the next digit
        if raw is U64 and mode != "none":
            continue  # 64-bit keys with values sort indices
        for shift, key_in, key_out, values, _ in _passes(raw, mode):
            if key_out is not None:
                continue  # the last pass has no next digit
            name = (f"onesweep{8 * raw.size}_{shift}_{_t(key_in)}_{_t(key_out)}_{values}_vu32"
                    f"_i{O.onesweep_items(raw, mode)}_n0_r1_reg1_next")
            out[name] = O.radix_onesweep.__wrapped__(shift, key_in, key_out, values, O.onesweep_items(raw, mode),
                                                    0, 1, raw=raw, value_raw=U32, registers=True, count_next=True)
    for d in NARROW[:2]:  # unique's last pass counting run starts (u32, i32; recorded when it was added), on
        # the params words of unique's plan (n 2, region 3; the compaction's span 0 and recount word 1)
        out[f"onesweep32_24_-_{d.value}_none_vu32_i{O.ONESWEEP_ITEMS}_n2_r3_reg1_runs"] = O.radix_onesweep.__wrapped__(
            24, None, d, "none", O.ONESWEEP_ITEMS, 2, 3, raw=U32, value_raw=U32, registers=True, runs=(0, 1))
    for spin, width in (((1, 0), 1), ((2, 3), 3)):  # other waits
        out[f"onesweep32_8_-_-_none_s{spin[0]}x{spin[1]}_w{width}"] = O.radix_onesweep.__wrapped__(
            8, None, None, "none", O.ONESWEEP_ITEMS, 0, 1, spin, width)
    return out


def cases() -> dict[str, Program]:
    """Every sort program variant checked, by a name stable across versions."""
    return _segmented() | _indices() | _onesweep()


EXPECTED = recorded("sort_ptx")
CASES = cases()


def test_the_grid_is_the_recorded_one() -> None:
    assert sorted(f"{name} sm_{sm}" for name in CASES for sm in SMS) == sorted(EXPECTED)


def test_sort_ptx_is_the_builders_byte_for_byte() -> None:
    different = changed(CASES, EXPECTED)
    assert not different, f"the PTX of {len(different)} sort programs changed: {different[:8]}"


SORT_PREFIXES = ("lib_radix_", "lib_split_keys", "lib_gather")


@pytest.mark.parametrize("limit", ["", "0"])
def test_every_sort_program_the_library_runs_is_checked(rng, monkeypatch, limit: str) -> None:
    """``sort`` (keys, 4- and 8-byte values), ``argsort`` and ``unique`` of every key type, single
    pass and (``VYRE_ONESWEEP_LIMIT=0``) over segments, dispatch checked programs only."""
    monkeypatch.setenv("VYRE_ONESWEEP_LIMIT", limit)
    be = RecordingBackend()
    for dtype in (np.uint32, np.int32, np.float32, np.uint64, np.int64, np.float64):
        for n in (1, 300):
            x = rng.integers(0, 1000, n).astype(dtype)
            lib.sort(x, backend=be)
            lib.argsort(x, backend=be)
            lib.unique(x, backend=be)
            for value_type in (np.uint32, np.float64):
                lib.sort(x, rng.integers(0, 5, n).astype(value_type), backend=be)
    ran = {p for steps in be.sequences for p, _, _ in steps if (p.name or "").startswith(SORT_PREFIXES)}
    checked = set(CASES.values())
    assert ran <= checked, sorted(p.name or "" for p in ran - checked)
    passes = {"lib_radix_onesweep_0", "lib_radix_onesweep64_0"} if not limit else {"lib_radix_counts_0",
                                                                                 "lib_radix_scatter_0"}
    assert passes | {"lib_split_keys_f64", "lib_gather_u64_f64"} <= {p.name for p in ran}
