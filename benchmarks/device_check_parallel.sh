#!/usr/bin/env bash
# Every device check at once on a machine of 4 or more GPUs, each job pinned to its GPUs so the
# benchmarks share their card with nothing (see docs/benchmarks.md). Logs and results: $OUT/all.tgz.
#   GPU 0: bench_lib.py, bench_workloads.py, then the multi-GPU tests (all GPUs, at the end)
#   GPU 1: the GPU suite, then the fuzzer with coarsening off (FUZZ_COUNT programs x 3 input sets)
#   GPU 2: the fuzzer with coarsening on
#   GPUs 1-3: the whole GPU suite under compute-sanitizer memcheck (memcheck_shards.py)
# DEADLINE (seconds, default 450) bounds the memcheck run; its unfinished tests are listed.
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 SKIP_INSTALL=1 FUZZ_COUNT=${FUZZ_COUNT:-3000}
DEADLINE=${DEADLINE:-450}
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
start=$(date +%s)
CUDA_VISIBLE_DEVICES=1,2,3 python3 benchmarks/memcheck_shards.py --per-gpu "${MEMCHECK_PER_GPU:-3}" \
  --out "$OUT/memcheck" --timeout "$DEADLINE" >"$OUT/memcheck.txt" 2>&1 &
(CUDA_VISIBLE_DEVICES=1 STEP_TIMEOUT=$DEADLINE OUT=$OUT/suite bash benchmarks/device_check.sh tests fuzz) \
  >"$OUT/suite.txt" 2>&1 &
(CUDA_VISIBLE_DEVICES=2 STEP_TIMEOUT=$DEADLINE OUT=$OUT/coarsen bash benchmarks/device_check.sh fuzzc) \
  >"$OUT/coarsen.txt" 2>&1 &
(export CUDA_VISIBLE_DEVICES=0
 timeout "$DEADLINE" python3 benchmarks/bench_lib.py --json "$OUT/bench_lib.json" --png "$OUT/lib_bench.png"
 timeout "$DEADLINE" python3 benchmarks/bench_workloads.py --json "$OUT/bench_workloads.json" \
   --png "$OUT/workloads.png") >"$OUT/bench.txt" 2>&1 &
wait
timeout 120 python3 -m pytest -q -m gpu tests/gpu/test_multi_gpu.py -p no:cacheprovider >"$OUT/multi_gpu.txt" 2>&1
echo "== all took $(( $(date +%s) - start )) s"
for f in suite coarsen memcheck multi_gpu; do echo "-- $f"; tail -n 12 "$OUT/$f.txt"; done
echo "-- bench"; grep -E "^\| 2\^28|^(bfs|connected)|^# |workload=" "$OUT/bench.txt" | head -60
tar czf "$OUT/all.tgz" -C "$OUT" --exclude all.tgz . 2>/dev/null
