#!/usr/bin/env python3
"""Builds a hand plan (JSON) from a planned plan of the same pool and a layout spec.
spec: JSON {"node/index": [[profile, start, sharing, [tenants]], ...] | {"exclusive": tenant}, ...}
GPUs not named are idle. vLLM args of each tenant are copied from the planned plan's first
replica of that tenant (max-model-len etc.); the simulator sizes the rest.
Usage: mkhand.py PLANNED.json SPEC.json > HAND.json"""
import json, sys
p = json.load(open(sys.argv[1])); spec = json.load(open(sys.argv[2]))
args = {}
for g in p["gpus"]:
    for r in g.get("replicas", []) + [r for i in g.get("instances", []) for r in i.get("replicas", [])]:
        a = [x for x in r.get("vllmArgs", [])]
        if "--tensor-parallel-size" in a:
            i = a.index("--tensor-parallel-size"); del a[i:i + 2]
        args.setdefault(r["tenant"], a)
nextidx = {}; treps = {}
def rep(t, gpu, inst, sl, extra=None):
    i = nextidx.get(t, 0); nextidx[t] = i + 1
    r = {"tenant": t, "index": i, "vllmArgs": args.get(t, [])}
    if extra: r.update(extra)
    e = {"index": i, "gpu": gpu, "slice": sl}
    if inst: e["instance"] = inst
    treps.setdefault(t, []).append(e)
    return r
used = 0
for g in p["gpus"]:
    key = f'{g["node"]}/{g["index"]}'
    for f in ("replicas", "instances"): g.pop(f, None)
    s = spec.get(key)
    if not s:
        g["role"] = "idle"; g["mode"] = "exclusive"; continue
    used += 1; g["role"] = "pool"
    if isinstance(s, dict) and "exclusive" in s:
        g["mode"] = "exclusive"; g["replicas"] = [rep(s["exclusive"], key, None, "exclusive")]
    elif isinstance(s, dict) and "timeslice" in s:
        g["mode"] = "timeslice"; g["replicas"] = [rep(t, key, None, "timeslice", {"limits": {"timeSliceReplicas": 1}}) for t in s["timeslice"]]
    else:
        g["mode"] = "mig"; g["instances"] = []
        for prof, start, sharing, ts in s:
            inst = {"profile": prof, "start": start}
            sl = "mig"
            if sharing != "none":
                inst["sharing"] = {"mode": sharing}; sl = "mig+" + sharing
            extra = {"limits": {"timeSliceReplicas": 1}} if sharing == "timeslice" else None
            inst["replicas"] = [rep(t, key, f"{prof}@{start}", sl, extra) for t in ts]
            g["instances"].append(inst)
for t in p["tenants"]:
    t["replicas"] = treps.get(t["name"], [])
    t.pop("infeasible", None)
p["summary"]["gpusUsed"] = used
p["summary"]["lowerBound"] = min(p["summary"]["lowerBound"], used)
json.dump(p, sys.stdout)
