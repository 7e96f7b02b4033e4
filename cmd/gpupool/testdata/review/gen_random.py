#!/usr/bin/env python3
"""Writes random-ish Pool files for checking plan/render/simulate (seeded, reproducible)."""
import random, sys, os
out = sys.argv[1]; n = int(sys.argv[2]); seed0 = int(sys.argv[3]) if len(sys.argv) > 3 else 100
bigfleet = len(sys.argv) > 4 and sys.argv[4] == "big"
NMIN, NMAX, COUNTS = (3, 6, [8]) if bigfleet else (1, 3, [2, 4, 8])
boards = ["H100", "H200", "A100-SXM4-80GB", "A100-SXM4-40GB", "H100-NVL-94GB", "B200-180GB", "A30-24GB", "H100-PCIe-80GB"]
small = ["qwen2.5-0.5b", "qwen2.5-1.5b", "llama-3.2-1b", "llama-3.2-3b", "qwen2.5-3b"]
mid = ["llama-3.1-8b", "qwen2.5-7b", "mistral-7b-v0.3", "llama-2-7b", "qwen2.5-14b", "llama-2-13b"]
big = ["llama-3.1-70b", "qwen2.5-72b", "llama-2-70b", "qwen2.5-32b", "mixtral-8x7b"]
for k in range(n):
    r = random.Random(seed0 + k)
    nodes = []
    for i in range(r.randint(NMIN, NMAX)):
        b = r.choice(boards)
        nodes.append((f"node-{i}", b, r.choice(COUNTS)))
    dra = r.random() < 0.4
    modes = r.choice([None, ["exclusive", "mig"], ["exclusive", "mig", "mps"], ["mig", "mps", "timeslice"]])
    L = [f"apiVersion: gpupool.dev/v1", "kind: Pool", f"metadata: {{name: rnd-{seed0+k}}}", "fleet:", "  nodes:"]
    for name, b, c in nodes:
        L += [f"  - name: {name}", f"    gpus: [{{board: {b}, count: {c}}}]"]
    L += ["policy:", f"  burstPoolPercent: {r.choice([0, 0, 10])}", f"  maxUnavailable: {r.choice([1, 2, '25%'])}"]
    if modes: L.append(f"  allowedModes: [{', '.join(modes)}]")
    if dra: L.append("  kubernetesDeviceAPI: dra")
    L.append("tenants:")
    for t in range(r.randint(4, 14)):
        u = r.random()
        if u < 0.2:
            m = r.choice(big); q = r.choice(["bf16", "fp8", "fp8", "int4-awq"])
        elif u < 0.6:
            m = r.choice(mid); q = r.choice(["bf16", "bf16", "fp8"])
        else:
            m = r.choice(small); q = "bf16"
        iso = r.choice(["hard", "soft", "soft", "shared"])
        if modes and iso == "hard" and not ({"exclusive", "mig"} & set(modes)): iso = "soft"
        if modes == ["mig", "mps", "timeslice"] and iso == "hard": pass
        rps = round(r.choice([0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20]) * r.uniform(0.7, 1.3), 3)
        rps = min(max(rps, 0.05), 20)
        inp = r.choice([128, 300, 700, 1500, 3000]); outp = r.choice([50, 150, 300, 600])
        conc = r.choice([1, 1, 2, 4, 8, 16, 32, 64])
        slo = r.choice([
            f"{{ttftP99: {r.choice(['500ms','1s','2s','5s'])}, tpotP99: {r.choice(['40ms','60ms','100ms'])}}}",
            f"{{ttftP99: {r.choice(['800ms','3s'])}}}",
            f"{{e2eP99: {r.choice(['20s','60s'])}}}",
            f"{{tpotP99: {r.choice(['50ms','80ms'])}, e2eP99: 90s}}",
        ])
        path = r.choice(["org-a/team-1", "org-a/team-2", "org-b/x"])
        L += [f"- name: t{t}-{m.replace('.', '-')}", f"  path: {path}", f"  isolation: {iso}",
              f"  weight: {r.choice([1, 2, 0.5, 4])}",
              f"  model: {{name: {m}, quantization: {q}" + (", kvCacheDtype: fp8}" if q == "fp8" and r.random() < 0.5 else "}"),
              f"  concurrency: {conc}",
              f"  traffic: {{rps: {rps}, inputTokens: {inp}, outputTokens: {outp}, pattern: {r.choice(['poisson','poisson','bursty','constant'])}}}",
              f"  slo: {slo}"]
        if iso == "shared" and rps <= 0.2 and r.random() < 0.6: L.append("  lowFrequency: true")
        x = r.random()
        if x < 0.1 and not os.environ.get("NOFIXED"): L.append(f"  replicas: {r.randint(1, 3)}")
        elif x < 0.2: L.append(f"  minReplicas: {r.randint(1, 3)}")
        elif x < 0.3: L.append(f"  maxReplicas: {r.randint(2, 6)}")
        if r.random() < 0.1: L.append("  redundancy: true")
        if r.random() < 0.2: L.append(f"  energyClass: {r.choice(['performance','efficiency'])}")
    open(os.path.join(out, f"rnd-{seed0+k}.yaml"), "w").write("\n".join(L) + "\n")
