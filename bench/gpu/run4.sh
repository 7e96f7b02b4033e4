#!/usr/bin/env bash
# Four identical llama-7b tenants sharing one GPU, busy at once: time-slicing and MPS 25% each.
# Same worker and settings as run.sh; leaves GPU settings as found.
set -u
cd "$(dirname "$0")"
O=${OUT:-/tmp/gpupool-bench}; mkdir -p "$O"; R="$O/results4.jsonl"
PY=${PY:-python3}
start_in() { python3 -c "import time;print(time.time()+$1)"; }
W="--model llama-7b --batch 32 --ctx 512 --prefill-batch 8 --prefill-seq 512 --seconds 5"
echo "== time-slicing, 4 processes"
S=$(start_in 20); pids=()
for i in a b c d; do timeout 60 $PY worker.py $W --start "$S" --label ts4-$i --out "$R" & pids+=($!); done
wait "${pids[@]}"
echo "== MPS 25% x 4"
export CUDA_MPS_PIPE_DIRECTORY=$(mktemp -d) CUDA_MPS_LOG_DIRECTORY=$(mktemp -d)
if nvidia-cuda-mps-control -d; then
  S=$(start_in 20); pids=()
  for i in a b c d; do CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25 timeout 60 $PY worker.py $W --start "$S" --label mps4-25-$i --out "$R" & pids+=($!); done
  wait "${pids[@]}"
  echo quit | nvidia-cuda-mps-control
fi
cat "$R"
