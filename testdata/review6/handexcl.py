#!/usr/bin/env python3
"""Hand plan: N single-GPU exclusive replicas of the pool's one tenant, built from a planned plan
(JSON) of the same pool whose replicas may be tensor-parallel. vLLM args are copied from the first
replica with the --tensor-parallel-size pair dropped, and --max-num-batched-tokens set if given.
Usage: handexcl.py PLAN.json N [BATCHED_TOKENS] > HAND.json"""
import json, sys
p = json.load(open(sys.argv[1])); n = int(sys.argv[2])
first = next(r for g in p["gpus"] for r in g.get("replicas", []))
args = list(first.get("vllmArgs", []))
if "--tensor-parallel-size" in args:
    i = args.index("--tensor-parallel-size"); del args[i:i + 2]
if len(sys.argv) > 3:
    i = args.index("--max-num-batched-tokens"); args[i + 1] = sys.argv[3]
tn = first["tenant"]; reps = []
for k, g in enumerate(p["gpus"]):
    g.pop("replicas", None)
    if k < n:
        g["role"] = "pool"; g["mode"] = "exclusive"
        g["replicas"] = [{"tenant": tn, "index": k, "vllmArgs": args}]
        reps.append({"index": k, "gpu": f'{g["node"]}/{g["index"]}', "slice": "exclusive"})
    else:
        g["role"] = "idle"
p["tenants"][0]["replicas"] = reps
p["summary"]["gpusUsed"] = n
p["summary"]["lowerBound"] = min(p["summary"]["lowerBound"], n)
json.dump(p, sys.stdout)
