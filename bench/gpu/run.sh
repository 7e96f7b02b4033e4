#!/usr/bin/env bash
# Measures, on one real GPU: calibration (bandwidth, GEMM, prefill/decode step times), an MPS
# active-thread-percentage sweep (MuxServe's experiment), and two tenants sharing the GPU by
# time-slicing and by MPS. Read-only with respect to GPU settings: MIG and compute mode are left
# as they are; the MPS control daemon runs in a private pipe directory and is stopped at the end.
set -u
cd "$(dirname "$0")"
O=${OUT:-/tmp/gpupool-bench}; mkdir -p "$O"; R="$O/results.jsonl"
PY=${PY:-python3}
echo "== calibrate"; timeout 150 $PY calibrate.py "$R" || echo "calibrate failed rc=$?"
start_in() { python3 -c "import time;print(time.time()+$1)"; }
W="--model llama-7b --batch 32 --ctx 512 --prefill-batch 8 --prefill-seq 512 --seconds 5"

echo "== alone"
timeout 40 $PY worker.py $W --start "$(start_in 12)" --label alone --out "$R" || echo "alone failed"
echo "== time-slicing, 2 processes"
S=$(start_in 15)
timeout 45 $PY worker.py $W --start "$S" --label ts2-a --out "$R" & p1=$!
timeout 45 $PY worker.py $W --start "$S" --label ts2-b --out "$R" & p2=$!
wait $p1 $p2

echo "== MPS"
export CUDA_MPS_PIPE_DIRECTORY=$(mktemp -d) CUDA_MPS_LOG_DIRECTORY=$(mktemp -d)
if nvidia-cuda-mps-control -d; then
  for pct in 30 50 70 100; do
    CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$pct timeout 40 $PY worker.py $W --start "$(start_in 12)" --label "mps-alone-$pct" --out "$R" || echo "mps $pct failed"
  done
  S=$(start_in 15)
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 timeout 45 $PY worker.py $W --start "$S" --label mps2-50-a --out "$R" & p1=$!
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 timeout 45 $PY worker.py $W --start "$S" --label mps2-50-b --out "$R" & p2=$!
  wait $p1 $p2
  S=$(start_in 15)
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100 timeout 45 $PY worker.py $W --start "$S" --label mps2-100-a --out "$R" & p1=$!
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100 timeout 45 $PY worker.py $W --start "$S" --label mps2-100-b --out "$R" & p2=$!
  wait $p1 $p2
  echo quit | nvidia-cuda-mps-control
  cp "$CUDA_MPS_LOG_DIRECTORY"/*.log "$O/" 2>/dev/null
else
  echo "mps control daemon did not start"
fi
echo "== done"; cat "$R"
