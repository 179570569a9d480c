"""The single-pass radix pass with the tile's keys in registers (``ONESWEEP_KEYS_IN_REGISTERS``) and
the pass that reads them three times, on the device against numpy's stable sort: every key type,
keys alone, with values and argsort, from one key to 2^23 (many tiles, so look-backs meet
unpublished tiles), and ties; the written-out form (``ONESWEEP_REGISTER_ROUNDS = 0``) for 64-bit keys;
passes that count the next pass's digits (``COUNT_IN_PASSES_FROM``: from 2^26 by default) at
every size."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from tests.lib import expected as E
from vyre import lib
from vyre.lib._sort import onesweep

pytestmark = pytest.mark.gpu

#: name: (keys in registers, keys ranked per loop iteration, capacity from which passes count the next digit)
FROM = onesweep.COUNT_IN_PASSES_FROM
VARIANTS = {"three_reads": (False, 4, FROM), "registers": (True, 4, FROM), "written_out": (True, 0, FROM),
            "next_digit_counted_at_every_size": (True, 4, 0)}
SIZES = (1, 4097, 6145, (1 << 20) + 3, 1 << 23)


@pytest.fixture(params=sorted(VARIANTS))
def variant(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    registers, rounds, count_from = VARIANTS[request.param]
    monkeypatch.setattr(onesweep, "ONESWEEP_KEYS_IN_REGISTERS", registers)
    monkeypatch.setattr(onesweep, "COUNT_IN_PASSES_FROM", count_from)
    monkeypatch.setattr(onesweep, "ONESWEEP_REGISTER_ROUNDS", rounds)
    if rounds == 0:  # written out, 24 keys of 64 bits pass 4096 PTX instructions too (4957): 4096-key tiles
        monkeypatch.setattr(onesweep, "ONESWEEP_WIDE_LARGE_ITEMS", onesweep.ONESWEEP_WIDE_ITEMS)
    onesweep.radix_onesweep.cache_clear()
    yield request.param
    onesweep.radix_onesweep.cache_clear()


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.float32, np.uint64, np.int64, np.float64])
def test_variant_sorts_match_numpy(variant, rng, dtype) -> None:
    """A fresh backend per variant (a backend keeps the compiled calls of the first plan it records)."""
    from vyre_cuda.backend import CudaBackend

    if variant == "written_out" and np.dtype(dtype).itemsize == 4:
        pytest.skip("32-bit keys alone take 24 keys per invocation: written out, over 4096 PTX instructions")
    be = CudaBackend()
    try:
        for n in SIZES:
            keys = E.data(rng, dtype, n)
            keys[: n // 4] = keys[n // 4: 2 * (n // 4)]  # ties, so stability shows
            order = E.sort_order(keys)
            E.assert_same_bits(np.asarray(lib.sort(keys, backend=be)), keys[order])
            E.assert_same(np.asarray(lib.argsort(keys, backend=be)), order.astype(np.uint32))
            values = E.data(rng, np.float32, n)
            got_k, got_v = lib.sort(keys, values, backend=be)
            E.assert_same_bits(np.asarray(got_k), keys[order])
            E.assert_same_bits(np.asarray(got_v), values[order])
        equal = np.full(1 << 20, E.data(rng, dtype, 1)[0])
        E.assert_same(np.asarray(lib.argsort(equal, backend=be)), np.arange(equal.size, dtype=np.uint32))
    finally:
        be.shutdown()
