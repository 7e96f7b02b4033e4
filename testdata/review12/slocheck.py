#!/usr/bin/env python3
"""Plan a pool, then simulate the plan over several seeds and check every feasible tenant's p99s.

usage: slocheck.py POOL DURATION SEED... (run from the repository root after
`go build -o gp ./cmd/gpupool`). Prints one line per tenant and seed; exit 1 when a tenant the
planner calls feasible misses a p99 SLO in some run.
"""
import json, os, subprocess, sys, tempfile

import yaml  # PyYAML

sys.path.insert(0, os.path.dirname(__file__))
from slocheck_lib import dur_ms  # noqa: E402


def main():
    pool, duration, seeds = sys.argv[1], sys.argv[2], sys.argv[3:]
    spec = yaml.safe_load(open(pool))
    slos = {t["name"]: t.get("slo", {}) for t in spec["tenants"]}
    tmp = tempfile.mkdtemp()
    planf = os.path.join(tmp, "plan.yaml")
    r = subprocess.run(["./gp", "plan", pool, "-o", "yaml"], capture_output=True, text=True)
    open(planf, "w").write(r.stdout)
    plan = yaml.safe_load(r.stdout)
    infeasible = {t["name"] for t in plan["tenants"] if t.get("infeasible")}
    nrep = {t["name"]: len(t.get("replicas", [])) for t in plan["tenants"]}
    print(f"plan rc={r.returncode} gpusUsed={plan.get('summary', {}).get('gpusUsed')} "
          f"replicas={nrep} infeasible={sorted(infeasible)}")
    bad = 0
    for seed in seeds:
        s = subprocess.run(["./gp", "simulate", pool, "--plan", planf, "--duration", duration,
                            "--seed", seed, "-o", "json"], capture_output=True, text=True)
        if s.returncode != 0:
            print("simulate failed", s.stderr.strip()); bad += 1; continue
        rep = json.loads(s.stdout)
        for t in rep["tenants"]:
            name = t["name"]
            if name in infeasible:
                continue
            slo = slos[name]
            miss = []
            for key, f in (("ttftP99", "ttftMs"), ("tpotP99", "tpotMs"), ("e2eP99", "e2eMs")):
                lim = dur_ms(slo.get(key))
                if lim is not None and t[f]["p99"] > lim:
                    miss.append(f"{key} {t[f]['p99']:.1f}ms > {lim:.0f}ms")
            flag = "MISS " + "; ".join(miss) if miss else "ok"
            if miss:
                bad += 1
            print(f"seed {seed} {name}: repl {t['replicas']} done {t['completed']} drop {t['dropped']} "
                  f"unfin {t['unfinished']} ttft99 {t['ttftMs']['p99']:.1f} tpot99 {t['tpotMs']['p99']:.1f} "
                  f"e2e99 {t['e2eMs']['p99']:.0f} att {t['sloAttainment']:.4f} {flag}")
    sys.exit(1 if bad else 0)


main()
