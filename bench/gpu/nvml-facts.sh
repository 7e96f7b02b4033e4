#!/usr/bin/env bash
# read-only facts about the accelerator
set -u
cd "$(dirname "$0")"
O=${OUT:-/tmp/out}; mkdir -p "$O"
${NVMLDUMP:-./nvmldump/nvmldump} > "$O/nvml.json" 2> "$O/nvml.err"; echo "nvmldump rc=$?"
nvidia-smi > "$O/smi.txt" 2>&1
nvidia-smi -q > "$O/smi-q.txt" 2>&1
nvidia-smi --query-gpu=name,pci.device_id,memory.total,power.limit,power.default_limit,power.max_limit,clocks.max.sm,clocks.max.mem,mig.mode.current,compute_mode,driver_version --format=csv > "$O/query.csv" 2>&1
nvidia-smi mig -lgip > "$O/lgip.txt" 2>&1; echo "lgip rc=$?"
nvidia-smi mig -lgipp > "$O/lgipp.txt" 2>&1; echo "lgipp rc=$?"
{ for t in python3 go nvcc nvidia-cuda-mps-control vllm docker; do printf '%s: ' $t; command -v $t || echo none; done
  python3 -c 'import torch;print("torch",torch.__version__, torch.cuda.get_device_properties(0))' 2>&1 | tail -1
  python3 -c 'import vllm;print("vllm",vllm.__version__)' 2>&1 | tail -1
  nproc; free -g | head -2; cat /etc/os-release | head -2; } > "$O/tools.txt" 2>&1
cat "$O/query.csv" "$O/tools.txt"; head -c 3000 "$O/lgip.txt"
