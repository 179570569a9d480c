"""``run_length_encode`` and ``unique`` (a sort, then the runs of the sorted keys; with
``key_range``, a histogram of the keys instead). See docs/lib.md."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from vyre.driver.backend import Resident
from vyre.driver.errors import InvalidProgram
from vyre.ir import DataType
from vyre.lib._runs import topology as topo
from vyre.lib._scan import topology as scan_topo
from vyre.lib._select import topology as select_topo
from vyre.lib._sort import topology as sort_topo
from vyre.lib._sort.api import KEY_TYPES
from vyre.lib.io import U32, Array, Call, as_array, check_count, library_call
from vyre.lib.monoid import monoid
from vyre.lib.plan import Plan, capacity
from vyre.lib.repeat import MISSED

RANGE_TYPES = (DataType.U32, DataType.I32)  # the key types of unique(key_range=...)
RANGE_MAX = 1 << 24  # bins at most: 64 MiB of u32 counts
PROBE_SAMPLE = 1 << 16  # the probe ORs this many keys first (_small_keys): full-range keys skip the full read
PROBE_MIN = 1 << 20  # unique() of at least this many device u32/i32 keys first checks for small keys (_small_keys)
PROBE_ROLE = "unique.bits"  # the scratch word the probe ORs the keys into
#: ``ScratchCache.guesses``' value for a class whose last probe chose the sort: the next call
#: sorts with no probe, and the sort's plan ORs a sample of the keys (``_unique_by_sort``)
SORTED = 0
#: ``unique`` of u32/i32 keys whose runs are compacted in scanned segments (from 2^21 keys): the sort's
#: last pass counts the run starts per segment (``onesweep.count_runs``), so the compaction does not
#: read the keys to count them; False counts them in the compaction (kept to compare against)
COUNT_IN_SORT = True


def _runs(call: Call, key: tuple, prefix: Callable[[Plan], Resident], a: Array, on_device: bool,
          repeat: bool = True, also: tuple[str, ...] = (), seen: Callable[[list[int]], bool] | None = None,
          counted: bool = False) -> Any:
    """``(values, lengths)`` of the runs of the keys ``prefix(plan)`` leaves (``a``'s, or sorted),
    exact-size (``Call.exact``: the number of runs read back, the one wait); with ``on_device``
    (``count="device"``) full-length results and a 1-element u32 count of runs, with no wait.
    Both run compiled on device arrays and ``ResidentArray``s (``repeat``: as ``Call.fast`` takes it).
    ``also``: more 1-word scratch roles the plan writes, read back with the count and handed to
    ``seen`` (exact-size calls only), which returns False to give the results back (``MISSED``).
    ``counted``: ``prefix`` counted the run starts of the keys it leaves (``topology.run_length``'s
    ``counted``)."""
    n, np_dtype = a.n, a.np_dtype

    def steps(device_count: bool) -> tuple[Plan, list[tuple[Resident, np.dtype, int]], Any]:
        plan = call.plan()
        src = prefix(plan)
        values, lengths = call.result(plan, "rle.values", n, np_dtype), call.result(plan, "rle.lengths", n)
        count = call.result(plan, "rle.count_out", 1) if device_count else None
        count = topo.run_length(plan, a.dtype, src, values, lengths, n, capacity(n), count, counted)
        return plan, [(values, np_dtype, n), (lengths, U32, n)], count

    def finish(take: Callable[[int, int], Any], words: list[int]) -> Any:
        if seen is not None and not seen(words[1:]):
            return MISSED
        return _take_runs(take, words)

    return call.counted(key, steps, (topo.RUNS_ROLE, *also), finish, on_device, repeat)


def _take_runs(take: Callable[[int, int], Any], words: list[int]) -> tuple[Any, Any]:
    """The counted prefixes of the values and lengths (``words[0]``: how many)."""
    return take(0, words[0]), take(1, words[0])


def _no_runs(call: Call, np_dtype: np.dtype, on_device: bool) -> tuple[Any, ...]:
    empty = (call.empty(np_dtype), call.empty(U32))
    return (*empty, call.zero_count()) if on_device else empty


@library_call
def run_length_encode(x: object, *, count: str = "exact", stream: object = None, backend: Any = None,
                      scratch: Any = None) -> tuple[Any, ...]:
    """``(values, lengths)`` of the runs of equal consecutive elements (u32 lengths).

    Equality is bitwise, except that every float NaN equals every other (so -0.0 and +0.0 differ).
    ``count="device"``: ``(values, lengths, runs)``, full-length results whose first ``runs[0]``
    entries are the runs (no wait on device arrays).
    """
    on_device = check_count(count)
    a = as_array(x, "x", KEY_TYPES)
    call = Call(backend, scratch, a, stream=stream)
    if a.n == 0:
        return _no_runs(call, a.np_dtype, on_device)
    return _runs(call, ("rle",), lambda plan: call.upload(plan, "x", a), a, on_device)


@library_call
def unique(x: object, *, count: str = "exact", key_range: tuple[int, int] | None = None, stream: object = None,
           backend: Any = None, scratch: Any = None) -> tuple[Any, ...]:
    """``(values, counts)``: the distinct values in sort order and how often each occurs.

    Distinct by the sort's total order: -0.0 and +0.0 are two values, all NaNs are one.
    ``count="device"``: ``(values, counts, distinct)`` as ``run_length_encode`` gives them.
    ``key_range=(lo, hi)`` (u32/i32 keys, every key in ``[lo, hi)``, ``hi - lo <= 2**24``): the
    same result without sorting, from a histogram of ``x - lo`` (``topology.unique_in_range``);
    a key outside the range raises ``InvalidProgram``. Takes ``count="exact"`` only. Without it,
    ``count="exact"`` on at least ``PROBE_MIN`` device or resident u32/i32 keys ORs the keys first
    (one read) and takes that histogram plan when every key is in ``[0, 2**k)`` with ``2**k`` at
    most ``n / 16``: the same result, without the sort. The next such call of the same capacity
    class tries those bins first, with no probe (one wait; a loop repeats it), and probes again only
    when a key falls outside them. When the probe chose the sort, the next call of the class sorts
    with no probe (one wait; a loop repeats it), its plan ORing the first ``PROBE_SAMPLE`` keys; a
    sample that the histogram plan could take sends that call back to the probe.
    """
    on_device = check_count(count)
    a = as_array(x, "x", KEY_TYPES)
    call = Call(backend, scratch, a, stream=stream)
    if key_range is not None:
        lo, bins = checked_range(key_range, a)
        if on_device:
            raise InvalidProgram("unique(key_range=...) reads back its count to check the range",
                                 "call it with count='exact' (the default), or without key_range.")
        return (call.empty(a.np_dtype), call.empty(U32)) if a.n == 0 else _unique_in_range(call, a, lo, bins)
    if a.n == 0:
        return _no_runs(call, a.np_dtype, on_device)
    probe = not on_device and (a.on_device or a.resident) and a.dtype in RANGE_TYPES and a.n >= PROBE_MIN
    sampled = probe and call.scratch.guesses.get(_guess_key(a)) == SORTED  # no probe: the sort samples the keys
    if probe and not sampled:
        counted = _unique_of_small_keys(call, a)
        if counted is not None:  # every key in [0, bins): counted, not sorted (the same result)
            return counted
    out = _unique_by_sort(call, a, on_device, probe, sampled)
    if out is MISSED:  # the sample says the histogram plan may do: the guess is dropped, probe
        counted = _unique_of_small_keys(call, a)
        return counted if counted is not None else _unique_by_sort(call, a, on_device, probe, False)
    return out


def _guess_key(a: Array) -> tuple:
    """The key of ``a``'s guess in ``ScratchCache.guesses``: one per key type and capacity class."""
    return "unique.bins", a.dtype, capacity(a.n)


def _unique_by_sort(call: Call, a: Array, on_device: bool, probe: bool, sampled: bool) -> Any:
    """``unique`` by a sort, then the runs of the sorted keys. Where ``unique`` probes (``probe``)
    the plan is not repeated (a repeat would skip the probe). ``sampled`` (the class's guess was
    ``SORTED``, so no probe ran): the plan also ORs the first ``_sample(n)`` keys, read back with
    the count, and is repeated; a sample the histogram plan could take drops the guess and gives
    the results back (``MISSED``: the caller probes; a loop's repeat refuses)."""
    key = _guess_key(a)
    counted = COUNT_IN_SORT and sort_topo.counts_runs(a.dtype, a.n) and select_topo.counts_scanned(capacity(a.n))

    def sorted_keys(plan: Plan) -> Resident:
        src = call.upload(plan, "x", a)
        if sampled:
            _or_first(plan, a, src, _sample(a.n))
        runs = select_topo.counted_runs(plan, a.n, capacity(a.n)) if counted else None  # the last pass counts them
        keys, _ = sort_topo.sort(plan, a.dtype, src, None, None, "none", a.n, capacity(a.n), runs=runs)
        if keys is None:
            raise AssertionError("a sort of keys alone left no keys")
        return keys

    def seen(words: list[int]) -> bool:
        if _probe_bins(words[0], a.n):  # small keys in the sample: probe instead
            call.scratch.guesses.pop(key, None)
            return False
        return True

    if sampled:
        return _runs(call, ("unique", "sampled"), sorted_keys, a, on_device, True, (PROBE_ROLE,), seen, counted)
    return _runs(call, ("unique",), sorted_keys, a, on_device, repeat=not probe,  # a repeat would skip the probe
                 counted=counted)


def _or_first(plan: Plan, a: Array, src: Resident, first: int) -> None:
    """A step ORing the first ``first`` of ``a``'s keys (``src``) into the ``PROBE_ROLE`` word."""
    scan_topo.reduce(plan, monoid("or", a.dtype), src, first, capacity(first), plan.buffer(PROBE_ROLE, 1))


def _sample(n: int) -> int:
    """How many keys the probe ORs first: ``PROBE_SAMPLE`` of more than twice that, else all ``n``."""
    return PROBE_SAMPLE if n > 2 * PROBE_SAMPLE else n


def _unique_of_small_keys(call: Call, a: Array) -> tuple[Any, Any] | None:
    """``unique`` by the histogram plan when every key is in ``[0, bins)`` for the bins the last
    probe of such keys chose (``ScratchCache.guesses``): one wait, and a loop repeats it. When a
    key falls outside (the counts fall short of ``n``) or there is no guess: the probe
    (``_small_keys``), then the histogram plan for the bins it gives, or None (sort). Not called
    while the guess is ``SORTED`` (``unique`` sorts then)."""
    guesses, key = call.scratch.guesses, _guess_key(a)  # a bounded set of keys
    bins = guesses.get(key)
    if bins is not None:
        out = _unique_in_range(call, a, 0, bins, guess=key)
        if out is not MISSED:
            return out
    bins = _small_keys(call, a)
    if bins is None:
        return None
    guesses[key] = bins
    out = _unique_in_range(call, a, 0, bins, guess=key)
    return None if out is MISSED else out  # not MISSED: the probe saw every key below bins


def _small_keys(call: Call, a: Array) -> int | None:
    """``2**k`` when the OR of ``a``'s u32/i32 keys (one read of the keys, one word back) says every
    key is in ``[0, 2**k)`` and ``2**k`` is at most ``n / 16`` bins (and ``RANGE_MAX``); else None.
    Above ``2 * PROBE_SAMPLE`` keys the OR of the first ``PROBE_SAMPLE`` comes first: the OR only
    gains bits, so when those keys already rule the histogram plan out, the full read is skipped.
    Runs compiled on device arrays and ``ResidentArray``s (``Call.exact``, never repeated alone).
    When the first keys ORed (``_sample``) rule the histogram plan out, the class's guess becomes
    ``SORTED``; when only the full OR does, it stays unset (a sample would not see why)."""
    n, m = a.n, _sample(a.n)

    def probe(first: int) -> int:  # the OR of the first ``first`` keys
        def build() -> tuple[Plan, list]:
            plan = call.plan()
            _or_first(plan, a, call.upload(plan, "x", a), first)
            return plan, []

        return call.exact(("unique.probe", first < n), build, (PROBE_ROLE,), lambda _, words: _probe_bins(words[0], n),
                          repeat=False)

    bins = probe(m)
    if not bins:
        call.scratch.guesses[_guess_key(a)] = SORTED
        return None
    return (probe(n) if m < n else bins) or None


def _probe_bins(bits: int, n: int) -> int:
    """The histogram bins of keys whose OR is ``bits``, or 0 when a sort is the better plan (not
    None: a compiled call's None means it refused to run)."""
    bins = 1 << bits.bit_length()
    return bins if bits < 1 << 31 and bins <= min(RANGE_MAX, n // 16) else 0


def checked_range(key_range: object, a: Array) -> tuple[int, int]:
    """``(lo, bins)`` of ``key_range = (lo, hi)`` for ``a``'s keys, or ``InvalidProgram``."""
    if a.dtype not in RANGE_TYPES:
        raise InvalidProgram(f"unique(key_range=...) takes uint32 or int32 keys, not {a.np_dtype}",
                             "call unique(x) without key_range (the sort-based plan takes every key type).")
    pair: tuple[Any, ...] = key_range if isinstance(key_range, tuple) and len(key_range) == 2 else ()
    ok = bool(pair) and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in pair)
    info = np.iinfo(a.np_dtype)
    lo, hi = (int(pair[0]), int(pair[1])) if ok else (0, 0)
    if not (ok and info.min <= lo < hi <= int(info.max) + 1 and hi - lo <= RANGE_MAX):
        raise InvalidProgram(f"key_range={key_range!r} is not (lo, hi) with {info.min} <= lo < hi <= "
                             f"{int(info.max) + 1} and hi - lo <= {RANGE_MAX}",
                             "pass two ints bounding every key (lo <= x < hi), at most 2**24 apart, or call "
                             "unique(x) without key_range.")
    return lo, hi - lo


def _unique_in_range(call: Call, a: Array, lo: int, bins: int, guess: tuple | None = None) -> Any:
    """``(values, counts)`` of ``a``'s keys, all in ``[lo, lo + bins)``; one read of the keys, then
    the number of distinct keys and the sum of the counts read back (``Call.exact``); a sum short
    of ``n`` (a key out of range) raises ``InvalidProgram``, or with ``guess`` (the bins were a
    guess: ``_unique_of_small_keys``) drops that guess and returns ``MISSED``."""
    def build() -> tuple[Plan, list]:
        plan = call.plan()
        src = call.upload(plan, "x", a)
        values, counts = call.result(plan, "urange.values", bins, a.np_dtype), call.result(plan, "urange.kept", bins)
        topo.unique_in_range(plan, a.dtype, src, a.n, lo, bins, values, counts)
        return plan, [(values, a.np_dtype, bins), (counts, U32, bins)]

    n, guesses = a.n, call.scratch.guesses

    def finish(take: Callable[[int, int], Any], words: list[int]) -> Any:
        runs, found = words
        if found != n and guess is not None:
            guesses.pop(guess, None)
            return MISSED
        if found != n:
            raise InvalidProgram(f"{n - found} of the {n} keys are outside key_range=({lo}, {lo + bins})",
                                 "pass a key_range that bounds every key (lo <= x < hi), or call unique(x) "
                                 "without it.")
        return take(0, runs), take(1, runs)

    return call.exact(("unique.range", lo, bins), build, (topo.DISTINCT_ROLE, topo.TOTAL_ROLE), finish)
