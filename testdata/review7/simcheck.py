#!/usr/bin/env python3
"""simcheck.py GP POOL PLAN [SEEDS] [MINREQ]

Simulates PLAN (json or yaml, as `gp plan -o json|yaml` writes it) of POOL for each seed (default
1,2,3) for long enough that the slowest tenant the plan serves gets MINREQ (default 2000) requests,
capped so that the pool's total stays under simulate's one-million-request limit. Prints, per
served tenant and seed, requests and SLO attainment, and flags any below 99 % or short of MINREQ.
Reads the tenants' rates from POOL written in this folder's style (`- name:` then `traffic: {rps: R`).
"""
import json, re, subprocess, sys

gp, pool, plan = sys.argv[1:4]
seeds = [int(s) for s in (sys.argv[4] if len(sys.argv) > 4 else "1,2,3").split(",")]
minreq = int(sys.argv[5]) if len(sys.argv) > 5 else 2000

rps, cur = {}, None
for line in open(pool):
    m = re.match(r"^\s*- name:\s*(\S+)", line)
    if m:
        cur = m.group(1)
    m = re.search(r"traffic:\s*\{\s*rps:\s*([0-9.eE+-]+)", line)
    if m and cur:
        rps[cur] = float(m.group(1))
text = open(plan).read()
if text.lstrip().startswith("{"):
    served = [t["name"] for t in json.loads(text)["tenants"] if t.get("replicas") or t.get("loraEngines")]
else:  # yaml: tenant names under "tenants:" with a replicas list
    served = None
total = sum(rps.values())
names = served if served is not None else list(rps)
slow = min((rps[n] for n in names if rps.get(n, 0) > 0), default=1)
dur = minreq / slow * 1.08
cap = 990000 / total if total > 0 else dur
dur = int(min(dur, cap)) + 1
print(f"duration {dur}s (slowest served tenant {slow} req/s, pool {total:.3f} req/s)")
bad = 0
for s in seeds:
    out = subprocess.run([gp, "simulate", pool, "--plan", plan, "--duration", f"{dur}s",
                          "--seed", str(s), "-o", "json"], capture_output=True, text=True)
    if out.returncode not in (0, 2):
        print("simulate failed", out.returncode, out.stderr[-500:]); sys.exit(1)
    rep = json.loads(out.stdout)
    for t in rep["tenants"]:
        if served is not None and t["name"] not in served:
            continue
        att, n = t.get("sloAttainment", 0), t.get("arrived", 0)
        flag = ""
        if n < minreq:
            flag += f" SHORT-OF-{minreq}"
        if att < 0.99:
            flag += " BELOW-99"; bad += 1
        print(f"seed {s} {t['name']:24s} n={n:7d} att={att*100:7.3f}% p99ttft={t['ttftMs']['p99']:.1f}ms p99tpot={t['tpotMs']['p99']:.1f}ms{flag}")
print("tenants-below-99:", bad)
