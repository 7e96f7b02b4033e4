#!/usr/bin/env python3
"""fillslot.py PLAN.json TENANT GPU INSTANCE > HAND.json

Moves TENANT's one MIG replica of PLAN into the empty MIG instance INSTANCE (e.g. 1g.20gb@4) of
GPU (node/index) and turns the GPU it left into an idle exclusive GPU when nothing else runs there;
summary.gpusUsed is recounted. For a hand plan beside a re-plan that left freed slots empty.
"""
import json, sys
plan, tenant, gpu, inst = sys.argv[1:5]
p = json.load(open(plan))
prof, start = inst.split("@"); start = int(start)
rep = None
for g in p["gpus"]:
    for i in g.get("instances") or []:
        for r in list(i.get("replicas") or []):
            if r["tenant"] == tenant:
                rep = r; i["replicas"].remove(r); src = g
for g in p["gpus"]:
    if f'{g["node"]}/{g["index"]}' == gpu:
        for i in g["instances"]:
            if i["profile"] == prof and i["start"] == start:
                assert not i.get("replicas"), "instance not empty"
                i["replicas"] = [rep]
if not any(i.get("replicas") for i in src.get("instances") or []):
    for k in ("instances",): src.pop(k, None)
    src.update(role="idle", mode="exclusive", reasons=[{"code": "Idle", "message": "not needed by this plan"}])
for t in p["tenants"]:
    if t["name"] == tenant:
        t["replicas"][0].update(gpu=gpu, instance=inst)
p["summary"]["gpusUsed"] = sum(1 for g in p["gpus"] if g["role"] == "pool")
json.dump(p, sys.stdout, indent=1)
