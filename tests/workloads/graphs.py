"""Small test graphs in CSR form: random, chains, stars, self-loops, empty, disconnected."""

from __future__ import annotations

import numpy as np


def csr(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the directed edges src -> dst, neighbours in input order."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    order = np.argsort(src, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.uint32)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    return indptr, dst[order].astype(np.uint32)


def symmetric(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR with every edge stored both ways."""
    return csr(n, np.concatenate([src, dst]), np.concatenate([dst, src]))


def cases(seed: int = 0) -> dict[str, tuple[int, np.ndarray, np.ndarray]]:
    """Named edge lists ``(n, src, dst)`` covering the shapes that break graph code."""
    rng = np.random.default_rng(seed)
    n = 300
    out = {
        "random": (n, rng.integers(0, n, 400), rng.integers(0, n, 400)),
        "dense": (60, rng.integers(0, 60, 900), rng.integers(0, 60, 900)),
        "chain": (257, np.arange(256), np.arange(1, 257)),
        "reverse_chain": (130, np.arange(129, 0, -1), np.arange(128, -1, -1)),
        "star": (200, np.zeros(199, dtype=np.int64), np.arange(1, 200)),
        "self_loops": (20, np.arange(20), np.arange(20)),
        "no_edges": (17, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)),
        "one_vertex": (1, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)),
    }
    half = rng.permutation(n)
    out["two_halves"] = (n, half[:150][rng.integers(0, 150, 300)], half[:150][rng.integers(0, 150, 300)])
    return out
