"""The oracle with the three methods ``vyre.lib`` compiles ``ResidentArray`` calls with
(``alias_resident``, ``compile_caller_sequence``, ``enqueue_sequence``), so the library's compiled
resident path (``FastCall``, ``vyre.lib.repeat``) runs on the CPU with the oracle's results.

An alias is a handle whose bytes are a numpy view of the first ``nbytes`` of another handle's;
re-pointing it swaps the view (the oracle rebinds steps whose bytes changed). A compiled call
runs its steps through ``dispatch_sequence`` each time: what the test checks is the library's
bookkeeping around it (keys, aliases, issued and recycled results, refusals), not a graph.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from vyre.driver.backend import Resident
from vyre.driver.resident_args import check_byte_range
from vyre.reference import ReferenceBackend


class AliasingReference(ReferenceBackend):
    """``ReferenceBackend`` plus resident aliases and compiled caller sequences."""

    def __init__(self) -> None:
        super().__init__()
        self.compiled = 0  # compile_caller_sequence calls
        self.waits = 0  # reads back to the host (each a wait for the device on cuda)
        self.aliases: set[int] = set()  # ids of alias handles (they own no bytes)

    def alias_resident(self, handle: Resident | None, source: Resident, nbytes: int) -> Resident:
        data = self._store.storage(source)  # InvalidHandle for a freed or foreign source
        check_byte_range(source, 0, nbytes, "alias")
        if handle is None or handle.id not in self.aliases:
            handle = self._store.allocate(0)
            self.aliases.add(handle.id)
        handle.nbytes = nbytes
        self._store._buffers[handle.id] = (handle, data[:nbytes])
        return handle

    def free_resident(self, handle: Resident) -> None:
        super().free_resident(handle)
        self.aliases.discard(handle.id)

    def enqueue_sequence(self, steps: Sequence[Any], *, stream: Any = None,
                         writes: Sequence[tuple[Resident, np.ndarray]] = (), reads: Sequence[tuple] = (),
                         watch: Sequence[tuple[Resident, int, Callable[[int], Exception]]] = ()) -> list[np.ndarray]:
        for handle, words in writes:
            self.upload_resident(handle, words)
        self.waits += bool(reads)  # watched words are read here, but cuda does not wait for them
        out = super().dispatch_sequence(list(steps), [*reads, *((h, off, 4) for h, off, _ in watch)])
        for raw, (_, _, fail) in zip(out[len(reads):], watch):
            word = int(raw.view(np.uint32)[0])
            if word:
                raise fail(word)
        return out[:len(reads)]

    def dispatch_sequence(self, steps: Sequence[tuple], reads: Sequence[tuple] = ()) -> list[np.ndarray]:
        self.waits += bool(reads)
        return super().dispatch_sequence(steps, reads)

    def download_resident(self, handle: Resident, offset: int = 0, nbytes: int | None = None) -> np.ndarray:
        self.waits += 1
        return super().download_resident(handle, offset, nbytes)

    def live_handles(self) -> int:
        """Handles the oracle holds that own bytes (aliases aside)."""
        return sum(1 for i in self._store._buffers if i not in self.aliases)

    def compile_caller_sequence(self, steps: Sequence[Any], reads: Sequence[Any] = ()) -> CompiledSteps:
        self.compiled += 1
        return CompiledSteps(self, list(steps), tuple(reads))

    def metrics(self) -> dict[str, int]:
        """The oracle's metrics, alias views not counted as held bytes."""
        out = super().metrics()
        out["reference_resident_bytes"] -= sum(h.nbytes for i, (h, _) in self._store._buffers.items()
                                               if i in self.aliases)
        return out


class CompiledSteps:
    """A caller sequence: ``enqueue`` runs the steps with the writes and reads back the reads it
    was compiled with (no graph, so no ``replay``)."""

    def __init__(self, backend: AliasingReference, steps: list[Any], reads: tuple = ()) -> None:
        self.backend, self.steps, self.reads = backend, steps, reads
        self.runs = 0

    def enqueue(self, stream: Any, writes: Sequence[tuple[Resident, np.ndarray]] = (),
                watch: Sequence[tuple[Resident, int, Callable[[int], Exception]]] = ()) -> list[np.ndarray] | None:
        out = self.backend.enqueue_sequence(self.steps, stream=stream, writes=writes, reads=self.reads, watch=watch)
        self.runs += 1
        return out

    def close(self) -> None:
        self.steps = []
