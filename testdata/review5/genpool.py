#!/usr/bin/env python3
"""Writes a random Pool (1-3 nodes of one or two boards, 3-10 tenants of varied models, isolation,
traffic and SLOs) to stdout: python3 testdata/review5/genpool.py SEED [dra]. With "dra" the pool
sets policy.kubernetesDeviceAPI: dra. Seeds 1-8 were planned, cross-checked and applied (README.md)."""
import random, sys, yaml
seed = int(sys.argv[1]); dra = len(sys.argv) > 2
r = random.Random(seed)
boards = ["A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB", "H200-141GB", "B200-180GB", "H100-NVL-94GB", "A30-24GB"]
nodes = []
for i in range(r.randint(1, 3)):
    gs = [{"board": b, "count": r.choice([1, 2, 4, 8])} for b in r.sample(boards, r.choice([1, 1, 2]))]
    nodes.append({"name": f"n{i}", "gpus": gs})
models = [("llama-3.2-1b", "bf16"), ("llama-3.2-3b", "bf16"), ("llama-3.1-8b", "bf16"), ("llama-3.1-8b", "fp8"), ("mistral-7b-v0.3", "bf16"), ("llama-2-13b", "fp8"), ("llama-3.1-70b", "fp8"), ("llama-3.1-70b", "bf16"), ("mixtral-8x7b", "bf16")]
tenants = []
for j in range(r.randint(3, 10)):
    m, q = r.choice(models)
    iso = r.choice(["hard", "soft", "soft", "shared"])
    t = {"name": f"t{j}", "path": r.choice(["a", "b", "c"]) + ("/x" if iso != "shared" else ""), "isolation": iso,
         "model": {"name": m, "quantization": q}, "maxContext": r.choice([2048, 4096, 8192]),
         "traffic": {"rps": r.choice([0.05, 0.2, 0.5, 1, 3]), "inputTokens": r.choice([200, 500, 1000]), "outputTokens": r.choice([100, 200])}}
    if r.random() < 0.3: t["model"]["kvCacheDtype"] = "fp8"
    if iso == "shared" and r.random() < 0.7:
        t["lowFrequency"] = True; t["slo"] = {"e2eP99": "30s"}
    else:
        t["slo"] = {"ttftP99": r.choice(["1s", "2s", "4s"]), "tpotP99": r.choice(["50ms", "80ms", "120ms"])}
    tenants.append(t)
pol = {"burstPoolPercent": 0, "allowedModes": ["exclusive", "mig", "mps", "timeslice"]}
if dra: pol["kubernetesDeviceAPI"] = "dra"
print(yaml.safe_dump({"apiVersion": "gpupool.dev/v1", "kind": "Pool", "metadata": {"name": f"r5-rand{seed}{'-dra' if dra else ''}"}, "fleet": {"nodes": nodes}, "policy": pol, "tenants": tenants}, sort_keys=False))
