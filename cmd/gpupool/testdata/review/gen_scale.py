#!/usr/bin/env python3
"""Writes a varied pool of N tenants on G GPUs (8 per node, mixed boards) for timing gpupool plan."""
import random, sys
n, g, seed = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
r = random.Random(seed)
import os
boards = os.environ.get("BOARDS", "H100,H200,A100-SXM4-80GB,H100-NVL-94GB,B200-180GB,A100-SXM4-40GB").split(",")
models = [("qwen2.5-0.5b", "bf16"), ("qwen2.5-1.5b", "bf16"), ("llama-3.2-1b", "bf16"), ("llama-3.2-3b", "bf16"),
          ("llama-3.1-8b", "bf16"), ("qwen2.5-7b", "fp8"), ("mistral-7b-v0.3", "bf16"), ("qwen2.5-14b", "fp8"),
          ("llama-2-13b", "fp8"), ("qwen2.5-32b", "fp8"), ("llama-3.1-70b", "fp8"), ("qwen2.5-72b", "int4-awq")]
L = ["apiVersion: gpupool.dev/v1", "kind: Pool", f"metadata: {{name: scale-{n}-{g}}}", "fleet:", "  nodes:"]
for i in range(g // 8):
    L += [f"  - name: node-{i}", f"    gpus: [{{board: {boards[(i * 7) % len(boards)] if r.random() < 0.9 else r.choice(boards)}, count: 8}}]"]
L += ["policy:", "  burstPoolPercent: 5", "  maxUnavailable: 5%", "tenants:"]
for t in range(n):
    m, q = r.choice(models)
    iso = r.choice(["hard", "soft", "soft", "shared"])
    rps = round(min(20, max(0.05, float(os.environ.get("RSCALE", "1")) * r.lognormvariate(0, 1.2))), 3)
    L += [f"- name: t{t}", f"  path: org-{r.randint(0, 9)}/team-{r.randint(0, 4)}", f"  isolation: {iso}",
          f"  weight: {r.choice([1, 2, 4, 0.5])}", f"  model: {{name: {m}, quantization: {q}}}",
          f"  concurrency: {r.choice([1, 4, 8, 16, 32, 64])}",
          f"  traffic: {{rps: {rps}, inputTokens: {r.choice([200, 500, 1000, 2000])}, outputTokens: {r.choice([64, 128, 256, 512])}}}",
          f"  slo: {r.choice(['{ttftP99: 2s, tpotP99: 80ms}', '{ttftP99: 5s}', '{e2eP99: 60s}', '{ttftP99: 1s, tpotP99: 60ms}'])}"]
    if iso == "shared" and rps < 0.2: L.append("  lowFrequency: true")
open(os.environ.get("OUT", f"scale-{n}-{g}.yaml"), "w").write("\n".join(L) + "\n")
