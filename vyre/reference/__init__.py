"""The CPU reference oracle: the interpreter that defines vyre's semantics, and its backend."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vyre.driver.config import DispatchConfig
from vyre.ir.program import Program
from vyre.reference.backend import ReferenceBackend


def run(program: Program, inputs: Sequence[object], config: DispatchConfig | None = None) -> list[np.ndarray]:
    """Run ``program`` on the oracle (validated; inputs as docs/semantics.md says) and return its outputs."""
    return ReferenceBackend().dispatch(program, inputs, config)


__all__ = ["ReferenceBackend", "run"]
