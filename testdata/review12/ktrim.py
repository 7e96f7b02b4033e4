#!/usr/bin/env python3
"""k on the planner's own slices: drop a single-tenant plan's highest-indexed replicas.

usage: ktrim.py POOL DURATION SEED... (from the repository root, after
`go build -o gp ./cmd/gpupool`). Plans the pool, then for N = 1..planned-1 keeps the replicas with
index < N (the pool gets `replicas: N` so that the plan matches it), simulates every seed and
prints the p99s; k is the fewest N whose every seed meets every p99 SLO; when the planned count
itself misses at some seed, k is above it and the script says so (exit 1).
"""
import json, os, subprocess, sys, tempfile

import yaml

sys.path.insert(0, os.path.dirname(__file__))
from slocheck_lib import dur_ms  # noqa: E402


def trim(plan, name, n):
    p = json.loads(json.dumps(plan))
    keep = lambda reps: [r for r in reps if not (r["tenant"] == name and r["index"] >= n)]
    for g in p["gpus"]:
        if "replicas" in g:
            g["replicas"] = keep(g["replicas"])
        for inst in g.get("instances", []):
            if "replicas" in inst:
                inst["replicas"] = keep(inst["replicas"])
    used = 0
    for g in p["gpus"]:
        if g.get("replicas") or any(inst.get("replicas") for inst in g.get("instances", [])):
            used += 1
        elif g["role"] == "pool":  # emptied: idle, as the planner writes an unused GPU
            g.update(role="idle", mode="exclusive", reasons=[{"code": "Idle", "message": "not needed by this plan"}])
            g.pop("instances", None)
            g.pop("replicas", None)
    p["summary"]["gpusUsed"] = used
    p["summary"]["lowerBound"] = min(p["summary"]["lowerBound"], used)
    for t in p["tenants"]:
        if t["name"] == name:
            t["replicas"] = [r for r in t["replicas"] if r["index"] < n]
    return p


def main():
    pool, duration, seeds = sys.argv[1], sys.argv[2], sys.argv[3:]
    spec = yaml.safe_load(open(pool))
    t0 = spec["tenants"][0]
    r = subprocess.run(["./gp", "plan", pool, "-o", "yaml"], capture_output=True, text=True)
    plan = yaml.safe_load(r.stdout)
    planned = len(plan["tenants"][0]["replicas"])
    tmp = tempfile.mkdtemp()
    k = None
    for n in range(1, planned + 1):
        spec2 = json.loads(json.dumps(spec))
        t = spec2["tenants"][0]
        for key in ("minReplicas", "maxReplicas"):
            t.pop(key, None)
        t["replicas"] = n
        pf, planf = os.path.join(tmp, f"pool{n}.yaml"), os.path.join(tmp, f"plan{n}.yaml")
        yaml.safe_dump(spec2, open(pf, "w"))
        yaml.safe_dump(trim(plan, t0["name"], n), open(planf, "w"))
        ok, lines = True, []
        for seed in seeds:
            s = subprocess.run(["./gp", "simulate", pf, "--plan", planf, "--duration", duration, "--seed", seed,
                                "-o", "json"], capture_output=True, text=True)
            if s.returncode != 0:
                lines.append("simulate failed: " + s.stderr.strip()[:200]); ok = False; continue
            rep = json.loads(s.stdout)["tenants"][0]
            miss = [key for key, f in (("ttftP99", "ttftMs"), ("tpotP99", "tpotMs"), ("e2eP99", "e2eMs"))
                    if dur_ms(t0.get("slo", {}).get(key)) is not None and rep[f]["p99"] > dur_ms(t0["slo"][key])]
            ok = ok and not miss
            lines.append(f"s{seed}: ttft99 {rep['ttftMs']['p99']:.0f} tpot99 {rep['tpotMs']['p99']:.1f} "
                         f"done {rep['completed']} unfin {rep['unfinished']} {'MISS ' + ','.join(miss) if miss else 'ok'}")
        print(f"N={n}: " + " | ".join(lines))
        if ok:
            k = n
            break
    if k is None:
        print(f"planned {planned}: no N <= {planned} meets every seed's p99 SLOs (k > planned, the planned count is short)")
        sys.exit(1)
    bound = max(k + 1, 1.25 * k)
    print(f"planned {planned}, k = {k}, bound max(k+1, 1.25k) = {bound:g}: {'ok' if planned <= bound else 'ABOVE'}")


main()
