"""ULP error of the cuda backend's transcendental ops against float64 numpy (docs/semantics.md).

Each op runs over many float32 inputs of its checked domain (random bit patterns, so every
binade is covered, plus a uniform sweep); the result is compared with the float64 value rounded
to float32. Specials (NaN, ±inf, ±0) are checked exactly against C99 Annex F.
"""

from __future__ import annotations

import numpy as np
import pytest

from vyre.ir import BufferDecl, DataType, Expr, Node, Program

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy", reason="cupy is not installed")

N = 1 << 20
F32_MAX = float(np.finfo(np.float32).max)
F32_TINY = float(np.finfo(np.float32).tiny)

#: op -> (max ULP from docs/semantics.md, domain low, high, float64 reference)
OPS = {
    "inverse_sqrt": (2, 0.0, F32_MAX, lambda x: 1.0 / np.sqrt(x)),
    "exp": (2, np.log(F32_TINY), np.log(F32_MAX), np.exp),
    "exp2": (2, -126.0, 127.99, np.exp2),
    "log": (2, F32_TINY, F32_MAX, np.log),
    "log2": (2, F32_TINY, F32_MAX, np.log2),
    "sin": (2, -1e4, 1e4, np.sin),
    "cos": (2, -1e4, 1e4, np.cos),
    "tan": (4, -1e4, 1e4, np.tan),
    "asin": (4, -1.0, 1.0, np.arcsin),
    "acos": (4, -1.0, 1.0, np.arccos),
    "atan": (4, -F32_MAX, F32_MAX, np.arctan),
    "sinh": (4, -80.0, 80.0, np.sinh),
    "cosh": (4, -80.0, 80.0, np.cosh),
    "tanh": (4, -80.0, 80.0, np.tanh),
    # beyond docs/semantics.md: the emitter reduces every finite argument exactly (Payne-Hanek)
    "sin[all finite]": (2, -F32_MAX, F32_MAX, np.sin),
    "cos[all finite]": (2, -F32_MAX, F32_MAX, np.cos),
    "tan[all finite]": (4, -F32_MAX, F32_MAX, np.tan),
}
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0], np.float32)


def _backend():
    import vyre

    try:
        return vyre.acquire("cuda")
    except Exception as exc:  # no driver/device: skip with the backend's own reason
        pytest.skip(f"cuda backend unavailable: {exc}")


def _program(op: str, n: int) -> Program:
    i = Expr.var("i")
    return Program(
        [BufferDecl.read("x", 0, DataType.F32), BufferDecl.output("y", 1, DataType.F32, n)], (256, 1, 1),
        [Node.let("i", Expr.invocation_id(0)), Node.store("y", i, getattr(Expr, op)(Expr.load("x", i)))],
        name=f"ulp_{op}")


def _inputs(lo: float, hi: float, rng: np.random.Generator) -> np.ndarray:
    """Half random bit patterns inside [lo, hi] (every binade), half uniform in [lo, hi]."""
    bits = rng.integers(0, 1 << 32, size=4 * N, dtype=np.uint64).astype(np.uint32).view(np.float32)
    bits = bits[np.isfinite(bits) & (bits >= lo) & (bits <= hi)][: N // 2]
    uniform = rng.uniform(lo, hi, size=N - bits.size).astype(np.float32)
    return np.concatenate([bits, uniform]).astype(np.float32)


def _ulp(expected: np.ndarray, actual: np.ndarray) -> np.ndarray:
    from vyre.reference.ulp import ulp_distance

    return ulp_distance(expected, actual)


def test_transcendental_ulp() -> None:
    backend = _backend()
    rng = np.random.default_rng(20240601)
    rows, failures = [], []
    for label, (bound, lo, hi, ref) in OPS.items():
        op = label.split("[")[0]
        x = _inputs(lo, hi, rng)
        (y,) = backend.dispatch(_program(op, x.size), [x])
        with np.errstate(all="ignore"):
            expected = ref(x.astype(np.float64)).astype(np.float32)
        keep = np.isfinite(expected)
        if op in ("exp", "exp2"):
            keep &= np.abs(expected) >= F32_TINY  # domain: results normal
        dist = _ulp(expected[keep], y[keep])
        worst = int(np.argmax(dist))
        rows.append(f"{label:16s} max {int(dist.max()):3d} ulp (bound {bound}) worst x={x[keep][worst]!r}")
        if dist.max() > bound:
            failures.append(rows[-1])
        (s,) = backend.dispatch(_program(op, SPECIALS.size), [SPECIALS])
        with np.errstate(all="ignore"):
            want = ref(SPECIALS.astype(np.float64)).astype(np.float32)
        exact = ~np.isfinite(want) | (want == 0)  # specials: bit for bit (any NaN equals any NaN)
        same = np.where(exact, (np.isnan(want) & np.isnan(s)) | (want.view(np.uint32) == s.view(np.uint32)),
                        _ulp(want, s) <= bound)
        if not same.all():
            failures.append(f"{label} specials: inputs {SPECIALS[~same]} gave {s[~same]}, expected {want[~same]}")
    print("\n" + "\n".join(rows))
    assert not failures, "\n".join(failures)
