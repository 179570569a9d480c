"""ModuleCache on a real device: memory hits, disk cubin hits in a fresh process, failing PTX."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path

import numpy as np
import pytest

from vyre.driver.errors import KernelCompileFailed
from vyre_cuda.testing import DiskCache, ModuleCache, module_key, probe

cupy = pytest.importorskip("cupy")
if not cupy.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]

ADD_ONE = """
.version 8.0
.target sm_80
.address_size 64
// {nonce}
.visible .entry add_one(.param .u64 p_out, .param .u64 p_in, .param .u32 p_n)
{{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [p_out];
    ld.param.u64 %rd2, [p_in];
    ld.param.u32 %r1, [p_n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd4, %rd5;
    ld.global.u32 %r6, [%rd6];
    {op} %r7, %r6, 1;
    add.s64 %rd7, %rd3, %rd5;
    st.global.u32 [%rd7], %r7;
DONE:
    ret;
}}
"""


def add_one_ptx(op: str = "add.u32") -> str:
    """A fresh PTX (a nonce in a comment gives it its own cache key)."""
    return ADD_ONE.format(nonce=uuid.uuid4().hex, op=op)


def run_add_one(function: object, n: int = 1000) -> None:
    rng = np.random.default_rng(7)
    host = rng.integers(0, 2**32 - 1, n, dtype=np.uint32)
    src = cupy.asarray(host)
    out = cupy.full(n, 0xDEADBEEF, dtype=cupy.uint32)  # poisoned: an unwritten element shows
    function(((n + 127) // 128,), (128,), (out, src, np.uint32(n)))
    assert np.array_equal(cupy.asnumpy(out), host + np.uint32(1))


@pytest.fixture
def device():
    return probe()


def test_memory_hit_returns_the_loaded_kernel(device, tmp_path: Path) -> None:
    cache = ModuleCache(device, DiskCache(tmp_path))
    ptx = add_one_ptx()
    first = cache.load(ptx, "add_one")
    assert first.ptr == first.function.ptr != 0 and first.key == module_key(ptx, device)
    assert not first.cubin_cached
    assert cache.load(ptx, "add_one") is first
    run_add_one(first.function)
    counters = cache.counters()
    assert (counters["cuda_module_cache_entries"], counters["cuda_module_cache_hits"],
            counters["cuda_module_cache_misses"], counters["cuda_disk_cache_misses"]) == (1, 1, 1, 1)
    assert DiskCache(tmp_path).get(first.key, ".cubin") is not None  # linked and stored for the next process


def test_concurrent_first_use_loads_once(device, tmp_path: Path) -> None:
    cache = ModuleCache(device, DiskCache(tmp_path))
    ptx, start, results = add_one_ptx(), threading.Barrier(8), []

    def load() -> None:
        start.wait()
        results.append(cache.load(ptx, "add_one"))

    threads = [threading.Thread(target=load) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8 and all(r is results[0] for r in results)
    assert cache.counters()["cuda_module_cache_misses"] == 1


FIRST_LAUNCH = """
    import json, sys, time
    t0 = time.perf_counter()
    import cupy, numpy as np
    from vyre_cuda.testing import DiskCache
    from vyre_cuda.testing import probe
    from vyre_cuda.testing import ModuleCache
    ptx = open(sys.argv[1]).read()
    device = probe()
    cupy.cuda.runtime.free(cupy.cuda.runtime.malloc(1))  # context up: time the load, not driver start-up
    t1 = time.perf_counter()
    cache = ModuleCache(device, DiskCache(sys.argv[2]))
    kernel = cache.load(ptx, "add_one")
    out = cupy.zeros(1, dtype=cupy.uint32)
    kernel.function((1,), (1,), (out, out, np.uint32(1)))
    cupy.cuda.runtime.deviceSynchronize()
    t2 = time.perf_counter()
    print(json.dumps({"cubin_cached": kernel.cubin_cached, "load_launch_ms": (t2 - t1) * 1e3,
                      "process_ms": (t2 - t0) * 1e3, "value": int(out.get()[0]), **cache.counters()}))
"""


def first_launch(ptx_file: Path, cache_dir: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_CACHE_DISABLE": "1"}  # no driver JIT cache: real cold cost
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(FIRST_LAUNCH), str(ptx_file), str(cache_dir)],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_disk_cubin_hit_in_a_fresh_process(tmp_path: Path) -> None:
    ptx_file = tmp_path / "add_one.ptx"
    ptx_file.write_text(add_one_ptx())
    cold = first_launch(ptx_file, tmp_path / "cache")
    warm = first_launch(ptx_file, tmp_path / "cache")
    assert (cold["cubin_cached"], cold["cuda_disk_cache_misses"], cold["value"]) == (False, 1, 1)
    assert (warm["cubin_cached"], warm["cuda_disk_cache_hits"], warm["value"]) == (True, 1, 1)
    print(f"\ntime to first launch (load + launch + sync, {probe().name}): cold JIT {cold['load_launch_ms']:.2f} ms, "
          f"disk cubin hit {warm['load_launch_ms']:.2f} ms; whole process {cold['process_ms']:.0f} ms -> "
          f"{warm['process_ms']:.0f} ms")


def test_bad_ptx_is_kernel_compile_failed_with_ptxas_text_and_a_dump(device, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VYRE_PTX_DUMP_DIR", str(tmp_path / "dump"))
    cache = ModuleCache(device, DiskCache(tmp_path / "cache"))
    bad = add_one_ptx(op="xorr.b32")
    with pytest.raises(KernelCompileFailed) as caught:
        cache.load(bad, "add_one")
    message = str(caught.value)
    assert "Fix:" in message and "CUDA_ERROR" in message
    if shutil.which("ptxas"):
        assert "Not a name of any known instruction: 'xorr'" in message
    dumps = sorted((tmp_path / "dump").iterdir())
    assert [p.suffix for p in dumps] == [".log", ".ptx"] and dumps[1].read_text() == bad
    assert cache.counters()["cuda_module_cache_entries"] == 0
    assert DiskCache(tmp_path / "cache").get(module_key(bad, device), ".cubin") is None
    run_add_one(cache.load(add_one_ptx(), "add_one").function)  # the cache is still usable


def test_missing_entry_is_kernel_compile_failed(device, tmp_path: Path) -> None:
    cache = ModuleCache(device, DiskCache(tmp_path))
    with pytest.raises(KernelCompileFailed, match="no_such_kernel"):
        cache.load(add_one_ptx(), "no_such_kernel")


def test_a_cubin_the_driver_refuses_falls_back_to_the_ptx(device, tmp_path: Path) -> None:
    disk = DiskCache(tmp_path)
    ptx = add_one_ptx()
    disk.put(module_key(ptx, device), b"checksummed, but not a cubin", ".cubin")
    kernel = ModuleCache(device, disk).load(ptx, "add_one")
    assert not kernel.cubin_cached
    run_add_one(kernel.function)
    assert disk.get(kernel.key, ".cubin") != b"checksummed, but not a cubin"


def test_without_a_disk_cache_modules_still_load(device) -> None:
    kernel = ModuleCache(device, None).load(add_one_ptx(), "add_one")
    run_add_one(kernel.function)


WARM_PROGRAM = """
import hashlib, json, sys
import numpy as np
import vyre
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
U32 = DataType.U32
i = Expr.var("i")
salt = int(sys.argv[1])
p = Program([BufferDecl.read("a", 0, U32), BufferDecl.read_write("c", 1, U32)], (64, 1, 1),
            [Node.let("i", Expr.invocation_id(0)),
             Node.store("c", i, Expr.bitxor(Expr.load("a", i), Expr.u32(salt)))], name="warm_index")
a = np.random.default_rng(salt).integers(0, 2**32, 1000, dtype=np.uint32)
be = vyre.acquire("cuda")
out = be.dispatch(p, [a, np.full(1000, 0xDEADBEEF, np.uint32)])[0]
prep = be.prepared(p)
emitted = prep.emitted is not None
print(json.dumps({"ok": bool((out == (a ^ np.uint32(salt))).all()), "emitted": emitted,
                  "ptx": hashlib.sha256(prep.ptx.encode()).hexdigest(), "index_hits": be.metrics()["cuda_index_hits"],
                  "disk_hits": be.metrics()["cuda_disk_cache_hits"]}))
"""


def _warm_run(cache: Path, salt: int) -> dict:
    env = {**os.environ, "VYRE_CUDA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", WARM_PROGRAM, str(salt)], capture_output=True, text=True, env=env,
                          timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_warm_process_finds_the_cubin_through_the_program_index_without_emitting(tmp_path: Path) -> None:
    cold = _warm_run(tmp_path, 7)
    assert cold == {**cold, "ok": True, "emitted": True, "index_hits": 0}
    warm = _warm_run(tmp_path, 7)
    assert warm == {**warm, "ok": True, "emitted": False, "index_hits": 1, "disk_hits": 1}
    assert warm["ptx"] == cold["ptx"]  # the same PTX, emitted when asked for
    other = _warm_run(tmp_path, 8)  # another program: its own index entry, so emitted and right
    assert other == {**other, "ok": True, "emitted": True, "index_hits": 0}
