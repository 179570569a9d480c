"""The library kernels written as ``@vk.kernel`` functions emit the same PTX, byte for byte, as the
builder-written programs they replaced (``builder_histogram.py``, ``builder_reduce.py``,
``builder_segments.py``, ``builder_compact.py``, ``builder_scan.py``), for sm_80 and sm_90 and
every parameter combination the library uses; a recorded run checks that the grid covers those."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.lib.builder_compact import compact_segments as built_compact_segments
from tests.lib.builder_histogram import histogram_kernel as built_histogram
from tests.lib.builder_reduce import reduce_tiles as built_reduce_tiles
from tests.lib.builder_scan import scan_segments as built_scan_segments
from tests.lib.builder_segments import count_segments as built_count_segments
from tests.lib.builder_segments import reduce_segments as built_reduce_segments
from tests.lib.ptx_hashes import SMS, changed, recorded
from tests.lib.test_plan import RecordingBackend
from vyre import lib
from vyre.ir import DataType, Expr, Program
from vyre.lib._histogram.api import INT_TYPES
from vyre.lib._histogram.kernels import histogram_kernel
from vyre.lib._histogram.topology import HISTOGRAM_SHARED_MAX
from vyre.lib._scan.kernels import (
    REDUCE_ITEMS,
    SCAN_ITEMS,
    reduce_segments,
    reduce_tiles,
    scan_segments,
)
from vyre.lib._select.api import FLAG_TYPES, VALUE_TYPES
from vyre.lib._select.kernels import COMPACT_ITEMS, Predicate, compact_segments, count_segments
from vyre.lib.blocks import PARAM_WORDS, U32, WG, load_param
from vyre.lib.monoid import FLOAT_TYPES, OPS, SCAN_TYPES, Monoid
from vyre.lib.plan import capacity
from vyre.lib.transform import element, fused

pytest.importorskip("vyre_cuda")
from vyre_cuda import emit_ptx  # noqa: E402

COUNT_TYPES = (DataType.U32, DataType.U64)
#: workgroup bins: none (past HISTOGRAM_SHARED_MAX bins), else the capacity class of max(bins, WG)
SHARED = (0, *(capacity(b) for b in range(WG, HISTOGRAM_SHARED_MAX + 1, WG) if capacity(b) == b))
#: (n, bins, blocks) params words: histogram's own plan, and unique(key_range=)'s after its lo and bins
WORDS = ((0, 1, 2), (2, 3, 4))
#: unique(key_range=) counts `x - lo` (lo in params word 0) of U32 or I32 keys
SHIFTS = tuple(element("minus_lo", t, U32, lambda v: Expr.sub(Expr.cast(U32, v), load_param(0)))
               for t in (DataType.U32, DataType.I32))


def _cases() -> list[tuple[Program, Program]]:
    """(front-end program, builder program) for every combination checked."""
    cases = []
    for dtype, count_type, shared, words in itertools.product(INT_TYPES, COUNT_TYPES, SHARED, WORDS):
        cases.append((histogram_kernel(dtype, shared, *words, count_type),
                      built_histogram(dtype, shared, *words, count_type)))
    for shift, shared in itertools.product(SHIFTS, SHARED):
        front, built = histogram_kernel(U32, shared, *WORDS[1], U32), built_histogram(U32, shared, *WORDS[1], U32)
        cases.append((fused(front, shift), fused(built, shift)))
    return cases


CASES = _cases()


def _different(cases: list[tuple[Program, Program]]) -> list[tuple[str, str, int]]:
    """(name, sm, index) of each case whose two programs emit different PTX."""
    return [(front.name or "", sm, i) for i, (front, built) in enumerate(cases) for sm in SMS
            if emit_ptx(front, sm=sm) != emit_ptx(built, sm=sm)]


def _ran(be: RecordingBackend, prefix: str) -> set[Program]:
    """The programs named ``prefix...`` that ``be`` dispatched."""
    return {p for steps in be.sequences for p, _, _ in steps if (p.name or "").startswith(prefix)}


def test_histogram_ptx_is_the_builders_byte_for_byte() -> None:
    assert not _different(CASES)
    assert len(CASES) * len(SMS) == 476  # 8 dtypes x 2 count types x 7 bin classes x 2 word sets, + 14 fused, x 2 sms


def test_every_histogram_the_library_runs_is_checked(rng) -> None:
    """The programs ``histogram`` and ``unique(key_range=)`` dispatch are among the checked ones."""
    be = RecordingBackend()
    for dtype, bins, counts in itertools.product(INT_TYPES, (5, 300, 9000), (np.uint32, np.uint64)):
        lib.histogram(rng.integers(0, 120, 3000).astype(dtype.np_dtype), bins, counts_dtype=counts, backend=be)
    for keys in (np.uint32, np.int32):
        lib.unique(rng.integers(0, 100, 3000).astype(keys), key_range=(0, 100), backend=be)
        lib.unique(rng.integers(0, 100, 3000).astype(keys), key_range=(0, 10000), backend=be)
    ran = _ran(be, "lib_histogram")
    checked = {front for front, _ in CASES}
    assert len(ran) >= 8 * 2 + 2
    assert ran <= checked, sorted(p.name or "" for p in ran - checked)


#: every monoid a reduction takes (float types have no bitwise ops)
MONOIDS = tuple(Monoid(op, t) for op, t in itertools.product(OPS, SCAN_TYPES)
                if not (t in FLOAT_TYPES and op in ("and", "or", "xor")))
#: reduce's own plan: one params word per level (at most three levels of 4096-element tiles below 2^32)
REDUCE_WORDS = (0, 1, 2)
COUNT = Monoid("add", DataType.U32)
REDUCE_CASES = [(reduce_tiles(m, REDUCE_ITEMS, w), built_reduce_tiles(m, REDUCE_ITEMS, w))
                for m, w in itertools.product(MONOIDS, REDUCE_WORDS)]
# unique(key_range=) reduces its u32 bin counts after the words of its other steps: any word
REDUCE_CASES += [(reduce_tiles(COUNT, REDUCE_ITEMS, w), built_reduce_tiles(COUNT, REDUCE_ITEMS, w))
                 for w in range(len(REDUCE_WORDS), PARAM_WORDS)]


def test_reduce_ptx_is_the_builders_byte_for_byte() -> None:
    assert not _different(REDUCE_CASES)
    assert len(REDUCE_CASES) == 30 * 3 + 29  # 30 monoids x 3 words, + the u32 count on every other word


def test_every_reduction_the_library_runs_is_checked(rng) -> None:
    """The tile reductions ``reduce`` (every op and type, one to three levels) and
    ``unique(key_range=)`` dispatch are among the checked ones."""
    be = RecordingBackend()
    for m in MONOIDS:
        lib.reduce(rng.integers(0, 100, 5000).astype(m.dtype.np_dtype), m.op, backend=be)  # two levels
    lib.reduce(np.ones(4096 * 4096 + 1, np.uint32), backend=be)  # three
    for keys in (np.uint32, np.int32):
        lib.unique(rng.integers(0, 100, 3000).astype(keys), key_range=(0, 10000), backend=be)
    ran = _ran(be, "lib_reduce_") - _ran(be, "lib_reduce_segments")
    checked = {front for front, _ in REDUCE_CASES}
    assert len(ran) >= 30 * 2 + 1 + 1
    assert ran <= checked, sorted(p.name or "" for p in ran - checked)


#: the scans' upsweep runs for the types without a look-back scan (F32 and the 64-bit types); its
#: (n, span) params words follow the init value's words (none, one F32 word, two 64-bit words)
UPSWEEP_MONOIDS = tuple(m for m in MONOIDS if m.dtype not in (DataType.U32, DataType.I32))
UPSWEEP_WORDS = ((0, 1), (1, 2), (2, 3))
#: compaction's upsweep: (predicate, (n, span) words): select's flags, select_if's range after lo and
#: hi (one or two words each), run-length encoding's run starts (alone, or after unique's words),
#: unique(key_range=)'s u32 flags after its histogram's words
COUNT_PREDICATES = (
    [(Predicate("flags", t, f), (0, 1)) for t, f in itertools.product(VALUE_TYPES, FLAG_TYPES)]
    + [(Predicate("flags", DataType.U32, DataType.U32), (5, 6))]
    + [(Predicate("range", t), words) for t, words in itertools.product(VALUE_TYPES, ((2, 3), (4, 5)))]
    + [(Predicate("run_start", t), words) for t, words in itertools.product(VALUE_TYPES, ((0, 1), (5, 6)))])
SEGMENT_CASES = [(reduce_segments(m, REDUCE_ITEMS, *w), built_reduce_segments(m, REDUCE_ITEMS, *w))
                 for m, w in itertools.product(UPSWEEP_MONOIDS, UPSWEEP_WORDS)]
SEGMENT_CASES += [(count_segments(p, items, *w), built_count_segments(p, items, *w))
                  for items in (REDUCE_ITEMS, COMPACT_ITEMS) for p, w in COUNT_PREDICATES]


#: transform_reduce and the transform_ scans apply a transform where these kernels load x
TRANSFORMS = (element("twice", DataType.U8, U32, lambda v: Expr.mul(Expr.cast(U32, v), Expr.u32(2))),
              element("half", DataType.F32, DataType.F32, lambda v: Expr.mul(v, Expr.f32(0.5))))


def test_transformed_reductions_are_the_builders_byte_for_byte() -> None:
    """A transform rewrites the loads of x: the same rewrite of the same program gives the same PTX."""
    cases = []
    for t in TRANSFORMS:
        m = Monoid("max", t.out_type)
        cases += [(fused(reduce_tiles(m, REDUCE_ITEMS, 0), t), fused(built_reduce_tiles(m, REDUCE_ITEMS, 0), t)),
                  (fused(reduce_segments(m, REDUCE_ITEMS, 0, 1), t),
                   fused(built_reduce_segments(m, REDUCE_ITEMS, 0, 1), t))]
    assert not _different(cases)


def test_upsweep_ptx_is_the_builders_byte_for_byte() -> None:
    assert not _different(SEGMENT_CASES)
    assert len(SEGMENT_CASES) == 18 * 3 + 2 * (6 * 10 + 1 + 6 * 2 + 6 * 2)  # counts of 16 and 8 per invocation


def test_every_upsweep_the_library_runs_is_checked(rng) -> None:
    """The segment reductions of the scans (every op, init or not) and the counts of ``select``,
    ``select_if``, ``unique``, ``run_length_encode`` and ``unique(key_range=)`` are checked ones."""
    be = RecordingBackend()
    for t in VALUE_TYPES:
        x = rng.integers(0, 100, 10000).astype(t.np_dtype)
        for op in ("add", "min", "max") + (() if t in FLOAT_TYPES else ("and", "or", "xor")):
            lib.inclusive_scan(x, op, backend=be)
            lib.exclusive_scan(x, op, 3, backend=be)
        for f in FLAG_TYPES:
            lib.select(x, (x & 1 if t not in FLOAT_TYPES else x > 3).astype(f.np_dtype), backend=be)
        lib.select_if(x, 10, 50, backend=be)
        lib.unique(x, backend=be)
        lib.run_length_encode(x, backend=be)
    lib.unique(rng.integers(0, 100, 3000).astype(np.uint32), key_range=(0, 10000), backend=be)
    firsts = {p for p in _ran(be, "lib_count_") if (p.name or "").endswith("_firsts")}  # test_runs_ptx checks these
    ran = _ran(be, "lib_reduce_segments") | (_ran(be, "lib_count_") - firsts)
    checked = {front for front, _ in SEGMENT_CASES}
    assert len(ran) >= 18 + 2 * 10 + 6 + 4  # flags see raw 32- or 64-bit words
    assert ran <= checked, sorted(p.name or "" for p in ran - checked)


def _compact_cases() -> list[tuple[Program, Program]]:
    """Compaction's downsweep for every upsweep's predicate and words, with the carry of a
    multi-segment size or without (one segment); with element indices where the library asks for
    them (the two-pass run-length encoding's starts, unique(key_range=)'s bins)."""
    cases = []
    for (pred, words), has_carry in itertools.product(COUNT_PREDICATES, (False, True)):
        for with_index in (False, True) if pred.kind == "run_start" or words == (5, 6) else (False,):
            args = (pred, COMPACT_ITEMS, has_carry, with_index, *words)
            cases.append((compact_segments(*args), built_compact_segments(*args)))
    return cases


COMPACT_CASES = _compact_cases()


def _own_carry_cases() -> dict[str, Program]:
    """The downsweeps that sum their own carry (``own_carry``: no scan of the counts first, up to
    ``OWN_CARRY_GROUPS`` segments), for every predicate and words: written with the front end, no
    builder twin; hashes in ``compact_own_ptx.json``, recorded when written and again for
    each emitter change listed in ``ptx_hashes``."""
    out = {}
    for (pred, words), with_index in itertools.product(COUNT_PREDICATES, (False, True)):
        if with_index and not (pred.kind == "run_start" or words == (5, 6)):
            continue
        name = (f"compact_own_{pred.kind}_{pred.dtype.value}_{pred.flag_type.value}_i{int(with_index)}"
                f"_w{words[0]}{words[1]}")
        out[name] = compact_segments(pred, COMPACT_ITEMS, True, with_index, *words, own_carry=True)
    return out


OWN_CASES = _own_carry_cases()


def test_own_carry_compaction_ptx_is_the_recorded() -> None:
    expected = recorded("compact_own_ptx")
    assert sorted(f"{name} sm_{sm}" for name in OWN_CASES for sm in SMS) == sorted(expected)
    assert not changed(OWN_CASES, expected)


def test_compaction_ptx_is_the_builders_byte_for_byte() -> None:
    assert not _different(COMPACT_CASES)
    assert len(COMPACT_CASES) == (6 * 10 + 6 * 2) * 2 + (1 + 6 * 2) * 4


def test_every_compaction_the_library_runs_is_checked(rng) -> None:
    """The downsweeps of ``select``, ``select_if``, ``unique``, ``run_length_encode`` and
    ``unique(key_range=)``, in one segment and in several, are checked ones (``unique`` and
    ``run_length_encode`` run ``lib_rle_compact``, checked in ``test_runs_ptx``)."""
    be = RecordingBackend()
    for t, n in itertools.product(VALUE_TYPES, (1000, 10000)):
        x = rng.integers(0, 100, n).astype(t.np_dtype)
        for f in FLAG_TYPES:
            lib.select(x, (x & 1 if t not in FLOAT_TYPES else x > 3).astype(f.np_dtype), backend=be)
        lib.select_if(x, 10, 50, backend=be)
        lib.unique(x, backend=be)
        lib.run_length_encode(x, backend=be)
    for hi in (100, 10000):
        lib.unique(rng.integers(0, 100, 3000).astype(np.uint32), key_range=(0, hi), backend=be)
    ran = _ran(be, "lib_compact_")
    checked = {front for front, _ in COMPACT_CASES} | set(OWN_CASES.values())
    assert len(ran) >= (2 * 10 + 6 + 1) * 2
    assert ran <= checked, sorted(p.name or "" for p in ran - checked)


def _scan_cases() -> list[tuple[Program, Program]]:
    """The segment scan (inclusive or exclusive) of every monoid: alone on one workgroup or with
    carries (F32 and the 64-bit types, which reduce then scan), without an init value (words n=0,
    span=1) or with one in word 0 (n and span after its one or two words); the spine's exclusive
    scan of the partials after those; the u32 count scans of compaction, sorts and workloads on
    any words."""
    specs = []
    for m in MONOIDS:
        init_words = 1 if m.dtype.size == 4 else 2
        for inclusive, init in itertools.product((False, True), (None, 0)):
            n = 0 if init is None else init_words
            carries = (False, True) if m in UPSWEEP_MONOIDS else (False,)
            specs += [(m, inclusive, has_carry, n, n + 1, init) for has_carry in carries]
        specs += [(m, False, False, n, n + 1, None) for n in (2, 2 + init_words)]
    specs += [(COUNT, inclusive, False, n, n + 1, None) for inclusive in (False, True) for n in range(16)]
    specs = list(dict.fromkeys(specs))
    return [(scan_segments(m, SCAN_ITEMS, *rest), built_scan_segments(m, SCAN_ITEMS, *rest))
            for m, *rest in specs]


SCAN_CASES = _scan_cases()


def test_scan_ptx_is_the_builders_byte_for_byte() -> None:
    assert not _different(SCAN_CASES)


def test_every_segment_scan_the_library_runs_is_checked(rng) -> None:
    """The segment scans of the scans (every op, with and without init, one segment or several),
    of compaction, of ``unique``, ``run_length_encode`` and the sorts are checked ones."""
    be = RecordingBackend()
    for t, n in itertools.product(VALUE_TYPES, (1000, 10000)):
        x = rng.integers(0, 100, n).astype(t.np_dtype)
        for op in ("add", "min", "max") + (() if t in FLOAT_TYPES else ("and", "or", "xor")):
            for scan in (lib.inclusive_scan, lib.exclusive_scan):
                scan(x, op, backend=be)
                scan(x, op, init=3, backend=be)
        lib.select(x, (x > 3).astype(np.uint8), backend=be)
        lib.unique(x, backend=be)
        lib.run_length_encode(x, backend=be)
        lib.sort(x, backend=be)
    ran = _ran(be, "lib_scan_inclusive") | _ran(be, "lib_scan_exclusive")
    checked = {front for front, _ in SCAN_CASES}
    assert len(ran) >= 30 * 2
    assert ran <= checked, sorted(p.name or "" for p in ran - checked)
