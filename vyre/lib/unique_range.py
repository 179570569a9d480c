"""``unique(x, key_range=(lo, hi))``: sort-free ``unique`` of u32/i32 keys in a small known range.

A histogram of ``x - lo`` over ``hi - lo`` bins (the library's histogram kernel, reading each key
once, with the subtraction applied where it loads), a stable compaction of the non-zero bins with
their indices, and ``lo + index``: the distinct values come out in ascending order with their
counts, as the sort-based ``unique`` gives them. The sum of the counts is read back with the
number of distinct values; if it is short of ``n``, some key was outside the range and the call
raises. See docs/lib.md, "Fused forms".
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from vyre.driver.errors import InvalidProgram
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.lib import kernels as K
from vyre.lib import plan as topo
from vyre.lib.blocks import WG, load_param
from vyre.lib.io import Array, Call
from vyre.lib.plan import capacity, ceil_div
from vyre.lib.transform import element, fused

U32 = DataType.U32
RANGE_TYPES = (DataType.U32, DataType.I32)
RANGE_MAX = 1 << 24  # bins at most: 64 MiB of u32 counts
SHARED_BINS_MAX = 8192  # up to this many bins the histogram counts in workgroup memory first
BLOCKS_MAX = 1024
HISTOGRAM_ITEMS = 16


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


@cache
def offset_values(n_word: int, lo_word: int) -> Program:
    """``out[i] = index[i] + lo`` (u32 arithmetic: the bits of i32 values too) for ``i < n``."""
    i = Expr.invocation_id(0)
    body = [Node.if_(Expr.lt(i, load_param(n_word)),
                     Node.store("out", i, Expr.add(Expr.load("index", i), load_param(lo_word))))]
    buffers = [BufferDecl.read("index", 0, U32), BufferDecl.read_write("out", 1, U32),
               BufferDecl.uniform("params", 2, U32, K.PARAM_WORDS)]
    return Program(buffers, K.WG_SIZE, body, name="lib_unique_range_values")


def unique_in_range(call: Call, a: Array, lo: int, bins: int) -> tuple[Any, Any]:
    """``(values, counts)`` of ``a``'s keys, all in ``[lo, lo + bins)``; one read of the keys."""
    plan = call.plan()
    cap = capacity(bins)
    n_word, bins_word = plan.word("urange.n", a.n), plan.word("urange.bins", bins)
    lo_word = plan.word("urange.lo", lo)
    blocks = min(ceil_div(capacity(a.n), WG * HISTOGRAM_ITEMS), BLOCKS_MAX)
    blocks_word = plan.word("urange.blocks", blocks)
    src = call.upload(plan, "x", a)
    counts = plan.buffer("urange.counts", bins)
    plan.step(K.zero_fill(bins_word), [counts, plan.params], ceil_div(cap, WG))
    shift = element("minus_lo", a.dtype, U32, lambda v: Expr.sub(Expr.cast(U32, v), load_param(lo_word)))
    shared = capacity(max(bins, WG)) if bins <= SHARED_BINS_MAX else 0
    plan.step(fused(K.histogram_kernel(U32, shared, n_word, bins_word, blocks_word), shift),
              [src, counts, plan.params], blocks)
    kept = call.result(plan, "urange.kept", bins)
    index, distinct = plan.buffer("urange.index", bins), plan.buffer("urange.distinct", 1)
    topo.compact(plan, K.Predicate("flags", U32, U32), [counts, counts], kept, index, distinct, bins, cap)
    values = call.result(plan, "urange.values", bins, a.np_dtype)
    plan.step(offset_values(bins_word, lo_word), [index, values, plan.params], ceil_div(cap, WG))
    total = topo.reduce(plan, topo.COUNT, counts, bins, cap)
    raw_distinct, raw_total = call.run(plan, [(distinct, 0, 4), (total, 0, 4)])
    found = int(raw_total.view(np.uint32)[0])
    if found != a.n:
        raise InvalidProgram(f"{a.n - found} of the {a.n} keys are outside key_range=({lo}, {lo + bins})",
                             "pass a key_range that bounds every key (lo <= x < hi), or call unique(x) without it.")
    runs = int(raw_distinct.view(np.uint32)[0])
    return call.output(values, a.np_dtype, runs), call.output(kept, np.dtype(np.uint32), runs)
