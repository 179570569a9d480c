"""The staging pair's copy out (``staging.copy_out``) on the CPU: the copies it enqueues are recorded."""

from __future__ import annotations

from types import SimpleNamespace

from vyre_cuda._dispatch.staging import aligned, copy_out
from vyre_cuda._runtime.pools import D2H
from vyre_cuda._runtime.telemetry import Telemetry


def runtime(log: list) -> SimpleNamespace:
    cuda = SimpleNamespace(memcpyAsync=lambda *args: log.append(args))
    return SimpleNamespace(cuda=cuda, stream_ptr=7, telemetry=Telemetry())


def test_results_are_laid_out_back_to_back_on_aligned_offsets() -> None:
    log: list = []
    rt = runtime(log)
    off = copy_out(rt, 0x1000, 20, 0x9000, 0)
    assert off == aligned(20) == 32
    off = copy_out(rt, 0x2000, 0, 0x9000, off)  # an empty result takes no copy and no room
    off = copy_out(rt, 0x3000, 4, 0x9000, off)
    assert off == 48
    assert log == [(0x9000, 0x1000, 20, D2H, 7), (0x9000 + 32, 0x3000, 4, D2H, 7)]
    assert rt.telemetry.snapshot()["cuda_d2h_bytes"] == 24
