#!/usr/bin/env bash
# Everything that needs a GPU, in one go (see docs/benchmarks.md). Writes logs under $OUT.
#   bash benchmarks/device_check.sh tests|bench|lib|workloads|frontend|fuzz|fuzzc|memcheck|memcheck_all ...
# memcheck_all: the whole GPU suite under memcheck, sharded over every visible GPU (memcheck_shards.py).
# STEP_TIMEOUT (seconds, default 900) bounds each step so one slow step cannot starve the rest.
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# SKIP_INSTALL=1: the package is installed already (e.g. several of these run side by side on several GPUs).
if [ -z "${SKIP_INSTALL:-}" ]; then
  python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/card.txt"
T="timeout ${STEP_TIMEOUT:-900}"
for what in "$@"; do
  start=$(date +%s)
  case "$what" in
    tests)    $T python3 -m pytest -q -m gpu tests/gpu tests/fuzz -p no:cacheprovider >"$OUT/gpu_tests.log" 2>&1
              tail -n 15 "$OUT/gpu_tests.log" ;;
    bench)    $T python3 benchmarks/bench_cuda.py >"$OUT/bench_cuda.log" 2>&1; tail -n 40 "$OUT/bench_cuda.log"
              python3 benchmarks/bench_resident.py >"$OUT/bench_resident.log" 2>&1; tail -n 30 "$OUT/bench_resident.log"
              python3 benchmarks/bench_dispatch.py --json "$OUT/bench_dispatch.json" >"$OUT/bench_dispatch.log" 2>&1
              tail -n 32 "$OUT/bench_dispatch.log" ;;
    fuzz)     $T python3 -m vyre.fuzz --backend cuda --count "${FUZZ_COUNT:-5000}" --seed "${FUZZ_SEED:-20261126}" \
                --input-sets 3 --corpus "$OUT/corpus" >"$OUT/fuzz.log" 2>&1; tail -n 8 "$OUT/fuzz.log" ;;
    fuzzc)    VYRE_CUDA_COARSEN=4 $T python3 -m vyre.fuzz --backend cuda --count "${FUZZ_COUNT:-5000}" \
                --seed "$(( ${FUZZ_SEED:-20261126} + 1 ))" --input-sets 3 --corpus "$OUT/corpus_coarsen" \
                >"$OUT/fuzz_coarsen.log" 2>&1; tail -n 8 "$OUT/fuzz_coarsen.log" ;;
    lib)      $T python3 benchmarks/bench_lib.py --json "$OUT/bench_lib.json" --png "$OUT/lib_bench.png" \
                >"$OUT/bench_lib.log" 2>&1; tail -n 45 "$OUT/bench_lib.log" ;;
    workloads) $T python3 benchmarks/bench_workloads.py --json "$OUT/bench_workloads.json" \
                >"$OUT/bench_workloads.log" 2>&1; tail -n 20 "$OUT/bench_workloads.log" ;;
    frontend) $T python3 benchmarks/bench_frontend.py --json "$OUT/bench_frontend.json" \
                >"$OUT/bench_frontend.log" 2>&1; tail -n 15 "$OUT/bench_frontend.log" ;;
    memcheck) VYRE_CUDA_CONDITIONAL=0 $T compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 86 --print-limit 20 \
                python3 -m pytest -q -m gpu tests/gpu -p no:cacheprovider \
                -k "${MEMCHECK_K:-not fault and not recovery and not test_conditional_gpu}" >"$OUT/memcheck.log" 2>&1
              echo "memcheck exit $?"; grep -E "ERROR SUMMARY|passed|failed" "$OUT/memcheck.log" | tail -n 5 ;;
    memcheck_all) $T python3 benchmarks/memcheck_shards.py --per-gpu "${MEMCHECK_PER_GPU:-2}" --out "$OUT/memcheck" ;;
  esac
  echo "== $what took $(( $(date +%s) - start )) s"
done
