"""Results that must not depend on what ran before in the process (issue: stale workgroup memory).

A workgroup with fewer threads than the last 1-3 words of its workgroup memory left those words
unzeroed, so a kernel read whatever an earlier kernel had left in that multiprocessor's shared
memory (found by the differential fuzzer at program 350 of seed 777001). These tests dirty the
memory first, replay that fuzz run in one process, and run the long-process fuzz mode.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from vyre.driver.config import DispatchConfig
from vyre.fuzz import fuzz
from vyre.fuzz.paths import JUNK, dirtier_program, dirty, set_coarsening
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.reference import run
from vyre.reference.ulp import assert_outputs_equal

pytestmark = pytest.mark.gpu

GROUPS = 600  # workgroups of the reading program: several per multiprocessor
LONG_COUNT = int(os.environ.get("VYRE_GPU_LONG_FUZZ", "1200"))  # about a minute on an H100 host


def _reads_its_workgroup_memory(threads: int, words: int) -> Program:
    """Invocation 0 of each workgroup copies all of its (never written) workgroup memory out."""
    wg = Expr.workgroup_id(0)
    j = Expr.var("j")
    return Program(
        [BufferDecl.output("out", 0, DataType.U32, GROUPS * words), BufferDecl.workgroup("mem", words, DataType.U32)],
        (threads, 1, 1),
        [Node.if_(Expr.eq(Expr.local_id(0), Expr.u32(0)), [
            Node.loop("j", Expr.u32(0), Expr.u32(words), [
                Node.store("out", Expr.add(Expr.mul(wg, Expr.u32(words)), j), Expr.load("mem", j))])])],
        name=f"read_wg_{threads}x{words}")


@pytest.mark.parametrize("coarsen", [None, "4"], ids=["auto", "coarsen4"])
@pytest.mark.parametrize("threads", [1, 2, 3, 5, 32])
def test_small_workgroups_zero_all_of_their_workgroup_memory(backend, threads: int, coarsen: str | None) -> None:
    saved = os.environ.get("VYRE_CUDA_COARSEN")
    set_coarsening(coarsen)
    try:
        for words in (1, 2, 3, 4, 5, 7, 11, 31, 257, 2052):  # fills written out (up to 16 stores), then looped
            program = _reads_its_workgroup_memory(threads, words)
            config = DispatchConfig(grid=(GROUPS, 1, 1))
            backend.dispatch(dirtier_program(), [np.array([JUNK * 0x01010101], np.uint32)],
                             DispatchConfig(grid=(1024, 1, 1)))
            (out,) = backend.dispatch(program, [], config)
            assert_outputs_equal(run(program, [], config), [out], program)
            assert not out.any(), f"{threads} threads, {words} words: {np.count_nonzero(out)} stale words"
    finally:
        set_coarsening(saved)


def test_the_fuzz_run_that_found_it_agrees_in_one_process() -> None:
    """Programs 0-350 of seed 777001, 3 input sets each, on one new backend: 0 mismatches
    (program 350 read stale workgroup memory before the fix)."""
    from vyre_cuda.backend import CudaBackend

    with CudaBackend() as be:
        report = fuzz(be, 351, seed=777001, input_sets=3)
    assert report.runs == 351 * 3
    assert not report.mismatches, report.mismatches


def test_long_process_fuzz_agrees() -> None:
    """Every dispatch path in turn, coarsening settings interleaved, memory dirtied between
    programs, hundreds of programs in one process: 0 mismatches."""
    from vyre_cuda.backend import CudaBackend

    with CudaBackend() as be:
        report = fuzz(be, LONG_COUNT, seed=20261126, input_sets=3, long_process=True)
        metrics = be.metrics()
    assert report.runs == LONG_COUNT * 3
    assert not report.mismatches, report.mismatches
    assert metrics["cuda_dispatches"] >= LONG_COUNT  # host, device and dirtying dispatches all counted


def test_dirty_leaves_pools_usable(backend) -> None:
    """The dirtying step itself runs cleanly and leaves no buffer behind."""
    before = backend.metrics()["cuda_resident_handles"]
    dirty(backend, np.random.default_rng(1))
    assert backend.metrics()["cuda_resident_handles"] == before
