"""Exact-size results (``select``, ``select_if``, ``run_length_encode``, ``unique`` with
``count="exact"``) through the compiled ``ResidentArray`` path on the CPU
(``tests.lib.aliasing.AliasingReference``): after the first call of a shape, no plan is built and
the count is the one read back (one wait); the results are the counted prefix of full-length
handles, exact against numpy over new contents, new handles and poisoned recycled results; an
out-of-range ``key_range`` key still raises, and nothing leaks a handle.
(The same on ``cuda``, with CuPy arrays too: ``tests/gpu/test_lib_exact_fast.py``.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.lib import expected as E
from tests.lib.aliasing import AliasingReference
from vyre import lib
from vyre.driver.errors import InvalidProgram
from vyre.ir import DataType
from vyre.lib import ResidentArray
from vyre.lib.plan import Plan
from vyre.lib.scratch import scratch_for


@pytest.fixture
def be():
    backend = AliasingReference()
    yield backend
    lib.release_scratch(backend)


@pytest.fixture
def plans(monkeypatch) -> list[int]:
    """How many ``Plan``s the library has built (one element, counted as they are made)."""
    built = [0]
    make = Plan.__init__

    def counted(self: Plan, *args: Any, **kwargs: Any) -> None:
        built[0] += 1
        make(self, *args, **kwargs)

    monkeypatch.setattr(Plan, "__init__", counted)
    return built


def _poison(be, result: ResidentArray) -> None:
    """Fill a result's whole handle with ones (what a stale count would show)."""
    be.upload_resident(result.handle, np.full(result.handle.nbytes, 0xFF, np.uint8))


Inputs = dict[str, np.ndarray]
# name -> (the call on resident inputs, the numpy result); the inputs: x (u32), flags (u8), small (u32 < 64)
CASES: dict[str, tuple[Callable[[dict[str, ResidentArray], Any], Any], Callable[[Inputs], tuple]]] = {
    "select": (lambda r, be: lib.select(r["x"], r["flags"], backend=be),
               lambda h: (h["x"][h["flags"] != 0],)),
    "select_if": (lambda r, be: lib.select_if(r["x"], 100, 2**31, backend=be),
                  lambda h: (h["x"][(h["x"] >= 100) & (h["x"] < 2**31)],)),
    "run_length_encode": (lambda r, be: lib.run_length_encode(r["small"], backend=be),
                          lambda h: E.run_length_encode(h["small"])),
    "unique": (lambda r, be: lib.unique(r["small"], backend=be), lambda h: E.unique(h["small"])),
    "unique_range": (lambda r, be: lib.unique(r["small"], key_range=(0, 64), backend=be),
                     lambda h: E.unique(h["small"])),
}


def _inputs(rng: np.random.Generator, n: int) -> Inputs:
    x = E.data(rng, np.uint32, n)
    return {"x": x, "flags": (rng.random(n) < 0.3).astype(np.uint8),
            "small": np.repeat(rng.integers(0, 64, n), rng.integers(1, 4, n))[:n].astype(np.uint32)}


def _results(out: Any) -> tuple[ResidentArray, ...]:
    return out if isinstance(out, tuple) else (out,)


def _check(be, out: Any, want: tuple) -> None:
    got = _results(out)
    assert len(got) == len(want)
    for r, w in zip(got, want, strict=True):
        assert isinstance(r, ResidentArray) and r.n == w.size
        E.assert_same(E.get_resident(be, r), w)


@pytest.mark.parametrize("name", list(CASES))
def test_exact_calls_run_compiled_with_one_wait(be, plans, rng, name):
    """From the second call of a shape on: no plan built, one wait (the count), one compiled call
    in all; new contents, a new handle and poisoned recycled results all stay exact, and the
    third call runs its repeat."""
    run, want = CASES[name]
    n = 3001
    host = _inputs(rng, n)
    r = {k: E.put_resident(be, v) for k, v in host.items()}
    for i in range(6):
        host = _inputs(rng, n)
        if i == 3:  # other handles of the same length
            r = {k: E.put_resident(be, v) for k, v in host.items()}
        else:
            for k, v in host.items():
                be.upload_resident(r[k].handle, v)
        built, waits = plans[0], be.waits
        out = run(r, be)
        if i:
            assert plans[0] == built, f"call {i} built a plan"
            assert be.waits - waits == 1, f"call {i} waited {be.waits - waits} times"
        _check(be, out, want(host))
        for result in _results(out):
            _poison(be, result)
        lib.recycle(*_results(out), backend=be)
    assert be.compiled == 1
    assert scratch_for(be).repeats, "the equal calls ran their repeat"


def test_probed_unique_repeats_its_guess_and_probes_again_when_a_key_falls_outside(be, plans, rng, monkeypatch):
    """``unique`` of many resident u32 keys: the first call probes (the keys' OR), then counts
    them by the histogram plan of the bins the probe chose; later calls run that plan alone (one
    wait, repeated, no plan built). A key past those bins makes the repeat refuse: the probe runs
    again and the keys are sorted, and the class's guess becomes the sort: the next call sorts with
    no probe, its plan ORing a sample of the keys (here all of them) read back with the count, and
    a loop repeats it. Small keys in that sample make the repeat refuse (its results go back, the
    guess is dropped): the probe runs and the histogram plan counts them, then its repeat. Every
    result exact."""
    from vyre.lib._runs import api

    monkeypatch.setattr(api, "PROBE_MIN", 4096)
    n = 8193
    rx = E.put_resident(be, np.zeros(n, np.uint32))
    tops = [200, 200, 200, 200, 2**31 + 5, 2**31 + 5, 100, 100, 100]
    # probe + histogram; its repeat; the repeat's miss + probe + the sort's first run (which also reads its
    # look-back check); the sampled sort's first run; its repeat's miss (the sample) + probe + histogram;
    # that plan's repeat
    want_waits = [2, 1, 1, 1, 4, 2, 3, 1, 1]
    for i, top in enumerate(tops):
        x = rng.integers(0, 200, n).astype(np.uint32)
        x[rng.integers(0, n)] = top
        be.upload_resident(rx.handle, x)
        built, waits = plans[0], be.waits
        out = lib.unique(rx, backend=be)
        assert be.waits - waits == want_waits[i], f"call {i} waited {be.waits - waits} times"
        if i in (1, 2, 3, 7, 8):
            assert plans[0] == built, f"call {i} built a plan"
        _check(be, out, E.unique(x))
        lib.recycle(*out, backend=be)
        guess = scratch_for(be).guesses.get(("unique.bins", DataType.U32, 16384))
        assert (guess == api.SORTED) == (i in (4, 5)), f"call {i} left the guess {guess}"
    assert scratch_for(be).repeats, "the histogram plan of the guessed bins is repeated"
    assert be.compiled == 4, "the probe, the histogram plan, the sort plan and the sampled sort plan, once each"


def test_probed_unique_keeps_one_guess_per_capacity_class(be, rng, monkeypatch):
    """Keys of many lengths in one capacity class share one guess (the dict of guesses stays that
    size): after the first call's probe each call waits once, and every result is exact."""
    from vyre.lib._runs import api

    monkeypatch.setattr(api, "PROBE_MIN", 4096)
    for i, n in enumerate(range(8193, 8193 + 12 * 601, 601)):  # 12 lengths in the class of 16384
        x = rng.integers(0, 300, n).astype(np.uint32)
        rx = E.put_resident(be, x)
        waits = be.waits
        out = lib.unique(rx, backend=be)
        assert be.waits - waits == (2 if i == 0 else 1), f"length {n} waited {be.waits - waits} times"
        _check(be, out, E.unique(x))
        lib.recycle(*out, backend=be)
        be.free_resident(rx.handle)
    assert len(scratch_for(be).guesses) == 1


def test_out_of_range_keys_still_raise_and_hand_back_their_results(be, rng):
    """A key outside ``key_range`` raises ``InvalidProgram`` (a ``Fix:`` line) on the compiled
    path too; its result handles go back to the pool, so a loop of good and bad calls holds no
    more handles than its first round."""
    n = 4099
    x = rng.integers(0, 64, n).astype(np.uint32)
    rx = E.put_resident(be, x)
    bad = x.copy()
    bad[n // 2] = 64
    for i in range(6):
        be.upload_resident(rx.handle, x)
        out = lib.unique(rx, key_range=(0, 64), backend=be)
        _check(be, out, E.unique(x))
        lib.recycle(*out, backend=be)
        be.upload_resident(rx.handle, bad)
        with pytest.raises(InvalidProgram, match="outside key_range(.|\n)*Fix: "):
            lib.unique(rx, key_range=(0, 64), backend=be)
        if i == 0:
            live = be.live_handles()
    assert be.live_handles() == live


def test_exact_loops_leak_no_handle(be, rng):
    """Every exact-size function in a loop that recycles its results (and, for ``select``, one that
    frees them) holds no more handles after many calls than after the first round."""
    n = 2049
    host = _inputs(rng, n)
    r = {k: E.put_resident(be, v) for k, v in host.items()}
    live = 0
    for i in range(8):
        for run, want in CASES.values():
            out = run(r, be)
            _check(be, out, want(host))
            lib.recycle(*_results(out), backend=be)
        freed = lib.select(r["x"], r["flags"], backend=be)
        be.free_resident(freed.handle)
        if i == 0:
            live = be.live_handles()
    assert be.live_handles() == live


def test_device_counts_of_runs_run_compiled(be, plans, rng):
    """``run_length_encode`` and ``unique`` with ``count="device"`` run compiled too: full-length
    results and a count, no plan and no wait after the first call."""
    n = 3001
    rx = E.put_resident(be, np.zeros(n, np.uint32))
    for i in range(4):
        x = _inputs(rng, n)["small"]
        be.upload_resident(rx.handle, x)
        built, waits = plans[0], be.waits
        outs = [lib.run_length_encode(rx, count="device", backend=be), lib.unique(rx, count="device", backend=be)]
        if i:
            assert plans[0] == built and be.waits == waits
        for (values, counts, runs), (want_values, want_counts) in zip(outs, [E.run_length_encode(x), E.unique(x)],
                                                                       strict=True):
            k = int(E.get_resident(be, runs)[0])
            assert values.n == counts.n == n and k == want_values.size
            E.assert_same(E.get_resident(be, values)[:k], want_values)
            E.assert_same(E.get_resident(be, counts)[:k], want_counts)
            lib.recycle(values, counts, runs, backend=be)
    assert be.compiled == 2
