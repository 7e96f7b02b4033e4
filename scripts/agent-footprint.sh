#!/usr/bin/env bash
# Measures the node agent's footprint: `gpupool agent --fake` on a mock of 8 H100s, every GPU
# re-partitioned once then polled at 1 Hz with 16 engines, /metrics scraped every second, for
# DURATION seconds (default 60). Prints peak and final RSS and the CPU share of one core after
# the first 5 s (the re-partitioning). Needs Linux /proc. The mock stands in for NVML, whose real
# calls cost more than the mock's; the numbers are the agent's own cost.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-60}
export CGO_CFLAGS=${CGO_CFLAGS:-"-O2 -g -Wno-deprecated-declarations"}
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/gpupool" ./cmd/gpupool
{
  printf 'node: footprint\nstateDir: %s/state\nlisten: 127.0.0.1:0\npollInterval: 1s\npolicy: {reconfigCooldown: 1h}\ngpus:\n' "$tmp"
  for i in 0 1 2 3 4 5 6 7; do printf '  - {index: %d, layout: "3g.40gb@0 3g.40gb@4"}\n' "$i"; done
  printf 'engines:\n'
  for i in 0 1 2 3 4 5 6 7; do
    printf '  - {tenant: t%d, gpu: %d, slice: "3g.40gb@0", url: "http://e%d-0/metrics", memoryPlanned: 38000000000, smShare: 0.45}\n' $((i % 5)) "$i" "$i"
    printf '  - {tenant: t%d, gpu: %d, slice: "3g.40gb@4", url: "http://e%d-1/metrics", memoryPlanned: 38000000000, smShare: 0.45}\n' $(((i + 1) % 5)) "$i" "$i"
  done
} > "$tmp/agent.yaml"
"$tmp/gpupool" agent --fake --config "$tmp/agent.yaml" > "$tmp/out" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q 'http://' "$tmp/out" && break; sleep 0.1; done
addr=$(grep -o 'http://[0-9.:]*' "$tmp/out" | head -1)
sleep 5
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
t0=$(ticks); s0=$(date +%s.%N)
for _ in $(seq "$DURATION"); do curl -s "$addr/metrics" > /dev/null || true; sleep 1; done
t1=$(ticks); s1=$(date +%s.%N)
rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status"); hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
done_count=$(grep -c GateDone "$tmp/out" || true)
awk -v t0="$t0" -v t1="$t1" -v s0="$s0" -v s1="$s1" -v hz="$hz" -v rss="$rss" -v hwm="$hwm" -v n="$done_count" -v d="$DURATION" 'BEGIN {
  printf "agent footprint, 8 GPUs, 16 engines, 1 Hz polling, %d s measured (%d GPUs re-partitioned first):\n", d, n
  printf "  RSS now %.1f MB, peak %.1f MB\n", rss / 1024, hwm / 1024
  printf "  CPU %.3f%% of one core (%d ticks in %.1f s)\n", 100 * (t1 - t0) / hz / (s1 - s0), t1 - t0, s1 - s0
}'
