"""A run of ``vyre.lib``: a fixed topology of steps per capacity class, executed as one sequence.

``Plan`` collects ``(program, handles, config)`` steps, the u32 parameter words they read and
the scratch buffers they use; ``run`` uploads the parameter words and calls
``backend.dispatch_sequence`` once (one synchronisation; on ``cuda`` one captured graph per
capacity class, replayed), or enqueues them (``backend.enqueue_sequence``: on a caller's stream,
or on the backend's for ``ResidentArray`` calls), waiting only for what it reads back. Grids
and buffer sizes come from the capacity class (the next power of two of the size), never from
the exact size, which the kernels read from the parameters.
The topologies (the steps of each algorithm) live with their algorithm: ``vyre.lib._scan.topology``,
``_select.topology``, ``_histogram.topology``, ``_sort.topology`` and ``_runs.topology``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from vyre.driver.backend import Resident
from vyre.driver.config import DispatchConfig
from vyre.driver.errors import InvalidProgram, VyreError
from vyre.ir import DataType, Program
from vyre.lib.blocks import PARAM_WORDS
from vyre.lib.scratch import ScratchCache


@functools.cache
def grid_config(groups: int) -> DispatchConfig:
    """One shared config per grid: a backend that caches step bindings by config object reuses them."""
    return DispatchConfig(grid=(groups, 1, 1))


def capacity(n: int) -> int:
    """The capacity class of ``n`` elements: the next power of two (at least 1)."""
    return 1 << max(int(n) - 1, 0).bit_length()


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class Plan:
    """Steps, parameter words and scratch buffers of one library call on one backend."""

    def __init__(self, backend: Any, scratch: ScratchCache, params: str = "params", enqueue: bool = False) -> None:
        self.backend, self.scratch, self.enqueue = backend, scratch, enqueue
        self.params = scratch.get(params, PARAM_WORDS * 4)
        self._words = np.zeros(PARAM_WORDS, dtype=np.uint32)
        self._names: dict[str, int] = {}
        self.steps: list[tuple[Program, list[Resident], DispatchConfig]] = []
        self.checks: list[tuple[Resident, int, Callable[[int], VyreError]]] = []

    def word(self, name: str, value: int) -> int:
        """The parameter word called ``name``, set to ``value`` (u32 bits); returns its index."""
        index = self._names.setdefault(name, len(self._names))
        if index >= PARAM_WORDS:
            raise InvalidProgram("a vyre.lib plan needs more parameter words than it has",
                                 "report this as a vyre.lib bug (the plan is too deep).")
        self._words[index] = np.uint32(int(value) & 0xFFFFFFFF)
        return index

    def typed_word(self, name: str, value: object, dtype: DataType) -> int:
        """``value`` as ``dtype`` bits, read through a typed uniform view of the parameters; returns
        its element index in that view. An 8-byte value takes two words at an even index (a pad
        word first if needed), so its index is the first word's half."""
        bits = np.array([value], dtype=dtype.np_dtype).view(np.uint32)
        if bits.size == 1:
            return self.word(name, int(bits[0]))
        if f"{name}.lo" not in self._names and len(self._names) % 2:
            self.word(f"{name}.pad", 0)
        low = self.word(f"{name}.lo", int(bits[0]))
        self.word(f"{name}.hi", int(bits[1]))
        return low // 2

    def buffer(self, role: str, elements: int, itemsize: int = 4) -> Resident:
        """Scratch for ``elements`` of ``itemsize`` bytes, sized by capacity class."""
        return self.scratch.get(role, capacity(elements) * itemsize)

    def zeroed_buffer(self, role: str, elements: int) -> Resident:
        """``buffer`` of u32 words that are zero when first allocated (state a kernel keeps zero
        for the next call itself, as the look-back scan's)."""
        return self.scratch.get(role, capacity(elements) * 4, zeroed=True)

    def step(self, program: Program, handles: list[Resident], groups: int) -> None:
        self.steps.append((program, handles, grid_config(max(groups, 1))))

    def check(self, handle: Resident, word: int, fail: Callable[[int], VyreError]) -> None:
        """After the run, read word ``word`` of ``handle``; if it is not 0, raise ``fail(value)``."""
        self.checks.append((handle, word, fail))

    def run(self, reads: Sequence[tuple[Resident, int, int]] = (), stream: Any = None) -> list[np.ndarray]:
        """Run the steps; returns the ``(handle, byte offset, bytes)`` reads, after the checks pass.

        With ``stream`` (a device-array call): the parameter words and steps are enqueued on it
        (``backend.enqueue_sequence``), the checks are watched without waiting, and only ``reads``
        make the call wait. With ``enqueue`` (a ``ResidentArray`` call on a backend that enqueues):
        the same on the backend's stream, the checks read back with ``reads``, and no wait when
        there is nothing to read; unchanged parameter words are not written again."""
        writes = [(self.params, self._words)]
        if stream is not None:
            watch = [(handle, 4 * word, fail) for handle, word, fail in self.checks]
            return self.backend.enqueue_sequence(self.steps, stream=stream, writes=writes, reads=list(reads),
                                                 watch=watch)
        checks = [(handle, 4 * word, 4) for handle, word, _ in self.checks]
        if self.enqueue:
            out = self.backend.enqueue_sequence(self.steps, writes=writes, reads=list(reads) + checks)
        else:
            self.backend.upload_resident(self.params, self._words)
            out = self.backend.dispatch_sequence(self.steps, list(reads) + checks)
        for (_, _, fail), raw in zip(self.checks, out[len(reads):]):
            value = int(np.asarray(raw).view(np.uint32)[0])
            if value:
                raise fail(value)
        return out[:len(reads)]
