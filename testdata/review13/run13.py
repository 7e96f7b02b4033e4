#!/usr/bin/env python3
"""Rerun review 13's sweep: issue 8's bars 1-6 on every pool given, one table row a pool.

usage: run13.py [--dur 10m] [--seeds 11,12] [--ktrim] POOL...  (from the repository root, after
`go build -o gp ./cmd/gpupool`; PyYAML). Per pool: `gp validate`; `gp plan -o yaml`; every
feasible tenant simulated at each seed (bar 1: a miss is a p99 above its SLO; runs of fewer than
2,000 requests are reported as `short-run` misses apart, not counted); bar 2 on single-tenant
pools with --ktrim (testdata/review12/ktrim.py, same duration and seeds); bar 3: an infeasible
tenant's first reason must be a term code, and an infeasible tenant with `concurrency` whose first
reason is not the fleet (NoCapacity) or a bound (OverCap, a fixed count) is planned again without
it, on the same pool: becoming feasible then is a failure;
bar 4: `plan --out` exits 0 (2 only with infeasible tenants) and `gp validate` accepts its
plan.yaml (against the pool) and mig-parted config; bar 5: replicas / minReplicas / maxReplicas
kept, an infeasible bounded tenant's reason names the bound; bar 6: every tensor-parallel replica
has --tensor-parallel-size N in vllm/T.yaml and N GPUs in its pod (nvidia.com/gpu: "N" or a DRA
claim of count N). Prints a table and a list of failures; exit 1 on any failure.
"""
import json, os, re, subprocess, sys, tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
R12 = os.path.join(HERE, "..", "review12")
sys.path.insert(0, R12)
from slocheck_lib import dur_ms  # noqa: E402

TERMS = {"NoFit", "OverCap", "NoCapacity", "SLOUnmet", "FixedReplicas", "ReplicaBounds", "ModeNotAllowed",
         "Isolation", "TrustGroup", "MemoryBound", "ComputeBound"}


def run(args):
    return subprocess.run(args, capture_output=True, text=True)


def plan_of(poolf, tmp, tag):
    pf = os.path.join(tmp, f"plan-{tag}.yaml")
    r = run(["./gp", "plan", poolf, "-o", "yaml"])
    open(pf, "w").write(r.stdout)
    return r.returncode, (yaml.safe_load(r.stdout) if r.stdout.strip() else None), pf, r.stderr


def check(poolf, dur, seeds, do_ktrim):
    fails, notes = [], []
    spec = yaml.safe_load(open(poolf))
    tmp = tempfile.mkdtemp()
    v = run(["./gp", "validate", poolf])
    if v.returncode != 0:
        return {"fails": ["invalid pool: " + v.stdout.strip()[:200]], "notes": [], "row": "-"}
    rc, plan, pf, err = plan_of(poolf, tmp, "0")
    if plan is None:
        return {"fails": [f"plan rc={rc}: {err.strip()[:200]}"], "notes": [], "row": "-"}
    byname = {t["name"]: t for t in spec["tenants"]}
    ptn = {t["name"]: t for t in plan["tenants"]}
    infeas = [n for n, t in ptn.items() if t.get("infeasible")]
    nrep = {n: len(t.get("replicas") or []) for n, t in ptn.items()}
    # Bar 3.
    for n in infeas:
        codes = [x["code"] for x in ptn[n]["reasons"]]
        if not codes or codes[0] not in TERMS:
            fails.append(f"bar3 {n}: first reason {codes[:1]} names no term")
        msg0 = ptn[n]["reasons"][0]["message"]
        bound = codes[0] in ("NoCapacity", "OverCap") or "the fixed" in msg0  # the fleet or a bound
        if "concurrency" in byname[n] and not bound:
            spec2 = json.loads(json.dumps(spec))
            for t in spec2["tenants"]:
                if t["name"] == n:
                    t.pop("concurrency")
            p2f = os.path.join(tmp, "noconc.yaml")
            yaml.safe_dump(spec2, open(p2f, "w"))
            r2 = run(["./gp", "plan", p2f, "-o", "json"])
            p2 = json.loads(r2.stdout)
            if not any(t["name"] == n and t.get("infeasible") for t in p2["tenants"]):
                fails.append(f"bar3 {n}: infeasible ({codes[0]}) with concurrency {byname[n]['concurrency']}, feasible without")
    # Bar 5.
    for n, t in byname.items():
        k = nrep[n]
        codes = " ".join(x["code"] + " " + x["message"] for x in ptn[n]["reasons"])
        if n in infeas:
            for key in ("replicas", "maxReplicas", "minReplicas"):
                if key in t and key not in codes and "FixedReplicas" not in codes and "OverCap" not in codes \
                        and "NoCapacity" not in codes and "NoFit" not in codes:
                    fails.append(f"bar5 {n}: infeasible, bounded by {key}, reason names no bound")
            continue
        if "replicas" in t and k != t["replicas"]:
            fails.append(f"bar5 {n}: replicas {t['replicas']} planned {k}")
        if "minReplicas" in t and k < t["minReplicas"]:
            fails.append(f"bar5 {n}: minReplicas {t['minReplicas']} planned {k}")
        if "maxReplicas" in t and k > t["maxReplicas"]:
            fails.append(f"bar5 {n}: maxReplicas {t['maxReplicas']} planned {k}")
    # Bar 1.
    misses = short = 0
    for seed in seeds:
        s = run(["./gp", "simulate", poolf, "--plan", pf, "--duration", dur, "--seed", str(seed), "-o", "json"])
        if s.returncode != 0:
            fails.append(f"bar1 simulate seed {seed} rc={s.returncode}: {s.stderr.strip()[:200]}")
            continue
        for t in json.loads(s.stdout)["tenants"]:
            n = t["name"]
            if n in infeas:
                continue
            slo = byname[n].get("slo", {})
            miss = [f"{key} {t[f]['p99']:.1f}>{dur_ms(slo[key]):.0f}"
                    for key, f in (("ttftP99", "ttftMs"), ("tpotP99", "tpotMs"), ("e2eP99", "e2eMs"))
                    if key in slo and t[f]["p99"] > dur_ms(slo[key])]
            if not miss:
                continue
            msg = f"{n} seed {seed}: {' '.join(miss)} att {t['sloAttainment']:.4f} n={t['completed']} unfin {t['unfinished']}"
            if t["completed"] >= 2000:
                misses += 1
                fails.append("bar1 " + msg)
            else:
                short += 1
                notes.append("short-run " + msg)
    # Bar 4 and 6.
    od = os.path.join(tmp, "out")
    o = run(["./gp", "plan", poolf, "--out", od])
    if o.returncode not in (0, 2) or (o.returncode == 2 and not infeas):
        fails.append(f"bar4 plan --out rc={o.returncode}: {o.stderr.strip()[:300]}")
    else:
        vv = run(["./gp", "validate", "--pool", poolf, os.path.join(od, "plan.yaml")])
        if vv.returncode != 0:
            fails.append("bar4 validate plan.yaml: " + (vv.stdout + vv.stderr).strip()[:300])
        mp = os.path.join(od, "mig-parted", "config.yaml")
        if os.path.exists(mp):
            vv = run(["./gp", "validate", mp])
            if vv.returncode != 0:
                fails.append("bar4 validate mig-parted: " + (vv.stdout + vv.stderr).strip()[:300])
        tp = {}
        for g in plan["gpus"]:
            for rep in (g.get("replicas") or []) + [x for i in g.get("instances") or [] for x in i.get("replicas") or []]:
                if rep.get("tensorParallel"):
                    tp[rep["tenant"]] = rep["tensorParallel"]["size"]
        for n, size in tp.items():
            vl = open(os.path.join(od, "vllm", n + ".yaml")).read()
            if not re.search(rf"--tensor-parallel-size\s*\n?\s*-?\s*['\"]?{size}\b", vl):
                fails.append(f"bar6 {n}: vllm/{n}.yaml lacks --tensor-parallel-size {size}")
            pods = ""
            for d in ("k8s", "dra"):
                p = os.path.join(od, d, n + ".yaml")
                if os.path.exists(p):
                    pods += open(p).read()
            if not (re.search(rf"nvidia.com/gpu['\"]?:\s*['\"]?{size}['\"]?", pods) or re.search(rf"count:\s*{size}\b", pods)):
                fails.append(f"bar6 {n}: pod spec has no {size} GPUs")
        notes.append(f"tp={tp}" if tp else "")
    # Bar 2.
    kt = ""
    if do_ktrim and len(spec["tenants"]) == 1 and not infeas and "replicas" not in spec["tenants"][0] \
            and "minReplicas" not in spec["tenants"][0]:
        k = run([sys.executable, os.path.join(R12, "ktrim.py"), poolf, dur] + [str(s) for s in seeds])
        last = k.stdout.strip().splitlines()[-1] if k.stdout.strip() else k.stderr.strip()[-200:]
        m = re.search(r"k = (\d+)", last)
        kt = f"k={m.group(1)}" if m else "k>planned"
        if "ABOVE" in last:
            fails.append("bar2 " + last)
        if k.returncode != 0:
            notes.append("ktrim: " + last)
    s = plan.get("summary", {})
    row = (f"rc={rc} gpus {s.get('gpusUsed')}/{s.get('gpusTotal')} lb {s.get('lowerBound')} "
           f"feasible {len(ptn) - len(infeas)}/{len(ptn)} reps {sum(nrep.values())} misses {misses} short {short} {kt}")
    return {"fails": fails, "notes": [x for x in notes if x], "row": row,
            "infeasible": {n: ptn[n]["reasons"][0]["code"] for n in infeas}}


def main():
    args = sys.argv[1:]
    dur, seeds, do_ktrim = "10m", [11, 12], False
    while args and args[0].startswith("--"):
        a = args.pop(0)
        if a == "--dur":
            dur = args.pop(0)
        elif a == "--seeds":
            seeds = [int(x) for x in args.pop(0).split(",")]
        elif a == "--ktrim":
            do_ktrim = True
    allf = 0
    for p in args:
        res = check(p, dur, seeds, do_ktrim)
        name = os.path.basename(p)
        print(f"| {name} | {res['row']} | {len(res['fails'])} | {res.get('infeasible', {})} |", flush=True)
        for f in res["fails"]:
            print(f"    FAIL {f}", flush=True)
        for n in res["notes"]:
            print(f"    note {n}", flush=True)
        allf += len(res["fails"])
    print(f"{len(args)} pools, {allf} failure(s)")
    sys.exit(1 if allf else 0)


main()
