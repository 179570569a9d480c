"""The GPU suite under compute-sanitizer memcheck, split over every visible GPU so it fits a time budget.

    python3 benchmarks/memcheck_shards.py [--per-gpu 2] [--out DIR] [-k EXPR] [--timeout S] [--ids FILE]

Collects the ``gpu`` tests of ``tests/gpu`` and ``tests/fuzz``, deals them round-robin into
``GPUs x per-gpu`` shards and runs each shard as its own ``compute-sanitizer --tool memcheck
python3 -m pytest`` process pinned to one GPU (``CUDA_VISIBLE_DEVICES``). Each shard's log is
``DIR/memcheck_<i>.log``; the summary prints each shard's pytest line and ERROR SUMMARY. Exit 0
only when every shard passed with 0 errors. The default ``-k`` leaves out the tests that fault
the device on purpose (their faults are the point: memcheck reports them as errors).

Conditional graph nodes: memcheck faults WHILE-node loops when several sanitized processes share a
GPU, plain CUDA C programs included (``docs/resident.md``), so the shards run with
``VYRE_CUDA_CONDITIONAL=0`` and the conditional-loop tests (``test_conditional_gpu``) run
afterwards in one sanitized process of their own, with conditional loops on.

``--timeout S`` stops shards still running after S seconds and writes the tests they had not
finished to ``DIR/memcheck_left.txt``; ``--ids FILE`` runs only the test ids listed in FILE (such a
list), so a run cut short can be finished in a later call.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

# Left out: the tests that fault the device on purpose.
DEFAULT_K = "not fault and not recovery"
SOLO = "test_conditional_gpu"  # tests that run alone on a GPU, after the shards (see the docstring)
PATHS = ["tests/gpu", "tests/fuzz"]
OUTCOME = r" (PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR)"  # after a test id in pytest -v output


def visible_gpus() -> list[str]:
    """The GPUs to shard over: ``CUDA_VISIBLE_DEVICES`` when set, else every GPU ``nvidia-smi`` lists."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        return [g.strip() for g in visible.split(",") if g.strip()]
    done = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                          text=True, check=True)
    return done.stdout.split()


def collect(k: str) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "gpu", "-k", k,
                           "-p", "no:cacheprovider", *PATHS], capture_output=True, text=True, check=False)
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    if not ids:
        raise SystemExit(f"no tests collected:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return ids


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-gpu", type=int, default=2, help="shards per GPU (memcheck is CPU-heavy)")
    parser.add_argument("--out", default=os.environ.get("OUT", "."), help="where the shard logs go")
    parser.add_argument("-k", default=DEFAULT_K, help="pytest -k expression of the tests to run")
    parser.add_argument("--timeout", type=float, default=None, help="seconds before unfinished shards are stopped")
    parser.add_argument("--ids", help="a file of test ids to run instead of collecting")
    args = parser.parse_args()
    devices = visible_gpus()
    gpus = len(devices)
    ids = Path(args.ids).read_text().split() if args.ids else collect(args.k)
    solo = [t for t in ids if SOLO in t]
    shared = [t for t in ids if SOLO not in t]
    shards = [shared[i::gpus * args.per_gpu] for i in range(min(len(shared), gpus * args.per_gpu))]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"{len(ids)} tests in {len(shards)} shards on {gpus} GPU(s)" + (f", then {len(solo)} alone" if solo else ""),
          flush=True)
    start = time.time()
    rounds = [(shards, "0"), ([solo], "1")] if solo else [(shards, "0")]
    failed, left, first = 0, [], 0
    for round_shards, conditional in rounds:
        f, lf = run_round(round_shards, first, devices, conditional, out, args.timeout, start)
        failed, left, first = failed + f, left + lf, first + len(round_shards)
    if left:
        (out / "memcheck_left.txt").write_text("\n".join(left) + "\n")
        print(f"{len(left)} tests unfinished: {out / 'memcheck_left.txt'} (rerun with --ids)")
    print(f"{len(ids)} tests, {first} shards, {failed} failed, {time.time() - start:.0f} s")
    return 1 if failed or left else 0


def run_round(shards: list[list[str]], first: int, devices: list[str], conditional: str, out: Path,
              timeout: float | None, start: float) -> tuple[int, list[str]]:
    """Run ``shards`` side by side (shard ``first + i`` on GPU ``i % len(devices)``) under memcheck,
    with ``VYRE_CUDA_CONDITIONAL=conditional``; returns (failed shards, unfinished test ids)."""
    gpus, procs = len(devices), []
    for i, shard in enumerate(shards):
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": devices[i % gpus], "VYRE_CUDA_CONDITIONAL": conditional}
        log = open(out / f"memcheck_{first + i}.log", "w")  # noqa: SIM115 - closed after the process ends
        cmd = ["compute-sanitizer", "--tool", "memcheck", "--report-api-errors", "no", "--error-exitcode", "86",
               "--print-limit", "20", sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", *shard]
        procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                       start_new_session=True), log))
    failed, left = 0, []
    for i, (proc, log) in enumerate(procs):
        try:
            code = proc.wait(None if timeout is None else max(1.0, timeout - (time.time() - start)))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the sanitizer and the pytest process it started
            code = proc.wait()
        log.close()
        text = (out / f"memcheck_{first + i}.log").read_text(errors="replace")
        unfinished = [t for t in shards[i] if not re.search(re.escape(t) + OUTCOME, text)]
        if unfinished and code == -signal.SIGKILL:
            left += unfinished
            print(f"shard {first + i}: stopped at the time limit with {len(unfinished)} tests unfinished", flush=True)
            continue
        summary = re.findall(r"ERROR SUMMARY: .*", text)
        outcome = re.findall(r"^=* ?\d+ (?:passed|failed|skipped|deselected).*$", text, re.M)
        print(f"shard {first + i} (GPU {devices[i % gpus]}, conditional {conditional}): exit {code}; "
              f"{outcome[-1] if outcome else 'no pytest summary'}; {summary[-1] if summary else 'no ERROR SUMMARY'}",
              flush=True)
        failed += code != 0
    return failed, left


if __name__ == "__main__":
    sys.exit(main())
