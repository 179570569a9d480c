"""The CPU seconds of a block of code, for tests that bound how long a decoder, the validator or
the oracle takes.

CPU time of this process, not wall time, so a loaded machine's stalls (CI runs the tests on every
core) are not counted; and with the cyclic collector off inside the block, so a collection of what
earlier tests left is not counted either (in CI one such collection once charged 4.7 s to a decode
that takes 0.2 s). What a test bounds is the code's own work.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class Stopwatch:
    """The CPU seconds the ``stopwatch()`` block took, set when the block ends (also by an exception)."""

    seconds: float = 0.0


@contextmanager
def stopwatch() -> Iterator[Stopwatch]:
    """Time the block: ``with stopwatch() as watch: ...`` then ``watch.seconds``."""
    gc.collect()
    gc.disable()
    watch = Stopwatch()
    start = time.process_time()
    try:
        yield watch
    finally:
        watch.seconds = time.process_time() - start
        gc.enable()
