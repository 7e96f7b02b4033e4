#!/usr/bin/env python3
"""Draw review 13's pools: boards, models and loads the earlier reviews used little.

usage: gen13.py OUTDIR [MULTI] [SINGLE] [SEED] [HOT]  (defaults 60 15 13 0). Writes OUTDIR/mNNN.yaml
(1-12 tenants), OUTDIR/sNNN.yaml (one tenant) and OUTDIR/hNNN.yaml (one tenant at the top decade
of its rate law, no replica bounds, no RTX PRO 5000: pools where k is more than one, for bar 2).
Deterministic for a given SEED.

What it draws: boards H200, B200, B300, GH200, H20, H100 NVL, H100 PCIe, A100 PCIe 80GB and the
RTX PRO 6000/5000 (the catalog has no L40S, A10G or L4); fleets of 1-16 GPUs on 1-3 nodes; catalog
models from 0.5B to 72B (and mixtral-8x7b), bf16/fp8/int8/int4-awq; concurrency 1-256 or unset;
0.02-30 req/s (scaled down for large models); fixed, uniform and exponential lengths; poisson,
constant, bursty and diurnal patterns; TTFT+TPOT, e2e-only and tight-TPOT SLOs; the three tiers on
1-3 trust paths; redundancy, lowFrequency, replicas / minReplicas / maxReplicas; both device paths.
"""
import os
import random
import sys

import yaml

BOARDS = ["H200-141GB", "B200-180GB", "B300-269GB", "GH200-144GB", "H20-96GB", "H100-NVL-94GB",
          "H100-PCIe-80GB", "A100-PCIe-80GB", "RTX-PRO-6000-Blackwell-96GB",
          "RTX-PRO-5000-Blackwell-48GB"]
# model, rough bf16 size class (drives the rate law), native max context
MODELS = [("qwen2.5-0.5b", 0), ("qwen2.5-1.5b", 0), ("llama-3.2-1b", 0), ("llama-3.2-3b", 0),
          ("qwen2.5-3b", 0), ("qwen2.5-7b", 1), ("llama-3.1-8b", 1), ("mistral-7b-v0.3", 1),
          ("llama-2-7b", 1), ("llama-2-13b", 2), ("qwen2.5-14b", 2), ("qwen2.5-32b", 3),
          ("mixtral-8x7b", 3), ("llama-3.1-70b", 4), ("qwen2.5-72b", 4)]
MAXRPS = {0: 30, 1: 12, 2: 6, 3: 3, 4: 1.5}


def logu(r, lo, hi):
    return round(lo * (hi / lo) ** r.random(), 3)


def tenant(r, i, paths, ampere):
    model, cls = r.choice(MODELS)
    quants = ["bf16", "bf16", "fp8", "int4-awq", "int8"]
    if ampere:
        quants = ["bf16", "bf16", "int4-awq", "int8"]
    q = r.choice(quants)
    if model == "llama-2-7b" or model == "llama-2-13b":
        ctx_max = 4096
    else:
        ctx_max = 8192
    inp = r.choice([64, 200, 500, 1000, 2000, 3000])
    out = r.choice([16, 50, 128, 256, 512])
    if inp + out > ctx_max - 200:
        inp = ctx_max // 2
    rps = logu(r, 0.02, MAXRPS[cls])
    t = {"name": f"t{i}", "path": r.choice(paths), "isolation": r.choice(["hard", "soft", "shared", "shared"]),
         "model": {"name": model, "quantization": q}}
    if r.random() < 0.7:
        t["concurrency"] = r.choice([1, 1, 2, 4, 8, 16, 32, 64, 128, 256])
    tr = {"rps": rps, "inputTokens": inp, "outputTokens": out}
    pat = r.choice(["poisson", "poisson", "constant", "bursty", "diurnal"])
    if pat != "poisson":
        tr["pattern"] = pat
    ln = r.choice(["fixed", "fixed", "uniform", "exponential"])
    if ln != "fixed":
        tr["lengths"] = ln
    t["traffic"] = tr
    kind = r.random()
    if kind < 0.25:  # e2e only
        t["slo"] = {"e2eP99": f"{r.choice([5, 10, 20, 30, 60])}s"}
    elif kind < 0.45:  # tight TPOT
        t["slo"] = {"ttftP99": f"{r.choice([500, 1000, 2000])}ms", "tpotP99": f"{r.choice([12, 15, 20, 25])}ms"}
    else:
        t["slo"] = {"ttftP99": f"{r.choice([300, 800, 1500, 3000, 5000])}ms", "tpotP99": f"{r.choice([30, 45, 60, 100])}ms"}
    b = r.random()
    if b < 0.1:
        t["replicas"] = r.choice([1, 2, 3])
    elif b < 0.2:
        t["minReplicas"] = r.choice([2, 3])
    elif b < 0.3:
        t["maxReplicas"] = r.choice([1, 2, 4])
    elif b < 0.35:
        t["minReplicas"], t["maxReplicas"] = 2, 4
    if r.random() < 0.12 and "replicas" not in t:
        t["redundancy"] = True
    if rps <= 0.1 and r.random() < 0.5 and t["isolation"] == "shared":
        t["lowFrequency"] = True
    return t


def hot(r, t):
    model, cls = next((m, c) for m, c in MODELS if m == t["model"]["name"])
    t["traffic"]["rps"] = logu(r, MAXRPS[cls] / 10, MAXRPS[cls])
    t["traffic"].pop("pattern", None)
    for k in ("replicas", "minReplicas", "maxReplicas", "redundancy", "lowFrequency"):
        t.pop(k, None)
    return t


def pool(r, name, ntenants, single):
    nnodes = 1 if single else r.choice([1, 1, 2, 3])
    total = r.randint(1, 16) if not single else r.choice([1, 2, 4, 8, 8, 16])
    nodes = []
    left = total
    for n in range(nnodes):
        c = left if n == nnodes - 1 else max(1, left // (nnodes - n))
        if c <= 0:
            break
        left -= c
        nodes.append({"name": f"n{n}", "gpus": [{"board": r.choice(BOARDS), "count": c}]})
    ampere = any(g["board"].startswith("A100") for nd in nodes for g in nd["gpus"])
    paths = [f"team{j}/svc" for j in range(r.randint(1, 3))]
    pol = {"kubernetesDeviceAPI": r.choice(["deviceplugin", "dra"])}
    if r.random() < 0.8:
        pol["burstPoolPercent"] = 0
    p = {"apiVersion": "gpupool.dev/v1", "kind": "Pool", "metadata": {"name": f"r13-{name}"},
         "fleet": {"nodes": nodes}, "policy": pol,
         "tenants": [tenant(r, i, paths, ampere) for i in range(ntenants)]}
    return p


def main():
    outdir = sys.argv[1]
    nmulti = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    nsingle = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 13
    r = random.Random(seed)
    os.makedirs(outdir, exist_ok=True)
    for i in range(nmulti):
        name = f"m{i:03d}"
        yaml.safe_dump(pool(r, name, r.randint(1, 12), False), open(os.path.join(outdir, name + ".yaml"), "w"),
                       sort_keys=False)
    for i in range(nsingle):
        name = f"s{i:03d}"
        yaml.safe_dump(pool(r, name, 1, True), open(os.path.join(outdir, name + ".yaml"), "w"), sort_keys=False)
    nhot = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    for i in range(nhot):
        name = f"h{i:03d}"
        p = pool(r, name, 1, True)
        for nd in p["fleet"]["nodes"]:
            for g in nd["gpus"]:
                if g["board"] == "RTX-PRO-5000-Blackwell-48GB":
                    g["board"] = "H200-141GB"
        hot(r, p["tenants"][0])
        yaml.safe_dump(p, open(os.path.join(outdir, name + ".yaml"), "w"), sort_keys=False)


main()
