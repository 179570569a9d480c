"""Workgroup memory over 48 KiB on ``cuda`` without a GPU: the device check and the launch plans.

``ProgramCache`` runs here against a stand-in for the device runtime (module loads return
kernel records, ``allow_dynamic`` records the opt-in it would set); the plans it builds are the
real ``LaunchPlan`` objects whose ``shared_bytes`` every launch path passes to the driver.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any, cast

import pytest

from vyre.driver.errors import InvalidProgram
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.ir.layout import PORTABLE_WORKGROUP_BYTES, dynamic_workgroup_bytes, workgroup_bytes
from vyre_cuda._dispatch.prepared import ProgramCache
from vyre_cuda._runtime.device import DeviceInfo
from vyre_cuda._runtime.launch import DeviceLimits, check_workgroup_memory
from vyre_cuda._runtime.loader import LoadedKernel

KIB = 1024
#: opt-in maxima (cudaDevAttrMaxSharedMemoryPerBlockOptin) by compute capability
OPTIN = {"90": 227 * KIB, "80": 163 * KIB, "86": 99 * KIB, "61": 48 * KIB}


def _program(nbytes: int, name: str = "wide") -> Program:
    """One u32 workgroup buffer of ``nbytes``; each invocation writes and reads back one word."""
    gid = Expr.invocation_id(0)
    n = nbytes // 4
    body = [Node.store("t", Expr.rem(gid, Expr.u32(n)), gid), Node.barrier(),
            Node.store("out", gid, Expr.load("t", Expr.u32(n - 1)))]
    return Program([BufferDecl.output("out", 0, DataType.U32, 128), BufferDecl.workgroup("t", n, DataType.U32)],
                   (128, 1, 1), body, name=name)


def _info(cc: str) -> DeviceInfo:
    return DeviceInfo(0, f"sm_{cc}", cc, 132, 32, 1024, (1024, 1024, 64), (2**31 - 1, 65535, 65535),
                      48 * KIB, OPTIN[cc], True, 80 * 2**30, 50 * 2**20, 12040, 12040)


def test_dynamic_bytes_are_zero_up_to_48_kib_and_the_total_above() -> None:
    assert dynamic_workgroup_bytes(_program(PORTABLE_WORKGROUP_BYTES)) == 0
    assert dynamic_workgroup_bytes(_program(PORTABLE_WORKGROUP_BYTES + 4)) == PORTABLE_WORKGROUP_BYTES + 4
    assert dynamic_workgroup_bytes(_program(100 * KIB)) == workgroup_bytes(_program(100 * KIB)) == 100 * KIB


@pytest.mark.parametrize(("cc", "nbytes", "fits"), [
    ("90", 64 * KIB, True), ("90", 227 * KIB, True), ("80", 100 * KIB, True), ("80", 164 * KIB, False),
    ("86", 99 * KIB, True), ("86", 100 * KIB, False), ("61", 48 * KIB, True), ("61", 48 * KIB + 4, False),
])
def test_the_device_check_uses_the_opt_in_maximum_over_48_kib(cc: str, nbytes: int, fits: bool) -> None:
    limits = DeviceLimits.from_info(_info(cc))
    if fits:
        assert check_workgroup_memory(_program(nbytes), limits) == nbytes
        return
    with pytest.raises(InvalidProgram, match=rf"{nbytes} bytes of workgroup buffers, over the device's "
                                             rf"{OPTIN[cc]} bytes of opt-in \(dynamic\) shared memory.*"
                                             rf"Fix: declare at most {OPTIN[cc]} bytes"):
        check_workgroup_memory(_program(nbytes), limits)


class _Params:
    """A parameter block that keeps the words it was given."""

    ptr = 0x1000

    def write(self, words: tuple[int, ...], stream: Any) -> bool:
        self.words = words
        return True


class _Modules:
    """Module loads without a driver: kernel records, and the opt-ins ``allow_dynamic`` would set."""

    def __init__(self) -> None:
        self.loaded: list[str] = []
        self.opt_ins: list[tuple[int, int]] = []

    def target(self) -> tuple[str, str]:
        return "90", "8.0"

    def load_indexed(self, index: str, entry: str) -> LoadedKernel | None:
        return None

    def load(self, ptx: str, entry: str) -> LoadedKernel:
        self.loaded.append(ptx)
        return LoadedKernel("key", None, None, 0xABC0 + len(self.loaded), False, 1024, 0, entry=entry)

    def remember(self, index: str, kernel: LoadedKernel) -> None:
        pass

    def allow_dynamic(self, kernel: LoadedKernel, nbytes: int) -> LoadedKernel:
        self.opt_ins.append((kernel.ptr, nbytes))
        return replace(kernel, dynamic_bytes=nbytes)


class _Runtime:
    """What ``ProgramCache`` reads of a ``DeviceRuntime``."""

    def __init__(self, cc: str) -> None:
        self.info = _info(cc)
        self.limits = DeviceLimits.from_info(self.info)
        self.lock = threading.RLock()
        self.modules = _Modules()
        self.stream = None

    def check_open(self) -> None:
        pass

    def param_block(self, nwords: int) -> _Params:
        return _Params()


def _cache(cc: str = "90") -> tuple[ProgramCache, _Runtime]:
    rt = _Runtime(cc)
    return ProgramCache(cast("Any", rt)), rt


@pytest.mark.parametrize("nbytes", [64 * KIB, 100 * KIB])
def test_a_program_over_48_kib_opts_in_once_and_every_plan_passes_its_bytes(nbytes: int) -> None:
    cache, rt = _cache()
    prep = cache.prepared(_program(nbytes))
    assert ".extern .shared" in rt.modules.loaded[0]
    assert rt.modules.opt_ins == [(prep.kernel.ptr, nbytes)] and prep.kernel.dynamic_bytes == nbytes
    assert prep.dynamic_bytes == prep.shared_bytes == nbytes == prep.plan.shared_bytes
    plan = cache.plan_for(prep, [_Params()], {"out": 128}, (4, 1, 1))
    assert plan.shared_bytes == nbytes and plan.grid == (4, 1, 1)
    assert cache.for_grid(prep, (1 << 16, 1, 1)) is prep  # never coarsened: the block is not shared


def test_coarsened_variants_opt_in_and_pass_the_bytes_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VYRE_CUDA_COARSEN", "4")
    cache, rt = _cache()
    prep = cache.prepared(_program(64 * KIB))
    coarse = cache.for_grid(prep, (37, 1, 1))
    assert coarse.coarsen == 4 and coarse is not prep
    assert "coarsened x4" in rt.modules.loaded[-1] and ".extern .shared" in rt.modules.loaded[-1]
    assert rt.modules.opt_ins == [(prep.kernel.ptr, 64 * KIB), (coarse.kernel.ptr, 64 * KIB)]
    assert coarse.plan.shared_bytes == 64 * KIB
    assert cache.plan_for(coarse, [_Params()], {"out": 128}, (37, 1, 1)).grid == (10, 1, 1)


def test_a_program_within_48_kib_launches_with_no_dynamic_bytes() -> None:
    cache, rt = _cache()
    prep = cache.prepared(_program(PORTABLE_WORKGROUP_BYTES))
    assert rt.modules.opt_ins == [] and prep.dynamic_bytes == 0 and prep.plan.shared_bytes == 0
    assert cache.plan_for(prep, [_Params()], {"out": 128}, (4, 1, 1)).shared_bytes == 0


def test_a_program_over_the_devices_opt_in_is_refused_before_loading() -> None:
    cache, rt = _cache("86")
    with pytest.raises(InvalidProgram, match=r"over the device's 101376 bytes.*Fix: "):
        cache.prepared(_program(100 * KIB))
    assert rt.modules.loaded == [] and rt.modules.opt_ins == []
