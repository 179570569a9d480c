"""Runs: ``run_length_encode`` and ``unique``.

``kernels`` builds the run-lengths program, ``topology`` the steps (run starts by compaction),
``api`` the public calls.
"""

from vyre.lib._runs.api import run_length_encode, unique

__all__ = ["run_length_encode", "unique"]


