"""Comparing backend results with the oracle: bit equality (any NaN equals any NaN) and ULPs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vyre.ir.program import Program

#: (exponent mask, mantissa mask) of the float formats, by numpy dtype (BF16 arrays are uint16)
_FLOAT_MASKS = {np.dtype(np.float32): (0x7F800000, 0x007FFFFF), np.dtype(np.float16): (0x7C00, 0x03FF),
                np.dtype(np.float64): (0x7FF0000000000000, 0x000FFFFFFFFFFFFF)}
_BF16_MASKS = (0x7F80, 0x007F)
_SHOWN = 5


def ordered_f32(x: np.ndarray) -> np.ndarray:
    """float32 values as int64 keys whose order and differences follow the float order (-0 == +0)."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.int64)
    return np.where(b & 0x80000000, 0x80000000 - b, b)


def ordered_f64(x: np.ndarray) -> np.ndarray:
    """float64 values as int64 keys whose order and differences follow the float order (-0 == +0)."""
    b = np.asarray(x, np.float64).view(np.int64)
    return np.where(b < 0, np.int64(np.iinfo(np.int64).min) - b, b)


def ulp_distance(expected: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """Per-element distance in ULPs: float64 ULPs when both arrays are float64, else float32 ULPs;
    0 where both are NaN, huge where only one is."""
    e, a = np.asarray(expected), np.asarray(actual)
    if e.dtype == np.float64 and a.dtype == np.float64:
        ke, ka = ordered_f64(e), ordered_f64(a)
        cap = np.int64((1 << 62) - 1)  # keys of opposite signs: |ke| + |ka| without overflow
        across = np.minimum(np.abs(ke), cap) + np.minimum(np.abs(ka), cap)
        dist = np.where((ke < 0) == (ka < 0), np.abs(ke - ka), across)
    else:
        e, a = e.astype(np.float32), a.astype(np.float32)
        dist = np.abs(ordered_f32(e) - ordered_f32(a))
    both_nan = np.isnan(e) & np.isnan(a)
    one_nan = np.isnan(e) ^ np.isnan(a)
    return np.where(both_nan, 0, np.where(one_nan, np.iinfo(np.int64).max, dist))


def assert_within_ulp(expected: np.ndarray, actual: np.ndarray, max_ulp: int, what: str = "result") -> None:
    """Raise AssertionError naming the worst elements when any differs by more than ``max_ulp``."""
    dist = ulp_distance(expected, actual)
    bad = np.flatnonzero(dist > max_ulp)
    if bad.size:
        wide = np.asarray(expected).dtype == np.float64 and np.asarray(actual).dtype == np.float64
        e, a = (np.asarray(v, np.float64 if wide else np.float32) for v in (expected, actual))
        rows = [f"[{i}] expected {e[i].item()!r} ({_hex(e, i)}) got {a[i].item()!r} ({_hex(a, i)}), {dist[i]} ulp"
                for i in bad[:_SHOWN]]
        raise AssertionError(f"{what}: {bad.size} element(s) over {max_ulp} ulp:\n  " + "\n  ".join(rows))


def nan_mask(x: np.ndarray, bf16: bool = False) -> np.ndarray:
    """NaN elements of a float64/float32/float16 array, or of a uint16 array of BF16 bits when ``bf16``."""
    if bf16:
        exp, man = _BF16_MASKS
    elif x.dtype in _FLOAT_MASKS:
        exp, man = _FLOAT_MASKS[x.dtype]
    else:
        return np.zeros(x.shape, bool)
    b = x.view(np.dtype(f"u{x.dtype.itemsize}"))
    return ((b & exp) == exp) & ((b & man) != 0)


def mismatches(expected: np.ndarray, actual: np.ndarray, bf16: bool = False) -> np.ndarray:
    """Indices where two same-dtype arrays differ bit for bit, counting any two NaNs as equal."""
    e_bits = expected.view(np.dtype(f"u{expected.dtype.itemsize}"))
    a_bits = actual.view(np.dtype(f"u{actual.dtype.itemsize}"))
    differ = e_bits != a_bits
    if bf16 or expected.dtype in _FLOAT_MASKS:
        differ &= ~(nan_mask(expected, bf16) & nan_mask(actual, bf16))
    return np.flatnonzero(differ)


def host_array(a: object) -> np.ndarray:
    """A numpy array of ``a``: numpy as is, CuPy through ``get()``, torch through ``cpu()`` (bfloat16
    tensors as their uint16 bits, the storage form of a BF16 buffer)."""
    if isinstance(a, np.ndarray):
        return a
    if type(a).__module__.partition(".")[0] == "torch":  # duck-typed: vyre never imports torch
        host = a.detach().cpu()  # type: ignore[attr-defined]
        if str(host.dtype) == "torch.bfloat16":  # widening to f32 keeps the bits: take the top half
            return (host.float().numpy().view(np.uint32) >> 16).astype(np.uint16)
        return host.numpy()
    get = getattr(a, "get", None)
    return np.asarray(get() if callable(get) else a)


def assert_outputs_equal(
    expected: Sequence[np.ndarray], actual: Sequence[np.ndarray], program: Program | None = None
) -> None:
    """Assert that a backend's outputs equal the oracle's bit for bit (any NaN equals any NaN).
    Outputs may be numpy, CuPy or torch arrays (``host_array``).

    With ``program``, outputs are named after its output buffers and BF16 buffers (uint16 bits)
    get the BF16 NaN rule.
    """
    decls = program.outputs if program is not None else ()
    if len(expected) != len(actual):
        raise AssertionError(f"expected {len(expected)} outputs, got {len(actual)}")
    for k, (e, a) in enumerate(zip(expected, actual)):
        e, a = host_array(e), host_array(a)
        name = repr(decls[k].name) if k < len(decls) else f"#{k}"
        bf16 = k < len(decls) and decls[k].dtype.name == "BF16"
        if e.dtype != a.dtype or e.shape != a.shape:
            raise AssertionError(f"output {name}: expected {e.dtype}{list(e.shape)}, got {a.dtype}{list(a.shape)}")
        bad = mismatches(e.ravel(), a.ravel(), bf16)
        if bad.size:
            e, a = e.ravel(), a.ravel()
            rows = [f"[{i}] expected {_hex(e, i)} ({e[i].item()!r}) got {_hex(a, i)} ({a[i].item()!r})"
                    for i in bad[:_SHOWN]]
            raise AssertionError(f"output {name}: {bad.size} of {e.size} element(s) differ:\n  " + "\n  ".join(rows))


def _hex(x: np.ndarray, i: int) -> str:
    width = x.dtype.itemsize
    return f"0x{int(x.view(np.dtype(f'u{width}'))[i]):0{2 * width}x}"
