#!/usr/bin/env python3
"""artcheck.py PLAN.json OUTDIR

Checks that the artifacts `gp plan POOL --out OUTDIR` wrote agree with the plan (`gp plan POOL -o json`):
per tenant, the replicas the plan places and their tensor-parallel sizes against
  * vllm/TENANT.yaml: one entry per replica, `--tensor-parallel-size` = `gpuCount` = the plan's size;
  * k8s/TENANT.yaml: the Deployments' `replicas:` add up to the plan's replicas; in each Deployment the
    `--tensor-parallel-size` argument equals the GPUs its pod asks for (`nvidia.com/gpu: "N"`, or the
    `count:` of its DRA ResourceClaimTemplate in dra/TENANT.yaml).
Prints one line per problem and "artifacts agree" or the count of problems.
"""
import json, os, re, sys

plan = json.load(open(sys.argv[1]))
out = sys.argv[2]
want = {}  # tenant -> {replica index: tp size}
for g in plan["gpus"]:
    reps = list(g.get("replicas") or [])
    for inst in g.get("instances") or []:
        reps += inst.get("replicas") or []
    for r in reps:
        tp = (r.get("tensorParallel") or {}).get("size", 1)
        want.setdefault(r["tenant"], {})[r["index"]] = tp
problems = 0
def bad(msg):
    global problems
    problems += 1
    print("PROBLEM", msg)
for t in plan["tenants"]:
    name = t["name"]
    reps = want.get(name, {})
    if not reps:
        continue
    vp = os.path.join(out, "vllm", name + ".yaml")
    if not os.path.exists(vp):
        bad(f"{name}: no {vp}"); continue
    v = open(vp).read()
    entries = re.split(r"\n- args:", v)[1:]
    if len(entries) != len(reps):
        bad(f"{name}: vllm has {len(entries)} replica entries, plan {len(reps)}")
    for e in entries:
        m = re.search(r"--tensor-parallel-size\n\s*- \"?(\d+)", e)
        tp = int(m.group(1)) if m else 1
        gc = re.search(r"gpuCount: (\d+)", e)
        gc = int(gc.group(1)) if gc else 1
        idx = int(re.search(r"\n\s*index: (\d+)", e).group(1))
        if reps.get(idx) != tp or (tp > 1 and gc != tp):
            bad(f"{name}#{idx}: vllm tp {tp} gpuCount {gc}, plan tp {reps.get(idx)}")
    kp = os.path.join(out, "k8s", name + ".yaml")
    docs = [d for d in re.split(r"(?m)^---\s*$", open(kp).read()) if re.search(r"(?m)^kind: Deployment", d)]
    total = 0
    dra = os.path.join(out, "dra", name + ".yaml")
    dratext = open(dra).read() if os.path.exists(dra) else ""
    for d in docs:
        n = int(re.search(r"(?m)^  replicas: (\d+)", d).group(1))
        total += n
        m = re.search(r"--tensor-parallel-size\n\s*- \"?(\d+)", d)
        tp = int(m.group(1)) if m else 1
        g = re.search(r"nvidia.com/gpu: \"?(\d+)", d)
        if g:
            gpus = int(g.group(1))
        else:
            c = re.search(r"resourceClaimTemplateName: (\S+)", d)
            gpus = None
            if c:
                for doc in re.split(r"(?m)^---\s*$", dratext):
                    if re.search(r"name: " + re.escape(c.group(1)) + r"\n", doc):
                        cc = re.search(r"count: (\d+)", doc)
                        gpus = int(cc.group(1)) if cc else 1
        if tp > 1 and gpus != tp:
            bad(f"{name}: Deployment with --tensor-parallel-size {tp} asks for {gpus} GPUs")
        if tp > 1 and tp not in reps.values():
            bad(f"{name}: Deployment tp {tp} not in plan {sorted(set(reps.values()))}")
    if total != len(reps):
        bad(f"{name}: Deployments hold {total} replicas, plan {len(reps)}")
print("artifacts agree" if problems == 0 else f"{problems} problem(s)")
