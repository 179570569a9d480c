"""The single-pass (Onesweep-style) radix sort against the segmented one, kernel by kernel, on one GPU.

On a GPU machine, one call: ``python3 benchmarks/sort_probe.py [--sizes 24 28] [--reps 10]``. For
each size 2^k of random u32 keys (``ResidentArray``s, results handed back with ``lib.recycle``):

1. correctness: ``lib.sort``, ``lib.argsort``, ``lib.sort(keys, values)`` and ``lib.sort`` of
   ``keys & 255`` (contended digit counters) of both plans against ``cupy.sort`` /
   ``cupy.argsort`` (a small size first, so a hang would show early);
2. per-kernel times of both plans, each captured step timed alone (``--reps`` launches in one
   sequence; a step of the single-pass plan with the look-back state it needs zeroed before each
   launch, that reset's own time taken off);
3. whole-call times of both plans for each of those calls, next to ``cupy.sort``,
   ``cupy.argsort``, torch's sort and a copy of the keys (1 GiB at 2^28);

and prints one compact table per size. With ``ptxas`` on the path it first prints each new
kernel's registers and shared memory (``ptxas -v``, sm_90).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from bench_lib import wall_ms  # noqa: E402

import vyre  # noqa: E402
from vyre import lib  # noqa: E402
from vyre.driver.config import DispatchConfig  # noqa: E402
from vyre.ir import BufferDecl, DataType, Expr, Node, Program  # noqa: E402
from vyre.lib._sort import onesweep as K  # noqa: E402
from vyre.lib._sort import topology as topo  # noqa: E402
from vyre.lib._sort.tiles import RADIX_PASSES  # noqa: E402
from vyre.lib.blocks import WG  # noqa: E402
from vyre.lib.plan import Plan, ceil_div  # noqa: E402

Step = tuple[Program, list[Any], DispatchConfig]


def ptxas_report() -> None:
    """Registers and shared memory of the single-pass sort's kernels (f32 keys: the largest)."""
    from vyre_cuda import emit_ptx

    if not any((Path(d) / "ptxas").exists() for d in os.environ.get("PATH", "").split(os.pathsep)):
        print("ptxas not on PATH: no register report")
        return
    f32 = DataType.F32
    programs = {"onesweep keys (pass 0)": K.radix_onesweep(0, f32, None, "none", K.ONESWEEP_ITEMS, 0, 1),
                "onesweep keys (pass 1)": K.radix_onesweep(8, None, None, "none", K.ONESWEEP_ITEMS, 0, 1),
                "onesweep pairs (pass 1)": K.radix_onesweep(8, None, None, "load", K.ONESWEEP_VALUE_ITEMS, 0, 1),
                "histograms": K.radix_histograms(f32, K.HISTOGRAM_ITEMS, 0, 1),
                "digit starts": K.radix_digit_starts()}
    with tempfile.TemporaryDirectory() as tmp:
        for name, program in programs.items():
            ptx = Path(tmp) / "k.ptx"
            ptx.write_text(emit_ptx(program, "90"))
            done = subprocess.run(["ptxas", "--gpu-name", "sm_90", "-v", str(ptx), "-o", str(Path(tmp) / "k.o")],
                                  capture_output=True, text=True)
            found = re.findall(r"Used \d+ registers|\d+ bytes smem|\d+ bytes spill stores", done.stderr)
            print(f"  {name:24s} {'; '.join(found) if done.returncode == 0 else done.stderr[-300:]}")


def captured_steps(call: Callable[[], object]) -> list[Step]:
    """The steps of the last plan ``call`` runs."""
    seen: list[list[Step]] = []
    run = Plan.run

    def spy(self: Plan, reads: Any = ()) -> list[np.ndarray]:
        seen.append(list(self.steps))
        return run(self, reads)

    Plan.run = spy
    try:
        call()
    finally:
        Plan.run = run
    return seen[-1]


def reset_step(backend: Any, lookback: Any, pairs: Any, region: int) -> Step:
    """Zero the pass counters of ``lookback`` (not the digit starts) and both regions of the
    look-back's ``pairs`` (``region`` u64 words each); its last handle (the size) is the caller's
    to free."""
    i = Expr.invocation_id(0)
    words = Expr.load("size", Expr.u32(0))
    body = [Node.if_(Expr.lt(i, Expr.u32(RADIX_PASSES)), Node.store("lookback", i, Expr.u32(0))),
            Node.if_(Expr.lt(i, words), Node.store("pairs", i, Expr.u32(0)))]
    buffers = [BufferDecl.read_write("lookback", 0, DataType.U32), BufferDecl.read_write("pairs", 1, DataType.U32),
               BufferDecl.uniform("size", 2, DataType.U32, 1)]
    program = Program(buffers, (WG, 1, 1), body, name="probe_reset")
    size = backend.allocate_resident(4)
    backend.upload_resident(size, np.array([4 * region], np.uint32))  # two regions of u64 words, as u32 words
    return program, [lookback, pairs, size], DispatchConfig(grid=(ceil_div(4 * region, WG), 1, 1))


def step_times(backend: Any, steps: list[Step], reps: int) -> list[tuple[str, int, float]]:
    """(program, grid, ms) of each step alone: ``reps`` launches in one sequence over ``reps``."""
    def timed(sequence: list[Step]) -> float:
        backend.dispatch_sequence(sequence)
        t0 = time.perf_counter()
        backend.dispatch_sequence(sequence)
        return (time.perf_counter() - t0) * 1e3 / reps

    out = []
    reset = None
    for program, handles, config in steps:
        step = (program, handles, config)
        if program.name.startswith("lib_radix_onesweep"):  # one workgroup per tile: 256 words per two tiles
            reset = reset or reset_step(backend, handles[1], handles[2], ceil_div(config.grid[0], 2) * topo.RADIX)
            ms = timed([reset, step] * reps) - timed([reset] * reps)
        else:
            ms = timed([step] * reps)
        out.append((program.name, config.grid[0], ms))
    if reset is not None:
        backend.free_resident(reset[1][2])
    return out


def by_kind(times: list[tuple[str, int, float]]) -> dict[str, float]:
    """Step times summed by program name without its pass (``lib_radix_onesweep_8`` -> ``lib_radix_onesweep``)."""
    kinds: dict[str, float] = {}
    for name, _, ms in times:
        kind = re.sub(r"_\d+$", "", name)
        kinds[kind] = kinds.get(kind, 0.0) + ms
    return kinds


def probe(backend: Any, log2: int, reps: int) -> None:
    import cupy as cp

    n = 1 << log2
    cp.random.seed(log2)
    x = cp.random.randint(0, 2**32, n, dtype=cp.uint64).astype(cp.uint32)
    vals = cp.arange(n, dtype=cp.uint32)[::-1].copy()  # value of key i: n - 1 - i
    low = x & 255  # one busy digit in the first pass, one digit only in the others: contended counters
    handles = [backend.allocate_resident(n * 4) for _ in range(3)]
    for handle, array in zip(handles, (x, vals, low)):
        backend.upload_resident(handle, array)
    rx, rv, rlow = (lib.ResidentArray(handle, np.uint32, n) for handle in handles)
    want, order, want_low = cp.sort(x), cp.argsort(x), cp.sort(low)

    def got(result: Any) -> Any:
        return backend.view(result.handle, np.uint32)[:n]

    # name -> (call, is its result right, time its steps too)
    calls: dict[str, tuple[Callable[[], Any], Callable[[Any], bool], bool]] = {
        "sort": (lambda: lib.sort(rx, backend=backend), lambda out: cp.array_equal(got(out), want), True),
        "argsort": (lambda: lib.argsort(rx, backend=backend),  # stable, like cupy's
                    lambda out: cp.array_equal(got(out), order) and cp.array_equal(x[got(out)], want), True),
        "sort pairs": (lambda: lib.sort(rx, rv, backend=backend),
                       lambda out: cp.array_equal(got(out[0]), want) and cp.array_equal(x[n - 1 - got(out[1])], want),
                       False),
        "sort x & 255": (lambda: lib.sort(rlow, backend=backend), lambda out: cp.array_equal(got(out), want_low),
                         False),
    }
    rows: dict[tuple[str, str], dict[str, str]] = {}  # (call, row) -> plan -> ms
    for plan_name, limit in (("segmented", 0), ("onesweep", topo.ONESWEEP_LIMIT)):
        topo.ONESWEEP_LIMIT, saved = limit, topo.ONESWEEP_LIMIT
        try:
            for name, (call, right, by_step) in calls.items():
                out = call()
                ok = bool(right(out))
                lib.recycle(*(out if isinstance(out, tuple) else (out,)), backend=backend)
                print(f"2^{log2} {plan_name:9s} {name:10s} correct={ok}", flush=True)

                def timed_call(call: Callable[[], Any] = call) -> None:
                    result = call()
                    lib.recycle(*(result if isinstance(result, tuple) else (result,)), backend=backend)

                rows.setdefault((name, f"lib.{name} (whole call)"), {})[plan_name] = f"{wall_ms(timed_call, reps):.3f}"
                if not by_step:
                    continue
                steps = captured_steps(timed_call)
                for kind, ms in by_kind(step_times(backend, steps, reps)).items():
                    rows.setdefault((name, f"  {kind}"), {})[plan_name] = f"{ms:.3f}"
        finally:
            topo.ONESWEEP_LIMIT = saved
    others = {"cupy.sort": lambda: cp.sort(x), "cupy.argsort": lambda: cp.argsort(x),
              f"copy {n * 4 >> 20} MiB": lambda: x.copy()}
    try:
        import torch

        tx = torch.as_tensor(x.view(cp.int32), device="cuda")
        others["torch.sort (int32)"] = lambda: torch.sort(tx)
    except ImportError:
        pass
    for name, call in others.items():
        rows[("~", name)] = {"other": f"{wall_ms(call, reps):.3f}"}
    for handle in handles:
        backend.free_resident(handle)
    print(f"\n2^{log2} u32 keys, ms ({reps} reps; steps timed alone)")
    print(f"| {'what':44s} | segmented | onesweep | other |\n|---|---|---|---|")
    for (_, what), cols in sorted(rows.items(), key=lambda row: row[0][0]):  # stable: steps stay in order
        print(f"| {what:44s} | {cols.get('segmented', ''):9s} | {cols.get('onesweep', ''):8s} | "
              f"{cols.get('other', ''):5s} |")
    print(flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[24, 28], help="log2 of the key counts")
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    backend = vyre.acquire("cuda")
    print(f"device: {backend.device_profile().get('name', '?')}")
    ptxas_report()
    probe(backend, 16, 2)  # small first: a look-back that hangs or gives up shows here
    for log2 in args.sizes:
        probe(backend, log2, args.reps)


if __name__ == "__main__":
    main()
