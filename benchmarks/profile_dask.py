"""Where a ``vyre.dask.map_blocks`` block's worker time goes, on oracle workers (no GPU needed) or GPU workers.

``python benchmarks/profile_dask.py [--blocks 200] [--block 1024] [--reps 5] [--profile] [--json PATH]
[--backend reference|cuda]``

On ``vyre.dask.local_cluster(2, backend="reference")`` (``--backend cuda``: one worker per GPU) with x
and y placed by ``vdask.persist``,
each repetition runs, results persisted on the workers (medians printed, each rep's values after):

- ``numpy``: ``dask.array.map_blocks(np.bitwise_xor, x, y)``, the floor of Dask's own per-task cost;
- ``vyre``: ``vdask.map_blocks(xor, x, y)``; on the workers, the task function (``BlockRun``:
  program lookup, backend lookup, inputs, the dispatch) and the dispatch inside it, in wall time
  (which includes waiting for the backend while the worker's other thread dispatches) and in
  thread CPU time; vyre's own per-task Python is the task function less the dispatch;
- the CPU time of the worker processes (everything: threads, event loop, (de)serialisation) and
  of this process (the client and, in a ``LocalCluster``, the scheduler) while each run lasts;
- in this process, the same dispatches and numpy calls, their results dropped or kept.

Worker time per block = wall seconds x workers / blocks. On a machine shared with other work the
wall-clock rows move with its load; the CPU rows much less. ``--profile`` prints the workers'
cProfile of the task function (its two threads interleave in one profile).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_scale import block_arrays, ms_per_block, values, xor_program  # noqa: E402
from vyre.ir import Program  # noqa: E402


def renamed(program: Program, name: str) -> Program:
    """``program`` under another name: other Dask keys, so no repetition reuses another's results."""
    return Program(program.buffers, program.workgroup_size, program.body, name=name)


def _instrument(backend_id: str = "reference") -> None:
    """Wrap this worker's task function and the backend's dispatch with timers (and a profiler)."""
    import cProfile

    import vyre.dask as vdask

    state = vdask.__dict__.setdefault("_prof_state", {"task": 0.0, "dispatch": 0.0, "task_cpu": 0.0,
                                                      "dispatch_cpu": 0.0, "n": 0,
                                                      "profile": cProfile.Profile(), "on": False,
                                                      "lock": threading.Lock(),
                                                      "profiling": threading.Lock()})
    if "_prof_orig" in vdask.__dict__:
        return
    runs = getattr(vdask, "BlockRun", None)  # the task's callable (older versions: the function _run_block)
    original = vdask.__dict__["_prof_orig"] = runs.__call__ if runs is not None else vdask.__dict__["_run_block"]
    backend = vdask.worker_backend(backend_id)

    class Timed:
        """The worker's backend with its ``dispatch`` timed."""

        def __getattr__(self, name: str):
            return getattr(backend, name)

        def dispatch(self, *args, **kwargs):
            began, cpu = time.perf_counter(), time.thread_time()
            try:
                return backend.dispatch(*args, **kwargs)
            finally:
                _count(state, dispatch=time.perf_counter() - began, dispatch_cpu=time.thread_time() - cpu)

    vdask._backends[""] = vdask._backends[backend_id] = Timed()  # map_blocks' backend=None is ""

    def timed_task(*args, **kwargs):
        began, cpu = time.perf_counter(), time.thread_time()
        try:
            if state["on"] and state["profiling"].acquire(blocking=False):  # one thread at a time (3.12+)
                try:
                    return state["profile"].runcall(original, *args, **kwargs)
                finally:
                    state["profiling"].release()
            return original(*args, **kwargs)
        finally:
            _count(state, task=time.perf_counter() - began, task_cpu=time.thread_time() - cpu, n=1)

    if runs is not None:
        runs.__call__ = timed_task
    else:
        vdask.__dict__["_run_block"] = timed_task


def _count(state: dict, **amounts: float) -> None:
    """Add to the worker's timers (its two threads both add)."""
    with state["lock"]:
        for key, amount in amounts.items():
            state[key] += amount


def _take(profile: bool = False) -> dict:
    """This worker's timers since the last call (and reset them)."""
    import vyre.dask as vdask

    state = vdask.__dict__["_prof_state"]
    with state["lock"]:
        out = {k: state[k] for k in ("task", "dispatch", "task_cpu", "dispatch_cpu", "n")}
        out["cpu"] = time.process_time()  # the whole worker process: its threads, its event loop
        state.update(task=0.0, dispatch=0.0, task_cpu=0.0, dispatch_cpu=0.0, n=0, on=profile)
    return out


def _stats(sort: str = "cumulative") -> str:
    import io
    import pstats

    import vyre.dask as vdask

    state = vdask.__dict__["_prof_state"]
    buf = io.StringIO()
    pstats.Stats(state["profile"], stream=buf).sort_stats(sort).print_stats(25)
    return buf.getvalue()


def _task_bytes(array) -> int:
    """Pickled bytes of the task of ``array``'s first block (what the scheduler sends a worker for it)."""
    import pickle

    return len(pickle.dumps(dict(array.__dask_graph__())[array.__dask_keys__()[0]]))


def measure(blocks: int, block: int, reps: int, workers: int, profile: bool = False,
            backend_id: str = "reference") -> dict:
    """Medians (ms of worker time per block) of every row the module docstring lists, with each rep's values."""
    import dask.array as da
    from distributed import Client, wait

    import vyre
    import vyre.dask as vdask

    n = blocks * block
    a, b = values(0, n, 4), values(0, n, 5)
    program = xor_program()
    backend = vyre.acquire(backend_id)
    rows: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        rows.setdefault(name, []).append(value)

    cluster = vdask.local_cluster(workers, backend=backend_id)
    try:
        with Client(cluster) as client:
            client.run(_instrument, backend_id)
            x, y = vdask.persist(da.from_array(a, chunks=block), da.from_array(b, chunks=block))
            wait(vdask.map_blocks(program, y, x).persist())  # warm: modules, programs
            wait(da.map_blocks(np.bitwise_xor, y, x, dtype=np.uint32).persist())
            held = {*x.__dask_keys__(), *y.__dask_keys__()}
            ab, bb = block_arrays(blocks, block, 4), block_arrays(blocks, block, 5)  # as a worker holds them
            ms_per_block(lambda k: backend.dispatch(program, [ab[k], bb[k]])[0], blocks, False)  # warm, as x, y are
            for rep in range(reps):
                for kind in ("numpy", "vyre"):
                    timed = (da.map_blocks(np.bitwise_xor, x, y, dtype=np.uint32, token=f"np-{rep}") if kind == "numpy"
                             else vdask.map_blocks(renamed(program, f"xor_{rep}"), x, y))
                    add(f"tasks_per_block_{kind}", sum(k not in held for k in dict(timed.__dask_graph__())) / blocks)
                    add(f"task_bytes_{kind}", _task_bytes(timed))
                    cpu = client.run(_take, profile and kind == "vyre" and rep == reps - 1)
                    here = time.process_time()  # this process: the client and, in a LocalCluster, the scheduler
                    began = time.perf_counter()
                    result = timed.persist()
                    add(f"submit_{kind}", (time.perf_counter() - began) * workers / blocks * 1e3)
                    wait(result)
                    add(kind, (time.perf_counter() - began) * workers / blocks * 1e3)
                    add(f"scheduler_cpu_{kind}", (time.process_time() - here) / blocks * 1e3)
                    taken = client.run(_take)
                    add(f"worker_cpu_{kind}", sum(t["cpu"] - cpu[w]["cpu"] for w, t in taken.items()) / blocks * 1e3)
                    if kind == "vyre":
                        assert sum(t["n"] for t in taken.values()) == blocks, taken
                        task = sum(t["task"] for t in taken.values()) / blocks * 1e3
                        dispatch = sum(t["dispatch"] for t in taken.values()) / blocks * 1e3
                        add("task", task)
                        add("dispatch", dispatch)
                        add("task_cpu", sum(t["task_cpu"] for t in taken.values()) / blocks * 1e3)
                        add("dispatch_cpu", sum(t["dispatch_cpu"] for t in taken.values()) / blocks * 1e3)
                        add("own_cpu", rows["task_cpu"][-1] - rows["dispatch_cpu"][-1])
                        add("worker_dask_cpu_vyre", rows["worker_cpu_vyre"][-1] - rows["task_cpu"][-1])
                        add("own", task - dispatch)
                        add("around", rows["vyre"][-1] - task)
                        add("around_minus_numpy", rows["vyre"][-1] - task - rows["numpy"][-1])
                        assert np.array_equal(result.compute(), a ^ b)
                    del result
                for keep in (False, True):
                    name = "_kept" if keep else ""
                    add(f"direct{name}", ms_per_block(lambda k: backend.dispatch(program, [ab[k], bb[k]])[0],
                                                     blocks, keep))
                    add(f"numpy_direct{name}", ms_per_block(lambda k: np.bitwise_xor(ab[k], bb[k]), blocks, keep))
            where = set(client.run(lambda: vdask.__file__).values())
            stats = client.run(_stats) if profile else {}
    finally:
        cluster.close()
    return {"backend": backend_id, "workers": workers, "blocks": blocks, "block": block, "reps": reps,
            "worker_vyre": sorted(where),
            "median": {k: statistics.median(v) for k, v in rows.items()}, "all": rows, "profiles": stats}


def report(result: dict) -> None:
    med, rows = result["median"], result["all"]

    def line(label: str, key: str) -> None:
        print(f"  {label:<52} {med[key]:8.3f}   ({' '.join(f'{v:.2f}' for v in rows[key])})")

    print(f"{result['workers']} {result['backend']} workers ({', '.join(result['worker_vyre'])}), "
          f"{result['blocks']} blocks of "
          f"{result['block']} u32, {result['reps']} reps; medians, ms of worker time per block (each rep's value):")
    line("numpy map_blocks (Dask's own floor)", "numpy")
    line("vyre map_blocks", "vyre")
    line("  task function on the worker", "task")
    line("    the dispatch in it", "dispatch")
    line("    vyre's own per-task Python (task - dispatch)", "own")
    line("  Dask around the task (vyre - task)", "around")
    line("  ... minus the numpy floor, paired per rep", "around_minus_numpy")
    print("  CPU time (less sensitive to other load on the machine), ms per block:")
    line("worker processes, numpy map_blocks", "worker_cpu_numpy")
    line("worker processes, vyre map_blocks", "worker_cpu_vyre")
    line("  task function (thread CPU)", "task_cpu")
    line("    the dispatch in it", "dispatch_cpu")
    line("    vyre's own per-task Python", "own_cpu")
    line("  the workers' Dask part (worker CPU - task CPU)", "worker_dask_cpu_vyre")
    line("client + scheduler process, numpy", "scheduler_cpu_numpy")
    line("client + scheduler process, vyre", "scheduler_cpu_vyre")
    line("persist() in the client, numpy", "submit_numpy")
    line("persist() in the client, vyre", "submit_vyre")
    line("same dispatches in this process, results dropped", "direct")
    line("same dispatches in this process, results kept", "direct_kept")
    line("numpy xor in this process, results dropped", "numpy_direct")
    line("numpy xor in this process, results kept", "numpy_direct_kept")
    print(f"  tasks per block: numpy {med['tasks_per_block_numpy']:.2f}, vyre {med['tasks_per_block_vyre']:.2f}; "
          f"pickled task bytes: numpy {med['task_bytes_numpy']:.0f}, vyre {med['task_bytes_vyre']:.0f}")
    for worker, text in result["profiles"].items():
        print(f"---- cProfile of the task function on {worker}\n{text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=200)
    parser.add_argument("--block", type=int, default=1 << 10, help="elements per block")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="print the workers' cProfile of the task function")
    parser.add_argument("--json", help="also write the result here")
    parser.add_argument("--backend", default="reference", choices=("reference", "cuda"),
                        help="the workers' backend (cuda: one worker per visible GPU, at most --workers)")
    args = parser.parse_args()
    result = measure(args.blocks, args.block, args.reps, args.workers, args.profile, args.backend)
    report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
