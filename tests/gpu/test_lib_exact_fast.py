"""Exact-size results on ``cuda`` through the compiled path (``Call.exact``): ``select``,
``select_if``, ``run_length_encode`` and ``unique`` (sorted, probed, ``key_range``) with
``count="exact"`` on ``ResidentArray``s and CuPy arrays run their compiled steps into full-length
results, read the count back (the one wait) and return its prefix. Each case makes fresh random
input at 2^20 and at odd sizes, calls several times (the first records, the second runs compiled,
the third on captures or replays a graph), poisons each previous result before the next call
writes over its memory, and compares every result with numpy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.lib import expected as E
from vyre import lib
from vyre.driver.errors import InvalidProgram
from vyre.lib.scratch import scratch_for

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

SIZES = (1 << 20, (1 << 20) + 3, 70_001, 4_097, 33)
CALLS = 5


@pytest.fixture
def backend(own_backend):
    return own_backend


def _inputs(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """x (u32), flags (u8), small (u32 keys below 256 in runs: many repeats, so probed at 2^20)."""
    return {"x": rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32),
            "flags": (rng.random(n) < 0.3).astype(np.uint8),
            "small": np.repeat(rng.integers(0, 256, n), rng.integers(1, 5, n))[:n].astype(np.uint32)}


Case = tuple[Callable[[dict[str, Any], Any], Any], Callable[[dict[str, np.ndarray]], tuple]]
CASES: dict[str, Case] = {
    "select": (lambda a, be: lib.select(a["x"], a["flags"], backend=be), lambda h: (h["x"][h["flags"] != 0],)),
    "select_if": (lambda a, be: lib.select_if(a["x"], 1000, 2**31, backend=be),
                  lambda h: (h["x"][(h["x"] >= 1000) & (h["x"] < 2**31)],)),
    "run_length_encode": (lambda a, be: lib.run_length_encode(a["small"], backend=be),
                          lambda h: E.run_length_encode(h["small"])),
    "unique": (lambda a, be: lib.unique(a["small"], backend=be), lambda h: E.unique(h["small"])),
    "unique_wide": (lambda a, be: lib.unique(a["x"], backend=be), lambda h: E.unique(h["x"])),
    "unique_range": (lambda a, be: lib.unique(a["small"], key_range=(0, 256), backend=be),
                     lambda h: E.unique(h["small"])),
}


def _tuple(out: Any) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def _resident_host(be, r: lib.ResidentArray) -> np.ndarray:
    return be.download_resident(r.handle, 0, r.n * r.dtype.itemsize).view(r.dtype)


def _poison_resident(be, r: lib.ResidentArray) -> None:
    be.upload_resident(r.handle, np.full(r.handle.nbytes, 0xFF, np.uint8))


def _poison_cupy(out: Any) -> None:
    """Fill the whole memory behind a CuPy result (a prefix view of a full-length array) with ones."""
    whole = out.base if out.base is not None else out
    whole.view(cupy.uint8).fill(0xFF)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", list(CASES))
def test_resident_exact_calls_on_fresh_input(backend, rng, name, n):
    """``ResidentArray`` inputs refilled each call (and new handles once), results poisoned and
    recycled: every call exact; the calls after the first run compiled (one compiled call kept)."""
    run, want = CASES[name]
    r: dict[str, lib.ResidentArray] = {}
    for i in range(CALLS):
        host = _inputs(rng, n)
        if i in (0, 3):
            for old in r.values():
                backend.free_resident(old.handle)
            r = {k: E.put_resident(backend, v) for k, v in host.items()}
        else:
            for k, v in host.items():
                backend.upload_resident(r[k].handle, v)
        out = _tuple(run(r, backend))
        expected = want(host)
        assert len(out) == len(expected)
        for got, w in zip(out, expected, strict=True):
            assert isinstance(got, lib.ResidentArray) and got.n == w.size
            E.assert_same(_resident_host(backend, got), w)
            _poison_resident(backend, got)
        lib.recycle(*out, backend=backend)
    assert any(k[0] == "resident" and k[1][0] == "exact" for k in scratch_for(backend).fast)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", list(CASES))
def test_cupy_exact_calls_on_fresh_input(backend, rng, name, n):
    """CuPy inputs (new arrays each call, and the same arrays refilled), previous results poisoned
    and dropped (CuPy's pool hands their memory to the next call): every call exact."""
    run, want = CASES[name]
    d: dict[str, Any] = {}
    for i in range(CALLS):
        host = _inputs(rng, n)
        if i % 2 == 0:
            d = {k: cupy.asarray(v) for k, v in host.items()}
        else:
            for k, v in host.items():
                d[k][...] = cupy.asarray(v)
        out = _tuple(run(d, backend))
        expected = want(host)
        for got, w in zip(out, expected, strict=True):
            assert isinstance(got, cupy.ndarray) and got.size == w.size
            E.assert_same(cupy.asnumpy(got), w)
            _poison_cupy(got)
        del out


def test_cupy_exact_select_on_a_callers_stream(backend, rng):
    """``stream=``: the compiled call and its count read run on the caller's stream."""
    stream = cupy.cuda.Stream(non_blocking=True)
    for _ in range(CALLS):
        host = _inputs(rng, (1 << 20) + 3)
        with stream:
            x, flags = cupy.asarray(host["x"]), cupy.asarray(host["flags"])
        got = lib.select(x, flags, stream=stream, backend=backend)
        stream.synchronize()
        E.assert_same(cupy.asnumpy(got), host["x"][host["flags"] != 0])


def test_resident_exact_loop_waits_once_replays_and_holds_no_more_memory(backend, rng):
    """A warm loop of resident ``select`` and ``run_length_encode`` that recycles its results:
    at most one sync a call, no new graph captures, and flat resident bytes."""
    host = _inputs(rng, 1 << 20)
    r = {k: E.put_resident(backend, v) for k, v in host.items()}
    calls = (CASES["select"], CASES["run_length_encode"])
    for _ in range(6):
        for run, _ in calls:
            lib.recycle(*_tuple(run(r, backend)), backend=backend)
    before = backend.metrics()
    for _ in range(20):
        for run, _ in calls:
            lib.recycle(*_tuple(run(r, backend)), backend=backend)
    after = backend.metrics()
    assert after.get("cuda_sync_points", 0) - before.get("cuda_sync_points", 0) <= 40
    assert after["cuda_graph_captures"] == before["cuda_graph_captures"]
    assert after["cuda_resident_bytes_in_use"] == before["cuda_resident_bytes_in_use"]
    for run, want in calls:
        for got, w in zip(_tuple(run(r, backend)), want(host), strict=True):
            E.assert_same(_resident_host(backend, got), w)


def test_probed_unique_follows_keys_that_stop_being_small(backend, rng):
    """``unique`` of 2^20 keys probes every call: small keys are counted, keys past the range
    sorted, small ones counted again (no repeat skips the probe); resident and CuPy, all exact."""
    n = 1 << 20
    rx = E.put_resident(backend, np.zeros(n, np.uint32))
    for top in (200, 200, 200, 2**31 + 9, 2**31 + 9, 70, 70):
        x = rng.integers(0, 200, n).astype(np.uint32)
        x[rng.integers(0, n)] = top
        backend.upload_resident(rx.handle, x)
        want = E.unique(x)
        out = lib.unique(rx, backend=backend)
        for got, w in zip(out, want, strict=True):
            E.assert_same(_resident_host(backend, got), w)
        lib.recycle(*out, backend=backend)
        for got, w in zip(lib.unique(cupy.asarray(x), backend=backend), want, strict=True):
            E.assert_same(cupy.asnumpy(got), w)


def test_out_of_range_keys_raise_on_the_compiled_path(backend, rng):
    """``key_range`` still refuses a key outside it after the call has run compiled, and the
    resident bytes stay flat (the refused call's results go back to the pool)."""
    n = 70_001
    x = rng.integers(0, 256, n).astype(np.uint32)
    bad = x.copy()
    bad[n - 1] = 256
    rx = E.put_resident(backend, x)
    for i in range(4):
        backend.upload_resident(rx.handle, x)
        out = lib.unique(rx, key_range=(0, 256), backend=backend)
        E.assert_same(_resident_host(backend, out[0]), np.unique(x))
        lib.recycle(*out, backend=backend)
        backend.upload_resident(rx.handle, bad)
        with pytest.raises(InvalidProgram, match="outside key_range(.|\n)*Fix: "):
            lib.unique(rx, key_range=(0, 256), backend=backend)
        with pytest.raises(InvalidProgram, match="outside key_range(.|\n)*Fix: "):
            lib.unique(cupy.asarray(bad), key_range=(0, 256), backend=backend)
        if i == 0:
            held = backend.metrics()["cuda_resident_bytes_in_use"]
    assert backend.metrics()["cuda_resident_bytes_in_use"] == held


def test_torch_exact_calls_on_fresh_input(backend, rng):
    """torch tensors (i32 keys, u8 flags): exact-size results are torch views of the counted
    prefix; repeated calls over fresh tensors, each previous result poisoned, stay exact."""
    torch = pytest.importorskip("torch")
    n = (1 << 20) + 3
    for _ in range(CALLS):
        host = _inputs(rng, n)
        x, small = host["x"].view(np.int32), host["small"].view(np.int32)
        tx, tf, ts = (torch.as_tensor(a, device="cuda") for a in (x, host["flags"], small))
        got = {"select": (lib.select(tx, tf, backend=backend),),
               "select_if": (lib.select_if(tx, -1000, 2**30, backend=backend),),
               "run_length_encode": lib.run_length_encode(ts, backend=backend),
               "unique": lib.unique(ts, backend=backend)}
        want = {"select": (x[host["flags"] != 0],), "select_if": (x[(x >= -1000) & (x < 2**30)],),
                "run_length_encode": E.run_length_encode(small), "unique": E.unique(small)}
        for name, outs in got.items():
            for out, w in zip(outs, want[name], strict=True):
                assert isinstance(out, torch.Tensor) and out.numel() == w.size, name
                raw = out.view(torch.uint8)  # every dtype, u32 lengths included, as bytes
                E.assert_same(raw.cpu().numpy().view(w.dtype), w)
                raw.fill_(0xFF)
