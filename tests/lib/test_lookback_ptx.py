"""The single-pass scan (``vyre.lib._scan.lookback.scan_lookback``, a ``@vk.kernel``) emits the
same PTX, byte for byte, as the builder-written program it replaced: ``EXPECTED`` holds the
hashes of the builder version's PTX, recorded before the rewrite, for sm_80 and sm_90 and every
variant the library runs (every U32/I32 monoid, inclusive and exclusive, with and without an
init word, the u32 count scans on any params word), the spins, widths and items the tests and
measurements use, and a transform; a recorded run checks that the grid covers the library's. The
hashes were recorded again, once, when the emitter began making counter adds (the scan's tile
counter) once per subgroup, and once more when the scan began keeping its own state zero for the
next call (tickets and two sets of tile words, no zero fill: the grid's params word follows n's),
and once more when grids of 16 to 256 tiles began taking the wide look-back (every invocation
reads one lower tile's total; the ``wide`` cases, of every U32/I32 monoid, were added then; the
walk's own PTX changed only by one always-true test that ptxas drops); any other change to the
scan's PTX fails here.
All hashes were taken again for each emitter change listed in ``ptx_hashes`` (codegen 7, 8 and 9)."""

from __future__ import annotations

import itertools

import pytest

from tests.lib.ptx_hashes import SMS, changed, recorded
from tests.lib.test_plan import RecordingBackend
from vyre import lib
from vyre.ir import DataType, Expr, Program
from vyre.lib._scan import lookback
from vyre.lib._scan.lookback import SCAN_LOOKBACK_ITEMS, SCAN_LOOKBACK_WIDTH, SCAN_SPIN, scan_lookback
from vyre.lib.blocks import PARAM_WORDS, U32
from vyre.lib.monoid import OPS, Monoid
from vyre.lib.transform import element, fused

pytest.importorskip("vyre_cuda")

#: the trailing arguments of a spec of the wide look-back (the defaults, then ``wide``), or none
WIDE_TAIL = {False: (), True: (SCAN_LOOKBACK_ITEMS, SCAN_SPIN, SCAN_LOOKBACK_WIDTH, True)}
MONOIDS = tuple(Monoid(op, t) for op, t in itertools.product(OPS, (DataType.U32, DataType.I32)))
COUNT = Monoid("add", U32)
#: transform_inclusive_scan of u8 data: the transform rewrites the loads of x
TWICE = element("twice", DataType.U8, U32, lambda v: Expr.mul(Expr.cast(U32, v), Expr.u32(2)))


def _name(m: Monoid, inclusive: bool, n_word: int, init_word: int | None, items: int = SCAN_LOOKBACK_ITEMS,
          spin: tuple[int, int] = SCAN_SPIN, width: int = SCAN_LOOKBACK_WIDTH, wide: bool = False) -> str:
    kind = "inclusive" if inclusive else "exclusive"
    return (f"{m.op}_{m.dtype.value}_{kind}_n{n_word}_init{init_word}_items{items}_spin{spin[0]}x{spin[1]}_w{width}"
            + ("_wide" if wide else ""))


def _program(m: Monoid, inclusive: bool, n_word: int, init_word: int | None, items: int = SCAN_LOOKBACK_ITEMS,
             spin: tuple[int, int] = SCAN_SPIN, width: int = SCAN_LOOKBACK_WIDTH, wide: bool = False) -> Program:
    """The scan as ``topology.scan`` makes it: the grid's word right after n's (its next word)."""
    return scan_lookback.__wrapped__(m, items, inclusive, n_word, init_word, tiles_word=(n_word + 1) % PARAM_WORDS,
                                     spin=spin, width=width, wide=wide)


def cases() -> dict[str, Program]:
    """Every variant checked, by a name stable across versions: the scans' own (init in word 0,
    n in word 1, or n in word 0 alone), the u32 count scans of compaction, sorts, text and
    datalog on any params word, other spins, widths and items, and a transformed scan."""
    specs: list[tuple] = []
    for m, inclusive, wide in itertools.product(MONOIDS, (True, False), (False, True)):
        specs += [(m, inclusive, 0, None, *WIDE_TAIL[wide]), (m, inclusive, 1, 0, *WIDE_TAIL[wide])]
    specs += [(COUNT, inclusive, n, None) for inclusive in (True, False) for n in range(PARAM_WORDS)]
    specs += [(COUNT, True, 0, None, items) for items in (8, 16)]
    specs += [(COUNT, True, 0, None, SCAN_LOOKBACK_ITEMS, spin) for spin in ((1, 0), (1, 2), (2, 3))]
    specs += [(COUNT, True, 0, None, SCAN_LOOKBACK_ITEMS, SCAN_SPIN, width) for width in (1, 2, 5)]
    specs += [(Monoid("xor", DataType.I32), False, 1, 0, SCAN_LOOKBACK_ITEMS, (1, 0), 1)]
    out = {_name(*spec): _program(*spec) for spec in dict.fromkeys(specs)}
    out["twice_" + _name(COUNT, True, 1, 0)] = fused(scan_lookback(COUNT, SCAN_LOOKBACK_ITEMS, True, 1, 0,
                                                                   tiles_word=2), TWICE)
    return out


EXPECTED = recorded("lookback_ptx")
CASES = cases()


def test_the_grid_is_the_recorded_one() -> None:
    assert sorted(f"{name} sm_{sm}" for name in CASES for sm in SMS) == sorted(EXPECTED)
    assert len(CASES) == 12 * 2 * 2 * 2 + 32 * 2 - 2 + 2 + 3 + 3 + 1 + 1


def test_lookback_ptx_is_the_builders_byte_for_byte() -> None:
    different = changed(CASES, EXPECTED)
    assert not different, f"the PTX of {len(different)} look-back scans changed: {different[:8]}"


@pytest.mark.parametrize("wide", [False, True])
def test_every_lookback_scan_the_library_runs_is_checked(rng, monkeypatch, wide) -> None:
    """The single-pass scans ``inclusive_scan`` and ``exclusive_scan`` (every U32/I32 op, with and
    without init) dispatch are among the checked ones, walking back or (a grid of two tiles
    made to take it) wide."""
    monkeypatch.setattr(lookback, "WIDE_FROM", 2 if wide else lookback.WIDE_FROM)
    be = RecordingBackend()
    n = SCAN_LOOKBACK_ITEMS * 256 + 5  # two tiles
    for m in MONOIDS:
        x = rng.integers(0, 100, n).astype(m.dtype.np_dtype)
        for scan in (lib.inclusive_scan, lib.exclusive_scan):
            scan(x, m.op, backend=be)
            scan(x, m.op, init=3, backend=be)
    ran = {p for steps in be.sequences for p, _, _ in steps if (p.name or "").startswith("lib_scan_lookback")}
    checked = set(CASES.values())
    assert len(ran) == 12 * 2 * 2 - 12  # exclusive scans always take an init (the op's identity by default)
    assert ran <= checked, sorted(p.name or "" for p in ran - checked)
