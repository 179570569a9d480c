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


def counting_oracle() -> object:
    """A fresh oracle that counts what crosses to the host: ``reads`` (each range a ``dispatch_sequence``
    reads back, and each ``download_resident``) and ``loops`` (``dispatch_until`` calls)."""
    from vyre.reference.backend import ReferenceBackend

    class Counting(ReferenceBackend):
        reads = loops = 0

        def dispatch_sequence(self, steps, reads=()):
            self.reads += len(reads)
            return super().dispatch_sequence(steps, reads)

        def download_resident(self, handle, offset=0, nbytes=None):
            self.reads += 1
            return super().download_resident(handle, offset, nbytes)

        def dispatch_until(self, steps, flag_handle, max_iterations):
            self.loops += 1
            return super().dispatch_until(steps, flag_handle, max_iterations)

    return Counting()
