"""Atomics of one statement, applied in lane (linear invocation) order and vectorised.

Lanes that hit the same address form a segment after a stable sort by address; each lane's
old value is the memory value combined with the values of the earlier lanes of its segment
(an exclusive segmented scan), and the memory ends up holding the whole segment combined.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vyre.ir.expr import AtomicOp

_SCAN_UFUNC = {
    AtomicOp.ADD: np.add, AtomicOp.OR: np.bitwise_or, AtomicOp.AND: np.bitwise_and,
    AtomicOp.XOR: np.bitwise_xor, AtomicOp.MIN: np.minimum, AtomicOp.MAX: np.maximum,
}


def apply_atomic(
    data: np.ndarray,
    op: AtomicOp,
    flat: np.ndarray,
    ok: np.ndarray,
    value: np.ndarray,
    expected: np.ndarray | None = None,
) -> np.ndarray:
    """Apply ``op`` for lanes where ``ok`` (in lane order) to ``data[flat]``; return old values.

    ``data`` is an integer array (U32, I32, U64, I64), or F64 for ADD; lanes not ``ok``
    (inactive or out of bounds) get 0.
    """
    lanes = flat.shape[0]
    old = np.zeros(lanes, dtype=data.dtype)
    idx = np.flatnonzero(ok)
    if idx.size == 0:
        return old
    addr = flat[idx]
    if idx.size == 1:
        old[idx] = _apply_one(data, op, addr, value, expected, idx)
        return old
    order = np.argsort(addr, kind="stable")
    lane_of = idx[order]
    addr = addr[order]
    vals = _at(value, lane_of).astype(data.dtype)
    starts = np.flatnonzero(np.concatenate(([True], addr[1:] != addr[:-1])))
    seg_addr = addr[starts]
    before = data[seg_addr]
    seg_len = np.diff(starts, append=addr.size)
    seg_base = np.repeat(before, seg_len)
    first = np.zeros(vals.size, bool)
    first[starts] = True
    last = starts + seg_len - 1
    if op is AtomicOp.COMPARE_EXCHANGE:
        exp = _at(expected, lane_of).astype(data.dtype)
        old[lane_of], final = _compare_exchange(starts, before, vals, exp)
    elif op is AtomicOp.EXCHANGE:
        old[lane_of] = np.where(first, seg_base, _shift_right(vals))
        final = vals[last]
    elif data.dtype.kind == "f":
        old[lane_of], final = _float_add(starts, seg_len, before, vals)
    else:
        ufunc = _SCAN_UFUNC[op]
        inclusive = _segmented_scan(ufunc, vals, starts, seg_len)
        old[lane_of] = np.where(first, seg_base, ufunc(seg_base, _shift_right(inclusive)))
        final = ufunc(before, inclusive[last])
    data[seg_addr] = final
    return old


def _at(x: Any, lanes: np.ndarray) -> np.ndarray:
    """The values of lane value ``x`` (an array, or a scalar every lane shares) at ``lanes``."""
    return x[lanes] if np.ndim(x) else np.full(lanes.size, x)


def _apply_one(data: np.ndarray, op: AtomicOp, addr: np.ndarray, value: np.ndarray, expected: np.ndarray | None,
               lane: np.ndarray) -> np.ndarray:
    """The atomic of a single lane (``lane``, at ``addr``): what the segmented path gives for a
    segment of one, without sorting or scanning; returns the old value."""
    before = data[addr]
    v = _at(value, lane).astype(data.dtype)
    if op is AtomicOp.COMPARE_EXCHANGE:
        e = _at(expected, lane).astype(data.dtype)
        data[addr] = np.where(before == e, v, before)
    elif op is AtomicOp.EXCHANGE:
        data[addr] = v
    else:
        data[addr] = _SCAN_UFUNC[op](before, v)
    return before


def _shift_right(x: np.ndarray) -> np.ndarray:
    """``x`` moved one place later (the first element is a don't-care copy)."""
    out = np.empty_like(x)
    out[1:] = x[:-1]
    out[:1] = x[:1]
    return out


def _segmented_scan(ufunc: np.ufunc, vals: np.ndarray, starts: np.ndarray, seg_len: np.ndarray) -> np.ndarray:
    """Inclusive scan of ``vals`` restarting at each segment start.

    ADD and XOR use one global accumulate and cancel the previous segments (both are
    invertible); the others use a Hillis-Steele scan of ceil(log2(longest segment)) steps.
    """
    if ufunc is np.add or ufunc is np.bitwise_xor:
        acc = ufunc.accumulate(vals, dtype=vals.dtype)
        offset = np.zeros_like(vals)
        offset[starts[1:]] = acc[starts[1:] - 1]
        offset = np.repeat(offset[starts], seg_len)
        return acc - offset if ufunc is np.add else acc ^ offset
    seg = np.repeat(np.arange(seg_len.size), seg_len)
    out = vals.copy()
    step = 1
    longest = int(seg_len.max())
    while step < longest:
        same = seg[step:] == seg[:-step]
        out[step:] = np.where(same, ufunc(out[step:], out[:-step]), out[step:])
        step *= 2
    return out


def _float_add(starts: np.ndarray, seg_len: np.ndarray, before: np.ndarray,
               vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float ADD in lane order, rounding after every add (float sums cannot cancel earlier
    segments as the integer scan does): per segment, a sequential accumulate from its old value."""
    olds = np.empty_like(vals)
    final = before + vals[starts]  # segments of one lane
    olds[starts] = before
    for s in np.flatnonzero(seg_len > 1):
        lo, n = starts[s], seg_len[s]
        run = np.add.accumulate(np.concatenate((before[s : s + 1], vals[lo : lo + n])))
        olds[lo : lo + n] = run[:-1]
        final[s] = run[-1]
    return olds, final


def _compare_exchange(
    starts: np.ndarray, before: np.ndarray, vals: np.ndarray, expected: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Sequential compare-exchange per segment (the one atomic that is not a scan)."""
    olds = np.empty_like(vals)
    final = before.copy()
    bounds = [*starts.tolist(), vals.size]
    v, e = vals.tolist(), expected.tolist()
    out = olds.tolist()
    for s in range(len(starts)):
        cur = final[s].item()
        for k in range(bounds[s], bounds[s + 1]):
            out[k] = cur
            if cur == e[k]:
                cur = v[k]
        final[s] = cur
    return np.asarray(out, dtype=vals.dtype), final
