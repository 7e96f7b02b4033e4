#!/usr/bin/env python3
"""genscale.py TENANTS GPUS SEED [fixed] > POOL.yaml

A synthetic pool for timing the planner: GPUS GPUs in nodes of 8 (H100, A100-SXM4-80GB, H200,
B200 in turn; the last node takes the remainder), TENANTS tenants drawn with random.Random(SEED):
catalog models from 0.5B to 72B (bf16, fp8 for some), prompts 100-8,000 tokens, outputs 20-800,
fixed/uniform/exponential lengths, concurrency unset or 1-256, TTFT 300 ms-5 s, TPOT 25-150 ms or
an e2e SLO only, hard/soft/shared tiers in 40 trust paths, low-frequency tenants, some with
redundancy, minReplicas/maxReplicas or a fixed count, three energy classes. Rates are scaled so
that the load is about half the fleet. With `fixed` every tenant's lengths are `fixed` (the same
draws otherwise).
"""
import random, sys
n, g, seed = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
allfixed = len(sys.argv) > 4 and sys.argv[4] == "fixed"
r = random.Random(seed)
boards = ["H100", "A100-SXM4-80GB", "H200", "B200"]
models = [("qwen2.5-0.5b", 1), ("qwen2.5-1.5b", 2), ("llama-3.2-1b", 2), ("llama-3.2-3b", 3), ("qwen2.5-3b", 3),
          ("llama-3.1-8b", 6), ("qwen2.5-7b", 6), ("mistral-7b-v0.3", 4), ("qwen2.5-14b", 3),
          ("qwen2.5-32b", 2), ("mixtral-8x7b", 1), ("llama-3.1-70b", 1), ("qwen2.5-72b", 1)]
names = [m for m, w in models for _ in range(w)]
out = [f"apiVersion: gpupool.dev/v1\nkind: Pool\nmetadata:\n  name: scale-{n}-{g}-{seed}\nfleet:\n  nodes:\n"]
left, i = g, 0
while left > 0:
    c = min(8, left)
    out.append(f"  - name: node-{i:05d}\n    gpus:\n    - {{board: {boards[i % len(boards)]}, count: {c}}}\n")
    left -= c; i += 1
out.append("policy:\n  burstPoolPercent: 5\ntenants:\n")
budget = g * 0.5  # rough GPU-equivalents of load
for k in range(n):
    m = r.choice(names)
    big = m in ("llama-3.1-70b", "qwen2.5-72b", "mixtral-8x7b", "qwen2.5-32b")
    iso = r.choices(["hard", "soft", "shared"], [2, 5, 3])[0]
    low = iso == "shared" and r.random() < 0.3
    inp = r.choice([100, 300, 600, 1000, 2000, 4000, 8000])
    outp = r.choice([20, 80, 150, 300, 800])
    rps = round(r.choice([0.02, 0.1, 0.3, 0.8, 2, 5]) * (0.3 if big else 1) * (0.1 if low else 1), 3)
    lines = [f"- name: t{k:05d}", f"  path: org{k % 40}/team", f"  isolation: {iso}",
             f"  model: {{name: {m}" + (", quantization: fp8}" if big and r.random() < 0.5 else "}")]
    if inp + outp > 8192:
        lines.append(f"  maxContext: {inp + outp}")
    if r.random() < 0.3:
        lines.append(f"  concurrency: {r.choice([1, 4, 16, 64, 256])}")
    lw = r.choice(['fixed', 'uniform', 'exponential'])
    lines.append(f"  traffic: {{rps: {rps}, inputTokens: {inp}, outputTokens: {outp}, lengths: {'fixed' if allfixed else lw}}}")
    if r.random() < 0.15:
        lines.append(f"  slo: {{e2eP99: {r.choice([30, 60, 120])}s}}")
    else:
        ttft = r.choice([300, 800, 1500, 3000, 5000]) + (inp // 4 if inp > 2000 else 0)
        lines.append(f"  slo: {{ttftP99: {ttft}ms, tpotP99: {r.choice([25, 40, 60, 100, 150])}ms}}")
    x = r.random()
    if x < 0.05:
        lines.append(f"  replicas: {r.choice([1, 2])}")
    elif x < 0.12:
        lines.append(f"  minReplicas: 2\n  maxReplicas: {r.choice([2, 4, 8])}")
    elif x < 0.2:
        lines.append("  redundancy: true")
    if low:
        lines.append("  lowFrequency: true")
    if r.random() < 0.2:
        lines.append(f"  energyClass: {r.choice(['performance', 'efficiency'])}")
    out.append("\n".join(lines) + "\n")
sys.stdout.write("".join(out))
