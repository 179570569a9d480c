"""The readout step of compiled calls (``vyre_cuda._dispatch.readout``): on the reference oracle it
copies exactly the words asked for, in order, from each source buffer (a source read twice, an
8-byte range), and its PTX assembles for sm_90 (the GPU tests run it on the device)."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from vyre.driver.config import DispatchConfig
from vyre.reference import ReferenceBackend
from vyre_cuda import emit_ptx
from vyre_cuda._dispatch.readout import Readout, readout_program

SPANS = ((0, 0, 1), (1, 3, 2), (0, 5, 1))  # word 0 of src0, words 3-4 of src1, word 5 of src0


def test_the_readout_copies_the_words_asked_for_in_order() -> None:
    rng = np.random.default_rng()  # fresh words each run
    src0 = rng.integers(0, 2**32, 8, dtype=np.uint64).astype(np.uint32)
    src1 = rng.integers(0, 2**32, 6, dtype=np.uint64).astype(np.uint32)
    poisoned = np.full(4, 0xDEADBEEF, np.uint32)
    out = ReferenceBackend().dispatch(readout_program(SPANS, 2), [src0, src1, poisoned],
                                      DispatchConfig(grid=(1, 1, 1)))
    np.testing.assert_array_equal(out[-1].view(np.uint32), [src0[0], src1[3], src1[4], src0[5]])


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not on the path")
def test_the_readout_assembles_for_sm_90(tmp_path) -> None:
    path = tmp_path / "readout.ptx"
    path.write_text(emit_ptx(readout_program(SPANS, 2), sm="90"), encoding="utf-8")
    done = subprocess.run(["ptxas", "--gpu-name", "sm_90", str(path), "-o", str(tmp_path / "readout.cubin")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_only_whole_words_take_the_readout() -> None:
    """Ranges of whole aligned 4-byte words are copied by the step; others go through the copy engine."""
    h = object()
    assert Readout.takes([(h, 0, 4), (h, 8, 8)])
    assert not Readout.takes([])
    assert not Readout.takes([(h, 2, 4)])
    assert not Readout.takes([(h, 0, 6)])
    assert not Readout.takes([(h, 0)])
